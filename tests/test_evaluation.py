import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_lib import bleu, corpus_bleu

words = st.lists(st.sampled_from(["le", "chat", "est", "noir", "il", "."]), min_size=1, max_size=9)


@given(pred=words, label=words, k=st.integers(1, 4))
@settings(max_examples=300, deadline=None)
def test_bleu_equals_d2l(pred, label, k):
    from d2l import torch as d2l

    assert bleu(" ".join(pred), " ".join(label), k) == pytest.approx(d2l.bleu(" ".join(pred), " ".join(label), k))


def test_bleu_known_values():
    assert bleu("il est grand .", "il est grand .") == 1.0
    assert bleu("", "il est grand .") == 0.0
    assert bleu("chat chat", "il est grand .") == 0.0


def test_corpus_bleu_perfect_and_zero():
    refs = ["il est grand .", "je suis là ."]
    assert corpus_bleu(refs, refs) == pytest.approx(100.0)
    assert corpus_bleu(["x y z w", "q r s t"], refs) == pytest.approx(0.0)


def test_corpus_bleu_rejects_length_mismatch():
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        corpus_bleu(["a", "b"], ["a"])

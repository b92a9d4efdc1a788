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


def _systems(seed=0, n=400):
    import random

    rng = random.Random(seed)
    vocab = "le chat est noir il elle sait pas je tu".split()
    refs = [" ".join(rng.choices(vocab, k=6)) for _ in range(n)]
    noise = [" ".join(rng.choices(vocab, k=6)) for _ in range(n)]
    better = [r if rng.random() < 0.3 else h for r, h in zip(refs, noise)]
    return refs, noise, better


def test_compare_bleu_scores_match_corpus_bleu_and_find_a_real_gain():
    from attention_lib import compare_bleu

    refs, noise, better = _systems()
    rows = compare_bleu({"baseline": noise, "better": better}, refs, num_samples=200)
    assert [name for name, *_ in rows] == ["baseline", "better"]
    (_, base, base_ci, base_p), (_, score, ci, p) = rows
    assert base == pytest.approx(corpus_bleu(noise, refs)) and score == pytest.approx(corpus_bleu(better, refs))
    assert base_p is None and 0 < base_ci < 5 and 0 < ci < 10
    assert p < 0.01  # 30 % of sentences copied from the reference: a gain no resample undoes


def test_compare_bleu_finds_no_gain_between_two_equally_noisy_systems():
    from attention_lib import compare_bleu

    refs, noise, _ = _systems()
    _, other, _ = _systems(seed=1)  # as noisy, independently drawn
    _, (_, _, _, p) = compare_bleu({"a": noise, "b": other}, refs, num_samples=200)
    assert p > 0.05


def test_compare_bleu_rejects_bad_input():
    from attention_lib import compare_bleu

    with pytest.raises(ValueError, match="baseline and at least one other"):
        compare_bleu({"only": ["a"]}, ["a"])
    with pytest.raises(ValueError, match="'b' has 1 hypotheses but there are 2 references"):
        compare_bleu({"a": ["x", "y"], "b": ["x"]}, ["x", "y"])


@pytest.mark.parametrize("args, error, message", [
    (("a b", "a b", 0), ValueError, "k must be at least 1, got 0"),
    (("a b", "a b", 2.0), TypeError, r"k must be an integer \(at least 1\), got the float 2.0"),
    ((["a", "b"], "a b"), TypeError, "pred_seq must be a str of space-separated tokens, got a list of length 2"),
    (("a b", None), TypeError, "label_seq must be a str of space-separated tokens, got None"),
])
def test_bleu_names_bad_arguments(args, error, message):
    with pytest.raises(error, match=message):
        bleu(*args)


def test_bleu_k_beyond_the_prediction_is_fine():
    assert bleu("le chat", "le chat", 4) == 1.0


def test_corpus_bleu_and_compare_bleu_refuse_a_string_for_a_list():
    from attention_lib import compare_bleu

    with pytest.raises(TypeError, match=r"hypotheses must be a list of strings \(e.g. \['Go.'\]\), got the str"):
        corpus_bleu("il est grand .", "il est grand .")
    with pytest.raises(TypeError, match=r"references must be a list of strings, but references\[0\] is a list"):
        corpus_bleu(["a b"], [["a", "b"]])
    with pytest.raises(TypeError, match=r"systems\['b'\] must be a list of strings"):
        compare_bleu({"a": ["x"], "b": "x"}, ["x"])
    with pytest.raises(ValueError, match="num_samples must be at least 1, got 0"):
        compare_bleu({"a": ["x"], "b": ["x"]}, ["x"], num_samples=0)
    with pytest.raises(TypeError, match="systems must be a dict"):
        compare_bleu([["x"], ["y"]], ["x"])


def test_bleu_by_length_names_a_missing_split(small_data):
    from attention_lib import bleu_by_length

    with pytest.raises(ValueError, match=r"split must be one of \['test', 'train', 'val'\], got 'dev'"):
        bleu_by_length(None, small_data, split="dev")

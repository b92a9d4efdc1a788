import math
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_lib import bleu, corpus_bleu

words = st.lists(
    st.sampled_from(["le", "chat", "est", "noir", "il", "."]), min_size=1, max_size=9
)


@given(pred=words, label=words, k=st.integers(1, 4))
@settings(max_examples=300, deadline=None)
def test_bleu_equals_d2l(pred, label, k):
    from d2l import torch as d2l

    assert bleu(" ".join(pred), " ".join(label), k) == pytest.approx(
        d2l.bleu(" ".join(pred), " ".join(label), k)
    )


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
    assert base == pytest.approx(corpus_bleu(noise, refs)) and score == pytest.approx(
        corpus_bleu(better, refs)
    )
    assert base_p is None and 0 < base_ci < 5 and 0 < ci < 10
    # 30 % of sentences copied from the reference: a gain no resample undoes
    assert p < 0.01


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
    with pytest.raises(
        ValueError, match="'b' has 1 hypotheses but there are 2 references"
    ):
        compare_bleu({"a": ["x", "y"], "b": ["x"]}, ["x", "y"])


@pytest.mark.parametrize(
    "args, error, message",
    [
        (("a b", "a b", 0), ValueError, "k must be at least 1, got 0"),
        (
            ("a b", "a b", 2.0),
            TypeError,
            r"k must be an integer \(at least 1\), got the float 2.0",
        ),
        (
            (["a", "b"], "a b"),
            TypeError,
            "pred_seq must be a str of space-separated tokens, got a list of length 2",
        ),
        (
            ("a b", None),
            TypeError,
            "label_seq must be a str of space-separated tokens, got None",
        ),
    ],
)
def test_bleu_names_bad_arguments(args, error, message):
    with pytest.raises(error, match=message):
        bleu(*args)


def test_bleu_k_beyond_the_prediction_is_fine():
    assert bleu("le chat", "le chat", 4) == 1.0


def test_corpus_bleu_and_compare_bleu_refuse_a_string_for_a_list():
    from attention_lib import compare_bleu

    with pytest.raises(
        TypeError,
        match=r"hypotheses must be a list of strings \(e.g. \['Go.'\]\), got the str",
    ):
        corpus_bleu("il est grand .", "il est grand .")
    with pytest.raises(
        TypeError,
        match=r"references must be a list of strings, but references\[0\] is a list",
    ):
        corpus_bleu(["a b"], [["a", "b"]])
    with pytest.raises(TypeError, match=r"systems\['b'\] must be a list of strings"):
        compare_bleu({"a": ["x"], "b": "x"}, ["x"])
    with pytest.raises(ValueError, match="num_samples must be at least 1, got 0"):
        compare_bleu({"a": ["x"], "b": ["x"]}, ["x"], num_samples=0)
    with pytest.raises(TypeError, match="systems must be a dict"):
        compare_bleu([["x"], ["y"]], ["x"])


def test_bleu_by_length_names_a_missing_split(small_data):
    from attention_lib import bleu_by_length

    with pytest.raises(
        ValueError, match=r"split must be one of \['test', 'train', 'val'\], got 'dev'"
    ):
        bleu_by_length(None, small_data, split="dev")


# ----------------------------------------------------------------------------- the copy
# task


class _StandIn(torch.nn.Module):
    """A model with the decoding protocol whose greedy output is the source
    (``perfect``) or random symbols."""

    def __init__(self, perfect, vocab_size=13, first_symbol=3, seed=0):
        super().__init__()
        self.encoder = _PassSource()  # the "encoder output" is the source itself
        self.decoder = _StandInDecoder(perfect, vocab_size, first_symbol, seed)


class _PassSource(torch.nn.Module):
    def forward(self, src, valid_lens):
        return src


class _StandInDecoder(torch.nn.Module):
    def __init__(self, perfect, vocab_size, first_symbol, seed):
        super().__init__()
        self.perfect, self.vocab_size, self.first_symbol = (
            perfect,
            vocab_size,
            first_symbol,
        )
        self.generator = torch.Generator().manual_seed(seed)
        # so that the model has a device
        self.weight = torch.nn.Parameter(torch.zeros(1))

    attention_weights = None  # the decoder protocol: no attention

    def init_state(self, src, valid_lens):
        return src, 0

    @staticmethod
    def reorder_state(state, index):
        src, step = state
        return src[index], step

    def forward(self, token, state, *, need_weights=False):
        src, step = state
        logits = torch.zeros(src.shape[0], 1, self.vocab_size)  # (B, 1, V)
        if self.perfect:
            column = (
                src[:, step]
                if step < src.shape[1]
                else torch.zeros(src.shape[0], dtype=torch.long)
            )
        else:  # a random symbol, never <eos>: wrong except by chance
            column = torch.randint(
                self.first_symbol,
                self.vocab_size,
                (src.shape[0],),
                generator=self.generator,
            )
        logits[torch.arange(src.shape[0]), 0, column] = 1.0
        return logits, (src, step + 1)


def test_copy_accuracy_is_one_for_a_perfect_copier_and_chance_for_a_random_one():
    from attention_lib import copy_accuracy, copy_task

    batch = copy_task(3000, max_len=12, num_symbols=10, seed=0)
    perfect = copy_accuracy(_StandIn(True), batch)
    assert list(perfect) == list(range(2, 13)) and all(
        v == 1.0 for v in perfect.values()
    )
    random_model = copy_accuracy(_StandIn(False), batch)
    assert list(random_model) == list(range(2, 13))
    for n, share in random_model.items():
        # 1/10, give or take the sampling noise of ~270 sequences
        assert 0.04 < share < 0.17, (n, share)
    overall = sum(random_model.values()) / len(random_model)
    assert overall == pytest.approx(0.1, abs=0.02)


def test_copy_accuracy_counts_symbols_at_the_right_position():
    from attention_lib import copy_accuracy
    from attention_lib.data import Batch

    class Fixed(_StandInDecoder):  # always answers 3 4 5 <eos>
        def forward(self, token, state, *, need_weights=False):
            src, step = state
            logits = torch.zeros(src.shape[0], 1, 13)
            logits[:, 0, [3, 4, 5, 2][min(step, 3)]] = 1.0
            return logits, (src, step + 1)

    model = _StandIn(True)
    model.decoder = Fixed(True, 13, 3, 0)

    src = torch.tensor([[3, 4, 5, 2, 0], [4, 3, 5, 6, 2], [3, 9, 2, 0, 0]])
    lens = torch.tensor([4, 5, 3])
    batch = Batch(src, lens, src, src, lens)
    # right: 3 of 3; 1 of 4 (only the 5 in third place); 1 of 2
    accuracy = copy_accuracy(model, batch)
    assert accuracy == {3: 1.0, 4: 0.25, 2: 0.5} and list(accuracy) == [2, 3, 4]


def test_copy_accuracy_names_bad_arguments():
    from attention_lib import copy_accuracy, copy_task

    batch = copy_task(4, seed=0)
    with pytest.raises(TypeError, match="batch must be a Batch"):
        copy_accuracy(_StandIn(True), batch.src)
    with pytest.raises(
        ValueError, match=r"batch.src_valid_lens must be a tensor of shape \(4,\)"
    ):
        copy_accuracy(
            _StandIn(True), batch._replace(src_valid_lens=batch.src_valid_lens[:2])
        )
    with pytest.raises(ValueError, match="at least one symbol and <eos>"):
        copy_accuracy(
            _StandIn(True),
            batch._replace(tgt_valid_lens=torch.ones(4, dtype=torch.long)),
        )


# ----------------------------------------------------------------- bootstrap intervals


def test_bleu_interval_holds_the_score_and_narrows_with_more_sentences():
    from attention_lib import bleu_interval

    refs, noise, better = _systems(n=400)
    score, low, high = bleu_interval(better, refs, num_samples=300)
    assert score == pytest.approx(corpus_bleu(better, refs))
    assert low < score < high
    _, low_few, high_few = bleu_interval(better[:9], refs[:9], num_samples=300)
    # 9 pairs: a far wider interval than 400
    assert high_few - low_few > 3 * (high - low)
    assert bleu_interval(better, refs, num_samples=300) == (score, low, high)  # seeded
    assert bleu_interval(better, refs, num_samples=300, seed=1) != (score, low, high)
    assert bleu_interval(refs[:5], refs[:5], num_samples=50) == pytest.approx(
        (100.0,) * 3
    )


@pytest.mark.parametrize(
    "args, kwargs, error, message",
    [
        ((["a b"], ["a b", "c"]), {}, ValueError, "1 hypotheses but 2 references"),
        (([], []), {}, ValueError, "at least one sentence pair"),
        (("a b", ["a b"]), {}, TypeError, "hypotheses must be a list of strings"),
        (
            (["a b"], ["a b"]),
            {"num_samples": 0},
            ValueError,
            "num_samples must be at least 1",
        ),
    ],
)
def test_bleu_interval_names_bad_arguments(args, kwargs, error, message):
    from attention_lib import bleu_interval

    with pytest.raises(error, match=message):
        bleu_interval(*args, **kwargs)


def test_bleu_by_length_gives_an_interval_per_bin(small_data):
    from attention_lib import (
        EncoderDecoder,
        Seq2SeqDecoder,
        Seq2SeqEncoder,
        bleu_by_length,
        set_seed,
    )

    set_seed(0)
    model = EncoderDecoder(Seq2SeqEncoder(len(small_data.src_vocab), 8, 16),
                           Seq2SeqDecoder(len(small_data.tgt_vocab), 8, 16))
    plain = bleu_by_length(model, small_data, split="val")
    result = bleu_by_length(model, small_data, split="val", num_samples=20)
    assert "intervals" not in plain and result["by_length"] == plain["by_length"]
    assert len(result["intervals"]) == len(result["by_length"])
    for (_, _, score), (low, high) in zip(result["by_length"], result["intervals"]):
        assert low <= high and low <= score + 1e-9 or score == 0
    low, high = result["interval"]
    assert low <= high


# ---------------------------------------------------------------------- alignment_hits


def test_alignment_hits_counts_copied_words_and_the_uniform_baseline():
    from attention_lib import alignment_hits

    sources = [["tom", "is", "here", "."], ["i", "see", "mary", "."]]
    outputs = [["tom", "est", "ici", "."], ["je", "vois", "mary", "."]]
    # (T, Lk) with Lk = 5 (source + <eos>); one-hot rows on the chosen positions.
    looks = [[0, 1, 2, 3], [0, 1, 4, 0]]
    weights = [torch.eye(5)[rows] for rows in looks]
    result = alignment_hits(sources, outputs, weights)
    # Copied words: tom, . (sentence 1); mary, . (sentence 2): hits tom, ., not
    # mary (looked at <eos>) nor the last . (looked at i).
    assert result["words"] == 4 and result["hits"] == 0.5
    assert result["uniform"] == pytest.approx(1 / 5)
    near = alignment_hits(sources, outputs, weights, window=1)
    # mary at 2: position 4 (<eos>) is two away; "." at 3: position 0 is far: still 2.
    assert near["hits"] == 0.5
    # Within one position, each word's hit zone has 2 or 3 of the 5 positions.
    assert near["uniform"] == pytest.approx((2 + 3 + 3 + 3) / 5 / 4)


def test_alignment_hits_with_uniform_weights_matches_the_baseline_and_checks_input():
    from attention_lib import alignment_hits

    sources, outputs = [["a", "b"]], [["b"]]
    assert alignment_hits(sources, outputs, [torch.zeros(1, 3)])["uniform"] == 1 / 3
    assert math.isnan(alignment_hits([["a"]], [["z"]], [torch.ones(1, 2)])["hits"])
    with pytest.raises(ValueError, match="one entry per sentence"):
        alignment_hits(sources, outputs, [])
    with pytest.raises(ValueError, match=r"\(T, Lk\) tensor"):
        alignment_hits(sources, outputs, [torch.ones(1, 2)])
    with pytest.raises(ValueError, match="window"):
        alignment_hits(sources, outputs, [torch.ones(1, 3)], window=-1)


def test_mean_interval_is_the_t_interval():
    import numpy as np
    from scipy import stats

    from attention_lib.evaluation import mean_interval

    values = [0.71, 0.74, 0.69, 0.77, 0.72]
    mean, half = mean_interval(values)
    low, high = stats.t.interval(0.95, 4, loc=np.mean(values), scale=stats.sem(values))
    assert abs(mean - np.mean(values)) < 1e-12 and abs(half - (high - low) / 2) < 1e-12
    assert mean_interval([1.0, 1.0, 1.0]) == (1.0, 0.0)
    with pytest.raises(ValueError, match="at least 2"):
        mean_interval([0.5])


def test_grouped_bootstrap_resamples_whole_groups():
    from attention_lib import compare_bleu

    refs, noise, better = _systems(n=120)
    # Each source sentence five times over: the lines are not independent.
    refs5, noise5, better5 = ([x for x in xs for _ in range(5)]
                              for xs in (refs, noise, better))
    groups = [i for i in range(len(refs)) for _ in range(5)]
    systems = {"baseline": noise5, "better": better5}
    by_line = compare_bleu(systems, refs5, num_samples=300, groups=range(len(refs5)))
    by_group = compare_bleu(systems, refs5, num_samples=300, groups=groups)
    once = compare_bleu({"baseline": noise, "better": better}, refs, num_samples=300,
                        groups=range(len(refs)))
    assert [row[1] for row in by_line] == pytest.approx([row[1] for row in by_group])
    (_, _, hw_line, _), (_, _, hw_group, _), (_, _, hw_once, _) = (
        by_line[1], by_group[1], once[1]
    )
    # Lines resampled as independent: about sqrt(5) too narrow. Whole groups: the
    # width of the set without the copies.
    assert hw_line < 0.6 * hw_group
    assert hw_group == pytest.approx(hw_once, rel=0.35)
    # The better system is better at the group level too; the p-value is at its floor.
    assert by_group[1][3] == pytest.approx(1 / 301)


def test_grouped_bootstrap_finds_no_gain_between_equally_noisy_systems_and_checks():
    from attention_lib import compare_bleu

    refs, noise, _ = _systems()
    _, other, _ = _systems(seed=1)
    _, (_, _, _, p) = compare_bleu({"a": noise, "b": other}, refs, num_samples=200,
                                   groups=[i // 2 for i in range(len(refs))])
    assert p > 0.05
    with pytest.raises(ValueError, match="one label per line"):
        compare_bleu({"a": noise, "b": other}, refs, groups=[0, 1])


def test_format_p_names_the_floor():
    from attention_lib import format_p

    assert format_p(1 / 1001) == "p ≤ 0.001"
    assert format_p(1 / 201, num_samples=200) == "p ≤ 0.005"
    assert format_p(0.0234) == "p = 0.023"
    assert format_p(2 / 1001) == "p = 0.002"

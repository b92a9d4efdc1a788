"""Translating held-out sentences and scoring them with BLEU (Papineni et al., 2002).

* :func:`bleu` is the sentence BLEU that *Dive into Deep Learning* defines (n-gram
  precisions weighted by 1/2^n, a brevity penalty, no smoothing). It is written by hand
  because that exact definition is what readers of d2l know and what the tests compare
  against ``d2l.bleu``; sacrebleu's sentence BLEU smooths and weights differently.
* :func:`corpus_bleu` is the standard corpus-level BLEU, computed by sacrebleu.
* :func:`compare_bleu` says whether one system's corpus BLEU is really higher than
  another's on the same sentences: sacrebleu's paired bootstrap resampling (Koehn,
      2004).
* :func:`mean_interval` is the mean of a few runs (seeds) and the half-width of its 95 %
  t-interval, for results that vary from run to run.
* :func:`copy_accuracy` and :func:`alignment_hits` measure what BLEU cannot: how well a
  model copies, and how often its attention looks at the source word it copies.

Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
"""
from __future__ import annotations

import collections
import math
from typing import Sequence

import sacrebleu
import torch

from ._checks import check_int, check_str_list, describe
from .data import Batch, TranslationData
from .decoding import greedy_decode, translate

__all__ = [
    "bleu",
    "corpus_bleu",
    "compare_bleu",
    "format_p",
    "bleu_by_length",
    "bleu_interval",
    "copy_accuracy",
    "alignment_hits",
    "mean_interval",
]


def bleu(pred_seq: str, label_seq: str, k: int = 2) -> float:
    """Sentence BLEU as d2l defines it, on space-separated tokens, with n-grams up to
    ``k``.

    ``exp(min(0, 1 - len_label/len_pred)) * prod_n p_n ** (1/2**n)``; an empty
    prediction scores 0.

    Shapes:
        pred_seq, label_seq: str; returns: float in [0, 1]

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """
    for name, text in (("pred_seq", pred_seq), ("label_seq", label_seq)):
        if not isinstance(text, str):
            raise TypeError(
                f"{name} must be a str of space-separated tokens, got {describe(text)}"
            )
    check_int("k", k, 1)
    pred_tokens, label_tokens = pred_seq.split(), label_seq.split()
    len_pred, len_label = len(pred_tokens), len(label_tokens)
    if len_pred == 0:
        return 0.0
    score = math.exp(min(0.0, 1 - len_label / len_pred))
    for n in range(1, min(k, len_pred) + 1):
        label_ngrams = collections.Counter(
            tuple(label_tokens[i : i + n]) for i in range(len_label - n + 1)
        )
        pred_ngrams = collections.Counter(
            tuple(pred_tokens[i : i + n]) for i in range(len_pred - n + 1)
        )
        num_matches = sum(
            min(count, label_ngrams[g]) for g, count in pred_ngrams.items()
        )  # clipped counts
        score *= math.pow(num_matches / (len_pred - n + 1), math.pow(0.5, n))
    return score


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Corpus BLEU (0–100) with sacrebleu, on the book's tokenisation
    (``tokenize='none'``).

    Shapes:
        hypotheses, references: N strings each; returns: float

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """
    hypotheses, references = check_str_list("hypotheses", hypotheses), check_str_list(
        "references", references
    )
    if len(hypotheses) != len(references):
        raise ValueError(
            f"got {len(hypotheses)} hypotheses but {len(references)} references"
        )
    # force=True: our text is tokenised on purpose (both sides alike), which sacrebleu
    # would warn about.
    return sacrebleu.corpus_bleu(
        list(hypotheses), [list(references)], tokenize="none", force=True
    ).score


def compare_bleu(
    systems: dict[str, Sequence[str]],
    references: Sequence[str],
    num_samples: int = 1000,
    groups: Sequence | None = None,
) -> list[tuple[str, float, float, float | None]]:
    """Corpus BLEU of several systems with 95% intervals, each compared with the first
    by paired bootstrap.

    The test sentences are resampled with replacement ``num_samples`` times and every
    system is scored on the same resamples. The half-width is that of a 95% interval for
    the system's BLEU. The p-value tests whether a system differs from the first (the
    baseline) at all, in either direction: it is the share of resamples whose
    absolute difference, minus the mean of those absolute differences, is larger than
    the absolute difference on the whole set, counted with one added to the count and
    to the number of resamples (sacrebleu's convention, after MultEval): so the
    smallest p-value it can return is ``1 / (num_samples + 1)``, and a p-value there
    means "at most that"
    (:func:`format_p`). A small p-value says that a difference this large would be rare
    if the systems were equally good on sentences like these; it says nothing about luck
    in training. Without ``groups`` it is computed by sacrebleu (``PairedTest``,
    ``test_type="bs"``, as Moses' script does), on the book's tokenisation, with
    sacrebleu's fixed seed, so repeated calls give the same numbers.

    Resampling lines treats them as independent. When the test set holds the same
    source sentence several times (with different references), its lines are not: pass
    ``groups`` (one label per line, e.g. the source sentence) and whole groups are
    resampled, each with all its lines (a cluster bootstrap), with sacrebleu's interval,
    statistic and p-value computed on those draws, seeded.

    Returns one ``(name, bleu, half_width, p_value)`` per system, in order; the
    baseline's p-value is None.

    Shapes:
        systems: name -> N strings (the first is the baseline); references: N strings;
        groups: N hashable labels or None

    Taught in ``chapters/03_bahdanau/02_training_and_results.ipynb``.
    """
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    if not isinstance(systems, dict):
        raise TypeError(
            f"systems must be a dict from name to hypotheses, got {describe(systems)}"
        )
    if len(systems) < 2:
        raise ValueError(
            "compare_bleu needs a baseline and at least one other system, got"
            f" {list(systems)}"
        )
    check_int("num_samples", num_samples, 1)
    references = check_str_list("references", references)
    systems = {
        name: check_str_list(f"systems[{name!r}]", hypotheses)
        for name, hypotheses in systems.items()
    }
    for name, hypotheses in systems.items():
        if len(hypotheses) != len(references):
            raise ValueError(
                f"system {name!r} has {len(hypotheses)} hypotheses but there are "
                f"{len(references)} references"
            )
    if groups is not None:
        return _compare_bleu_grouped(systems, references, num_samples, groups)
    test = PairedTest(
        [(name, list(h)) for name, h in systems.items()],
        {"BLEU": BLEU(tokenize="none", force=True)},
        references=[list(references)],
        test_type="bs",
        n_samples=num_samples,
    )
    _, scores = test()
    return [
        (name, r.score, r.ci, r.p_value) for name, r in zip(systems, scores["BLEU"])
    ]


def _group_stats(hypotheses, references, groups):
    """sacrebleu's n-gram statistics of each line, summed over each group: (G, S)."""
    import numpy as np
    from sacrebleu.metrics import BLEU

    metric = BLEU(tokenize="none", force=True)
    # One row of n-gram counts per sentence; a corpus's counts are their sum.
    stats = np.array(metric._extract_corpus_statistics(hypotheses, [references]))
    if groups is None:
        return metric, stats
    labels = {label: i for i, label in enumerate(dict.fromkeys(groups))}
    index = np.array([labels[label] for label in groups])
    summed = np.zeros((len(labels), stats.shape[1]), dtype=stats.dtype)
    np.add.at(summed, index, stats)
    return metric, summed


def _resampled_scores(metric, stats, samples):
    """BLEU of each resample: rows of ``samples`` index the rows of ``stats``."""
    import numpy as np

    return np.array(
        [metric._compute_score_from_stats(stats[rows].sum(axis=0).tolist()).score
         for rows in samples]
    )


def _compare_bleu_grouped(systems, references, num_samples, groups):
    """sacrebleu's paired bootstrap (its interval, statistic and p-value), drawing
    whole groups of lines instead of single lines."""
    import numpy as np
    from sacrebleu.significance import _compute_p_value, estimate_ci

    groups = list(groups)
    if len(groups) != len(references):
        raise ValueError(
            f"groups must have one label per line ({len(references)}), got"
            f" {len(groups)}"
        )
    per_system = {
        name: _group_stats(hypotheses, references, groups)
        for name, hypotheses in systems.items()
    }
    num_groups = len(next(iter(per_system.values()))[1])
    samples = np.random.default_rng(12345).integers(
        0, num_groups, (num_samples, num_groups))  # (num_samples, G)
    rows, baseline = [], None
    for name, (metric, stats) in per_system.items():
        scores = _resampled_scores(metric, stats, samples)
        whole = corpus_bleu(systems[name], references)
        _, half_width = estimate_ci(scores)
        p_value = None
        if baseline is None:
            baseline = (whole, scores)
        else:
            # As sacrebleu: |difference| on each draw, minus its mean, against the
            # |difference| on the whole set; (count + 1) / (num_samples + 1).
            diffs = np.abs(scores - baseline[1])
            p_value = float(
                _compute_p_value(diffs - diffs.mean(), abs(whole - baseline[0])))
        rows.append((name, whole, float(half_width), p_value))
    return rows


def format_p(p_value: float, num_samples: int = 1000) -> str:
    """``"p = 0.023"``, or ``"p ≤ 0.001"`` when a bootstrap p-value sits at its floor
    ``1 / (num_samples + 1)``.

    Shapes:
        p_value: a float from :func:`compare_bleu`; returns a string

    Taught in ``chapters/03_bahdanau/02_training_and_results.ipynb``.
    """
    floor = 1 / (num_samples + 1)
    if p_value <= floor * (1 + 1e-9):
        return f"p ≤ {floor:.2g}" if floor < 0.001 else f"p ≤ {floor:.3f}"
    return f"p = {p_value:.3f}"


def bleu_by_length(
    model,
    data: TranslationData,
    split: str = "test",
    bins: Sequence[tuple[int, int]] = (
        (1, 3),
        (4, 4),
        (5, 5),
        (6, 6),
        (7, 7),
        (8, 8),
        (9, 99),
    ),
    num_samples: int | None = None,
):
    """Corpus BLEU overall and for each bin of source length (English words and
    punctuation).

    Returns ``{"bleu": float, "by_length": [(label, num_pairs, bleu), ...],
    "hypotheses": [...]}``. With ``num_samples``, also ``"interval": (low, high)`` and
    ``"intervals": [(low, high), ...]`` (one per row of ``by_length``): 95% bootstrap
    intervals from :func:`bleu_interval`, which say how much a bin's score owes to the
    luck of which sentences it holds.

    Shapes:
        returns: a dict (no tensors)

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """
    data._check_split(split)
    english = [e for e, _ in data.raw[split]]
    references = [" ".join(f) for _, f in data.pairs[split]]
    lengths = [len(e) for e, _ in data.pairs[split]]
    if num_samples is not None:
        check_int("num_samples", num_samples, 1)
    hypotheses, _ = translate(model, data, english)
    rows, intervals = [], []
    for low, high in bins:
        idx = [i for i, n in enumerate(lengths) if low <= n <= high]
        if idx:
            label = (
                f"{low}"
                if low == high
                else (f"{low}–{high}" if high < 99 else f"≥{low}")
            )
            rows.append(
                (
                    label,
                    len(idx),
                    corpus_bleu(
                        [hypotheses[i] for i in idx], [references[i] for i in idx]
                    ),
                )
            )
            if num_samples is not None:
                _, low_bleu, high_bleu = bleu_interval(
                    [hypotheses[i] for i in idx], [references[i] for i in idx],
                    num_samples)
                intervals.append((low_bleu, high_bleu))
    result = {
        "bleu": corpus_bleu(hypotheses, references),
        "by_length": rows,
        "hypotheses": hypotheses,
    }
    if num_samples is not None:
        result["interval"] = bleu_interval(hypotheses, references, num_samples)[1:]
        result["intervals"] = intervals
    return result


def bleu_interval(hypotheses: Sequence[str], references: Sequence[str],
                  num_samples: int = 1000, seed: int = 0) -> tuple[float, float, float]:
    """Corpus BLEU and a 95% bootstrap interval: how much the score owes to the sample.

    The N sentence pairs are resampled with replacement ``num_samples`` times and each
    resample is scored (sacrebleu's n-gram statistics, summed, as for the corpus); the
    interval runs from the 2.5th to the 97.5th percentile of those scores (Koehn, 2004).
    A few sentences give a wide interval: a bin of 9 pairs can score anywhere in tens of
    points. Seeded, so repeated calls give the same interval.

    Shapes:
        hypotheses, references: N strings each; returns: (bleu, low, high), floats

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """
    import numpy as np

    hypotheses = check_str_list("hypotheses", hypotheses)
    references = check_str_list("references", references)
    if len(hypotheses) != len(references):
        raise ValueError(
            f"got {len(hypotheses)} hypotheses but {len(references)} references")
    if not hypotheses:
        raise ValueError("bleu_interval needs at least one sentence pair, got none")
    check_int("num_samples", num_samples, 1)
    check_int("seed", seed, 0)
    metric, stats = _group_stats(hypotheses, references, None)
    samples = np.random.default_rng(seed).integers(
        0, len(hypotheses), (num_samples, len(hypotheses)))  # (num_samples, N)
    scores = _resampled_scores(metric, stats, samples)
    low, high = np.percentile(scores, [2.5, 97.5])
    return corpus_bleu(hypotheses, references), float(low), float(high)


def copy_accuracy(model, batch: Batch, bos: int = 1, eos: int = 2) -> dict[int, float]:
    """How well a model copies, by input length: the mean share of symbols put at the
    right place.

    Decodes ``batch.src`` greedily (at most ``Lk + 1`` steps) and, for every example,
    counts the positions ``t < n`` where the output's token ``t`` equals the target's,
    divided by ``n``, the number of target symbols without ``<eos>``; a missing or extra
    symbol shifts the rest, and they count as wrong. Returns, for each input length
    ``n`` (source symbols without ``<eos>``) present in the batch, the mean of that
    share, in increasing order of ``n``. Made for :func:`~attention_lib.data.copy_task`,
    whose target is its source.

    Shapes:
        batch: a :class:`~attention_lib.data.Batch` of (B, Lk) sources and (B, Lq)
            targets
        returns: {input length: share in [0, 1]}

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb`` (with attention in
    ``chapters/03_bahdanau/02_training_and_results.ipynb``).
    """
    if not isinstance(batch, tuple) or len(batch) != 5:
        raise TypeError(
            "batch must be a Batch (src, src_valid_lens, tgt_input, tgt_output, "
            f"tgt_valid_lens), e.g. copy_task(...), got {describe(batch)}"
        )
    batch = Batch(*batch)
    for name in ("src_valid_lens", "tgt_valid_lens"):
        lens = getattr(batch, name)
        if (
            not isinstance(lens, torch.Tensor)
            or lens.dim() != 1
            or lens.shape[0] != batch.src.shape[0]
        ):
            raise ValueError(
                f"batch.{name} must be a tensor of shape ({batch.src.shape[0]},), one"
                f" length per example, got {describe(lens)}"
            )
        if bool((lens < 2).any()):
            raise ValueError(
                f"batch.{name} must count at least one symbol and <eos> (2) for every "
                f"example, got a minimum of {int(lens.min())}"
            )
    outputs, _ = greedy_decode(
        model, batch.src, batch.src_valid_lens, bos, eos, max_len=batch.src.shape[1] + 1
    )
    shares = collections.defaultdict(list)
    for out, target, n_src, n_tgt in zip(
        outputs,
        batch.tgt_output.tolist(),
        (batch.src_valid_lens - 1).tolist(),
        (batch.tgt_valid_lens - 1).tolist(),
    ):
        shares[n_src].append(sum(a == b for a, b in zip(out, target[:n_tgt])) / n_tgt)
    return {n: sum(s) / len(s) for n, s in sorted(shares.items())}


def alignment_hits(
    sources: Sequence[Sequence[str]],
    outputs: Sequence[Sequence[str]],
    weights: Sequence[torch.Tensor],
    window: int = 0,
) -> dict:
    """How often attention looks at the source word that an output word copies.

    Names, numbers, punctuation and some words are written the same in both languages.
    For every output word that also occurs in its source sentence, a *hit* is when the
    step's largest attention weight falls on (one of) that word's source positions, or
    within ``window`` positions of one. ``uniform`` is the hit rate of weights that
    carry no information: for each such word, the share of source positions that would
    count as a hit, averaged. The source is each sentence's tokens followed by
    ``<eos>``, the positions the weights cover.

    Returns ``{"words": n, "hits": rate, "uniform": rate}`` (rates in [0, 1]; NaN when
    n is 0).

    Shapes:
        sources, outputs: N token lists; weights: N tensors of (T, Lk), Lk at least
        the source's length with ``<eos>``; output words beyond T are not counted

    Taught in ``chapters/03_bahdanau/02_training_and_results.ipynb``.
    """
    check_int("window", window, 0)
    if not len(sources) == len(outputs) == len(weights):
        raise ValueError(
            "sources, outputs and weights must have one entry per sentence, got "
            f"{len(sources)}, {len(outputs)} and {len(weights)}"
        )
    hits = chance = words = 0
    for source, output, w in zip(sources, outputs, weights):
        source = list(source) + ["<eos>"]
        if not isinstance(w, torch.Tensor) or w.dim() != 2 or w.shape[1] < len(source):
            raise ValueError(
                "each weights entry must be a (T, Lk) tensor with Lk at least the "
                f"source's {len(source)} tokens (with <eos>), got {describe(w)}"
            )
        for t, word in enumerate(list(output)[: w.shape[0]]):
            near = {
                j
                for i, token in enumerate(source)
                if token == word
                for j in range(i - window, i + window + 1)
                if 0 <= j < len(source)
            }
            if near:
                words += 1
                hits += int(int(w[t, : len(source)].argmax()) in near)
                chance += len(near) / len(source)
    if words == 0:
        return {"words": 0, "hits": math.nan, "uniform": math.nan}
    return {"words": words, "hits": hits / words, "uniform": chance / words}


def mean_interval(values, confidence: float = 0.95) -> tuple[float, float]:
    """The mean of a few runs' values (one per seed, say) and the half-width of its
    Student-t interval: ``mean ± half`` covers the true mean with probability
    ``confidence`` if the runs are independent and roughly normal. For paired
    comparisons, pass the per-seed differences.

    Shapes:
        values: a sequence of at least 2 numbers; returns: (mean, half-width), floats

    Taught in ``chapters/07_visual/03_vision_transformer.ipynb``.
    """
    from scipy import stats

    values = [float(v) for v in values]
    if len(values) < 2:
        raise ValueError(f"values must hold at least 2 runs, got {len(values)}")
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = stats.t.ppf(0.5 + confidence / 2, n - 1) * std / math.sqrt(n)
    return mean, float(half)

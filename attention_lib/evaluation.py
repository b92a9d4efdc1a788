"""Translating held-out sentences and scoring them with BLEU (Papineni et al., 2002).

* :func:`bleu` is the sentence BLEU that *Dive into Deep Learning* defines (n-gram precisions
  weighted by 1/2^n, a brevity penalty, no smoothing). It is written by hand because that exact
  definition is what readers of d2l know and what the tests compare against ``d2l.bleu``;
  sacrebleu's sentence BLEU smooths and weights differently.
* :func:`corpus_bleu` is the standard corpus-level BLEU, computed by sacrebleu.

Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
"""
from __future__ import annotations

import collections
import math
from typing import Sequence

import sacrebleu
import torch

from .data import TranslationData
from .seq2seq import greedy_decode

__all__ = ["bleu", "corpus_bleu", "translate", "bleu_by_length"]


def bleu(pred_seq: str, label_seq: str, k: int = 2) -> float:
    """Sentence BLEU as d2l defines it, on space-separated tokens, with n-grams up to ``k``.

    ``exp(min(0, 1 - len_label/len_pred)) * prod_n p_n ** (1/2**n)``; an empty prediction scores 0.

    Shapes:
        pred_seq, label_seq: str; returns: float in [0, 1]

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """
    pred_tokens, label_tokens = pred_seq.split(), label_seq.split()
    len_pred, len_label = len(pred_tokens), len(label_tokens)
    if len_pred == 0:
        return 0.0
    score = math.exp(min(0.0, 1 - len_label / len_pred))
    for n in range(1, min(k, len_pred) + 1):
        label_ngrams = collections.Counter(tuple(label_tokens[i:i + n]) for i in range(len_label - n + 1))
        pred_ngrams = collections.Counter(tuple(pred_tokens[i:i + n]) for i in range(len_pred - n + 1))
        num_matches = sum(min(count, label_ngrams[g]) for g, count in pred_ngrams.items())  # clipped counts
        score *= math.pow(num_matches / (len_pred - n + 1), math.pow(0.5, n))
    return score


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Corpus BLEU (0–100) with sacrebleu, on the book's tokenisation (``tokenize='none'``).

    Shapes:
        hypotheses, references: N strings each; returns: float

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """
    if len(hypotheses) != len(references):
        raise ValueError(f"got {len(hypotheses)} hypotheses but {len(references)} references")
    # force=True: our text is tokenised on purpose (both sides alike), which sacrebleu would warn about.
    return sacrebleu.corpus_bleu(list(hypotheses), [list(references)], tokenize="none", force=True).score


def translate(model, data: TranslationData, sentences: Sequence[str], max_len: int | None = None,
              batch_size: int = 256) -> tuple[list[str], list[torch.Tensor]]:
    """Greedy translations of raw English sentences, as space-separated French tokens.

    Also returns, per sentence, its attention weights (steps, Lk) when the decoder keeps them.

    Shapes:
        sentences: N strings; returns: N strings, N tensors of (T, Lk) (or an empty list)

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """
    max_len = max_len or data.num_steps + 2
    vocab = data.tgt_vocab
    out, attention = [], []
    for start in range(0, len(sentences), batch_size):
        src, src_valid_lens = data.encode_source(sentences[start:start + batch_size])
        indices, weights = greedy_decode(model, src, src_valid_lens, vocab.bos, vocab.eos, max_len)
        out.extend(" ".join(vocab.to_tokens(row)) for row in indices)
        if weights:
            stacked = torch.stack(weights, dim=1)  # (B, T, Lk)
            attention.extend(stacked[i, : max(len(row), 1)] for i, row in enumerate(indices))
    return out, attention


def bleu_by_length(model, data: TranslationData, split: str = "test",
                   bins: Sequence[tuple[int, int]] = ((1, 3), (4, 4), (5, 5), (6, 6), (7, 7), (8, 8), (9, 99))):
    """Corpus BLEU overall and for each bin of source length (English words and punctuation).

    Returns ``{"bleu": float, "by_length": [(label, num_pairs, bleu), ...], "hypotheses": [...]}``.

    Shapes:
        returns: a dict (no tensors)

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """
    english = [e for e, _ in data.raw[split]]
    references = [" ".join(f) for _, f in data.pairs[split]]
    lengths = [len(e) for e, _ in data.pairs[split]]
    hypotheses, _ = translate(model, data, english)
    rows = []
    for low, high in bins:
        idx = [i for i, n in enumerate(lengths) if low <= n <= high]
        if idx:
            label = f"{low}" if low == high else (f"{low}–{high}" if high < 99 else f"≥{low}")
            rows.append((label, len(idx), corpus_bleu([hypotheses[i] for i in idx], [references[i] for i in idx])))
    return {"bleu": corpus_bleu(hypotheses, references), "by_length": rows, "hypotheses": hypotheses}

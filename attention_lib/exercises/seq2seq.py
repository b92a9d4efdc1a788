"""Checkers for chapter 1's exercises (the corpus and the encoder–decoder).

Each checker runs the reader's function on cases built to expose one typical mistake each, and
names the mistake it finds.

Taught in ``chapters/01_seq2seq/01_data.ipynb`` and ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
"""
from __future__ import annotations

import collections
import math

import torch

from ..data import preprocess, truncate_pad
from ..evaluation import bleu
from ._feedback import Feedback, run_safely

__all__ = ["check_preprocess", "check_truncate_pad", "check_teacher_forcing_input", "check_bleu"]


def check_preprocess(fn) -> Feedback:
    """Check ``fn(text) -> str`` against the book's preprocessing (lower-case, spaces, punctuation).

    Shapes:
        fn: str -> str
    """
    cases = [
        ("Go.", "a space goes before '.', ',', '!' and '?' when there is none"),
        ("Hello, World!", "text must be lower-cased, and punctuation separated by a space"),
        ("Va !", "no second space before punctuation that already has one"),
        ("Ça alors\u202f!", "the narrow no-break space U+202F (French typography) must become a plain space"),
        ("Il a 3\xa0ans.", "the no-break space U+00A0 must become a plain space"),
    ]
    for text, rule in cases:
        got, error = run_safely(fn, text)
        if error is not None:
            return error
        expected = preprocess(text)
        if got is None:
            return Feedback.wrong("Your function returned None: return the preprocessed string.")
        if got == expected:
            continue
        if got.lower() == expected and got != expected:
            return Feedback.wrong(f"{text!r}: got {got!r}, expected {expected!r}. You forgot to lower-case.")
        if "  " in got:
            return Feedback.wrong(f"{text!r}: got {got!r}, expected {expected!r}. There is a double space: "
                                  "add a space before punctuation only when the previous character is not one.")
        if "\u202f" in got or "\xa0" in got:
            return Feedback.wrong(f"{text!r}: got {got!r}, expected {expected!r}. A non-breaking space "
                                  "(U+202F or U+00A0) is still there: replace it with ' '.")
        return Feedback.wrong(f"{text!r}: got {got!r}, expected {expected!r}. Rule: {rule}.")
    return Feedback.ok("Correct: lower-cased, non-breaking spaces replaced, punctuation split off.")


def check_truncate_pad(fn) -> Feedback:
    """Check ``fn(indices, num_steps, pad) -> list`` (right padding, truncation keeping the start).

    Shapes:
        fn: (list of Lt ints, int, int) -> list of ``num_steps`` ints
    """
    cases = [([5, 6, 7], 5, 0), ([1, 2, 3, 4, 5, 6, 7], 4, 0), ([9], 1, 0), ([4, 4], 2, 1)]
    for indices, num_steps, pad in cases:
        got, error = run_safely(fn, list(indices), num_steps, pad)
        if error is not None:
            return error
        expected = truncate_pad(indices, num_steps, pad)
        if got is None:
            return Feedback.wrong("Your function returned None: return the list of indices.")
        got = list(got)
        if got == expected:
            continue
        if len(got) != num_steps:
            what = "truncate it" if len(indices) > num_steps else "pad it"
            return Feedback.wrong(f"{indices}, num_steps={num_steps}: got length {len(got)}, expected {num_steps}. "
                                  f"The sequence is {'longer' if len(indices) > num_steps else 'shorter'} than "
                                  f"num_steps: {what}.")
        if len(indices) < num_steps and got[: num_steps - len(indices)] == [pad] * (num_steps - len(indices)):
            return Feedback.wrong(f"{indices}: got {got}, expected {expected}. You padded on the left; pad on the "
                                  "right, so position t is always the t-th word and valid_lens counts from 0.")
        if len(indices) > num_steps and got == indices[-num_steps:]:
            return Feedback.wrong(f"{indices}: got {got}, expected {expected}. You kept the end of the sentence; "
                                  "keep its beginning (indices[:num_steps]).")
        return Feedback.wrong(f"{indices}, num_steps={num_steps}, pad={pad}: got {got}, expected {expected}.")
    return Feedback.ok("Correct: truncated from the end, padded on the right.")


def check_teacher_forcing_input(fn) -> Feedback:
    """Check ``fn(targets, bos) -> decoder input``: ``<bos>`` then the targets shifted right by one.

    Shapes:
        fn: (targets (B, Lq) long tensor, int) -> (B, Lq) long tensor
    """
    bos = 1
    targets = torch.tensor([[7, 8, 9, 2, 0], [5, 2, 0, 0, 0]])  # (B, Lq), 2 = <eos>, 0 = <pad>
    expected = torch.tensor([[1, 7, 8, 9, 2], [1, 5, 2, 0, 0]])
    got, error = run_safely(fn, targets.clone(), bos)
    if error is not None:
        return error
    if got is None:
        return Feedback.wrong("Your function returned None: return the (B, Lq) decoder input.")
    got = torch.as_tensor(got)
    if got.shape != expected.shape:
        return Feedback.wrong(f"Expected shape (B, Lq) = {tuple(expected.shape)}, got {tuple(got.shape)}: drop the "
                              "last target position so the input keeps the targets' length.")
    if torch.equal(got, expected):
        return Feedback.ok("Correct: at step t the decoder reads the true token t-1 (teacher forcing).")
    if torch.equal(got, targets):
        return Feedback.wrong("The input equals the targets: the decoder would read the very word it must predict. "
                              "Shift right: start with <bos> and drop the last position.")
    if torch.equal(got[:, :-1], targets[:, 1:]):
        return Feedback.wrong("You shifted left (dropped the first target word); shift right instead: "
                              "<bos>, y_1, ..., y_{Lq-1}.")
    if torch.equal(got[:, 1:], targets[:, :-1]) and not bool((got[:, 0] == bos).all()):
        return Feedback.wrong(f"The shift is right, but the first column must be <bos> ({bos}), got {got[:, 0].tolist()}.")
    if bool((got[:, -1] == bos).all()):
        return Feedback.wrong("<bos> goes at the start of the input, not the end.")
    return Feedback.wrong(f"For targets {targets.tolist()} expected {expected.tolist()}, got {got.tolist()}.")


def _bleu_variant(pred_seq: str, label_seq: str, k: int, brevity: bool = True, clip: bool = True,
                  weighted: bool = True) -> float:
    """Sentence BLEU with one ingredient switched off: the typical wrong answers, to name them."""
    pred, label = pred_seq.split(), label_seq.split()
    if not pred:
        return 0.0
    score = math.exp(min(0.0, 1 - len(label) / len(pred))) if brevity else 1.0
    for n in range(1, min(k, len(pred)) + 1):
        label_ngrams = collections.Counter(tuple(label[i:i + n]) for i in range(len(label) - n + 1))
        pred_ngrams = collections.Counter(tuple(pred[i:i + n]) for i in range(len(pred) - n + 1))
        matches = sum((min(c, label_ngrams[g]) if clip else c * (g in label_ngrams)) for g, c in pred_ngrams.items())
        score *= (matches / (len(pred) - n + 1)) ** (0.5 ** n if weighted else 1.0)
    return score


def check_bleu(fn) -> Feedback:
    """Check ``fn(pred_seq, label_seq, k) -> float`` against the book's sentence BLEU.

    Shapes:
        fn: (str, str, int) -> float
    """
    cases = [("il est grand .", "il est grand .", 2), ("il est .", "il est très grand .", 2),
             ("le chat le chat", "le chat est noir", 2), ("je suis un chat noir", "je suis un chien noir", 3)]
    mistakes = [({"brevity": False}, "the brevity penalty exp(min(0, 1 - len_label / len_pred)) is missing"),
                ({"clip": False}, "n-gram matches are not clipped: a label n-gram can be matched at most as often "
                                  "as it occurs in the label"),
                ({"weighted": False}, "the precisions p_n must be weighted by the power 1/2^n")]
    answers = []
    for pred, label, k in cases:
        got, error = run_safely(fn, pred, label, k)
        if error is not None:
            return error
        if got is None:
            return Feedback.wrong("Your function returned None: return the score as a float.")
        answers.append(float(got))
    expected = [bleu(*case) for case in cases]
    if all(math.isclose(a, e, rel_tol=1e-6, abs_tol=1e-9) for a, e in zip(answers, expected)):
        return Feedback.ok("Correct: clipped n-gram precisions, weighted by 1/2^n, times the brevity penalty.")
    for switch, message in mistakes:
        variant = [_bleu_variant(*case, **switch) for case in cases]
        if all(math.isclose(a, v, rel_tol=1e-6, abs_tol=1e-9) for a, v in zip(answers, variant)):
            return Feedback.wrong(f"Not yet: {message}.")
    bad = next(i for i, (a, e) in enumerate(zip(answers, expected)) if not math.isclose(a, e, rel_tol=1e-6))
    pred, label, k = cases[bad]
    return Feedback.wrong(f"bleu({pred!r}, {label!r}, k={k}) = {answers[bad]:.4f}, expected {expected[bad]:.4f}.")

"""Checkers for chapter 1's exercises (the corpus and the encoder–decoder).

Each checker runs the reader's function on cases built to expose one typical mistake
each, and names the mistake it finds.

Taught in ``chapters/01_seq2seq/01_data.ipynb`` and
``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
"""
from __future__ import annotations

import collections
import math

import torch
from torch import Tensor

from ..data import preprocess, truncate_pad
from ..evaluation import bleu
from ..seq2seq import Seq2SeqDecoder, Seq2SeqEncoder
from ._feedback import (
    Feedback,
    checker,
    close,
    diagnose_numbers,
    read_numbers,
    read_text,
    read_tokens,
    run_safely,
)

__all__ = [
    "check_num_parameters",
    "check_preprocess",
    "check_truncate_pad",
    "check_teacher_forcing_input",
    "check_bleu",
]


@checker
def check_preprocess(fn) -> Feedback:
    """Check ``fn(text) -> str`` against the book's preprocessing (lower-case, spaces,
    punctuation).

    Shapes:
        fn: str -> str
    """
    cases = [
        ("Go.", "a space goes before '.', ',', '!' and '?' when there is none"),
        (
            "Hello, World!",
            "text must be lower-cased, and punctuation separated by a space",
        ),
        ("Va !", "no second space before punctuation that already has one"),
        (
            "Ça alors\u202f!",
            "the narrow no-break space U+202F (French typography) must become a"
            " plain space",
        ),
        ("Il a 3\xa0ans.", "the no-break space U+00A0 must become a plain space"),
        (
            "Who? Me, TOM!",
            "a space goes before every '.', ',', '!' and '?' when there is none",
        ),
    ]
    for text, rule in cases:
        got, error = run_safely(fn, text)
        if error is not None:
            return error
        got, error = read_text(got, "preprocessed string")
        if error is not None:
            return error
        expected = preprocess(text)
        if got == expected:
            continue
        if got.lower() == expected and got != expected:
            return Feedback.wrong(
                f"{text!r}: got {got!r}, expected {expected!r}. You forgot to"
                " lower-case."
            )
        if "  " in got:
            return Feedback.wrong(
                f"{text!r}: got {got!r}, expected {expected!r}. There is a double"
                " space: add a space before punctuation only when the previous"
                " character is not one."
            )
        if "\u202f" in got or "\xa0" in got:
            return Feedback.wrong(
                f"{text!r}: got {got!r}, expected {expected!r}. A non-breaking space "
                "(U+202F or U+00A0) is still there: replace it with ' '."
            )
        return Feedback.wrong(
            f"{text!r}: got {got!r}, expected {expected!r}. Rule: {rule}."
        )
    return Feedback.ok(
        "Correct: lower-cased, non-breaking spaces replaced, punctuation split off."
    )


@checker
def check_truncate_pad(fn) -> Feedback:
    """Check ``fn(indices, num_steps, pad) -> list`` (right padding, truncation keeping
    the start).

    ``num_steps`` and ``pad`` take several values, so an answer that fixes either is
    caught.

    Shapes:
        fn: (list of Lt ints, int, int) -> list of ``num_steps`` ints (a tuple, array or
            tensor is fine)
    """
    cases = [
        ([5, 6, 7], 5, 0),
        ([1, 2, 3, 4, 5, 6, 7], 4, 0),
        ([9], 1, 0),
        ([4, 4], 2, 1),
        ([5, 6, 7], 6, 1),
        ([8], 3, 2),
        ([3, 1, 4, 1, 5], 2, 7),
    ]
    for indices, num_steps, pad in cases:
        got, error = run_safely(fn, list(indices), num_steps, pad)
        if error is not None:
            return error
        got, error = read_tokens(got, "list of indices", dim=1)
        if error is not None:
            return error
        got = got.tolist()
        expected = truncate_pad(indices, num_steps, pad)
        if got == expected:
            continue
        if len(got) != num_steps:
            what = "truncate it" if len(indices) > num_steps else "pad it"
            return Feedback.wrong(
                f"{indices}, num_steps={num_steps}: got length {len(got)}, expected"
                f" {num_steps}. The sequence is"
                f" {'longer' if len(indices) > num_steps else 'shorter'} than"
                f" num_steps: {what}."
            )
        if len(indices) < num_steps and got[: num_steps - len(indices)] == [pad] * (
            num_steps - len(indices)
        ):
            return Feedback.wrong(
                f"{indices}: got {got}, expected {expected}. You padded on the left;"
                " pad on the right, so position t is always the t-th word and"
                " valid_lens counts from 0."
            )
        if len(indices) > num_steps and got == indices[-num_steps:]:
            return Feedback.wrong(
                f"{indices}: got {got}, expected {expected}. You kept the end of the"
                " sentence; keep its beginning (indices[:num_steps])."
            )
        if got[: len(indices)] == indices and len(set(got[len(indices):])) == 1:
            return Feedback.wrong(
                f"{indices}, num_steps={num_steps}, pad={pad}: got {got}, expected"
                f" {expected}. Pad with the `pad` argument ({pad}), not with {got[-1]}."
            )
        return Feedback.wrong(
            f"{indices}, num_steps={num_steps}, pad={pad}: got {got}, expected"
            f" {expected}."
        )
    return Feedback.ok("Correct: truncated from the end, padded on the right.")


def _teacher_forcing_input(targets: Tensor, bos: int) -> Tensor:
    # (B, Lq)
    return torch.cat([torch.full((targets.shape[0], 1), bos), targets[:, :-1]], dim=1)


@checker
def check_teacher_forcing_input(fn) -> Feedback:
    """Check ``fn(targets, bos) -> decoder input``: ``<bos>`` then the targets shifted
    right by one.

    Two batches of different shapes, with different ``<bos>`` indices, so a fixed
    ``bos`` is caught.

    Shapes:
        fn: (targets (B, Lq) long tensor, int) -> (B, Lq) tensor of indices (a list or
            array is fine)
    """
    # (B, Lq), 2 = <eos>, 0 = <pad>
    cases = [(torch.tensor([[7, 8, 9, 2, 0], [5, 2, 0, 0, 0]]), 1),
             (torch.tensor([[4, 6, 2, 0], [9, 9, 5, 2], [7, 2, 0, 0]]), 3)]
    for targets, bos in cases:
        expected = _teacher_forcing_input(targets, bos)
        got, error = run_safely(fn, targets.clone(), bos)
        if error is not None:
            return error
        got, error = read_tokens(got, "(B, Lq) decoder input", dim=2)
        if error is not None:
            return error
        if got.shape != expected.shape:
            hint = (
                ": drop the last target position so the input keeps the targets' length"
                if got.shape == (targets.shape[0], targets.shape[1] + 1)
                else ""
            )
            return Feedback.wrong(
                f"Expected shape (B, Lq) = {tuple(expected.shape)}, got"
                f" {tuple(got.shape)}{hint}."
            )
        if torch.equal(got, expected):
            continue
        if torch.equal(got, targets):
            return Feedback.wrong(
                "The input equals the targets: the decoder would read the very word it"
                " must predict. Shift right: start with <bos> and drop the last"
                " position."
            )
        if torch.equal(got[:, :-1], targets[:, 1:]):
            return Feedback.wrong(
                "You shifted left (dropped the first target word); shift right instead:"
                " <bos>, y_1, ..., y_{Lq-1}."
            )
        if torch.equal(got[:, 1:], targets[:, :-1]) and not bool(
            (got[:, 0] == bos).all()
        ):
            return Feedback.wrong(
                "The shift is right, but the first column must be <bos>, the `bos`"
                f" argument ({bos}), got {got[:, 0].tolist()}."
            )
        if bool((got[:, -1] == bos).all()):
            return Feedback.wrong("<bos> goes at the start of the input, not the end.")
        return Feedback.wrong(
            f"For targets {targets.tolist()} and bos={bos} expected"
            f" {expected.tolist()}, got {got.tolist()}."
        )
    return Feedback.ok(
        "Correct: at step t the decoder reads the true token t-1 (teacher forcing)."
    )


def _bleu_variant(
    pred_seq: str,
    label_seq: str,
    k: int,
    brevity: bool = True,
    clip: bool = True,
    weighted: bool = True,
) -> float:
    """Sentence BLEU with one ingredient switched off: the typical wrong answers, to
    name them."""
    pred, label = pred_seq.split(), label_seq.split()
    if not pred:
        return 0.0
    score = math.exp(min(0.0, 1 - len(label) / len(pred))) if brevity else 1.0
    for n in range(1, min(k, len(pred)) + 1):
        label_ngrams = collections.Counter(
            tuple(label[i : i + n]) for i in range(len(label) - n + 1)
        )
        pred_ngrams = collections.Counter(
            tuple(pred[i : i + n]) for i in range(len(pred) - n + 1)
        )
        matches = sum(
            (min(c, label_ngrams[g]) if clip else c * (g in label_ngrams))
            for g, c in pred_ngrams.items()
        )
        score *= (matches / (len(pred) - n + 1)) ** (0.5 ** n if weighted else 1.0)
    return score


@checker
def check_bleu(fn) -> Feedback:
    """Check ``fn(pred_seq, label_seq, k) -> float`` against the book's sentence BLEU.

    ``k`` runs from 1 to 4 (and beyond the prediction's length), so an answer that fixes
    it is caught.

    Shapes:
        fn: (str, str, int) -> a number (Python, NumPy or a one-element tensor)
    """
    cases = [
        ("il est grand .", "il est grand .", 2),
        ("il est .", "il est très grand .", 2),
        ("le chat le chat", "le chat est noir", 2),
        ("je suis un chat noir", "je suis un chien noir", 3),
        ("il est petit .", "il est grand .", 1),
        ("le chat", "le chat noir", 4),
    ]
    mistakes = [
        (
            {"brevity": False},
            "the brevity penalty exp(min(0, 1 - len_label / len_pred)) is missing",
        ),
        (
            {"clip": False},
            "n-gram matches are not clipped: a label n-gram can be matched at most"
            " as often as it occurs in the label",
        ),
        ({"weighted": False}, "the precisions p_n must be weighted by the power 1/2^n"),
    ]
    answers, error = read_numbers(fn, cases, "score")
    if error is not None:
        return error

    def matches(values):
        return all(
            close(a, torch.tensor(v, dtype=torch.float64))
            for a, v in zip(answers, values)
        )

    expected = [bleu(*case) for case in cases]
    if matches(expected):
        return Feedback.ok(
            "Correct: clipped n-gram precisions, weighted by 1/2^n, times the brevity"
            " penalty."
        )
    for switch, message in mistakes:
        if matches([_bleu_variant(*case, **switch) for case in cases]):
            return Feedback.wrong(f"Not yet: {message}.")
    for fixed in (1, 2, 3, 4):
        if matches([bleu(pred, label, fixed) for pred, label, _ in cases]):
            return Feedback.wrong(
                f"Your scores are BLEU with n-grams up to {fixed} whatever k is: use"
                " the `k` argument, n = 1, ..., min(k, len_pred)."
            )
    bad = next(i for i, (a, e) in enumerate(zip(answers, expected))
               if not close(a, torch.tensor(e, dtype=torch.float64)))
    pred, label, k = cases[bad]
    return Feedback.wrong(
        f"bleu({pred!r}, {label!r}, k={k}) = {float(answers[bad]):.4f}, "
        f"expected {expected[bad]:.4f}."
    )


# --------------------------------------------------------------------------- counting
# parameters


def _gru_parameters(input_size: int, num_hiddens: int, num_layers: int,
                    gates: int = 3, biases: int = 2, same_input: bool = False) -> int:
    """Parameters of a stacked GRU; the switches give the typical miscounts."""
    total = 0
    for layer in range(num_layers):
        size = input_size if layer == 0 or same_input else num_hiddens
        total += (
            gates * num_hiddens * (size + num_hiddens) + biases * gates * num_hiddens
        )
    return total


def _seq2seq_parameters(src_vocab_size: int, tgt_vocab_size: int, embed_size: int,
                        num_hiddens: int, num_layers: int, gates: int = 3,
                        biases: int = 2, context: bool = True, output_bias: bool = True,
                        same_input: bool = False) -> int:
    """Parameters of chapter 1's encoder–decoder, counted by formula (see the
    checker)."""
    encoder = src_vocab_size * embed_size + _gru_parameters(
        embed_size, num_hiddens, num_layers, gates, biases, same_input)
    decoder_input = embed_size + (num_hiddens if context else 0)
    decoder = (tgt_vocab_size * embed_size
               + _gru_parameters(decoder_input, num_hiddens, num_layers, gates, biases,
                                 same_input)
               + num_hiddens * tgt_vocab_size + (tgt_vocab_size if output_bias else 0))
    return encoder + decoder


_PARAMETER_CASES = [  # (src vocab V, tgt vocab V, E, Ds, layers)
    (2948, 4465, 128, 256, 2),  # the page's model
    (10, 12, 4, 6, 1),
    (30, 20, 8, 5, 3),
    (7, 9, 3, 3, 2),
]

_PARAMETER_MISTAKES = [
    (
        {"biases": 1},
        "one bias vector per gate is missing: PyTorch's GRU keeps two, b_ih and "
        "b_hh (3 Ds numbers each per layer), although one would do",
    ),
    (
        {"context": False},
        "the decoder's first GRU layer reads the embedding *and* the context "
        "c, so its input size is E + Ds, not E",
    ),
    (
        {"gates": 1},
        "a GRU layer has three sets of weights, for the reset gate r, the update "
        "gate z and the candidate state: 3 Ds (input size + Ds) + 2 × 3 Ds",
    ),
    (
        {"gates": 4},
        "that is an LSTM's count (four gates); a GRU has three: r, z and the "
        "candidate state",
    ),
    (
        {"output_bias": False},
        "the output layer nn.Linear(Ds, V) has a bias of V numbers too",
    ),
    (
        {"same_input": True},
        "only the first GRU layer reads the embeddings; layers 2 and up "
        "read the layer below, whose output has Ds numbers",
    ),
]


def _model_parameters(src_vocab, tgt_vocab, embed, hiddens, layers) -> int:
    """The parameters of the library's encoder and decoder of these sizes."""
    encoder = Seq2SeqEncoder(src_vocab, embed, hiddens, layers)
    decoder = Seq2SeqDecoder(tgt_vocab, embed, hiddens, layers)
    return sum(p.numel() for p in [*encoder.parameters(), *decoder.parameters()])


@checker
def check_num_parameters(fn) -> Feedback:
    """Check ``fn(src_vocab_size, tgt_vocab_size, embed_size, num_hiddens,
    num_layers)``, the number of parameters of chapter 1's encoder–decoder, against the
    real modules.

    Per GRU layer with input size I: 3 Ds (I + Ds) weights and 2 × 3 Ds biases; the
    encoder's first layer reads E numbers, the decoder's E + Ds (the embedding and the
    context); the embeddings hold V × E each, the output layer Ds × V + V. Four sizes,
    so a formula that fits only the page's model is caught, and each typical miscount is
    named.

    Shapes:
        fn: five ints -> one int
    """
    def explain(answers, expected):
        bad = next(i for i, (a, e) in enumerate(zip(answers, expected)) if a != e)
        return (
            f"For (V_src, V_tgt, E, Ds, layers) = {_PARAMETER_CASES[bad]} you count"
            f" {answers[bad]:,.0f}, the model has {expected[bad]:,.0f}. Count each"
            " module: two embeddings, the encoder's and the decoder's GRU layers (three"
            " gates, two bias vectors each), and the output layer."
        )

    return diagnose_numbers(
        fn, _PARAMETER_CASES, _model_parameters,
        [(lambda *case, switch=switch: _seq2seq_parameters(*case, **switch),
          message + ".") for switch, message in _PARAMETER_MISTAKES],
        what="number of parameters", explain=explain,
        correct=lambda expected: f"Correct: {expected[0]:,.0f} for the page's model."
        " Most of them sit in the two embeddings and the output layer"
        " (vocabulary-sized); the GRU layers hold 3 Ds (input size + Ds) + 6 Ds each.",
    )

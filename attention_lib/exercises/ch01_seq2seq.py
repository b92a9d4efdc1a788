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
    diagnose,
    diagnose_numbers,
    read_text,
    read_tokens,
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
    rules = {
        "Go.": "a space goes before '.', ',', '!' and '?' when there is none",
        "Hello, World!": "text must be lower-cased, and punctuation separated by a"
        " space",
        "Va !": "no second space before punctuation that already has one",
        "Ça alors\u202f!": "the narrow no-break space U+202F (French typography) must"
        " become a plain space",
        "Il a 3\xa0ans.": "the no-break space U+00A0 must become a plain space",
        "Who? Me, TOM!": "a space goes before every '.', ',', '!' and '?' when there"
        " is none",
    }

    def explain(got, expected, text):
        if got.lower() == expected:
            hint = "You forgot to lower-case."
        elif "  " in got:
            hint = ("There is a double space: add a space before punctuation only when"
                    " the previous character is not one.")
        elif "\u202f" in got or "\xa0" in got:
            hint = ("A non-breaking space (U+202F or U+00A0) is still there: replace it"
                    " with ' '.")
        else:
            hint = f"Rule: {rules[text]}."
        return f"got {got!r}, expected {expected!r}. {hint}"

    return diagnose(
        fn, [(text,) for text in rules], preprocess, what="preprocessed string",
        where=repr, compare=str.__eq__, explain=explain,
        read=lambda got, text: read_text(got, "preprocessed string"),
        correct="Correct: lower-cased, non-breaking spaces replaced, punctuation split"
        " off.",
    )


@checker
def check_truncate_pad(fn) -> Feedback:
    """Check ``fn(indices, num_steps, pad) -> list``: right padding, truncation keeping
    the start, for several ``num_steps`` and ``pad``.

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

    def read(got, *case):
        got, error = read_tokens(got, "list of indices", dim=1)
        return (got if error is not None else got.tolist()), error

    return diagnose(fn, cases, truncate_pad, what="list of indices", read=read,
                    compare=list.__eq__, explain=_explain_truncate_pad,
                    correct="Correct: truncated from the end, padded on the right.")


def _explain_truncate_pad(got, expected, indices, num_steps, pad) -> str:
    result = f"got {got}, expected {expected}."
    if len(got) != num_steps:
        longer = len(indices) > num_steps
        return (
            f"{indices}, num_steps={num_steps}: got length {len(got)}, expected"
            f" {num_steps}. The sequence is {'longer' if longer else 'shorter'} than"
            f" num_steps: {'truncate it' if longer else 'pad it'}."
        )
    missing = num_steps - len(indices)
    if missing > 0 and got[:missing] == [pad] * missing:
        return (f"{indices}: {result} You padded on the left; pad on the right, so"
                " position t is always the t-th word and valid_lens counts from 0.")
    if missing < 0 and got == indices[-num_steps:]:
        return (f"{indices}: {result} You kept the end of the sentence; keep its"
                " beginning (indices[:num_steps]).")
    shown = f"{indices}, num_steps={num_steps}, pad={pad}: {result}"
    if got[: len(indices)] == indices and len(set(got[len(indices):])) == 1:
        return f"{shown} Pad with the `pad` argument ({pad}), not with {got[-1]}."
    return shown

def _teacher_forcing_input(targets: Tensor, bos: int) -> Tensor:
    # (B, Lq)
    return torch.cat([torch.full((targets.shape[0], 1), bos), targets[:, :-1]], dim=1)


@checker
def check_teacher_forcing_input(fn) -> Feedback:
    """Check ``fn(targets, bos) -> decoder input``: ``<bos>`` then the targets shifted
    right by one, for two batches with different ``<bos>``.

    Shapes:
        fn: (targets (B, Lq) long tensor, int) -> (B, Lq) tensor of indices (a list or
            array is fine)
    """
    # (B, Lq), 2 = <eos>, 0 = <pad>
    cases = [(torch.tensor([[7, 8, 9, 2, 0], [5, 2, 0, 0, 0]]), 1),
             (torch.tensor([[4, 6, 2, 0], [9, 9, 5, 2], [7, 2, 0, 0]]), 3)]
    return diagnose(
        fn, cases, _teacher_forcing_input, [(lambda targets, bos: targets, (
            "The input equals the targets: the decoder would read the very word it"
            " must predict. Shift right: start with <bos> and drop the last position."
        ))], what="decoder input", explain=_explain_teacher_forcing,
        compare=lambda got, expected: got.shape == expected.shape
        and torch.equal(got, expected),
        read=lambda got, *case: read_tokens(got, "(B, Lq) decoder input", dim=2),
        correct="Correct: at step t the decoder reads the true token t-1 (teacher"
        " forcing).",
    )


def _explain_teacher_forcing(got, expected, targets, bos) -> str:
    if got.shape != expected.shape:
        hint = (": drop the last target position so the input keeps the targets' length"
                if got.shape == (targets.shape[0], targets.shape[1] + 1) else "")
        return (f"Expected shape (B, Lq) = {tuple(expected.shape)}, got"
                f" {tuple(got.shape)}{hint}.")
    if torch.equal(got[:, :-1], targets[:, 1:]):
        return ("You shifted left (dropped the first target word); shift right"
                " instead: <bos>, y_1, ..., y_{Lq-1}.")
    if torch.equal(got[:, 1:], targets[:, :-1]) and not bool((got[:, 0] == bos).all()):
        return ("The shift is right, but the first column must be <bos>, the `bos`"
                f" argument ({bos}), got {got[:, 0].tolist()}.")
    if bool((got[:, -1] == bos).all()):
        return "<bos> goes at the start of the input, not the end."
    if bool((got[:, 0] == bos).all()) and torch.equal(got[:, 1:], targets[:, 1:]):
        return ("<bos> replaces the first target word instead of coming before it:"
                " shift the targets right by one, then put <bos> in front.")
    return (f"For targets {targets.tolist()} and bos={bos} expected"
            f" {expected.tolist()}, got {got.tolist()}.")


def _bleu_variant(
    pred_seq: str,
    label_seq: str,
    k: int,
    brevity: bool = True,
    clip: bool = True,
    weighted: bool = True,
    beyond_pred: bool = False,
) -> float:
    """Sentence BLEU with one ingredient switched off: the typical wrong answers, to
    name them. ``beyond_pred`` runs n up to k and gives p_n = 0 when the prediction
    has no n-grams (n > len_pred), instead of stopping at min(k, len_pred)."""
    pred, label = pred_seq.split(), label_seq.split()
    if not pred:
        return 0.0
    score = math.exp(min(0.0, 1 - len(label) / len(pred))) if brevity else 1.0
    if beyond_pred and k > len(pred):
        return 0.0
    for n in range(1, min(k, len(pred)) + 1):
        label_ngrams = collections.Counter(
            tuple(label[i : i + n]) for i in range(len(label) - n + 1)
        )
        pred_ngrams = collections.Counter(
            tuple(pred[i : i + n]) for i in range(len(pred) - n + 1)
        )
        matches = sum((min(c, label_ngrams[g]) if clip else c * (g in label_ngrams))
                      for g, c in pred_ngrams.items())
        score *= (matches / (len(pred) - n + 1)) ** (0.5 ** n if weighted else 1.0)
    return score


@checker
def check_bleu(fn) -> Feedback:
    """Check ``fn(pred_seq, label_seq, k) -> float`` against the book's sentence BLEU,
    for k from 1 to beyond the prediction's length.

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
        ({"brevity": False},
         "the brevity penalty exp(min(0, 1 - len_label / len_pred)) is missing"),
        ({"clip": False},
         "n-gram matches are not clipped: a label n-gram can be matched at most"
         " as often as it occurs in the label"),
        ({"weighted": False}, "the precisions p_n must be weighted by the power 1/2^n"),
        ({"beyond_pred": True},
         "a prediction of len_pred tokens has no n-grams for n > len_pred, and you"
         " count their precision as 0, which makes the whole score 0: the product"
         " runs over n = 1, ..., min(k, len_pred), as d2l's code does"),
    ]
    # The formula read literally divides by len_pred - n + 1 = 0 when k > len_pred.
    hint = [("ZeroDivisionError", (
        "A prediction of len_pred tokens has len_pred - n + 1 n-grams, none for"
        " n > len_pred (here k is larger than the prediction): the product runs"
        " over n = 1, ..., min(k, len_pred), as d2l's code does."))]

    return diagnose_numbers(
        fn, cases, bleu, [
            (lambda *case, switch=switch: _bleu_variant(*case, **switch),
             f"Not yet: {m}.")
            for switch, m in mistakes
        ] + [(lambda pred, label, k, fixed=fixed: bleu(pred, label, fixed), (
            f"Your scores are BLEU with n-grams up to {fixed} whatever k is: use the"
            " `k` argument, n = 1, ..., min(k, len_pred).")) for fixed in (1, 2, 3, 4)],
        what="score", equal=close, prefix="", hint=hint,
        explain_case=lambda answer, expected, pred, label, k: f"bleu({pred!r},"
        f" {label!r}, k={k}) = {answer:.4f}, expected {expected:.4f}.",
        correct="Correct: clipped n-gram precisions, weighted by 1/2^n, times the"
        " brevity penalty.",
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
    ({"biases": 1},
     "one bias vector per gate is missing: PyTorch's GRU keeps two, b_ih and "
     "b_hh (3 Ds numbers each per layer). For the reset and update gates the two "
     "only add up, so one would do there; the candidate's b_hn sits inside "
     "r ⊙ (W_hn h + b_hn), so it cannot be folded into b_in"),
    ({"context": False},
     "the decoder's first GRU layer reads the embedding *and* the context "
     "c, so its input size is E + Ds, not E"),
    ({"gates": 1},
     "a GRU layer has three sets of weights, for the reset gate r, the update "
     "gate z and the candidate state: 3 Ds (input size + Ds) + 2 × 3 Ds"),
    ({"gates": 4},
     "that is an LSTM's count (four gates); a GRU has three: r, z and the "
     "candidate state"),
    ({"output_bias": False},
     "the output layer nn.Linear(Ds, V) has a bias of V numbers too"),
    ({"same_input": True},
     "only the first GRU layer reads the embeddings; layers 2 and up "
     "read the layer below, whose output has Ds numbers"),
]


def _model_parameters(src_vocab, tgt_vocab, embed, hiddens, layers) -> int:
    """The parameters of the library's encoder and decoder of these sizes."""
    encoder = Seq2SeqEncoder(src_vocab, embed, hiddens, layers)
    decoder = Seq2SeqDecoder(tgt_vocab, embed, hiddens, layers)
    return sum(p.numel() for p in [*encoder.parameters(), *decoder.parameters()])


@checker
def check_num_parameters(fn) -> Feedback:
    """Check ``fn(src_vocab_size, tgt_vocab_size, embed_size, num_hiddens,
    num_layers)``: the parameters of chapter 1's encoder–decoder, against the modules:
    per GRU layer of input size I, 3 Ds (I + Ds) + 6 Ds; the decoder's first layer reads
    E + Ds; V × E per embedding; Ds × V + V for the output layer. Names each typical
    miscount.

    Shapes:
        fn: five ints -> one int
    """
    def explain_case(answer, expected, *case):
        return (
            f"For (V_src, V_tgt, E, Ds, layers) = {case} you count {answer:,.0f}, the"
            f" model has {expected:,.0f}. Count each module: two embeddings, the"
            " encoder's and the decoder's GRU layers (three gates, two bias vectors"
            " each), and the output layer."
        )

    return diagnose_numbers(
        fn, _PARAMETER_CASES, _model_parameters,
        [(lambda *case, switch=switch: _seq2seq_parameters(*case, **switch),
          message + ".") for switch, message in _PARAMETER_MISTAKES],
        what="number of parameters", explain_case=explain_case,
        correct=lambda expected: f"Correct: {expected[0]:,.0f} for the page's model."
        " Most of them sit in the two embeddings and the output layer"
        " (vocabulary-sized); the GRU layers hold 3 Ds (input size + Ds) + 6 Ds each.",
    )

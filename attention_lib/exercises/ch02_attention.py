"""Checkers for chapter 2's exercises (attention as weighted averaging).

Taught in ``chapters/02_attention/`` (one exercise or more per section).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from ..attention import additive_scores, attention_pooling
from ..masking import masked_softmax, valid_lens_to_mask
from ._common import attention_output, check_choice
from ._feedback import (
    Feedback,
    checker,
    close,
    close_each,
    diagnose,
    diagnose_numbers,
    read_tensor,
    read_tensors,
    tolerance,
)

__all__ = [
    "check_nadaraya_watson",
    "check_masked_softmax",
    "check_scaled_dot_product_attention",
    "check_dot_product_variance",
    "check_kernel_as_dot_product",
    "check_additive_scores",
    "check_why_not_stack",
    "check_temperature_limits",
]


# --- 01: attention pooling as kernel regression ---------------------------------------

def _nadaraya_watson(x_query, x_train, y_train, bandwidth, sign=-1.0, power=2, dim=1,
                     normalise=True) -> Tensor:
    """Kernel regression by the library's pooling; the other arguments give the
    typical mistakes (+ for −, σ for σ², the softmax over the queries, no softmax)."""
    attn_scores = sign * (x_query[:, None] - x_train[None, :]) ** 2 / (
        2 * bandwidth**power
    )  # (n, m)
    if dim == 1 and normalise:
        return attention_pooling(attn_scores[None], y_train[None, :, None])[0][0, :, 0]
    weights = torch.softmax(attn_scores, dim=dim) if normalise else attn_scores.exp()
    return weights @ y_train  # (n,)


def _kernel_mistake(message, bandwidth_of=None, **mistake):
    """The mistake ``mistake`` of :func:`_nadaraya_watson`, at ``bandwidth_of(σ)`` (None
    where it does not apply)."""
    def fn(x_query, x_train, y_train, bandwidth):
        used = bandwidth if bandwidth_of is None else bandwidth_of(bandwidth)
        if used is None:
            return None
        return _nadaraya_watson(x_query, x_train, y_train, used, **mistake)
    return fn, message


_SQUARED = lambda x_query, x_train, y_train, bandwidth: (  # noqa: E731
    f"With bandwidth σ={bandwidth} your result is off: divide the squared distance by"
    " 2σ² (σ squared), not by 2 or by 2σ."
)
_FIXED = lambda x_query, x_train, y_train, bandwidth: (  # noqa: E731
    f"With bandwidth σ={bandwidth} your result is that of another σ: use the"
    " `bandwidth` argument, not a fixed number."
)
_NW_MISTAKES = [
    _kernel_mistake(
        "Wrong axis for the softmax: your weights sum to 1 over the queries (dim=0)."
        " Each query's weights must sum to 1 over the training points: softmax(...,"
        " dim=1).", dim=0),
    _kernel_mistake(
        "The score must be *minus* the squared distance: nearby training points should"
        " get the largest weights, and yours give them the smallest.", sign=1.0),
    _kernel_mistake(
        "Your weights do not sum to 1: normalise the kernel values (a softmax over the"
        " training points does it), so the prediction is a weighted *average*.",
        normalise=False),
    _kernel_mistake(_SQUARED, lambda s: None if s == 1.0 else 1.0),
    _kernel_mistake(_SQUARED, lambda s: None if s == 1.0 else s, power=1),
] + [_kernel_mistake(_FIXED, lambda s, fixed=fixed: fixed) for fixed in (1.0, 0.5, 2.0)]


@checker
def check_nadaraya_watson(fn) -> Feedback:
    """Check ``fn(x_query, x_train, y_train, bandwidth) -> predictions``: Σ_i
    softmax_i(-(x - x_i)² / (2σ²)) · y_i, for three bandwidths and two data sets.

    Shapes:
        fn: ((n,), (m,), (m,), float) -> (n,) (a tensor, NumPy array or list)
    """
    gen = torch.Generator().manual_seed(0)
    x_train = torch.sort(torch.rand(12, generator=gen) * 5).values.double()
    y_train = (2 * torch.sin(x_train) + x_train).double()
    x_query = torch.linspace(0, 5, 7, dtype=torch.float64)
    other_train = torch.sort(torch.rand(9, generator=gen) * 3).values.double()
    cases = [
        (x_query, x_train, y_train, 1.0),
        (x_query, x_train, y_train, 0.5),
        (torch.linspace(-0.5, 3.5, 4, dtype=torch.float64), other_train,
         torch.cos(2 * other_train), 2.0),
    ]
    return diagnose(
        fn, cases, _nadaraya_watson, _NW_MISTAKES, what="predictions, one per query",
        shape=True,
        explain=lambda got, expected, *case: (
            f"With bandwidth {case[-1]}: expected {expected[:3].tolist()} … for the"
            f" first queries, got {got[:3].tolist()} …"
        ),
        correct="Correct: a Gaussian kernel turned into weights by a softmax over the"
        " training points.",
    )


# --- 02: masked softmax ---------------------------------------------------------------

@checker
def check_masked_softmax(fn) -> Feedback:
    """Check ``fn(attn_scores, valid_lens) -> attn_weights``: a softmax over the keys
    with weight 0 at positions ``>= valid_lens[b]``, all zeros for a query with no valid
    key, safe in float16.

    Shapes:
        fn: ((B, Lq, Lk) float, (B,) int) -> (B, Lq, Lk) (a tensor of any float dtype,
            NumPy array or list)
    """
    gen = torch.Generator().manual_seed(0)
    labels, cases = zip(*[
        ("three queries, padded keys",
         (torch.randn(2, 3, 5, generator=gen), torch.tensor([2, 4]))),
        ("a sentence with no valid key",
         (torch.randn(2, 2, 4, generator=gen), torch.tensor([0, 3]))),
        ("float16 scores as large as 1e4",
         ((torch.randn(2, 2, 4, generator=gen) * 1e4).half(), torch.tensor([1, 4]))),
        ("three sentences, one query each",
         (torch.randn(3, 1, 6, generator=gen).double(), torch.tensor([6, 1, 3]))),
    ])
    where = [f"Case '{label}'" for label in labels]

    def hint(error, scores, valid_lens):
        if scores.dtype != torch.float16 or error.todo:
            return error
        return Feedback.wrong(
            f"{where[2]}: {error.message}. Float16 only reaches ±65504, so a fill value"
            " like -1e9 does not fit: use torch.finfo(attn_scores.dtype).min."
        )

    def after(scores, valid_lens):  # (B, Lq, Lk): zeroed after the softmax
        return torch.softmax(scores.double(), dim=-1) * _allowed(scores, valid_lens)

    return diagnose(
        fn, cases, masked_softmax, [(after, (
            "the mask is applied after the softmax. Zeroing weights afterwards leaves"
            " rows that no longer sum to 1; mask the *scores* (a very negative fill)"
            " before the softmax."))],
        what="attention weights", where=where, hint=hint, explain=_explain_masked,
        read=lambda got, scores, valid_lens: read_tensor(
            got, "attention weights (same shape as the scores)", scores.shape),
        correct="Correct: padding gets zero weight, rows sum to 1 over valid keys,"
        " empty rows are zero, and float16 is safe.",
    )


def _allowed(scores: Tensor, valid_lens: Tensor) -> Tensor:
    """(B, Lq, Lk): True at the valid keys."""
    return valid_lens_to_mask(valid_lens, scores.shape[-1])[:, None, :].expand_as(
        scores)


def _explain_masked(got, expected, scores, valid_lens) -> str:
    allowed = _allowed(scores, valid_lens)  # (B, Lq, Lk)
    empty_rows = ~allowed.any(-1)  # (B, Lq)
    if torch.isnan(got).any():
        if not torch.isnan(got[~empty_rows]).any():  # NaN in the empty rows alone
            return (
                "NaN for a query with no valid key. Filling with -inf makes the softmax"
                " 0/0 there; fill with torch.finfo(dtype).min and set the weights of"
                " masked keys to 0 after the softmax."
            )
        return (
            "your weights contain NaN. In float16 a fill value like -1e9 overflows to"
            " -inf: use torch.finfo(attn_scores.dtype).min."
        )
    # (B, Lk): 1 at valid keys if the softmax ran over the queries
    column_sums = got.double().sum(dim=1)[allowed[:, 0, :]]
    row_sums = got.double().sum(dim=-1)[~empty_rows]
    if (scores.shape[1] > 1
            and close(column_sums.to(got.dtype), torch.ones_like(column_sums))
            and not close(row_sums.to(got.dtype), torch.ones_like(row_sums))):
        return ("wrong axis for the softmax. Your weights sum to 1 over the queries"
                " (dim=1); each query's weights must sum to 1 over the keys: dim=-1.")
    if empty_rows.any() and close(
        got[empty_rows], torch.full_like(got[empty_rows].double(), 1 / scores.shape[-1])
    ):
        return (
            "a query with no valid key got uniform weights 1/Lk (that is what a -1e6"
            " fill does); the library's convention is all zeros there."
        )
    if (~allowed).any() and got[~allowed].abs().max() > tolerance(got)[0]:
        return (
            f"padding positions are given weight (valid_lens={valid_lens.tolist()})."
            " Keys at positions >= valid_len must get weight exactly 0."
        )
    return (
        "your weights differ from the expected ones, e.g. row 0 of example 0 is"
        f" {got[0, 0].double().tolist()}, expected {expected[0, 0].double().tolist()}."
    )


_QUERY_AXIS = (
    "Wrong axis for the softmax: your weights sum to 1 over the queries (dim=1). They"
    " must sum to 1 over the keys: dim=-1."
)


# --- 03: scoring functions ------------------------------------------------------------

def _scaled_mistake(scale_of, message_of, dim=-1):
    """A mistake of scale or axis: ``scale_of(D, *extra)`` (None where it does not
    apply), the extra arguments after queries, keys and values."""
    def mistake(queries, keys, values, *extra):
        scale = scale_of(queries.shape[-1], *extra)
        return None if scale is None else attention_output(
            queries, keys, values, scale, dim
        )

    return mistake, lambda queries, keys, values, *extra: message_of(
        queries.shape[-1], *extra
    )


_SDPA_MISTAKES = [
    _scaled_mistake(lambda d: 1.0, lambda d: (
        f"Missing scale: divide the scores by √D = √{d} = {math.sqrt(d):.0f} before the"
        " softmax. Without it the scores grow with D and the softmax saturates."
    )),
    _scaled_mistake(lambda d: 1 / d, lambda d: (
        f"You divided by D = {d}; divide by √D = {math.sqrt(d):.0f}."
    )),
    _scaled_mistake(math.sqrt, lambda d: "You multiplied by √D; divide by it."),
    _scaled_mistake(lambda d: 1 / math.sqrt(d), lambda d: _QUERY_AXIS, dim=1),
    _scaled_mistake(lambda d: 1.0, lambda d: (
        "Wrong axis for the softmax (dim=1, the queries; use dim=-1) and the 1/√D scale"
        " is missing."
    ), dim=1),
] + [
    _scaled_mistake(lambda d, other=other: None if d == other else other**-0.5,
                    lambda d, other=other: (
                        f"Your scale is that of D = {other}, but here D = {d}: divide"
                        " by √D computed from the queries' size, queries.shape[-1]."
                    ))
    for other in (16, 9, 8, 64, 512)
]


def _weights_instead(got, expected, queries, keys, *rest):
    """The message for the weights (B, Lq, Lk) returned instead of the output."""
    if got.shape == queries.shape[:-1] + keys.shape[-2:-1]:
        return (f"Your result has shape {tuple(got.shape)} (B, Lq, Lk): those are the"
                " weights. Multiply them by the values to get the output (B, Lq, Dv).")
    return None


@checker
def check_scaled_dot_product_attention(fn) -> Feedback:
    """Check ``fn(queries, keys, values) -> output``: softmax(Q Kᵀ / √D) V, for D = 16
    and 9 (a fixed scale is caught).

    Shapes:
        fn: ((B, Lq, D), (B, Lk, D), (B, Lk, Dv)) -> (B, Lq, Dv) (a tensor of any float
            dtype, array or list)
    """
    gen = torch.Generator().manual_seed(0)
    cases = [
        tuple(torch.randn(*shape, generator=gen) for shape in shapes)
        for shapes in (((2, 3, 16), (2, 5, 16), (2, 5, 4)),
                       ((3, 4, 9), (3, 2, 9), (3, 2, 5)))
    ]

    def explain(got, expected, *case):
        return _weights_instead(got, expected, *case) or (
            None if got.shape != expected.shape else
            "Your output differs from softmax(QKᵀ/√D)V: e.g. output[0, 0] is "
            f"{got[0, 0].tolist()}, expected {expected[0, 0].tolist()}."
        )

    return diagnose(
        fn, cases, attention_output, _SDPA_MISTAKES, what="output (B, Lq, Dv)",
        explain=explain,
        correct="Correct: scores scaled by 1/√D, softmax over the keys, weighted"
        " average of the values.",
    )


@checker
def check_dot_product_variance(fn) -> Feedback:
    """Check ``fn(size, sigma) -> Var(qᵀk)`` for q, k with ``size`` independent entries
    of mean 0 and variance σ²: D·σ⁴, for four (D, σ), so that D·σ² is caught.

    Shapes:
        fn: (int, float) -> one number
    """
    mistakes = [
        (lambda size, sigma: size * sigma**2,
         "Your answer is D·σ²: right only for σ = 1. A product of two"
         " independent entries of variance σ² has variance E[q_i²] E[k_i²] ="
         " σ²·σ² = σ⁴, not σ²."),
        (lambda size, sigma: size**2 * sigma**4,
         "Your answer is D²·σ⁴: the variances of independent terms add (no cross"
         " terms), so D terms give D·σ⁴, not D² times. D² would be the variance"
         " if all D terms were the same number."),
        (lambda size, sigma: sigma**4,
         "σ⁴ is the variance of one product q_i k_i; qᵀk adds D of them, and"
         " their variances add."),
        (lambda size, sigma: math.sqrt(size) * sigma**2,
         "√D·σ² is the standard deviation of qᵀk; the exercise asks for the"
         " variance, its square."),
        (lambda size, sigma: size,
         "D alone is the variance for σ = 1; with entries of variance σ² each"
         " product contributes σ⁴."),
        (lambda size, sigma: size * sigma,
         "Your answer grows like σ; each product q_i k_i has variance σ²·σ² = σ⁴."),
        (lambda size, sigma: 2 * size * sigma**4,
         "Twice too large: q_i k_i has mean 0, so its variance is E[q_i² k_i²] ="
         " E[q_i²] E[k_i²] = σ⁴."),
    ]
    cases = [(16, 1.0), (64, 0.5), (3, 2.0), (10, 3.0)]

    def explain(answers, expected):
        shown = ", ".join(f"D={size}, σ={sigma}: {got:.4g}"
                          for got, (size, sigma) in zip(answers, cases))
        return (
            f"Your variances ({shown}) do not follow one formula in D and σ that fits."
            " Write qᵀk as a sum of D products q_i k_i; find the mean and the variance"
            " of one product first."
        )

    return diagnose_numbers(
        fn, cases, lambda size, sigma: size * sigma**4, mistakes,
        what="variance of qᵀk",
        prefix="", explain=explain,
        equal=close,
        correct="Correct: each product q_i k_i has mean 0 and variance E[q_i²]"
        " E[k_i²] = σ⁴, and the variances of D independent terms add up to D·σ⁴."
        " Dividing by √D brings it to σ⁴, which is 1 only for entries of variance 1.",
    )


def _gaussian_kernel_attention(queries, keys, values, bandwidth) -> Tensor:
    # (B, Lq, Lk): the squared distances, as scores of the library's pooling
    squared_distances = ((queries[:, :, None, :] - keys[:, None, :, :]) ** 2).sum(-1)
    return attention_pooling(-squared_distances / (2 * bandwidth**2), values)[0]


_KERNEL_MISTAKES = [
    _scaled_mistake(scale_of, lambda d, bandwidth, message=message: message, dim=dim)
    for scale_of, dim, message in [
        (lambda d, s: 1 / (2 * s**2), -1,
         "You kept the kernel's 1/2: expanding -|q - k|²/(2σ²) gives the cross term"
         " +2qᵀk/(2σ²) = qᵀk/σ². Divide the dot products by σ²."),
        (lambda d, s: 1 / s, -1,
         "The bandwidth enters squared: divide the dot products by σ², not by σ."),
        (lambda d, s: 1.0, -1,
         "The bandwidth is missing: the kernel's scores are qᵀk/σ² (plus terms that"
         " cancel)."),
        (lambda d, s: 1 / math.sqrt(d), -1,
         "1/√D is the scaled dot product's choice of temperature; here the bandwidth"
         " sets it: divide by σ²."),
        (lambda d, s: s**2, -1, "Divide the dot products by σ², do not multiply them."),
        (lambda d, s: -1 / s**2, -1,
         "Mind the sign: the kernel's minus and the -2qᵀk of the expansion cancel, so"
         " the score is +qᵀk/σ² (nearby keys, large dot products, large weights)."),
        (lambda d, s: 1 / s**2, 1, _QUERY_AXIS),
    ]
] + [
    (lambda q, k, v, s: attention_pooling(  # (qᵀk - kᵀk)/σ², the ½ forgotten
        (q @ k.transpose(1, 2) - (k * k).sum(-1)[:, None, :]) / s**2, v)[0],
     "Keys of different norms: you kept the key-norm term, but in full. Expanding"
     " -|q - k|²/(2σ²) gives -kᵀk/(2σ²): half of kᵀk, divided by σ²."),
    (lambda q, k, v, s: attention_pooling(  # (qᵀk + kᵀk/2)/σ², the sign flipped
        (q @ k.transpose(1, 2) + (k * k).sum(-1)[:, None, :] / 2) / s**2, v)[0],
     "Keys of different norms: you kept the key-norm term with the wrong sign."
     " -|q - k|²/(2σ²) = qᵀk/σ² - |q|²/(2σ²) - kᵀk/(2σ²): long keys lose score."),
]


_KERNEL_EXACT = (
    "Correct, and exact for keys of any norm: your output is Gaussian-kernel"
    " regression's on every case, the keys of different norms included. In dot"
    " products that is softmax((qᵀk - kᵀk/2)/σ²): the -|q|²/(2σ²) term cancels in the"
    " softmax, the -|k|²/(2σ²) term does not unless the keys have one norm. With"
    " unit-norm keys it is softmax(qᵀk/σ²), dot-product attention with temperature σ²."
    " (If you computed |q - k|² itself, the output is the same, but the exercise asks"
    " for the dot-product form.)"
)


@checker
def check_kernel_as_dot_product(fn) -> Feedback:
    """Check ``fn(queries, keys, values, bandwidth) -> output``: Gaussian-kernel
    regression written as dot products.

    With unit-norm keys, softmax(-|q - k|² / (2σ²)) = softmax(qᵀk / σ²): the |q|² and
    |k|² terms are the same for every key of a query and cancel in the softmax, so the
    answer is dot-product attention with temperature σ². Two cases with unit-norm keys
    (queries of any norm); a last case with keys of different norms, where
    softmax(qᵀk/σ²) and the kernel differ. Both are accepted there, each with its own
    message: the kernel itself, softmax((qᵀk - kᵀk/2)/σ²), also uses dot products only
    (the checker sees outputs, so it cannot tell that form from one computed with
    distances).

    Shapes:
        fn: ((B, Lq, D), (B, Lk, D), (B, Lk, Dv), float) -> (B, Lq, Dv)
    """
    gen = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    def unit(x: Tensor) -> Tensor:
        return x / x.norm(dim=-1, keepdim=True)

    names = {0.8: "unit-norm keys, σ = 0.8", 1.5: "unit-norm keys, σ = 1.5",
             1.0: "keys of different norms, σ = 1"}
    cases = [
        (1.5 * randn(2, 3, 4), unit(randn(2, 5, 4)), randn(2, 5, 2), 0.8),
        (2.0 * randn(1, 4, 3), unit(randn(1, 6, 3)), randn(1, 6, 3), 1.5),
        (randn(2, 3, 4), randn(2, 5, 4) * torch.tensor(
            [0.3, 1.0, 2.0, 0.6, 1.5], dtype=torch.float64)[:, None],
         randn(2, 5, 2), 1.0),
    ]

    def explain(got, expected, *case):
        if _weights_instead(got, expected, *case):
            return (
                f"your result has shape (B, Lq, Lk) = {tuple(got.shape)}: those are the"
                " weights. Multiply them by the values to get the output (B, Lq, Dv)."
            )
        if got.shape == expected.shape:
            return ("your output differs from softmax(QKᵀ/σ²)V, e.g. output[0, 0] is"
                    f" {got[0, 0].tolist()}, expected {expected[0, 0].tolist()}.")
        return None

    exact = diagnose(fn, cases, _gaussian_kernel_attention, what="output (B, Lq, Dv)",
                     correct=_KERNEL_EXACT)
    if exact:  # the kernel on every case, keys of different norms included
        return exact
    return diagnose(
        fn, cases, lambda q, k, v, bandwidth: attention_output(q, k, v, bandwidth**-2),
        _KERNEL_MISTAKES, what="output (B, Lq, Dv)",
        where=lambda q, k, v, bandwidth: f"Case '{names[bandwidth]}'", explain=explain,
        correct="Correct: with unit-norm keys, -|q - k|²/(2σ²) = qᵀk/σ² - |q|²/(2σ²) -"
        " 1/(2σ²); the last two terms are the same for every key and cancel in the"
        " softmax. Gaussian-kernel regression is dot-product attention with temperature"
        " σ². On the last case, keys of different norms, your softmax(qᵀk/σ²) is no"
        " longer the kernel: there the -|k|²/(2σ²) term differs from key to key.",
    )


def _additive(queries, keys, W_q, W_k, w_v, tanh=True) -> Tensor:
    """The library's additive scores; without the tanh (a mistake) if not ``tanh``."""
    q, k = queries @ W_q.T, keys @ W_k.T  # (B, Lq, Da), (B, Lk, Da)
    if tanh:
        return additive_scores(q, k, w_v)  # (B, Lq, Lk)
    return q @ w_v[:, None] + (k @ w_v[:, None]).transpose(1, 2)  # (B, Lq, Lk)


_WEIGHTS_RETURNED = (
    "You returned weights (rows sum to 1); return the scores, before the softmax."
)
_ADDITIVE_MISTAKES = [
    (lambda *case: _additive(*case, tanh=False),
     "The tanh is missing: without it the score is linear, w_vᵀW_q q + w_vᵀW_k k,"
     " and the query's part is the same for every key, so the softmax ignores the"
     " query."),
    (lambda *case: torch.tanh(_additive(*case, tanh=False)),
     "The tanh goes inside: w_vᵀ tanh(W_q q + W_k k), not tanh(w_vᵀ(W_q q + W_k"
     " k))."),
    (lambda *case: torch.softmax(_additive(*case), dim=-1),
     _WEIGHTS_RETURNED),
]


def _explain_additive(got, expected, queries, keys, W_q, W_k, w_v):
    batch_size, num_queries, num_kv = expected.shape
    if got.shape == (batch_size, num_kv, num_queries):
        return (
            f"Your scores have shape (B, Lk, Lq) = {tuple(got.shape)}: queries and keys"
            " are swapped. Broadcast queries.unsqueeze(2) (B, Lq, 1, Da) +"
            " keys.unsqueeze(1) (B, 1, Lk, Da)."
        )
    if got.shape == (batch_size, num_queries, num_kv, w_v.shape[0]):
        return ("Your result has shape (B, Lq, Lk, Da): apply w_v to the last axis"
                " (features @ w_v) to get one score per query–key pair.")
    if got.shape != expected.shape:
        return None
    if close(got.sum(-1), torch.ones(batch_size, num_queries)) and (got >= 0).all():
        return _WEIGHTS_RETURNED
    return (f"Your scores differ: e.g. scores[0, 0] is {got[0, 0].tolist()}, expected"
            f" {expected[0, 0].tolist()}.")


@checker
def check_additive_scores(fn) -> Feedback:
    """Check ``fn(queries, keys, W_q, W_k, w_v) -> attn_scores``, the additive score
    w_vᵀ tanh(W_q q + W_k k).

    Two cases with different sizes everywhere, so an answer that fixes a size is caught.

    Shapes:
        fn: ((B, Lq, Dq), (B, Lk, Dk), (Da, Dq), (Da, Dk), (Da,)) -> (B, Lq, Lk)
    """
    gen = torch.Generator().manual_seed(0)
    cases = []
    for b, lq, lk, dq, dk, da in ((2, 3, 4, 5, 6, 8), (3, 2, 5, 4, 3, 6)):
        shapes = ((b, lq, dq), (b, lk, dk), (da, dq), (da, dk), (da,))
        cases.append(tuple(torch.randn(*shape, generator=gen) for shape in shapes))
    return diagnose(
        fn, cases, _additive, _ADDITIVE_MISTAKES, what="scores (B, Lq, Lk)",
        explain=_explain_additive,
        correct="Correct: one additive score per query–key pair, queries and keys of"
        " different sizes.",
    )


# --- 04: why a recurrent decoder cannot stack its queries -----------------------------

_STACK_CHOICES = {
    "a": (False,
          "Memory is not the obstacle: Q Kᵀ has Lq × Lk entries, the same numbers the"
          " loop computes one row at a time."),
    "b": (True,
          "Right: s_{t'-1} is computed from c_{t'-1} (the context enters the GRU's"
          " input), and c_{t'-1} needs the attention of the previous step. The"
          " queries only exist one at a time, so Q cannot be stacked. When the"
          " queries do not depend on earlier contexts (a decoder whose states are"
          " computed without the context, or self-attention with teacher forcing)"
          " every query is known up front and one softmax(QKᵀ)V computes all"
          " contexts."),
    "c": (False,
          "The softmax works row by row, so it is happy with many queries at once;"
          " the vectorised form in this section does exactly that."),
    "d": (False,
          "The keys are the encoder's states h_1 … h_Lk: they are fixed for the whole"
          " sentence (which is why a decoder can project them once)."),
}


@checker
def check_why_not_stack(choice) -> Feedback:
    """Check the answer (a letter) to: why can an RNN decoder not stack its queries
    s_{t'-1} into Q?

    Shapes:
        choice: one of "a", "b", "c", "d"
    """
    return check_choice(choice, _STACK_CHOICES)


# --- 04: the limits of a temperature --------------------------------------------------

def _even_on(hits: Tensor) -> Tensor:
    hits = hits.double()
    return hits / hits.sum()  # equal weights on the marked keys


@checker
def check_temperature_limits(fn) -> Feedback:
    """Check ``fn(attn_scores) -> (weights as τ → 0, weights as τ → ∞)`` for
    softmax(scores / τ): all the weight on the largest score (shared in a tie), then
    1/Lk for every key.

    Shapes:
        fn: (Lk,) -> a pair of (Lk,) tensors (or arrays, or lists)
    """
    cases = [(torch.tensor(scores, dtype=torch.float64),) for scores in (
        [2.0, -1.0, 0.5, 1.0], [-4.0, -1.0, -3.0], [1.0, 3.0, -2.0, 3.0, 0.5])]

    def read(got, scores):
        shape = tuple(scores.shape)
        return read_tensors(got, ("weights as τ → 0", "weights as τ → ∞"), [shape] * 2)

    return diagnose(
        fn, cases, lambda scores: (_even_on(scores == scores.max()), _uniform(scores)),
        _temperature_mistakes, what="weights", read=read, compare=close_each,
        explain=_explain_temperature,
        correct="Correct: as τ → 0 the softmax becomes a hard lookup (all the weight on"
        " the largest score, shared in a tie); as τ → ∞ it becomes a plain average"
        " (1/Lk for every key). Every temperature in between, √D included, mixes the"
        " two.",
    )


def _uniform(scores: Tensor) -> Tensor:
    return torch.full_like(scores, 1 / scores.shape[0])


def _temperature_mistakes(scores: Tensor) -> list:
    """((cold, hot), message), None for either limit: anything."""
    on_max, on_min = _even_on(scores == scores.max()), _even_on(scores == scores.min())
    uniform, at_one = _uniform(scores), torch.softmax(scores, dim=0)
    tied = (scores == scores.max()).nonzero().flatten().tolist()
    where = f"For the scores {scores.tolist()}"
    cold = [
        (on_min, "as τ → 0 all the weight goes to the *largest* score, not the"
         " smallest: exp(s/τ) grows fastest for the largest s."),
        (at_one, "this is the softmax at τ = 1, not its limit as τ → 0: take τ"
         " smaller and smaller."),
        (uniform, "as τ → 0 the weights are not uniform: s/τ stretches the gaps"
         " between the scores, so the largest score takes all the weight."),
    ] + [(_even_on(torch.arange(len(scores)) == i), (
        f"keys {tied} tie for the largest score. As τ → 0 their scores stay equal, so"
        f" they keep equal weights: each gets 1/{len(tied)}, and argmax alone picks"
        " just one.")) for i in tied if len(tied) > 1]
    hot = [
        (at_one, "this is the softmax at τ = 1, not its limit as τ → ∞: take τ"
         " larger and larger."),
        (torch.zeros_like(scores), "the weights do not vanish as τ → ∞: s/τ → 0 for"
         " every key, exp(0) = 1, and the softmax divides by the sum, so each key gets"
         f" 1/Lk = 1/{len(scores)}."),
        (on_max, "a large τ flattens the weights, it does not sharpen them: s/τ"
         " shrinks every score towards 0."),
    ]
    return [((uniform, on_max), (
        f"{where} you swapped the limits. Dividing by a tiny τ stretches the gaps"
        " between the scores without bound, so the largest wins everything; dividing"
        " by a huge τ shrinks every score to 0, and exp(0) is the same for every key."
    ))] + [((v, None), f"{where}, {m}") for v, m in cold] + [
        ((on_max, v), f"{where}, {m}") for v, m in hot]


def _explain_temperature(got, expected, scores) -> str:
    (cold, hot), (on_max, uniform) = got, expected
    if close(cold, on_max):
        message = (
            f"expected {uniform.tolist()} as τ → ∞, got {hot.double().tolist()}: what"
            " does s/τ tend to for every key?"
        )
    elif not close(cold.double().sum(), torch.tensor(1.0, dtype=torch.float64)):
        message = (
            "your weights for τ → 0 do not sum to 1. They sum to 1 at every τ, so"
            " their limit does too."
        )
    else:
        message = (
            f"expected {on_max.tolist()} as τ → 0, got {cold.double().tolist()}: think"
            " about which exp(s/τ) dominates the sum as τ shrinks."
        )
    return f"For the scores {scores.tolist()}, {message}"

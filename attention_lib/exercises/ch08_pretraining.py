"""Checkers for chapter 8's exercises: the pieces of a pretrained language model that
are easy to get almost right (the causal mask with a cache, temperature and top-p
sampling, RMSNorm, SwiGLU, BERT's masking) and two counts (a modern block's
parameters, the KV cache's bytes), against the library: :mod:`attention_lib.sampling`,
:mod:`attention_lib.transformer`, :mod:`attention_lib.lm`. Parameters are counted on
the ``meta`` device (sizes only, no memory); no checker changes the global random
state.

Taught in ``chapters/08_pretraining/05_exercises.ipynb``.
"""
from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..lm import IGNORE_INDEX
from ..masking import causal_mask
from ..multihead import MultiHeadAttention
from ..sampling import apply_temperature, top_p_filter
from ..transformer import RMSNorm, SwiGLU
from ._common import read_mask, triangle
from ._feedback import (
    Feedback,
    checker,
    diagnose,
    diagnose_numbers,
    read_tensors,
    run_safely,
    sizes,
)

__all__ = [
    "check_causal_mask_with_offset",
    "check_sampling_temperature",
    "check_top_p",
    "check_rms_norm",
    "check_swiglu",
    "check_mlm_masking",
    "check_modern_block_parameters",
    "check_kv_cache_bytes",
]


def _shape(sizes_) -> str:
    return "(" + ", ".join(str(int(s)) for s in sizes_) + ")"


def _nan_text(got: Tensor, what: str) -> str | None:
    if got.dtype.is_floating_point and bool(got.isnan().any()):
        return f"your {what} hold NaN: look for a division 0 / 0."
    return None


# --- 1. the causal mask with a cache --------------------------------------------------

# (Lq, t): no cache; three new positions after four cached ones; one step after five
_MASK_CASES = ((4, 0), (3, 4), (1, 5))


def _offset_mask(num_queries: int, offset: int) -> Tensor:
    """The reference: :func:`~attention_lib.causal_mask` of Lq queries and t + Lq
    keys. (Lq, t + Lq) bool."""
    return causal_mask(num_queries, offset + num_queries)


def _mask_variants(num_queries: int, offset: int) -> list:
    num_kv = offset + num_queries
    expected = _offset_mask(num_queries, offset)
    variants = [
        (~expected,
         "your mask is inverted: True where a query may NOT attend. In the library and"
         " in F.scaled_dot_product_attention, True means 'may attend'. Negate it."),
        (triangle(num_queries, num_kv, offset - 1),
         "off by one: query i does not see its own position (tril(diagonal=t - 1), or"
         " key < query instead of key ≤ query). Without a cache the first query then"
         " has no key at all. A query may attend to itself: keep the diagonal,"
         " tril(diagonal=t)."),
        (triangle(num_queries, num_kv, offset + 1),
         "off by one the other way: query i also sees position t + i + 1, the very"
         " token it is trained to predict, so training learns to copy it. Keep"
         " key ≤ query, tril(diagonal=t)."),
        (triangle(num_queries, num_kv, offset, upper=True),
         "transposed: query i sees its own position and the later ones, not the"
         " earlier ones (triu, or key ≥ query). Keep the lower triangle, tril."),
        (torch.ones_like(expected),
         "no mask: every query sees every position, the future included. Keep the"
         " lower triangle."),
    ]
    if offset:
        variants.append((
            triangle(num_queries, num_kv, 0),
            f"offset ignored: your query i sees positions 0 to i, but with t = {offset}"
            f" positions in the cache it sits at position t + i = {offset} + i and"
            " must see positions 0 to t + i. Shift the diagonal: tril(diagonal=t).",
        ))
    return variants


def _mask_shape(got: Tensor, num_queries: int, offset: int) -> Feedback:
    num_kv = offset + num_queries
    where = _mask_where(num_queries, offset)
    if offset and got.shape == (num_queries, num_queries):
        return Feedback.wrong(
            f"{where}: your mask has shape (Lq, Lq) = {_shape(got.shape)}: the cache is"
            f" ignored. The queries attend to the t = {offset} cached positions too:"
            f" shape (Lq, t + Lq) = ({num_queries}, {num_kv})."
        )
    if offset and got.shape == (num_kv, num_kv):
        return Feedback.wrong(
            f"{where}: you built the mask of all t + Lq = {num_kv} positions. Only the"
            f" last Lq = {num_queries} are queries: keep the last Lq rows,"
            " mask[-num_queries:]."
        )
    return Feedback.wrong(
        f"{where}: your mask has shape {_shape(got.shape)}, expected (Lq, t + Lq) ="
        f" ({num_queries}, {num_kv}): one row per new query, one column per key."
    )


def _mask_where(num_queries: int, offset: int) -> str:
    return f"For num_queries={num_queries}, offset={offset}"


def _read_offset_mask(got, num_queries: int, offset: int):
    return read_mask(got, _offset_mask(num_queries, offset),
                     _mask_where(num_queries, offset),
                     lambda mask: _mask_shape(mask, num_queries, offset))


@checker
def check_causal_mask_with_offset(fn) -> Feedback:
    """Check ``fn(num_queries, offset) -> mask``: the causal mask of Lq new queries
    after t cached positions, True where a query may attend, as
    :func:`~attention_lib.causal_mask` ``(Lq, t + Lq)``: query i, at position t + i,
    sees keys 0 to t + i. Names an inverted mask, off by one either way (the diagonal
    hidden, the next token shown), the upper triangle, no mask, the offset ignored,
    the cache left out of the shape, and masks of numbers.

    Shapes:
        fn: (int Lq, int t) -> (Lq, t + Lq) bool (leading sizes of 1 are fine)

    Taught in ``chapters/08_pretraining/05_exercises.ipynb``.
    """
    return diagnose(
        fn, _MASK_CASES, _offset_mask, _mask_variants, what="mask",
        read=_read_offset_mask, compare=torch.equal, where=_mask_where,
        explain=lambda got, expected, num_queries, offset: (
            f"your mask differs from the causal mask: query 0, at position {offset},"
            f" may attend to {expected[0].int().tolist()}, yours says"
            f" {got[0].int().tolist()} (1 = may attend)."
        ),
        correct="Correct: torch.ones(Lq, t + Lq, dtype=torch.bool).tril(diagonal=t)."
        " Query i sits at position t + i and sees every position up to its own,"
        " cached or new, and none after it.",
    )


# --- 2. temperature -------------------------------------------------------------------

# (B, V, T, seed): T below 1 and above 1 (at T = 1 every slip is right)
_TEMPERATURE_CASES = ((3, 7, 0.5, 0), (2, 5, 2.0, 1))


def _temperature_case(batch, vocab, temperature, seed):
    gen = torch.Generator().manual_seed(810 + seed)
    return 2 * torch.randn(batch, vocab, generator=gen), temperature  # (B, V), T


def _tempered(logits: Tensor, temperature: float) -> Tensor:
    """The reference: softmax(logits / T) with the library's
    :func:`~attention_lib.sampling.apply_temperature`. (B, V)."""
    return apply_temperature(logits, temperature).softmax(dim=-1)


def _temperature_variants(logits: Tensor, temperature: float) -> list:
    probs = logits.softmax(dim=-1)  # (B, V)
    powered = probs ** (1 / temperature)
    return [
        (probs,
         f"the temperature is missing: these are the probabilities at T = 1. At T ="
         f" {temperature:g} divide the logits by T before the softmax."),
        ((logits * temperature).softmax(dim=-1),
         "you multiplied the logits by T (or raised the probabilities to the power T"
         " and renormalised, the same thing): divide the logits, logits / T. Below"
         " 1 the distribution should get sharper, above 1 flatter; yours does the"
         " opposite."),
        (probs / temperature,
         "you divided the probabilities by T, after the softmax: they no longer sum to"
         " 1, and their ratios are unchanged. The temperature goes before the softmax:"
         " softmax(logits / T)."),
        (powered,
         "you raised the probabilities to the power 1/T after the softmax. That has"
         " the right shape (p^(1/T) ∝ exp(logits / T)) but no longer sums to 1:"
         " divide the logits by T before the softmax (or renormalise)."),
        (logits / temperature,
         "these are the tempered logits: apply the softmax to turn them into"
         " probabilities."),
        ((logits / temperature).log_softmax(dim=-1),
         "these are log-probabilities: return the probabilities, softmax(logits /"
         " T)."),
        ((logits / temperature).softmax(dim=0),
         "the softmax runs over the batch (dim=0): each row is one distribution over"
         " the vocabulary, softmax(dim=-1)."),
    ]


@checker
def check_sampling_temperature(fn) -> Feedback:
    """Check ``fn(logits, temperature) -> probs``: softmax(logits / T) over the
    vocabulary, as :func:`~attention_lib.sampling.apply_temperature` then a softmax.
    Names the temperature forgotten or multiplied, applied after the softmax (divided,
    or a power left unnormalised), logits or log-probabilities returned, and a softmax
    over the batch.

    Shapes:
        fn: (logits (B, V), float T) -> probs (B, V)

    Taught in ``chapters/08_pretraining/05_exercises.ipynb``.
    """
    return diagnose(
        fn, [_temperature_case(*case) for case in _TEMPERATURE_CASES], _tempered,
        _temperature_variants, what="probabilities", shape=True,
        where=lambda logits, t: f"For logits of shape {_shape(logits.shape)} and T ="
        f" {t:g}",
        explain=lambda got, expected, logits, t: _nan_text(got, "probabilities"),
        correct="Correct: torch.softmax(logits / T, dim=-1). Dividing the logits by T"
        " before the softmax raises every probability to the power 1/T and"
        " renormalises: T < 1 sharpens, T > 1 flattens, and the order of the tokens"
        " never changes.",
    )


# --- 3. top-p (nucleus) filtering -----------------------------------------------------

# (B, V, p, seed): the top token's probability stays below p and 1 - p in every row,
# so that every rule keeps at least one token and none keeps them all; the rows keep
# nuclei of different sizes.
_TOP_P_CASES = ((3, 10, 0.6, 0), (2, 12, 0.5, 3))


def _top_p_case(batch, vocab, p, seed):
    gen = torch.Generator().manual_seed(820 + seed)
    return torch.randn(batch, vocab, generator=gen), p  # (B, V), p


def _nucleus(logits: Tensor, p: float) -> Tensor:
    """The reference: softmax of the library's
    :func:`~attention_lib.sampling.top_p_filter`. (B, V), zero outside the nucleus."""
    return top_p_filter(logits, p).softmax(dim=-1)


def _kept(probs: Tensor, p: float, rule: str = "before", order: str = "desc"):
    """Which tokens a rule keeps, in token order. (B, V) bool."""
    if order == "none":  # accumulated in vocabulary order, without sorting
        ranked, index = probs, torch.arange(probs.shape[-1]).expand_as(probs)
    else:
        ranked, index = probs.sort(dim=-1, descending=order == "desc")
    total = ranked.cumsum(dim=-1)  # (B, V)
    before = total - ranked  # the probability of the tokens sorted before
    keep = {"before": before < p, "total": total < p, "tail": before >= p}[rule]
    return keep.scatter(-1, index, keep)  # (B, V), back in token order


def _renormalised(probs: Tensor, keep: Tensor) -> Tensor:
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True)


def _top_p_variants(logits: Tensor, p: float) -> list:
    probs = logits.softmax(dim=-1)  # (B, V)
    right = _kept(probs, p)
    tail = _kept(probs, p, "tail")
    short = _kept(probs, p, "total")
    in_sorted = _nucleus(logits, p).sort(dim=-1, descending=True).values
    tail_text = (
        "you kept the wrong side of the threshold: the tail of unlikely tokens that"
        " comes after the nucleus, and dropped the nucleus itself. Keep the most"
        " likely tokens, up to and including the one whose running sum reaches p."
    )
    short_text = (
        "you dropped the token that crosses p: you keep a token while the running sum"
        " *including* it is < p (cumsum < p), so the kept mass stays below p, and a"
        " top token above p leaves nothing at all. Keep a token when the tokens"
        " sorted before it sum to < p: cumsum - probs < p."
    )
    unnormalised = (
        "the right tokens, but not renormalised: your probabilities sum to less than"
        " 1. Divide the kept probabilities by their sum (or apply the softmax to the"
        " filtered logits)."
    )
    return [
        (_renormalised(probs, tail), tail_text),
        (probs * tail, tail_text),
        (_renormalised(probs, short), short_text),
        (probs * short, short_text + " Renormalise too."),
        (probs * right, unnormalised),
        (_renormalised(probs, _kept(probs, p, order="asc")),
         "you sorted in ascending order: the running sum starts at the least likely"
         " token, so you kept the unlikely ones. Sort with descending=True."),
        (_renormalised(probs, _kept(probs, p, order="none")),
         "you accumulated the probabilities in vocabulary order, without sorting. The"
         " nucleus is the most likely tokens: sort in descending order first, then"
         " scatter the decision back to token order."),
        (in_sorted,
         "your probabilities are in sorted order. Return them in token order: scatter"
         " back with the indices the sort returned."),
        (top_p_filter(logits, p),
         "these are the filtered logits (−inf outside the nucleus): return the"
         " probabilities, their softmax."),
        (probs,
         "nothing was filtered: these are the probabilities of all the tokens."),
    ]


@checker
def check_top_p(fn) -> Feedback:
    """Check ``fn(logits, p) -> probs``: the distribution top-p sampling draws from,
    softmax of :func:`~attention_lib.sampling.top_p_filter` (a token is kept when the
    more likely tokens before it sum to < p), renormalised and in token order. Names
    the tail kept, the token that crosses p dropped, no renormalising, an ascending or
    missing sort, sorted order returned, the filtered logits and no filtering.

    Shapes:
        fn: (logits (B, V), float p) -> probs (B, V)

    Taught in ``chapters/08_pretraining/05_exercises.ipynb``.
    """
    def explain(got, expected, logits, p):
        nan = _nan_text(got, "probabilities")
        if nan is not None:
            return (nan + " A row of zeros renormalised is 0 / 0: the nucleus was"
                    " empty. The most likely token is always kept.")
        kept = (expected[0] > 0).int().tolist()
        return (f"row 0 keeps the tokens {kept} (1 = kept), with probabilities"
                f" {[round(v, 3) for v in expected[0].tolist()]}; yours are"
                f" {[round(v, 3) for v in got[0].tolist()]}.")

    return diagnose(
        fn, [_top_p_case(*case) for case in _TOP_P_CASES], _nucleus, _top_p_variants,
        what="probabilities", shape=True, explain=explain,
        where=lambda logits, p: f"For logits of shape {_shape(logits.shape)} and p ="
        f" {p:g}",
        correct="Correct: sort descending, keep a token while the tokens before it"
        " sum to < p (so the one that crosses p is kept, and the top token always),"
        " zero the rest and renormalise. The nucleus grows where the model is unsure"
        " and shrinks where it is confident, which top-k cannot do.",
    )


# --- 4. RMSNorm -----------------------------------------------------------------------

# (shape, scale of x, eps, seed): ordinary activations and eps = 1e-6; then small
# activations with a large eps, where eps inside or outside the root differ
_RMS_CASES = (((2, 3, 8), 1.0, 1e-6, 0), ((4, 6), 0.05, 1e-2, 1))


def _rms_case(shape, scale, eps, seed):
    gen = torch.Generator().manual_seed(830 + seed)
    x = torch.randn(shape, generator=gen)
    x = scale * (x + torch.randn(shape[:-1] + (1,), generator=gen))  # mean ≠ 0
    weight = 1 + 0.5 * torch.randn(shape[-1], generator=gen)  # (D,)
    return x, weight, eps


def _rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """The reference: the library's :class:`~attention_lib.transformer.RMSNorm` with
    ``weight``. Same shape as x."""
    norm = RMSNorm(x.shape[-1], eps)  # its weight starts as ones: no random draws
    with torch.no_grad():
        norm.weight.copy_(weight)
        return norm(x)


def _rms_variants(x: Tensor, weight: Tensor, eps: float) -> list:
    square = x.pow(2).mean(dim=-1, keepdim=True)  # (..., 1)
    centred = x - x.mean(dim=-1, keepdim=True)
    var = centred.pow(2).mean(dim=-1, keepdim=True)  # biased: divides by D
    unbiased = x.var(dim=-1, keepdim=True)  # PyTorch's default: divides by D - 1
    rms_text = (" The root mean square is sqrt(mean(x²)), x.pow(2).mean(-1,"
                " keepdim=True): no mean subtracted.")
    variants = [
        (centred / (var + eps).sqrt() * weight,
         "you subtracted the mean: that is LayerNorm (without its bias). RMSNorm"
         " keeps the mean and only rescales: y = x / sqrt(mean(x²) + eps) · weight."),
        (centred / (unbiased + eps).sqrt() * weight,
         "you subtracted the mean and divided by the root of x.var(): that is"
         " LayerNorm (without its bias), and with the variance PyTorch computes by"
         " default, which divides by D − 1 (LayerNorm divides by D). RMSNorm keeps the"
         " mean and only rescales: y = x / sqrt(mean(x²) + eps) · weight."),
        (x / (var + eps).sqrt() * weight,
         "you divided by the standard deviation (x.var(unbiased=False) or"
         " x.std(unbiased=False)), which subtracts the mean inside." + rms_text),
        (x / (unbiased + eps).sqrt() * weight,
         "you divided by the standard deviation (x.var() or x.std(), which by default"
         " subtract the mean and divide by D − 1)." + rms_text),
        (x / (square + eps) * weight,
         "the square root is missing: divide by sqrt(mean(x²) + eps), the root of the"
         " mean square (torch.rsqrt multiplies by its inverse)."),
        (x / (square.sqrt() + eps) * weight,
         "eps is outside the square root, x / (sqrt(mean(x²)) + eps). For ordinary"
         " activations (the first case) the two agree; for small ones, here"
         " mean(x²) is close to eps, they do not. Zhang and Sennrich's equation has"
         " no eps, and implementations differ; this exercise's formula, like"
         " torch.nn.RMSNorm, Llama and the library, adds eps inside:"
         " x / sqrt(mean(x²) + eps)."),
        (x / square.sqrt() * weight,
         "eps is missing: x / sqrt(mean(x²)). For ordinary activations (the first"
         " case) that hardly matters; for small ones, here mean(x²) is close to eps,"
         " it does, and for a vector of zeros it divides by zero. Add eps inside the"
         " root: x / sqrt(mean(x²) + eps)."),
        (x / (square + eps).sqrt(),
         "the weight is missing: multiply by the learned weight, one number per"
         " feature (D of them)."),
        (x / (x.pow(2).sum(dim=-1, keepdim=True) + eps).sqrt() * weight,
         "you divided by the sum of squares (the L2 norm): the mean square is that"
         " sum divided by D, so your output is √D times too small."),
        (x * (square + eps).sqrt() * weight,
         "you multiplied by the RMS: divide by it (or multiply by torch.rsqrt)."),
    ]
    dims = [d for d in range(x.dim() - 1)] + [tuple(range(x.dim()))]
    for dim in dims:
        other = x.pow(2).mean(dim=dim, keepdim=True)
        text = ("over every axis at once" if isinstance(dim, tuple)
                else f"over axis {dim}")
        variants.append((
            x / (other + eps).sqrt() * weight,
            f"you took the mean {text}. RMSNorm normalises each token's vector on its"
            " own: the mean over the last axis, the D features, dim=-1,"
            " keepdim=True.",
        ))
    return variants


@checker
def check_rms_norm(fn) -> Feedback:
    """Check ``fn(x, weight, eps) -> y``: ``x / sqrt(mean(x²) + eps) · weight`` over
    the last axis, as :class:`~attention_lib.transformer.RMSNorm`. Names the mean
    subtracted (LayerNorm, with the biased or PyTorch's default unbiased variance),
    the standard deviation (biased or unbiased), the square root missing, eps outside
    the root, eps missing, the weight missing, the sum of squares, a product with the
    RMS and the mean over another axis.

    Shapes:
        fn: (x (..., D), weight (D,), float eps) -> (..., D)

    Taught in ``chapters/08_pretraining/05_exercises.ipynb``.
    """
    return diagnose(
        fn, [_rms_case(*case) for case in _RMS_CASES], _rms_norm, _rms_variants,
        what="output", shape=True,
        hint=[("must match the size",
               "(Keep the reduced axis, keepdim=True, so that the RMS broadcasts"
               " against x.)")],
        where=lambda x, weight, eps: f"For x of shape {_shape(x.shape)} and eps ="
        f" {eps:g}",
        explain=lambda got, expected, *case: _nan_text(got, "output"),
        correct="Correct: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) *"
        " weight. No mean subtracted and no bias: a cheaper LayerNorm that keeps only"
        " the rescaling.",
    )


# --- 5. SwiGLU ------------------------------------------------------------------------

# (B, L, D, h): h ≠ D, so that W_2 applied in the wrong place fails
_SWIGLU_CASES = ((2, 3, 8, 12), (1, 4, 6, 10))


def _swiglu_case(batch, length, width, hidden, seed):
    gen = torch.Generator().manual_seed(840 + seed)
    x = torch.randn(batch, length, width, generator=gen)  # (B, L, D)
    layers = []
    for fan_in, fan_out in ((width, hidden), (hidden, width), (width, hidden)):
        layer = nn.utils.skip_init(nn.Linear, fan_in, fan_out, bias=False)
        with torch.no_grad():
            layer.weight.copy_(torch.randn(fan_out, fan_in, generator=gen)
                               / math.sqrt(fan_in))
        layers.append(layer.requires_grad_(False))
    return (x, *layers)  # x, W_1 (D -> h), W_2 (h -> D), W_3 (D -> h)


def _swiglu(x: Tensor, w_1: nn.Linear, w_2: nn.Linear, w_3: nn.Linear) -> Tensor:
    """The reference: the library's :class:`~attention_lib.transformer.SwiGLU` with
    these weights. (B, L, D)."""
    with torch.random.fork_rng(devices=[]):  # the global random state is left alone
        ffn = SwiGLU(x.shape[-1], w_1.out_features)
    ffn.load_state_dict({"W_1.weight": w_1.weight, "W_2.weight": w_2.weight,
                         "W_3.weight": w_3.weight})
    with torch.no_grad():
        return ffn(x)


def _swiglu_variants(x, w_1, w_2, w_3) -> list:
    gate, value = w_1(x), w_3(x)  # (B, L, h) each
    return [
        (w_2(gate * F.silu(value)),
         "the gate is on the wrong branch: silu(W_3 x) · W_1 x. The gate is"
         " silu(W_1 x); W_3 x is the value it scales. The two branches have their"
         " own weights (Llama's w1 and w3), so swapping them gives another"
         " function."),
        (w_2(torch.sigmoid(gate) * value),
         "you used the sigmoid: that is GLU (Dauphin et al., 2017). SwiGLU's gate is"
         " silu(z) = z · sigmoid(z), F.silu."),
        (w_2(F.silu(gate * value)),
         "silu is applied after the product: silu(W_1 x · W_3 x). Apply it to the"
         " gate's branch alone, then multiply: silu(W_1 x) · W_3 x."),
        (w_2(torch.relu(gate) * value),
         "you used ReLU (that is ReGLU): SwiGLU's gate is silu, F.silu."),
        (w_2(F.gelu(gate) * value),
         "you used GELU (that is GEGLU): SwiGLU's gate is silu, F.silu."),
        (w_2(gate * value),
         "no activation: W_1 x · W_3 x is a bilinear layer. Apply silu to W_1 x."),
        (w_2(F.silu(gate) + value),
         "you added the two branches: the gate multiplies, silu(W_1 x) · W_3 x."),
        (w_2(F.silu(gate)),
         "W_3's branch is missing: that is a two-matrix FFN with a silu. SwiGLU"
         " multiplies the gate silu(W_1 x) by a second projection, W_3 x."),
        (F.silu(w_2(gate * value)),
         "silu is applied at the end, after W_2: it belongs on the gate's branch,"
         " silu(W_1 x), before the product."),
    ]


@checker
def check_swiglu(fn) -> Feedback:
    """Check ``fn(x, W_1, W_2, W_3) -> y``: ``W_2(silu(W_1 x) ⊙ W_3 x)`` with three
    bias-free Linear layers, as :class:`~attention_lib.transformer.SwiGLU`. Names the
    gate on the wrong branch, the sigmoid (GLU), silu after the product, ReLU, GELU,
    no activation, a sum, W_3's branch missing, silu after W_2, and W_2 missing.

    Shapes:
        fn: (x (B, L, D), W_1: D -> h, W_2: h -> D, W_3: D -> h) -> y (B, L, D)

    Taught in ``chapters/08_pretraining/05_exercises.ipynb``.
    """
    def explain(got, expected, x, w_1, w_2, w_3):
        if got.shape == expected.shape[:-1] + (w_1.out_features,):
            return (f"your output has shape {_shape(got.shape)}, (B, L, h): W_2 is"
                    " missing. It maps the h hidden features back to D.")
        return None

    return diagnose(
        fn, [_swiglu_case(*case, seed) for seed, case in enumerate(_SWIGLU_CASES)],
        _swiglu, _swiglu_variants, what="output", explain=explain,
        hint=[("cannot be multiplied",
               "(W_1 and W_3 map D to h, W_2 maps h back to D: apply W_1 and W_3 to"
               " x, W_2 to their gated product.)")],
        where=lambda x, w_1, w_2, w_3: f"For x of shape {_shape(x.shape)} and h ="
        f" {w_1.out_features}",
        correct="Correct: W_2(F.silu(W_1(x)) * W_3(x)). The silu gate, computed from"
        " x, scales the value W_3 x feature by feature: three D × h matrices where the"
        " 2017 FFN has two.",
    )


# --- 6. BERT's masking ----------------------------------------------------------------

_PAD, _CLS, _SEP, _MASK, _VOCAB = 0, 1, 2, 3, 1000
_MLM_SPECIAL = (_PAD, _CLS, _SEP)
_MLM_BATCH, _MLM_LENGTH, _MLM_SEED = 64, 160, 8


def _mlm_tokens() -> Tensor:
    """64 sentences of 40 to 160 positions: [CLS], ordinary tokens, [SEP], padding.
    (B, L) long."""
    gen = torch.Generator().manual_seed(850)
    batch, length = _MLM_BATCH, _MLM_LENGTH
    lengths = torch.randint(length // 4, length + 1, (batch,), generator=gen)
    tokens = torch.randint(_MASK + 1, _VOCAB, (batch, length), generator=gen)
    tokens[:, 0] = _CLS
    tokens[torch.arange(batch), lengths - 1] = _SEP
    tokens[torch.arange(length) >= lengths[:, None]] = _PAD
    return tokens


def _near(count: int, total: int, rate: float) -> bool:
    """Whether count / total is within five standard deviations of ``rate``."""
    if total == 0:
        return False
    spread = 5 * math.sqrt(rate * (1 - rate) / total)
    return abs(count / total - rate) <= spread


def _run_mlm(fn, tokens: Tensor, seed: int):
    """The reader's (inputs, labels) as (B, L) long tensors, or the feedback."""
    generator = torch.Generator().manual_seed(seed)
    got, error = run_safely(fn, tokens.clone(), _MASK, _VOCAB, _MLM_SPECIAL,
                            generator)
    if error is not None:
        return None, error
    pair, error = read_tensors(got, ("inputs", "labels"), [tokens.shape] * 2)
    if error is not None:
        return None, error
    for name, tensor in zip(("inputs", "labels"), pair):
        if tensor.dtype == torch.bool or (tensor.dtype.is_floating_point and not bool(
                (tensor == tensor.round()).all())):
            return None, Feedback.wrong(
                f"your {name} hold {tensor.dtype} values: token ids are whole numbers"
                " (torch.long).")
    return [t.long() for t in pair], None


def _mlm_structure(tokens, inputs, labels) -> str | None:
    """What is wrong with where the answer corrupts and labels, or None."""
    chosen = labels != IGNORE_INDEX  # (B, L)
    if bool((labels == tokens).all()):
        return ("your labels are the tokens everywhere. A label is the original token"
                f" only where it was chosen, and {IGNORE_INDEX} (IGNORE_INDEX)"
                " elsewhere, so that the loss skips the positions left alone.")
    if not bool((labels == IGNORE_INDEX).any()):
        common = int(labels.flatten().mode().values)
        return (f"no label is {IGNORE_INDEX}: where a token was not chosen your labels"
                f" hold {common}. Use {IGNORE_INDEX} (IGNORE_INDEX), the index"
                " F.cross_entropy skips by default; any other number is a real token"
                " to predict.")
    changed = inputs != tokens
    padding = tokens == _PAD
    touched = padding & (chosen | changed)
    if bool(touched.any()):
        return (f"you masked padding: {int(touched.sum())} of the"
                f" {int(padding.sum())} padding positions were chosen (their label is"
                f" not {IGNORE_INDEX}) or changed. Padding is not text: never choose"
                " it. Leave out every special id before drawing, e.g. ordinary ="
                " ~torch.isin(tokens, torch.tensor(special_ids)).")
    for name, token in (("[CLS]", _CLS), ("[SEP]", _SEP)):
        touched = (tokens == token) & (chosen | changed)
        if bool(touched.any()):
            return (f"you chose {name}: {int(touched.sum())} of the"
                    f" {int((tokens == token).sum())} {name} tokens were chosen or"
                    " changed. Only ordinary tokens are chosen; leave out every id in"
                    " special_ids.")
    if not bool((labels[chosen] == tokens[chosen]).all()):
        wrong = chosen & (labels != tokens)
        if bool((labels[wrong] == inputs[wrong]).all()):
            return ("your labels hold the corrupted inputs ([MASK] or the random"
                    " token). The label is the original token, what the model must"
                    " recover.")
        return ("where a token is chosen, its label must be the original token;"
                f" {int(wrong.sum())} of your labels are not.")
    if bool((changed & ~chosen).any()) and bool((inputs[chosen] == _MASK).all()):
        return ("your labels mark only the [MASK] positions. The tokens replaced by a"
                " random token and those kept as they are were chosen too: they get"
                " their original token as label, and the loss is computed at all of"
                " them.")
    if bool((changed & ~chosen).any()):
        return (f"you changed {int((changed & ~chosen).sum())} positions that you did"
                f" not choose (their label is {IGNORE_INDEX}). Only the chosen tokens"
                " are replaced, and each one replaced has its label.")
    if bool(((inputs < 0) | (inputs >= _VOCAB)).any()):
        return (f"some inputs lie outside the vocabulary, 0 to {_VOCAB - 1}: draw the"
                " random tokens with torch.randint(vocab_size, ...).")
    return None


def _mlm_rates(tokens, inputs, labels) -> str | None:
    """What is wrong with how many are chosen and how they are split, or None."""
    chosen = labels != IGNORE_INDEX
    ordinary = ~torch.isin(tokens, torch.tensor(_MLM_SPECIAL))
    num_chosen, num_ordinary = int(chosen.sum()), int(ordinary.sum())
    masked = int((chosen & (inputs == _MASK)).sum())
    kept = int((chosen & (inputs == tokens)).sum())
    replaced = num_chosen - masked - kept
    if masked == num_chosen and _near(num_chosen, num_ordinary, 0.15 * 0.8):
        return ("your labels mark only the [MASK] positions, about 12% of the tokens."
                " The 15% chosen all get a label, the 10% replaced by a random token"
                " and the 10% kept as they are too: the loss is computed at all of"
                " them.")
    if not _near(num_chosen, num_ordinary, 0.15):
        return (f"you chose {num_chosen / num_ordinary:.1%} of the {num_ordinary}"
                " ordinary tokens. BERT chooses 15% of the ordinary tokens, never"
                " padding or special ids: here each one with probability 0.15 (as"
                " the library and Hugging Face's collator do; Google's BERT code"
                " takes a fixed count per sentence instead).")
    shares = (f"of the {num_chosen} chosen tokens {masked / num_chosen:.0%} became"
              f" [MASK], {replaced / num_chosen:.0%} a random token and"
              f" {kept / num_chosen:.0%} stayed as they were")
    if masked == num_chosen:
        return (f"{shares}. Every chosen token became [MASK]: BERT replaces only 80%,"
                " 10% become a random token and 10% stay, so that the model cannot"
                " rely on seeing [MASK], which never appears when it is fine-tuned.")
    if kept == 0:
        return (f"{shares}. None stayed: of the chosen, 80% become [MASK], 10% a"
                " random token and 10% stay unchanged (but keep their label).")
    if replaced == 0:
        return (f"{shares}. None became a random token: 10% of the chosen should.")
    if _near(replaced, num_chosen, 0.02) and not _near(replaced, num_chosen, 0.1):
        return (f"{shares}. About 2% random: your second draw took 10% of the 20% not"
                " masked. The 10% are of all the chosen: half of those not masked."
                " One uniform draw u per position splits them: u < 0.8 [MASK],"
                " 0.8 ≤ u < 0.9 random, else kept.")
    if not (_near(masked, num_chosen, 0.8) and _near(replaced, num_chosen, 0.1)
            and _near(kept, num_chosen, 0.1)):
        return f"{shares}. BERT's rule is 80% [MASK], 10% random, 10% unchanged."
    return None


@checker
def check_mlm_masking(fn) -> Feedback:
    """Check ``fn(tokens, mask_id, vocab_size, special_ids, generator) -> (inputs,
    labels)``: BERT's corruption, as :func:`~attention_lib.lm.mask_tokens` with p =
    0.15, judged by its structure and its rates on about 6,000 ordinary tokens (five
    standard deviations). Names padding or [CLS]/[SEP] masked, labels everywhere or
    without -100, labels holding the corrupted inputs, positions changed without a
    label, tokens out of the vocabulary, labels only at [MASK], the share chosen, the
    80/10/10 split missed (all [MASK], none kept, none random, 2% random), and draws
    that ignore the generator or do not depend on it.

    Shapes:
        fn: (tokens (B, L) long, int, int, tuple of ints, torch.Generator) ->
            (inputs (B, L), labels (B, L))

    Taught in ``chapters/08_pretraining/05_exercises.ipynb``.
    """
    tokens = _mlm_tokens()
    where = (f"For {_MLM_BATCH} sentences of up to {_MLM_LENGTH} tokens (padding"
             f" {_PAD}, [CLS] {_CLS}, [SEP] {_SEP}, [MASK] {_MASK}, V = {_VOCAB})")
    answer, error = _run_mlm(fn, tokens, _MLM_SEED)
    if error is not None:
        return error
    text = _mlm_structure(tokens, *answer) or _mlm_rates(tokens, *answer)
    if text is not None:
        return Feedback.wrong(f"{where}: {text}")
    again, error = _run_mlm(fn, tokens, _MLM_SEED)
    if error is not None:
        return error
    if not all(torch.equal(a, b) for a, b in zip(answer, again)):
        return Feedback.wrong(
            "Two calls with generators seeded alike gave different results: draw"
            " every random number from the generator you are given, e.g."
            " torch.rand(tokens.shape, generator=generator), so that a run can be"
            " repeated.")
    other, error = _run_mlm(fn, tokens, _MLM_SEED + 1)
    if error is not None:
        return error
    if torch.equal(answer[1], other[1]):
        return Feedback.wrong(
            "Generators with different seeds chose the same positions: the choice"
            " must be random, drawn from the generator.")
    return Feedback.ok(
        "Correct: padding and special ids never chosen, about 15% of the other tokens"
        " chosen, of them about 80% [MASK], 10% random and 10% unchanged, each with"
        f" its original token as label and {IGNORE_INDEX} everywhere else. The model"
        " must predict every chosen token, including those it sees unchanged.")


# --- 7. the parameters of a modern block ----------------------------------------------

# (D, H, h): h ≠ D and not a multiple of D; H varies, and changes nothing
_MODERN_CASES = ((64, 4, 172), (96, 6, 256), (48, 2, 128), (128, 8, 344))


@functools.lru_cache(maxsize=None)  # counted once per case
def _modern_block_parameters(width: int, num_heads: int, hidden: int) -> int:
    """The reference: the parameters of the library's parts, counted on the ``meta``
    device: MultiHeadAttention(D, H, bias=False), SwiGLU(D, h), two RMSNorm(D)."""
    with torch.device("meta"):
        parts = [MultiHeadAttention(width, num_heads, bias=False),
                 SwiGLU(width, hidden), RMSNorm(width), RMSNorm(width)]
    return sum(p.numel() for part in parts for p in part.parameters())


@checker
def check_modern_block_parameters(fn) -> Feedback:
    """Check ``fn(embed_dim, num_heads, hidden) -> int``: the parameters of a pre-norm
    block with RMSNorm, bias-free attention and SwiGLU, 4D² + 3D·h + 2D, counted from
    the library's modules. Names biases counted, norms with a bias, a norm or both
    forgotten, two SwiGLU matrices, W_o forgotten and heads that multiply.

    Shapes:
        fn: (int D, int H, int h) -> one number

    Taught in ``chapters/08_pretraining/05_exercises.ipynb``.
    """
    def count(extra):
        return lambda d, n, h: 4 * d * d + 3 * d * h + 2 * d + extra(d, n, h)

    variants = [
        (count(lambda d, n, h: 4 * d),
         "you counted the attention's biases: the modern block has none (bias=False"
         " in W_q, W_k, W_v and W_o)."),
        (count(lambda d, n, h: 4 * d + 2 * h + d),
         "you counted biases: the modern block has none, neither in the attention"
         " nor in SwiGLU's three matrices."),
        (count(lambda d, n, h: 2 * d),
         "you gave each RMSNorm a bias, as LayerNorm has: RMSNorm has only its"
         " weight, D numbers."),
        (count(lambda d, n, h: -d),
         "one RMSNorm is missing: a pre-norm block has two, one before the attention"
         " and one before SwiGLU, D numbers each."),
        (count(lambda d, n, h: -2 * d),
         "the two RMSNorms are missing: D numbers each."),
        (count(lambda d, n, h: -d * h),
         "you counted two matrices for SwiGLU: it has three, W_1 and W_3 (D × h) and"
         " W_2 (h × D)."),
        (count(lambda d, n, h: -d * d),
         "W_o is missing: the attention has four D × D matrices, W_q, W_k, W_v and"
         " the output projection W_o."),
        (count(lambda d, n, h: 4 * (n - 1) * d * d),
         "the heads do not multiply the parameters: H heads of Dh = D / H features"
         " share the same four D × D matrices, split."),
    ]

    def explain_case(answer, expected, width, num_heads, hidden):
        return (f"For {sizes(' = ', D=width, H=num_heads, h=hidden)} you count"
                f" {answer:,.0f}; the block has {expected:,.0f}.")

    return diagnose_numbers(
        fn, _MODERN_CASES, _modern_block_parameters, variants,
        what="number of parameters", explain_case=explain_case,
        correct=f"Correct: 4D² + 3D·h + 2D, whatever H is:"
        f" {_modern_block_parameters(512, 8, 1365):,} for D = 512, h = 1365"
        " (swiglu_hidden(2048)), about what the 2017 block's attention and FFN of"
        " width F = 2048 cost, 4D² + 2D·F: three matrices of width 2F/3 cost what"
        " two of width F cost.",
    )


# --- 8. the KV cache's bytes ----------------------------------------------------------

# (B, N, H, Dh, T, bytes per number): all sizes differ within a case
_KV_CASES = ((2, 3, 4, 8, 10, 4), (1, 6, 2, 16, 7, 2), (3, 2, 8, 4, 5, 2),
             (4, 5, 3, 6, 9, 8))
_DTYPES = {2: torch.bfloat16, 4: torch.float32, 8: torch.float64}


@functools.lru_cache(maxsize=None)  # counted once per case
def _kv_cache_bytes(batch_size, num_layers, num_heads, head_dim, length, size) -> int:
    """The reference: the bytes of the caches of ``num_layers`` library attention
    layers after ``length`` tokens, measured on one layer (the global random state
    is left alone)."""
    dtype, width = _DTYPES[size], num_heads * head_dim
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        layer = MultiHeadAttention(width, num_heads, bias=False).to(dtype)
        x = torch.zeros(batch_size, length, width, dtype=dtype)  # (B, T, D)
        _, cache = layer(x, x, x, cache=layer.empty_cache(batch_size, x))
    return num_layers * sum(t.numel() * t.element_size() for t in cache)


@checker
def check_kv_cache_bytes(fn) -> Feedback:
    """Check ``fn(batch_size, num_layers, num_heads, head_dim, length,
    bytes_per_number) -> int``: the bytes a decoder's KV cache holds after T tokens,
    2·N·B·H·T·Dh·s, measured on the library's attention. Names the values (or keys),
    layers, batch, heads or bytes forgotten, and bits counted.

    Shapes:
        fn: (int B, int N, int H, int Dh, int T, int s) -> one number

    Taught in ``chapters/08_pretraining/05_exercises.ipynb``.
    """
    def full(b, n, h, d, t, s):
        return 2 * n * b * h * t * d * s

    variants = [
        (lambda b, n, h, d, t, s: full(b, n, h, d, t, s) / 2,
         "you counted only the keys (or only the values): the cache keeps both, two"
         " (B, H, T, Dh) tensors per layer."),
        (lambda b, n, h, d, t, s: full(b, n, h, d, t, s) / n,
         "you counted one layer: every layer keeps its own keys and values, × N."),
        (lambda b, n, h, d, t, s: full(b, n, h, d, t, s) / b,
         "you counted one sequence: each sequence of the batch has its cache, × B."),
        (lambda b, n, h, d, t, s: full(b, n, h, d, t, s) / h,
         "you counted one head: each position stores H heads of Dh numbers, × H."),
        (lambda b, n, h, d, t, s: full(b, n, h, d, t, s) / s,
         "that is the number of numbers: multiply by the bytes per number, s."),
        (lambda b, n, h, d, t, s: full(b, n, h, d, t, s) * 8,
         "that is bits: a byte is 8 bits, and s is already in bytes."),
    ]

    def explain_case(answer, expected, b, n, h, d, t, s):
        return (f"For {sizes(' = ', B=b, N=n, H=h, Dh=d, T=t, s=s)} you count"
                f" {answer:,.0f} bytes; the cache holds {expected:,.0f}.")

    return diagnose_numbers(
        fn, _KV_CASES, _kv_cache_bytes, variants, what="number of bytes",
        explain_case=explain_case,
        correct="Correct: 2·N·B·H·T·Dh·s, keys and values in every layer. It grows"
        " linearly with T and with the batch: for 32 layers of 32 heads of 128 in"
        f" bfloat16, {2 * 32 * 32 * 4096 * 128 * 2 / 2**30:g} GiB per"
        " sequence of 4,096 tokens.",
    )

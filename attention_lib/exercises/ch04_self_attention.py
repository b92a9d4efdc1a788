"""Checkers for chapter 4's exercises: the mistakes people make with multi-head
attention, on cases whose sizes (B, H, L, Dh, ...) all differ, so that every axis is
told apart by its size.

Taught in ``chapters/04_self_attention/05_exercises.ipynb``.
"""
from __future__ import annotations

import itertools
import math

import torch
from torch import Tensor

from ..attention import dot_product_scores
from ..masking import masked_softmax, valid_lens_to_mask
from ..multihead import MultiHeadAttention, merge_heads, split_heads
from ._common import heads_attention, merge_view, split_view
from ._feedback import (
    Feedback,
    checker,
    close,
    close_where_defined,
    diagnose,
    diagnose_numbers,
    read_tensor,
    sizes,
)

__all__ = [
    "check_split_heads",
    "check_merge_heads",
    "check_attention_weights",
    "check_head_scale",
    "check_mask_broadcast",
    "check_padding_mask",
    "check_mha_parameter_count",
]


def _randn(gen, *shape, scale=1.0):
    return scale * torch.randn(*shape, generator=gen)


def _permuted(got: Tensor, expected: Tensor):
    """The permutation ``p`` (not the identity) with ``got == expected.permute(p)``, or
    None."""
    for perm in itertools.permutations(range(expected.dim())):
        if perm != tuple(range(expected.dim())) and close(got, expected.permute(perm)):
            return perm
    return None


# --- 1. splitting the width into heads ------------------------------------------------

_SPLIT_CASES = ((2, 5, 12, 3), (3, 4, 10, 2))  # (B, L, D, H): every size differs
_SPLIT_MISTAKES = [
    (split_view,
     "you reshaped (B, L, D) straight to (B, H, L, Dh), with no transpose. The shape"
     " is right but reshape (or view) fills the new axes in memory order: 'head' 0"
     " gets the first L·Dh numbers, i.e. whole feature vectors of the first tokens"
     " cut into pieces, instead of Dh features of every token. Tokens are mixed"
     " across heads. Reshape to (B, L, H, Dh), then .transpose(1, 2)."),
    (
        lambda x, h: x.unflatten(-1, (-1, h)).permute(0, 3, 1, 2),  # split as (Dh, H)
        "your head h holds features h, h+H, h+2H, ... (you split D as (Dh, H)). Each"
        " head must hold a contiguous block of Dh features, h·Dh to (h+1)·Dh: reshape"
        " to (B, L, H, Dh). Otherwise merge_heads does not undo your split, and weights"
        " trained with the usual layout land in the wrong heads.",
    ),
    (lambda x, h: split_heads(x, h).flip(1),
     "your heads are in reverse order: head 0 holds the last Dh features. Head h"
     " holds features h·Dh to (h+1)·Dh."),
]


def _explain_split(got, expected, x, num_heads):
    perm = _permuted(got, expected)
    if perm is not None:
        if perm == (0, 2, 1, 3):
            hint = (
                " You reshaped to (B, L, H, Dh) but did not move the heads next to the"
                " batch: add .transpose(1, 2), so that each head is one more batch of"
                " (L, Dh) attention."
            )
        elif perm[0] == 1:
            hint = (
                " The heads come before the batch (torch.stack(..., dim=0) does that):"
                " stack along dim=1, or reshape and transpose(1, 2)."
            )
        else:
            hint = (
                " You transposed the wrong axes: after reshape(B, L, H, Dh) the ones to"
                " swap are 1 (L) and 2 (H)."
            )
        order = "(" + ", ".join(("B", "H", "L", "Dh")[i] for i in perm) + ")"
        return (f"your axes are in the order {order}, expected (B, H, L, Dh) ="
                f" {tuple(expected.shape)}.{hint}")
    if close(got, expected.flatten(0, 1)):
        return (
            f"you folded the heads into the batch, (B·H, L, Dh) = {tuple(got.shape)},"
            " as d2l does. Here the heads keep their own axis: return (B, H, L, Dh) ="
            f" {tuple(expected.shape)}."
        )
    if got.shape == expected.shape:
        return (
            f"your heads differ from split_heads(x, {num_heads}): e.g. head 0 of token"
            f" 0 is {got[0, 0, 0].tolist()}, expected {expected[0, 0, 0].tolist()} (the"
            " first Dh features of token 0)."
        )
    return None


@checker
def check_split_heads(fn) -> Feedback:
    """Check ``fn(x, num_heads) -> heads``: the width D split into H heads of Dh = D / H
    features, heads next to the batch axis, as :func:`~attention_lib.split_heads`. Names
    a reshape without the transpose, a transpose of the wrong axes, interleaved or
    reversed heads, and a fixed H.

    Shapes:
        fn: (x (B, L, D), int H) -> (B, H, L, Dh) (a tensor of any float dtype, an array
            or a nested list)

    Taught in ``chapters/04_self_attention/05_exercises.ipynb``.
    """
    gen = torch.Generator().manual_seed(0)
    cases = [(_randn(gen, b, length, d), h) for b, length, d, h in _SPLIT_CASES]
    return diagnose(
        fn, cases, split_heads, _SPLIT_MISTAKES, what="heads (B, H, L, Dh)",
        where=lambda x, h: "For " + sizes(B=x.shape[0], L=x.shape[1], D=x.shape[2],
                                          H=h),
        explain=_explain_split,
        correct="Correct: reshape (B, L, D) to (B, L, H, Dh), then transpose(1, 2) to"
        " (B, H, L, Dh). Head h sees features h·Dh to (h+1)·Dh of every token, and the"
        " heads are one more batch axis.",
    )


# --- 2. merging the heads back --------------------------------------------------------

_MERGE_MISTAKES = [
    (merge_view,
     "you reshaped (B, H, L, Dh) straight to (B, L, D), with no transpose. Row i"
     " then holds numbers from several tokens of one head, not token i's features"
     " from every head. Move the heads next to the features first: .transpose(1,"
     " 2), then reshape."),
    (lambda heads: heads.permute(0, 2, 3, 1).flatten(2),
     "your features are interleaved (feature j·H + h is feature j of head h): you"
     " put Dh before H. Transpose to (B, L, H, Dh) and reshape, so that head h fills"
     " features h·Dh to (h+1)·Dh."),
    (lambda heads: merge_heads(heads.flip(1)),
     "your heads are concatenated in reverse order: head 0 must fill the first Dh"
     " features."),
]


def _explain_merge(got, expected, heads):
    if close(got, heads.transpose(1, 2)):
        return (f"you transposed to (B, L, H, Dh) = {tuple(got.shape)} but did not"
                f" concatenate: reshape to (B, L, H·Dh) = {tuple(expected.shape)}.")
    for how, combined in (("summed", heads.sum(1)), ("averaged", heads.mean(1))):
        if close(got, combined):
            return (
                f"you {how} the heads, (B, L, Dh) = {tuple(got.shape)}. Multi-head"
                f" attention concatenates them, (B, L, H·Dh) = {tuple(expected.shape)},"
                " and lets W_o mix them: each head keeps its own features."
            )
    if got.shape == expected.shape:
        return (f"your result differs from merge_heads: token 0 should be"
                f" {expected[0, 0].tolist()}, yours is {got[0, 0].tolist()}.")
    return None


@checker
def check_merge_heads(fn) -> Feedback:
    """Check ``fn(heads) -> x``: (B, H, L, Dh) -> (B, L, H·Dh), as
    :func:`~attention_lib.merge_heads`. Names a reshape without the transpose, heads in
    the wrong order or interleaved, heads summed or averaged, and a ``.view`` of a
    transposed tensor.

    Shapes:
        fn: (B, H, L, Dh) -> (B, L, D) with D = H·Dh

    Taught in ``chapters/04_self_attention/05_exercises.ipynb``.
    """
    gen = torch.Generator().manual_seed(1)
    cases = [(_randn(gen, *shape),) for shape in ((2, 3, 5, 4), (3, 2, 4, 5))]
    return diagnose(
        fn, cases, merge_heads, _MERGE_MISTAKES, what="merged heads (B, L, D)",
        where=lambda h: "For " + sizes(B=h.shape[0], H=h.shape[1], L=h.shape[2],
                                       Dh=h.shape[3]),
        hint=[(
            "view size is not compatible",
            "(transpose returns a view whose numbers are no longer in row-major order,"
            " so .view cannot regroup them: use .reshape(...), or"
            " .contiguous().view(...).)",
        )],
        explain=_explain_merge,
        correct="Correct: transpose(1, 2) to (B, L, H, Dh), then reshape to (B, L,"
        " H·Dh): merge_heads(split_heads(x, H)) gives x back.",
    )


# --- 3. the heads' attention weights --------------------------------------------------

_MATMUL_HINT = (
    "(With the heads as an axis the tensors have four dimensions: transpose the last"
    " two axes of the keys, k.transpose(-2, -1). k.transpose(1, 2) swaps heads and"
    " tokens, and k.T reverses all four axes.)"
)


def _by_dh(dh: int) -> str:
    return (f"you divided by Dh = {dh}; divide by its square root, √Dh ="
            f" {math.sqrt(dh):.3g}: the scores' standard deviation, not their variance,"
            " grows like √Dh.")


def _weights(q, k, scale=None, dim=-1):
    """softmax(q kᵀ · scale) over ``dim``; ``scale=None`` is 1/√Dh."""
    return torch.softmax(dot_product_scores(q, k, scale), dim=dim)


_WEIGHT_MISTAKES = [
    (lambda q, k: _weights(k, q),
     "you computed the weights of k qᵀ, (B, H, Lk, Lq): rows are keys. Each row must"
     " be a query: q @ k.transpose(-2, -1) gives (B, H, Lq, Lk), and the softmax"
     " runs over the last axis, the keys."),
    (lambda q, k: _weights(q, k, dim=-2),
     "softmax over the wrong axis: your weights sum to 1 over the queries (dim=-2,"
     " or dim=2, which was the last axis of the (B, Lq, Lk) scores without heads)."
     " Each query's weights must sum to 1 over the keys: dim=-1."),
    (lambda q, k: _weights(q, k, dim=1),
     "softmax over the heads axis (dim=1): your weights sum to 1 across the heads."
     " Each head attends on its own; the softmax runs over the keys: dim=-1."),
    (lambda q, k: _weights(q, k, dim=0),
     "softmax over the batch (dim=0): use dim=-1, the keys."),
    (lambda q, k: dot_product_scores(q, k),
     "those are the scaled scores: there is no softmax. Apply torch.softmax(...,"
     " dim=-1) so that each query's weights are positive and sum to 1 over the"
     " keys."),
    (lambda q, k: dot_product_scores(q, k, 1.0),
     "those are the raw scores q kᵀ: divide by √Dh and apply a softmax over the keys"
     " (dim=-1)."),
    (lambda q, k: _weights(q, k, 1.0),
     lambda q, k: f"the scale is missing: divide the scores by √Dh = √{q.shape[-1]}"
     " before the softmax."),
    (lambda q, k: _weights(q, k, 1 / math.sqrt(q.shape[1] * q.shape[-1])),
     lambda q, k: f"you divided by √D = √{q.shape[1] * q.shape[-1]}, the model's"
     f" width; each head's dot product adds only Dh = {q.shape[-1]} terms: divide"
     " by √Dh."),
    (lambda q, k: _weights(q, k, 1 / q.shape[-1]),
     lambda q, k: _by_dh(q.shape[-1])),
    (lambda q, k: _weights(q, k).transpose(-2, -1),
     "your weights are transposed, (B, H, Lk, Lq): column j holds query j's weights."
     " Rows are queries: return (B, H, Lq, Lk), each row summing to 1 over the"
     " keys."),
]


@checker
def check_attention_weights(fn) -> Feedback:
    """Check ``fn(q, k) -> attn_weights``: every head's softmax(q kᵀ / √Dh) over the
    keys, on a cross- and a self-attention case. Names the softmax over the queries, the
    heads or the batch, no softmax, k qᵀ, and a wrong scale.

    Shapes:
        fn: (q (B, H, Lq, Dh), k (B, H, Lk, Dh)) -> (B, H, Lq, Lk)

    Taught in ``chapters/04_self_attention/05_exercises.ipynb``.
    """
    gen = torch.Generator().manual_seed(2)
    cases = []
    for b, h, lq, lk, dh in ((2, 3, 4, 6, 5), (3, 2, 5, 5, 4)):  # (B, H, Lq, Lk, Dh)
        cases.append((_randn(gen, b, h, lq, dh), _randn(gen, b, h, lk, dh)))

    def explain(got, expected, q, k):
        if got.shape == expected.shape:
            return (
                f"your weights differ from softmax(q kᵀ/√Dh): the first query of head 0"
                f" should get {expected[0, 0, 0].tolist()}, yours gets"
                f" {got[0, 0, 0].tolist()}."
            )
        return None

    return diagnose(
        fn, cases, _weights, _WEIGHT_MISTAKES, what="weights (B, H, Lq, Lk)",
        where=lambda q, k: "For " + sizes(B=q.shape[0], H=q.shape[1], Lq=q.shape[2],
                                          Lk=k.shape[2], Dh=q.shape[3]),
        hint=_MATMUL_HINT, explain=explain,
        correct="Correct: one (Lq, Lk) matrix of weights per head and example, each row"
        " a softmax over the keys of q kᵀ/√Dh.",
    )


# --- 4. the scale of each head --------------------------------------------------------

def _dh(queries, num_heads):
    return queries.shape[-1] // num_heads


def _scaled(scale_of, message_of):
    """A mistake of scale: ``scale_of(D, H, Dh)`` (None where it does not apply)."""
    def mistake(queries, keys, values, num_heads):
        scale = scale_of(queries.shape[-1], num_heads, _dh(queries, num_heads))
        if scale is None:
            return None
        return heads_attention(queries, keys, values, num_heads, scale)

    return mistake, lambda q, k, v, h: message_of(q.shape[-1], h, _dh(q, h))


_SCALE_MISTAKES = [
    _scaled(lambda d, h, dh: 1 / math.sqrt(d), lambda d, h, dh: (
        f"you divided by √D = √{d}, the model's width. Each head's dot product adds"
        f" only Dh = {dh} products (variance Dh for entries of variance 1): divide by"
        f" √Dh = √{dh}. (Computing the scale from queries.shape[-1] before the split"
        " gives √D.)"
    )),
    _scaled(lambda d, h, dh: 1.0, lambda d, h, dh: (
        f"the scale is missing: divide each head's scores by √Dh = √{dh} before the"
        " softmax, or they grow with Dh and the softmax saturates."
    )),
    _scaled(lambda d, h, dh: 1 / dh, lambda d, h, dh: _by_dh(dh)),
    _scaled(lambda d, h, dh: 1 / d, lambda d, h, dh: (
        f"you divided by D = {d}; divide by √Dh = {math.sqrt(dh):.3g}, the square root"
        " of one head's size."
    )),
    _scaled(lambda d, h, dh: math.sqrt(dh), lambda d, h, dh: (
        "you multiplied by √Dh; divide by it."
    )),
    _scaled(lambda d, h, dh: 1 / math.sqrt(h), lambda d, h, dh: (
        f"you divided by √H = √{h}; the scale depends on the size of each head, Dh ="
        f" {dh}: divide by √Dh."
    )),
] + [
    _scaled(lambda d, h, dh, other=other: None if other == dh else other**-0.5,
            lambda d, h, dh, other=other: (
                f"your scale is that of Dh = {other}, but here Dh = {dh}: compute it"
                " from the heads' size (q.shape[-1] after the split), not a fixed"
                " number."
            ))
    for other in (64, 4, 9)
] + [
    (lambda q, k, v, h: heads_attention(q, k, v, 1),
     "that is single-head attention of width D: you did not split into heads. Split"
     " the projected queries, keys and values into H heads of Dh features, attend in"
     " each, then merge."),
    (lambda q, k, v, h: heads_attention(q, k, v, h, dim=-2),
     "softmax over the wrong axis: over the queries (dim=-2). Use dim=-1, the keys."),
    (lambda q, k, v, h: heads_attention(q, k, v, h, merge=merge_view),
     "the heads are right but you merged them without the transpose: (B, H, Lq, Dh)"
     " -> transpose(1, 2) -> reshape (B, Lq, D)."),
    (lambda q, k, v, h: heads_attention(q, k, v, h, split=split_view,
                                        merge=merge_view),
     "you split and merged with reshape alone, without the transposes. The shapes"
     " work out, but each 'head' attends among pieces of several tokens: reshape to"
     " (B, L, H, Dh), then transpose(1, 2)."),
    (lambda q, k, v, h: heads_attention(q, k, v, h, split=split_view),
     "you split the heads with reshape (or view) alone, without the transpose:"
     " (B, L, D) -> (B, H, L, Dh) directly. The shapes work out, but each 'head'"
     " attends among pieces of several tokens: reshape to (B, L, H, Dh), then"
     " transpose(1, 2)."),
]


@checker
def check_head_scale(fn) -> Feedback:
    """Check ``fn(queries, keys, values, num_heads) -> output``: multi-head attention on
    projected inputs (split, softmax(q kᵀ / √Dh) v, merge), with √Dh, √D, Dh and D all
    different. Names √D, no scale, Dh, a fixed scale, one full-width head, and a split
    or merge without its transpose.

    Shapes:
        fn: (queries (B, Lq, D), keys (B, Lk, D), values (B, Lk, D), int H) -> (B, Lq,
            D)

    Taught in ``chapters/04_self_attention/05_exercises.ipynb``.
    """
    gen = torch.Generator().manual_seed(3)
    cases = []
    for b, lq, lk, d, h in ((2, 4, 5, 12, 3), (3, 3, 6, 18, 2)):  # (B, Lq, Lk, D, H)
        cases.append((_randn(gen, b, lq, d, scale=1.5),
                      _randn(gen, b, lk, d, scale=1.5), _randn(gen, b, lk, d), h))

    def explain(got, expected, queries, keys, values, num_heads):
        if got.shape == split_heads(queries, num_heads).shape:
            return (
                f"your output has shape (B, H, Lq, Dh) = {tuple(got.shape)}: those are"
                f" the heads' outputs. Merge them (merge_heads) into (B, Lq, D) ="
                f" {tuple(expected.shape)}."
            )
        if got.shape == expected.shape:
            return (
                "your output differs from multi-head attention with scale 1/√Dh:"
                f" output[0, 0, :3] should be {expected[0, 0, :3].tolist()}, yours is"
                f" {got[0, 0, :3].tolist()}."
            )
        return None

    return diagnose(
        fn, cases, heads_attention, _SCALE_MISTAKES, what="output (B, Lq, D)",
        where=lambda q, k, v, h: "For " + sizes(D=q.shape[-1], H=h, Dh=_dh(q, h)),
        hint=_MATMUL_HINT, explain=explain,
        correct="Correct: each head's scores are divided by √Dh, the size of the"
        " vectors whose dot product they are, not by √D.",
    )


# --- 5. a key mask for every head -----------------------------------------------------

_BROADCAST_HINT = (
    "(The scores are (B, H, Lq, Lk) and the key mask (B, Lk): give it the shape (B, 1,"
    " 1, Lk), key_mask[:, None, None, :], so that it repeats over the heads and the"
    " queries.)"
)


def _masked_with(allowed_of):
    """The softmax with the mask ``allowed_of(key_mask)`` broadcast to the scores (None
    where it does not broadcast), on the rows where it and the right mask keep a key."""
    def mistake(scores, key_mask):
        allowed = allowed_of(key_mask)
        if allowed is None:
            return None
        weights = masked_softmax(scores, None, allowed.expand_as(scores))
        keep = allowed.expand_as(scores).any(-1) & key_mask.any(-1)[:, None, None]
        return weights.masked_fill(~keep[..., None], math.nan)
    return mistake


_BROADCAST_MISTAKES = [
    # No mask first: on the rows they keep, the wrong broadcasts equal it.
    (_masked_with(lambda m: torch.ones_like(m)[:, None, None, :]),
     "the padded keys get weight: the mask is not applied. Fill the scores where the"
     " mask is False with -inf (or torch.finfo(dtype).min) before the softmax."),
    (_masked_with(lambda m: ~m[:, None, None, :]),
     "your mask is inverted: True means 'may attend' (the convention of"
     " F.scaled_dot_product_attention and the library), so fill the scores where the"
     " mask is *False*: masked_fill(~mask, ...)."),
    (
        lambda s, m: _masked_with(lambda m: m[:, None, :, None])(s, m)
        if s.shape[-2] == s.shape[-1] else None,  # (B, 1, Lk, 1) read as (B, 1, Lq, 1)
        "your mask hides queries, not keys: as (B, 1, Lk, 1) it runs down the rows"
        " (queries), so padded queries lose every key and real queries still attend to"
        " the padding. It only runs because Lq = Lk in self-attention. The key axis is"
        " the last: key_mask[:, None, None, :] (B, 1, 1, Lk).",
    ),
    (
        lambda s, m: _masked_with(lambda m: m[:, None, :])(s, m)
        if s.shape[0] == s.shape[1] else None,  # (B, 1, Lk) read as (H, Lq, Lk)
        "your mask has no head axis: as (B, 1, Lk) it lines up with the last three axes"
        " of the scores, (H, Lq, Lk), so B falls on the heads and head h of every"
        " example gets example h's mask. It only runs because B = H here. Add the head"
        " axis: key_mask[:, None, None, :] (B, 1, 1, Lk).",
    ),
    (lambda s, m: torch.softmax(s, dim=-1) * m[:, None, None, :],
     "the mask is applied after the softmax: the padded keys get weight 0, but the"
     " rows no longer sum to 1. Mask the scores before the softmax."),
    (lambda s, m: torch.softmax(s * m[:, None, None, :], dim=-1),
     "you set the masked scores to 0 (masked_fill(~mask, 0) or scores * mask). A"
     " score of 0 still gets weight exp(0) = 1 in the softmax: fill with -inf or"
     " torch.finfo(dtype).min."),
]


@checker
def check_mask_broadcast(fn) -> Feedback:
    """Check ``fn(attn_scores, key_mask) -> attn_weights``: the softmax over the keys
    with a (B, Lk) key mask (True = may attend) broadcast to (B, 1, 1, Lk). A case with
    B = H and Lq = Lk lets the wrong broadcasts run; names the mask over the queries, a
    mask without a head axis, no mask, the mask after the softmax, masked scores set to
    0.

    Shapes:
        fn: (attn_scores (B, H, Lq, Lk), key_mask (B, Lk) bool) -> (B, H, Lq, Lk)

    Taught in ``chapters/04_self_attention/05_exercises.ipynb``.
    """
    gen = torch.Generator().manual_seed(4)
    # (B, H, Lq, Lk), valid keys per example: every query has a key to attend to
    cases = [
        (_randn(gen, *shape, scale=2),
         valid_lens_to_mask(torch.tensor(lens), shape[-1]))  # (B, H, Lq, Lk), (B, Lk)
        for shape, lens in (((2, 2, 5, 5), [5, 3]), ((3, 2, 4, 6), [6, 2, 4]))
    ]

    def explain(got, expected, scores, key_mask):
        if torch.isnan(got).any():
            return ("your weights contain NaN: a query (row) has lost every key."
                    f" {_BROADCAST_HINT}")
        return (
            "your weights differ from the masked softmax: the first query of example 1,"
            f" head 0 should get {expected[1, 0, 0].tolist()}, yours gets"
            f" {got[1, 0, 0].tolist()}."
        )

    def where(scores, key_mask):
        b, h, lq, lk = scores.shape
        return "For " + sizes(B=b, H=h, Lq=lq, Lk=lk) + (
            f" and valid keys {key_mask.sum(-1).tolist()}"
        )

    return diagnose(
        fn, cases,
        lambda s, m: masked_softmax(s, None, m[:, None, None, :].expand_as(s)),
        _BROADCAST_MISTAKES, what="weights (B, H, Lq, Lk)", where=where,
        hint=_BROADCAST_HINT, compare=close_where_defined, explain=explain, shape=True,
        correct="Correct: key_mask[:, None, None, :] (B, 1, 1, Lk) repeats the mask"
        " over the heads and the queries; every head of every query ignores the padded"
        " keys.",
    )


# --- 6. the padding mask --------------------------------------------------------------

# (tokens (B, L), pad_id, valid lengths): B ≠ L first; then pad id 1, where the token 0
# is a real word, so that a pad id fixed at 0 is caught.
_PADDING_CASES = (
    ([[3, 1, 4, 1, 5], [2, 6, 0, 0, 0], [5, 3, 5, 0, 0]], 0, [5, 2, 3]),
    ([[0, 1, 1, 1], [2, 0, 3, 0], [4, 0, 5, 1], [0, 5, 2, 6]], 1, [1, 4, 3, 4]),
)
_NUM_HEADS = 2


def _as_head_mask(mask: Tensor, batch_size: int, length: int) -> Tensor | None:
    """The reader's mask broadcast to (B, H, Lq, Lk) as the library reads it (up to
    three dimensions against (B, Lq, Lk), four against (B, H, Lq, Lk)); None if it does
    not broadcast."""
    full = (batch_size, _NUM_HEADS, length, length)
    try:
        if mask.dim() <= 3:
            return mask.broadcast_to((batch_size, length, length))[:, None].expand(full)
        if mask.dim() == 4:
            return mask.broadcast_to(full)
    except RuntimeError:
        return None
    return None


def _padding_where(tokens, pad_id):
    return f"For tokens {tokens.tolist()} and pad_id={pad_id}"


def _read_padding_mask(got, tokens, pad_id):
    """The reader's mask as (B, H, Lq, Lk) bools, or the feedback naming its dtype or
    shape."""
    got, error = read_tensor(got, "mask")
    if error is not None:
        return None, error
    batch_size, length = tokens.shape
    where = _padding_where(tokens, pad_id)
    shapes = (f"(B, 1, Lk) = {(batch_size, 1, length)} or (B, 1, 1, Lk) ="
              f" {(batch_size, 1, 1, length)}")
    if got.dtype != torch.bool:
        full = _as_head_mask(got != 0, batch_size, length)
        if full is not None and torch.equal(full, _padding_reference(tokens, pad_id)):
            return None, Feedback.wrong(
                f"{where}: the pattern is right, but your mask holds {got.dtype}"
                " numbers, not bools. F.scaled_dot_product_attention *adds* a float"
                " mask to the scores (1 at real tokens, 0 at padding: the padding still"
                " gets weight), and the library refuses it: return a bool mask, e.g."
                " (tokens != pad_id)."
            )
        if got.dtype.is_floating_point and bool(((got == 0) | (got <= -1e4)).all()):
            return None, Feedback.wrong(
                f"{where}: that is an additive float mask (0 to keep, -inf to hide),"
                " which SDPA accepts but the library does not. Return the boolean form:"
                " True where a query may attend."
            )
        return None, Feedback.wrong(
            f"{where}: return a bool mask (True = may attend), got dtype {got.dtype}."
        )
    full = _as_head_mask(got, batch_size, length)
    if full is not None:
        return full, None
    if got.shape == (batch_size, length):
        return None, Feedback.wrong(
            f"{where}: your mask has shape (B, Lk) = {tuple(got.shape)}. Against the"
            " scores (B, Lq, Lk) it lines up B with Lq (and where B = Lq it runs,"
            " giving query i example i's mask). Add a query axis: mask[:, None, :],"
            f" shape {shapes}."
        )
    return None, Feedback.wrong(
        f"{where}: your mask of shape {tuple(got.shape)} does not broadcast to the"
        f" scores (B, Lq, Lk) = {(batch_size, length, length)}: return shape {shapes}."
    )


def _keys_real(tokens, pad_id):  # (B, 1, 1, Lk): the mask valid_lens stands for
    lens = (tokens != pad_id).sum(-1)
    return valid_lens_to_mask(lens, tokens.shape[1])[:, None, None, :]


def _padding_reference(tokens, pad_id):
    length = tokens.shape[1]
    return _keys_real(tokens, pad_id).expand(-1, _NUM_HEADS, length, length)


def _queries_real(tokens, pad_id):  # (B, H, Lq, Lk): the mask over the queries
    return _keys_real(tokens, pad_id).transpose(-2, -1).expand(
        _padding_reference(tokens, pad_id).shape
    )


_PADDING_MISTAKES = [
    (lambda t, p: ~_padding_reference(t, p),
     "your mask is inverted: True at the padding. In the library and in"
     " F.scaled_dot_product_attention True means 'may attend', so the mask is tokens"
     " != pad_id. (torch.nn.MultiheadAttention's key_padding_mask uses the opposite"
     " convention, True = ignore, which is where inverted masks come from.)"),
    (_queries_real,
     "your mask runs over the queries, not the keys: (B, Lq, 1) hides the padded"
     " queries' rows and lets every real query attend to the padding. Padding is a"
     " property of keys: put the sentence axis last, (B, 1, Lk)."),
    (lambda t, p: ~_queries_real(t, p),
     "your mask is inverted *and* runs over the queries: True must mark the real"
     " keys, along the last axis: (tokens != pad_id)[:, None, :]."),
    (lambda t, p: _queries_real(t, p) & _padding_reference(t, p),
     "you masked the padded queries too: their rows have no key left, so their"
     " weights are all zero in the library, and NaN in a hand-written softmax that"
     " fills with -inf. The loss ignores those positions anyway: mask the keys only,"
     " (tokens != pad_id)[:, None, :]."),
    (lambda t, p: None if p == 0 else (t != 0)[:, None, None, :].expand(
         _padding_reference(t, p).shape),
     lambda t, p: f"your mask treats token 0 as padding, but here the pad id is {p}"
     " and 0 is a real token: use the pad_id argument."),
]


@checker
def check_padding_mask(fn) -> Feedback:
    """Check ``fn(tokens, pad_id) -> mask``: the bool padding mask for self-attention,
    True at every real key for every query (the library's and
    ``F.scaled_dot_product_attention``'s convention), broadcastable to (B, Lq, Lk) or
    (B, H, Lq, Lk). Names an inverted mask, a mask over the queries (or both axes), no
    query axis, a pad id fixed at 0, and float masks.

    Shapes:
        fn: (tokens (B, L) int64, int pad_id) -> bool mask broadcastable to (B, Lq, Lk)
            or (B, H, Lq, Lk), with Lq = Lk = L

    Taught in ``chapters/04_self_attention/05_exercises.ipynb``.
    """
    def explain(full, expected, tokens, pad_id):
        return (
            "your mask, broadcast to (B, H, Lq, Lk), differs from the padding mask: the"
            " first query of example 1 may attend to keys"
            f" {expected[1, 0, 0].tolist()}, yours says {full[1, 0, 0].tolist()}."
        )

    return diagnose(
        fn, [(torch.tensor(rows), pad_id) for rows, pad_id, _ in _PADDING_CASES],
        _padding_reference, _PADDING_MISTAKES, what="mask", where=_padding_where,
        compare=torch.equal, read=_read_padding_mask, explain=explain,
        correct="Correct: tokens != pad_id, shaped to broadcast over the queries (and"
        " heads), is True at every real key for every query and head, the mask that"
        " valid_lens stands for.",
    )


# --- 7. the number of parameters ------------------------------------------------------

_PARAMETER_CASES = ((8, 2), (12, 3), (512, 8), (64, 1), (64, 16))  # (D, H)
_PARAMETER_MISTAKES = [
    (lambda d, h: h * (4 * d * d + 4 * d),
     "you multiplied by H. Splitting D into H heads of Dh = D/H features only"
     " reshapes the projections' output: W_q, W_k, W_v and W_o are D × D whatever"
     " H is, and the heads share them out (head h uses output features h·Dh to"
     " (h+1)·Dh)."),
    (lambda d, h: 3 * h * (d * d + d) + h * d * d + d,
     "you gave each head its own D × D projections (and W_o an H·D × D input):"
     " that would be H full-width heads. Each head projects to Dh = D/H features"
     " only, so the H heads together hold D × D numbers per projection."),
    (lambda d, h: 4 * d * d,
     "the biases are missing: each of the four projections (W_q, W_k, W_v, W_o)"
     " has a bias of D numbers: 4D more."),
    (lambda d, h: 3 * d * d + 3 * d,
     "W_o is missing: after the heads are concatenated, one more D × D projection"
     " (with its bias) mixes them."),
    (lambda d, h: 3 * d * d,
     "W_o and the biases are missing: four D × D projections, each with a bias of"
     " D numbers."),
    (lambda d, h: 4 * (d * (d // h) + d // h),
     "you counted one head's projections, D × Dh: the H heads together project to"
     " H·Dh = D features, so each projection is D × D."),
]


def _mha_parameters(width: int, num_heads: int) -> int:
    with torch.device("meta"):  # sizes only: no memory, no random numbers drawn
        layer = MultiHeadAttention(width, num_heads)
    return sum(p.numel() for p in layer.parameters())


def _explain_count(answers, expected):
    same_width = [i for i, (width, _) in enumerate(_PARAMETER_CASES) if width == 64]
    if answers[same_width[0]] != answers[same_width[1]]:
        return (
            f"Your count changes with H (D = 64: {answers[same_width[0]]:,.0f} with H ="
            f" 1, {answers[same_width[1]]:,.0f} with H = 16). The number of heads"
            " only decides how the D projected features are grouped; count W_q, W_k,"
            " W_v and W_o with their biases."
        )
    return None


def _explain_count_case(answer, expected, width, num_heads):
    return (f"For D = {width}, H = {num_heads} you count {answer:,.0f}; the layer has"
            f" {expected:,.0f}. Count the four projections W_q, W_k, W_v, W_o and their"
            " biases.")


@checker
def check_mha_parameter_count(fn) -> Feedback:
    """Check ``fn(embed_dim, num_heads) -> int``: the parameters of
    :class:`~attention_lib.MultiHeadAttention`, 4D² + 4D whatever H is. Names H times
    the count, full-width heads, missing biases, a missing W_o and one head's
    projections.

    Shapes:
        fn: (int D, int H) -> one number

    Taught in ``chapters/04_self_attention/05_exercises.ipynb``.
    """
    return diagnose_numbers(
        fn, _PARAMETER_CASES, _mha_parameters, _PARAMETER_MISTAKES,
        what="number of parameters", explain=_explain_count,
        explain_case=_explain_count_case,
        correct=lambda expected: f"Correct: 4D² + 4D, {expected[2]:,.0f} for D = 512,"
        " with 1 head or 8. Splitting into heads reshapes the projections' outputs; it"
        " adds no parameters.",
    )

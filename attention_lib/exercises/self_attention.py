"""Checkers for chapter 4's exercises: the mistakes people make with multi-head
attention.

Each checker runs the reader's function on small cases whose sizes all differ (B, H, L,
Dh, ...), so that every axis can be told apart by its size, compares with the library
(:mod:`attention_lib.multihead`, :mod:`attention_lib.attention`,
:mod:`attention_lib.masking`), and when the answer is wrong recomputes the typical
mistakes (heads split without the transpose, softmax over the queries, the scale √D
instead of √Dh, a key mask broadcast over the queries, an inverted padding mask, H times
the parameters, ...) to name the one made.

Taught in ``chapters/04_self_attention/05_exercises.ipynb``.
"""
from __future__ import annotations

import itertools
import math

import torch
from torch import Tensor

from ..masking import masked_softmax, valid_lens_to_mask
from ..multihead import MultiHeadAttention, merge_heads, split_heads
from ._feedback import (
    Feedback,
    checker,
    close,
    first_match,
    read_numbers,
    read_tensor,
    run_safely,
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

def _with_hint(error: Feedback, hint: str) -> Feedback:
    """The reader's error, followed by what usually causes it (not for the starter)."""
    if error.todo:
        return error
    return Feedback.wrong(f"{error.message} {hint}")


def _order(names: tuple[str, ...], perm) -> str:
    return "(" + ", ".join(names[i] for i in perm) + ")"


def _permuted(got: Tensor, expected: Tensor):
    """The permutation ``p`` (not the identity) with ``got == expected.permute(p)``, or
    None."""
    for perm in itertools.permutations(range(expected.dim())):
        if perm == tuple(range(expected.dim())):
            continue
        candidate = expected.permute(perm)
        if candidate.shape == got.shape and close(got, candidate):
            return perm
    return None


def _sizes(**sizes) -> str:
    return ", ".join(f"{name}={size}" for name, size in sizes.items())


# --- 1. splitting the width into heads ------------------------------------------------

_SPLIT_CASES = ((2, 5, 12, 3), (3, 4, 10, 2))  # (B, L, D, H): every size differs


def _split_interleaved(x: Tensor, num_heads: int) -> Tensor:
    batch_size, length, width = x.shape
    x = x.reshape(batch_size, length, width // num_heads, num_heads)  # (B, L, Dh, H)
    return x.permute(0, 3, 1, 2)  # (B, H, L, Dh): head h holds features h, h+H, ...


@checker
def check_split_heads(fn) -> Feedback:
    """Check ``fn(x, num_heads) -> heads``: the width D split into H heads of Dh = D / H
    features, heads next to the batch axis, as :func:`~attention_lib.split_heads`.

    Head h holds features h·Dh to (h+1)·Dh of every token. Two cases with different H
    and with B, H, L and Dh all different, so that a reshape straight to (B, H, L, Dh)
    (tokens mixed across heads), a transpose of the wrong axes, interleaved or reversed
    heads, and a fixed H are each recognised and named.

    Shapes:
        fn: (x (B, L, D), int H) -> (B, H, L, Dh) (a tensor of any float dtype, an array
            or a nested list)

    Taught in ``chapters/04_self_attention/05_exercises.ipynb``.
    """
    gen = torch.Generator().manual_seed(0)
    names = ("B", "H", "L", "Dh")
    for batch_size, length, width, num_heads in _SPLIT_CASES:
        head_dim = width // num_heads
        where = "For " + _sizes(B=batch_size, L=length, D=width, H=num_heads)
        x = torch.randn(batch_size, length, width, generator=gen)
        got, error = run_safely(fn, x.clone(), num_heads)
        if error is not None:
            return error
        expected = split_heads(x, num_heads)  # (B, H, L, Dh)
        got, error = read_tensor(got, "heads (B, H, L, Dh)")
        if error is not None:
            return error
        if got.shape == expected.shape and close(got, expected):
            continue
        if got.shape == expected.shape:
            if close(got, x.reshape(batch_size, num_heads, length, head_dim)):
                return Feedback.wrong(
                    f"{where}: you reshaped (B, L, D) straight to (B, H, L, Dh), with"
                    " no transpose. The shape is right but reshape (or view) fills the"
                    " new axes in memory order: 'head' 0 gets the first L·Dh numbers,"
                    " i.e. whole feature vectors of the first tokens cut into pieces,"
                    " instead of Dh features of every token. Tokens are mixed across"
                    " heads. Reshape to (B, L, H, Dh), then .transpose(1, 2)."
                )
            if close(got, _split_interleaved(x, num_heads)):
                return Feedback.wrong(
                    f"{where}: your head h holds features h, h+H, h+2H, ... (you split"
                    " D as (Dh, H)). Each head must hold a contiguous block of Dh"
                    " features, h·Dh to (h+1)·Dh: reshape to (B, L, H, Dh). Otherwise"
                    " merge_heads does not undo your split, and weights trained with"
                    " the usual layout land in the wrong heads."
                )
            if close(got, expected.flip(1)):
                return Feedback.wrong(
                    f"{where}: your heads are in reverse order: head 0 holds the last"
                    " Dh features. Head h holds features h·Dh to (h+1)·Dh."
                )
        perm = _permuted(got, expected)
        if perm is not None:
            hint = " Reshape to (B, L, H, Dh), then swap L and H: .transpose(1, 2)."
            if perm == (0, 2, 1, 3):
                hint = (
                    " You reshaped to (B, L, H, Dh) but did not move the heads next to"
                    " the batch: add .transpose(1, 2), so that each head is one more"
                    " batch of (L, Dh) attention."
                )
            elif perm[0] == 1:
                hint = (
                    " The heads come before the batch (torch.stack(..., dim=0) does"
                    " that): stack along dim=1, or reshape and transpose(1, 2)."
                )
            else:
                hint = (
                    " You transposed the wrong axes: after reshape(B, L, H, Dh) the"
                    " ones to swap are 1 (L) and 2 (H)."
                )
            return Feedback.wrong(
                f"{where}: your axes are in the order {_order(names, perm)}, expected"
                f" (B, H, L, Dh) = {tuple(expected.shape)}.{hint}"
            )
        if got.shape == (batch_size * num_heads, length, head_dim):
            folded = expected.reshape(batch_size * num_heads, length, head_dim)
            if close(got, folded):
                return Feedback.wrong(
                    f"{where}: you folded the heads into the batch, (B·H, L, Dh) ="
                    f" {tuple(got.shape)}, as d2l does. Here the heads keep their own"
                    f" axis: return (B, H, L, Dh) = {tuple(expected.shape)}."
                )
        got, error = read_tensor(got, "heads (B, H, L, Dh)", expected.shape)
        if error is not None:
            return Feedback.wrong(f"{where}: {error.message}")
        return Feedback.wrong(
            f"{where}: your heads differ from split_heads(x, {num_heads}): e.g. head 0"
            f" of token 0 is {got[0, 0, 0].tolist()}, expected"
            f" {expected[0, 0, 0].tolist()} (the first Dh features of token 0)."
        )
    return Feedback.ok(
        "Correct: reshape (B, L, D) to (B, L, H, Dh), then transpose(1, 2) to (B, H, L,"
        " Dh). Head h sees features h·Dh to (h+1)·Dh of every token, and the heads are"
        " one more batch axis."
    )


# --- 2. merging the heads back --------------------------------------------------------

_VIEW_HINT = (
    "(transpose returns a view whose numbers are no longer in row-major order, so"
    " .view cannot regroup them: use .reshape(...), or .contiguous().view(...).)"
)


@checker
def check_merge_heads(fn) -> Feedback:
    """Check ``fn(heads) -> x``: the heads concatenated again, (B, H, L, Dh) -> (B, L,
    H·Dh), the inverse of :func:`~attention_lib.split_heads`, as
    :func:`~attention_lib.merge_heads`.

    Recognises a reshape without the transpose, heads concatenated in the wrong order or
    interleaved, heads summed or averaged instead of concatenated, and a ``.view`` of a
    transposed (non-contiguous) tensor.

    Shapes:
        fn: (B, H, L, Dh) -> (B, L, D) with D = H·Dh

    Taught in ``chapters/04_self_attention/05_exercises.ipynb``.
    """
    gen = torch.Generator().manual_seed(1)
    for batch_size, num_heads, length, head_dim in ((2, 3, 5, 4), (3, 2, 4, 5)):
        where = "For " + _sizes(B=batch_size, H=num_heads, L=length, Dh=head_dim)
        width = num_heads * head_dim
        heads = torch.randn(batch_size, num_heads, length, head_dim, generator=gen)
        got, error = run_safely(fn, heads.clone())
        if error is not None:
            if "view size is not compatible" in error.message:
                return _with_hint(error, _VIEW_HINT)
            return error
        expected = merge_heads(heads)  # (B, L, D)
        got, error = read_tensor(got, "merged heads (B, L, D)")
        if error is not None:
            return error
        if got.shape == expected.shape and close(got, expected):
            continue
        if got.shape == expected.shape:
            variants = [
                (
                    heads.reshape(batch_size, length, width),
                    "you reshaped (B, H, L, Dh) straight to (B, L, D), with no"
                    " transpose. Row i then holds numbers from several tokens of one"
                    " head, not token i's features from every head. Move the heads"
                    " next to the features first: .transpose(1, 2), then reshape.",
                ),
                (
                    heads.permute(0, 2, 3, 1).reshape(batch_size, length, width),
                    "your features are interleaved (feature j·H + h is feature j of"
                    " head h): you put Dh before H. Transpose to (B, L, H, Dh) and"
                    " reshape, so that head h fills features h·Dh to (h+1)·Dh.",
                ),
                (
                    merge_heads(heads.flip(1)),
                    "your heads are concatenated in reverse order: head 0 must fill"
                    " the first Dh features.",
                ),
            ]
            matched = first_match(got, variants, where)
            if matched is not None:
                return matched
        if got.shape == (batch_size, length, num_heads, head_dim) and close(
            got, heads.transpose(1, 2)
        ):
            return Feedback.wrong(
                f"{where}: you transposed to (B, L, H, Dh) = {tuple(got.shape)} but did"
                f" not concatenate: reshape to (B, L, H·Dh) = {tuple(expected.shape)}."
            )
        if got.shape == (batch_size, length, head_dim):
            for how, combined in (("summed", heads.sum(1)),
                                  ("averaged", heads.mean(1))):
                if close(got, combined):
                    return Feedback.wrong(
                        f"{where}: you {how} the heads, (B, L, Dh) ="
                        f" {tuple(got.shape)}. Multi-head attention concatenates them,"
                        f" (B, L, H·Dh) = {tuple(expected.shape)}, and lets W_o mix"
                        " them: each head keeps its own features."
                    )
        got, error = read_tensor(got, "merged heads (B, L, D)", expected.shape)
        if error is not None:
            return Feedback.wrong(f"{where}: {error.message}")
        return Feedback.wrong(
            f"{where}: your result differs from merge_heads: token 0 should be"
            f" {expected[0, 0].tolist()}, yours is {got[0, 0].tolist()}."
        )
    return Feedback.ok(
        "Correct: transpose(1, 2) to (B, L, H, Dh), then reshape to (B, L, H·Dh):"
        " merge_heads(split_heads(x, H)) gives x back."
    )


# --- 3. the heads' attention weights --------------------------------------------------

_MATMUL_HINT = (
    "(With the heads as an axis the tensors have four dimensions: transpose the last"
    " two axes of the keys, k.transpose(-2, -1). k.transpose(1, 2) swaps heads and"
    " tokens, and k.T reverses all four axes.)"
)


@checker
def check_attention_weights(fn) -> Feedback:
    """Check ``fn(q, k) -> attn_weights``: every head's weights softmax(q kᵀ / √Dh) over
    the keys.

    Two cases: a cross-attention one (Lq ≠ Lk, so swapped queries and keys change the
    shape) and a self-attention one (Lq = Lk, where they do not). Recognises the softmax
    over the queries (``dim=-2``, or ``dim=2`` copied from three-dimensional code), over
    the heads or the batch, no softmax, the weights of k qᵀ, and a wrong scale.

    Shapes:
        fn: (q (B, H, Lq, Dh), k (B, H, Lk, Dh)) -> (B, H, Lq, Lk)

    Taught in ``chapters/04_self_attention/05_exercises.ipynb``.
    """
    gen = torch.Generator().manual_seed(2)
    # (B, H, Lq, Lk, Dh)
    for batch_size, num_heads, num_queries, num_kv, head_dim in (
        (2, 3, 4, 6, 5),
        (3, 2, 5, 5, 4),
    ):
        where = "For " + _sizes(
            B=batch_size, H=num_heads, Lq=num_queries, Lk=num_kv, Dh=head_dim
        )
        q = torch.randn(batch_size, num_heads, num_queries, head_dim, generator=gen)
        k = torch.randn(batch_size, num_heads, num_kv, head_dim, generator=gen)
        got, error = run_safely(fn, q.clone(), k.clone())
        if error is not None:
            return _with_hint(error, _MATMUL_HINT)
        scores = q @ k.transpose(-2, -1)  # (B, H, Lq, Lk)
        scale = 1 / math.sqrt(head_dim)
        expected = torch.softmax(scores * scale, dim=-1)
        got, error = read_tensor(got, "weights (B, H, Lq, Lk)")
        if error is not None:
            return error
        if got.shape == expected.shape and close(got, expected):
            continue
        # (B, H, Lk, Lq)
        swapped = torch.softmax(scores.transpose(-2, -1) * scale, dim=-1)
        if got.shape == swapped.shape and close(got, swapped):
            return Feedback.wrong(
                f"{where}: you computed the weights of k qᵀ, (B, H, Lk, Lq): rows are"
                " keys. Each row must be a query: q @ k.transpose(-2, -1) gives (B, H,"
                " Lq, Lk), and the softmax runs over the last axis, the keys."
            )
        if got.shape == expected.shape:
            variants = [
                (
                    torch.softmax(scores * scale, dim=-2),
                    "softmax over the wrong axis: your weights sum to 1 over the"
                    " queries (dim=-2, or dim=2, which was the last axis of the (B,"
                    " Lq, Lk) scores without heads). Each query's weights must sum to"
                    " 1 over the keys: dim=-1.",
                ),
                (
                    torch.softmax(scores * scale, dim=1),
                    "softmax over the heads axis (dim=1): your weights sum to 1 across"
                    " the heads. Each head attends on its own; the softmax runs over"
                    " the keys: dim=-1.",
                ),
                (
                    torch.softmax(scores * scale, dim=0),
                    "softmax over the batch (dim=0): use dim=-1, the keys.",
                ),
                (
                    scores * scale,
                    "those are the scaled scores: there is no softmax. Apply"
                    " torch.softmax(..., dim=-1) so that each query's weights are"
                    " positive and sum to 1 over the keys.",
                ),
                (
                    scores,
                    "those are the raw scores q kᵀ: divide by √Dh and apply a softmax"
                    " over the keys (dim=-1).",
                ),
                (
                    torch.softmax(scores, dim=-1),
                    f"the scale is missing: divide the scores by √Dh = √{head_dim}"
                    " before the softmax.",
                ),
                (
                    torch.softmax(scores / math.sqrt(num_heads * head_dim), dim=-1),
                    f"you divided by √D = √{num_heads * head_dim}, the model's width;"
                    f" each head's dot product adds only Dh = {head_dim} terms: divide"
                    " by √Dh.",
                ),
            ]
            if num_queries == num_kv:
                variants.append((
                    expected.transpose(-2, -1),
                    "your weights are transposed, (B, H, Lk, Lq): column j holds"
                    " query j's weights. Rows are queries: return (B, H, Lq, Lk), each"
                    " row summing to 1 over the keys.",
                ))
            matched = first_match(got, variants, where)
            if matched is not None:
                return matched
        got, error = read_tensor(got, "weights (B, H, Lq, Lk)", expected.shape)
        if error is not None:
            return Feedback.wrong(f"{where}: {error.message}")
        return Feedback.wrong(
            f"{where}: your weights differ from softmax(q kᵀ/√Dh): the first query of"
            f" head 0 should get {expected[0, 0, 0].tolist()}, yours gets"
            f" {got[0, 0, 0].tolist()}."
        )
    return Feedback.ok(
        "Correct: one (Lq, Lk) matrix of weights per head and example, each row a"
        " softmax over the keys of q kᵀ/√Dh."
    )


# --- 4. the scale of each head --------------------------------------------------------

def _multihead(queries, keys, values, num_heads, scale, dim=-1, split=split_heads,
               merge=merge_heads):
    q, k, v = (split(t, num_heads) for t in (queries, keys, values))  # (B, H, L, Dh)
    weights = torch.softmax(q @ k.transpose(-2, -1) * scale, dim=dim)  # (B, H, Lq, Lk)
    return merge(weights @ v)  # (B, Lq, D)


def _split_no_transpose(x: Tensor, num_heads: int) -> Tensor:
    batch_size, length, width = x.shape
    return x.reshape(batch_size, num_heads, length, width // num_heads)


def _merge_no_transpose(x: Tensor) -> Tensor:
    batch_size, num_heads, length, head_dim = x.shape
    return x.reshape(batch_size, length, num_heads * head_dim)


@checker
def check_head_scale(fn) -> Feedback:
    """Check ``fn(queries, keys, values, num_heads) -> output``: multi-head attention
    on queries, keys and values that are already projected: split into H heads,
    softmax(q kᵀ / √Dh) v in every head, merge.

    Two cases in which √Dh, √D, Dh and D are all different numbers (D = 12, H = 3; D =
    18, H = 2), so that the scale of the model width √D, no scale, Dh instead of √Dh, a
    fixed scale, one head of full width, and a split or merge without its transpose are
    each recognised.

    Shapes:
        fn: (queries (B, Lq, D), keys (B, Lk, D), values (B, Lk, D), int H) -> (B, Lq,
            D)

    Taught in ``chapters/04_self_attention/05_exercises.ipynb``.
    """
    gen = torch.Generator().manual_seed(3)
    # (B, Lq, Lk, D, H)
    for batch_size, num_queries, num_kv, width, num_heads in (
        (2, 4, 5, 12, 3),
        (3, 3, 6, 18, 2),
    ):
        head_dim = width // num_heads
        where = "For " + _sizes(D=width, H=num_heads, Dh=head_dim)
        queries = 1.5 * torch.randn(batch_size, num_queries, width, generator=gen)
        keys = 1.5 * torch.randn(batch_size, num_kv, width, generator=gen)
        values = torch.randn(batch_size, num_kv, width, generator=gen)
        got, error = run_safely(
            fn, queries.clone(), keys.clone(), values.clone(), num_heads
        )
        if error is not None:
            return _with_hint(error, _MATMUL_HINT)
        args = (queries, keys, values, num_heads)
        expected = _multihead(*args, 1 / math.sqrt(head_dim))
        got, error = read_tensor(got, "output (B, Lq, D)")
        if error is not None:
            return error
        if got.shape == expected.shape and close(got, expected):
            continue
        if got.shape == (batch_size, num_heads, num_queries, head_dim):
            return Feedback.wrong(
                f"{where}: your output has shape (B, H, Lq, Dh) = {tuple(got.shape)}:"
                " those are the heads' outputs. Merge them (merge_heads) into (B, Lq,"
                f" D) = {tuple(expected.shape)}."
            )
        if got.shape == expected.shape:
            scales = [
                (
                    1 / math.sqrt(width),
                    f"you divided by √D = √{width}, the model's width. Each head's"
                    f" dot product adds only Dh = {head_dim} products (variance Dh for"
                    f" entries of variance 1): divide by √Dh = √{head_dim}. (Computing"
                    " the scale from queries.shape[-1] before the split gives √D.)",
                ),
                (
                    1.0,
                    f"the scale is missing: divide each head's scores by √Dh ="
                    f" √{head_dim} before the softmax, or they grow with Dh and the"
                    " softmax saturates.",
                ),
                (
                    1 / head_dim,
                    f"you divided by Dh = {head_dim}; divide by its square root, √Dh ="
                    f" {math.sqrt(head_dim):.3g}: the scores' standard deviation, not"
                    " their variance, grows like √Dh.",
                ),
                (
                    1 / width,
                    f"you divided by D = {width}; divide by √Dh ="
                    f" {math.sqrt(head_dim):.3g}, the square root of one head's size.",
                ),
                (math.sqrt(head_dim), "you multiplied by √Dh; divide by it."),
                (
                    1 / math.sqrt(num_heads),
                    f"you divided by √H = √{num_heads}; the scale depends on the size"
                    f" of each head, Dh = {head_dim}: divide by √Dh.",
                ),
            ] + [
                (
                    1 / math.sqrt(other),
                    f"your scale is that of Dh = {other}, but here Dh = {head_dim}:"
                    " compute it from the heads' size (q.shape[-1] after the split),"
                    " not a fixed number.",
                )
                for other in (64, 4, 9)
                if other != head_dim
            ]
            for scale, message in scales:
                if close(got, _multihead(*args, scale)):
                    return Feedback.wrong(f"{where}: {message}")
            structural = [
                (
                    _multihead(queries, keys, values, 1, 1 / math.sqrt(width)),
                    "that is single-head attention of width D: you did not split into"
                    " heads. Split the projected queries, keys and values into H heads"
                    " of Dh features, attend in each, then merge.",
                ),
                (
                    _multihead(*args, 1 / math.sqrt(head_dim), dim=-2),
                    "softmax over the wrong axis: over the queries (dim=-2). Use"
                    " dim=-1, the keys.",
                ),
                (
                    _multihead(
                        *args, 1 / math.sqrt(head_dim), merge=_merge_no_transpose
                    ),
                    "the heads are right but you merged them without the transpose:"
                    " (B, H, Lq, Dh) -> transpose(1, 2) -> reshape (B, Lq, D).",
                ),
                (
                    _multihead(
                        *args,
                        1 / math.sqrt(head_dim),
                        split=_split_no_transpose,
                        merge=_merge_no_transpose,
                    ),
                    "you split and merged with reshape alone, without the transposes."
                    " The shapes work out, but each 'head' attends among pieces of"
                    " several tokens: reshape to (B, L, H, Dh), then transpose(1, 2).",
                ),
            ]
            matched = first_match(got, structural, where)
            if matched is not None:
                return matched
        got, error = read_tensor(got, "output (B, Lq, D)", expected.shape)
        if error is not None:
            return Feedback.wrong(f"{where}: {error.message}")
        return Feedback.wrong(
            f"{where}: your output differs from multi-head attention with scale 1/√Dh:"
            f" output[0, 0, :3] should be {expected[0, 0, :3].tolist()}, yours is"
            f" {got[0, 0, :3].tolist()}."
        )
    return Feedback.ok(
        "Correct: each head's scores are divided by √Dh, the size of the vectors whose"
        " dot product they are, not by √D."
    )


# --- 5. a key mask for every head -----------------------------------------------------

def _softmax_with(attn_scores: Tensor, allowed: Tensor) -> Tensor:
    """Softmax over the keys with ``allowed`` (broadcast to the scores) kept; rows with
    no allowed key are zero."""
    return masked_softmax(attn_scores, mask=allowed.expand_as(attn_scores))


def _close_on_rows(got: Tensor, expected: Tensor, rows: Tensor) -> bool:
    """``close`` on the rows (queries) where ``rows`` is True, whatever is elsewhere
    (NaN, 1/Lk, 0: what each fill value gives a row with no key)."""
    if got.shape != expected.shape or not bool(rows.any()):
        return False
    return close(got[rows], expected[rows])


_BROADCAST_HINT = (
    "(The scores are (B, H, Lq, Lk) and the key mask (B, Lk): give it the shape (B, 1,"
    " 1, Lk), key_mask[:, None, None, :], so that it repeats over the heads and the"
    " queries.)"
)


@checker
def check_mask_broadcast(fn) -> Feedback:
    """Check ``fn(attn_scores, key_mask) -> attn_weights``: the softmax over the keys
    of every head's scores, with a (B, Lk) key mask (True = may attend) that must be
    broadcast to (B, 1, 1, Lk).

    The first case is self-attention (Lq = Lk) with B = H, where the typical wrong
    broadcasts run without an error: the mask as (B, 1, Lk, 1), over the queries
    instead of the keys; the mask as (B, 1, Lk), with no head axis, which lines B up
    with H. The second (Lq ≠ Lk, B ≠ H) catches shapes that only fit the first. Also
    recognised: no mask, the mask applied after the softmax, masked scores set to 0.

    Shapes:
        fn: (attn_scores (B, H, Lq, Lk), key_mask (B, Lk) bool) -> (B, H, Lq, Lk)

    Taught in ``chapters/04_self_attention/05_exercises.ipynb``.
    """
    gen = torch.Generator().manual_seed(4)
    # (B, H, Lq, Lk), valid keys per example: every query has a key to attend to
    cases = (((2, 2, 5, 5), [5, 3]), ((3, 2, 4, 6), [6, 2, 4]))
    for (batch_size, num_heads, num_queries, num_kv), lens in cases:
        where = "For " + _sizes(B=batch_size, H=num_heads, Lq=num_queries, Lk=num_kv)
        where += f" and valid keys {lens}"
        scores = 2 * torch.randn(
            batch_size, num_heads, num_queries, num_kv, generator=gen
        )
        key_mask = valid_lens_to_mask(torch.tensor(lens), num_kv)  # (B, Lk)
        got, error = run_safely(fn, scores.clone(), key_mask.clone())
        if error is not None:
            return _with_hint(error, _BROADCAST_HINT)
        allowed = key_mask[:, None, None, :]  # (B, 1, 1, Lk)
        expected = _softmax_with(scores, allowed)  # (B, H, Lq, Lk)
        got, error = read_tensor(got, "weights (B, H, Lq, Lk)", expected.shape)
        if error is not None:
            return Feedback.wrong(f"{where}: {error.message}")
        if close(got, expected):
            continue
        # No mask first: on the rows they keep, the wrong broadcasts equal it.
        variants = [
            (
                torch.ones_like(allowed),
                "the padded keys get weight: the mask is not applied. Fill the scores"
                " where the mask is False with -inf (or torch.finfo(dtype).min) before"
                " the softmax.",
            ),
            (
                ~allowed,
                "your mask is inverted: True means 'may attend' (the convention of"
                " F.scaled_dot_product_attention and the library), so fill the scores"
                " where the mask is *False*: masked_fill(~mask, ...).",
            ),
        ]
        if num_queries == num_kv:
            variants.append((
                key_mask[:, None, :, None],  # (B, 1, Lk, 1): read as (B, 1, Lq, 1)
                "your mask hides queries, not keys: as (B, 1, Lk, 1) it runs down the"
                " rows (queries), so padded queries lose every key and real queries"
                " still attend to the padding. It only runs because Lq = Lk in"
                " self-attention. The key axis is the last: key_mask[:, None, None, :]"
                " (B, 1, 1, Lk).",
            ))
        if batch_size == num_heads:
            variants.append((
                key_mask[:, None, :],  # (B, 1, Lk): read as (H, Lq, Lk)
                "your mask has no head axis: as (B, 1, Lk) it lines up with the last"
                " three axes of the scores, (H, Lq, Lk), so B falls on the heads and"
                " head h of every example gets example h's mask. It only runs because"
                " B = H here. Add the head axis: key_mask[:, None, None, :] (B, 1, 1,"
                " Lk).",
            ))
        has_key = allowed.expand_as(scores).any(-1)  # (B, H, Lq)
        for mask, message in variants:
            variant = _softmax_with(scores, mask)
            rows = mask.expand_as(scores).any(-1) & has_key
            if _close_on_rows(got, variant, rows):
                return Feedback.wrong(f"{where}: {message}")
        if close(got, torch.softmax(scores, dim=-1) * allowed):
            return Feedback.wrong(
                f"{where}: the mask is applied after the softmax: the padded keys get"
                " weight 0, but the rows no longer sum to 1. Mask the scores before the"
                " softmax."
            )
        if close(got, torch.softmax(scores * allowed, dim=-1)):
            return Feedback.wrong(
                f"{where}: you set the masked scores to 0 (masked_fill(~mask, 0) or"
                " scores * mask). A score of 0 still gets weight exp(0) = 1 in the"
                " softmax: fill with -inf or torch.finfo(dtype).min."
            )
        if torch.isnan(got).any():
            return Feedback.wrong(
                f"{where}: your weights contain NaN: a query (row) has lost every key."
                f" {_BROADCAST_HINT}"
            )
        return Feedback.wrong(
            f"{where}: your weights differ from the masked softmax: the first query of"
            f" example 1, head 0 should get {expected[1, 0, 0].tolist()}, yours gets"
            f" {got[1, 0, 0].tolist()}."
        )
    return Feedback.ok(
        "Correct: key_mask[:, None, None, :] (B, 1, 1, Lk) repeats the mask over the"
        " heads and the queries; every head of every query ignores the padded keys."
    )


# --- 6. the padding mask --------------------------------------------------------------

# (tokens (B, L), pad_id, valid lengths): B ≠ L first; then pad id 1, where the token 0
# is a real word, so that a pad id fixed at 0 is caught.
_PADDING_CASES = (
    ([[3, 1, 4, 1, 5], [2, 6, 0, 0, 0], [5, 3, 5, 0, 0]], 0, [5, 2, 3]),
    ([[0, 1, 1, 1], [2, 0, 3, 0], [4, 0, 5, 1], [0, 5, 2, 6]], 1, [1, 4, 3, 4]),
)


def _as_head_mask(
    mask: Tensor, batch_size: int, num_heads: int, length: int
) -> Tensor | None:
    """The reader's mask broadcast to (B, H, Lq, Lk) as the library reads it (up to
    three dimensions against (B, Lq, Lk), four against (B, H, Lq, Lk)); None if it does
    not broadcast."""
    try:
        if mask.dim() <= 3:
            full = mask.broadcast_to((batch_size, length, length))  # (B, Lq, Lk)
            return full[:, None].expand(batch_size, num_heads, length, length)
        if mask.dim() == 4:
            return mask.broadcast_to((batch_size, num_heads, length, length))
    except RuntimeError:
        return None
    return None


@checker
def check_padding_mask(fn) -> Feedback:
    """Check ``fn(tokens, pad_id) -> mask``: the boolean padding mask for
    self-attention over ``tokens``, in the convention of the library and of
    ``F.scaled_dot_product_attention``: True where a query may attend, i.e. at every
    real (non-padding) key, for every query. It must broadcast to (B, Lq, Lk) (one mask
    for all heads), e.g. (B, 1, Lk), or to (B, H, Lq, Lk), e.g. (B, 1, 1, Lk).

    Compared with ``valid_lens_to_mask``, the mask ``valid_lens`` stands for. Recognises
    an inverted mask (True at padding, the convention of ``nn.MultiheadAttention``'s
    ``key_padding_mask``), a mask over the queries instead of the keys, queries and keys
    both masked, a (B, Lk) mask without a query axis, a pad id fixed at 0, and a 0/1 or
    additive float mask instead of a bool one.

    Shapes:
        fn: (tokens (B, L) int64, int pad_id) -> bool mask broadcastable to (B, Lq, Lk)
            or (B, H, Lq, Lk), with Lq = Lk = L

    Taught in ``chapters/04_self_attention/05_exercises.ipynb``.
    """
    num_heads = 2
    for rows, pad_id, lens in _PADDING_CASES:
        tokens = torch.tensor(rows)  # (B, L)
        batch_size, length = tokens.shape
        where = f"For tokens {tokens.tolist()} and pad_id={pad_id}"
        got, error = run_safely(fn, tokens.clone(), pad_id)
        if error is not None:
            return error
        got, error = read_tensor(got, "mask")
        if error is not None:
            return error
        keys_real = valid_lens_to_mask(torch.tensor(lens), length)  # (B, Lk)
        expected = keys_real[:, None, None, :].expand(
            batch_size, num_heads, length, length
        )  # (B, H, Lq, Lk)
        shapes = (
            f"(B, 1, Lk) = {(batch_size, 1, length)} or (B, 1, 1, Lk) ="
            f" {(batch_size, 1, 1, length)}"
        )
        if got.dtype != torch.bool:
            as_bool = got != 0
            full = _as_head_mask(as_bool, batch_size, num_heads, length)
            if full is not None and bool((full == expected).all()):
                return Feedback.wrong(
                    f"{where}: the pattern is right, but your mask holds {got.dtype}"
                    " numbers, not bools. F.scaled_dot_product_attention *adds* a"
                    " float mask to the scores (1 at real tokens, 0 at padding: the"
                    " padding still gets weight), and the library refuses it: return"
                    " a bool mask, e.g. (tokens != pad_id)."
                )
            if got.dtype.is_floating_point and bool(
                ((got == 0) | (got <= -1e4)).all()
            ):
                return Feedback.wrong(
                    f"{where}: that is an additive float mask (0 to keep, -inf to"
                    " hide), which SDPA accepts but the library does not. Return the"
                    " boolean form: True where a query may attend."
                )
            return Feedback.wrong(
                f"{where}: return a bool mask (True = may attend), got dtype"
                f" {got.dtype}."
            )
        full = _as_head_mask(got, batch_size, num_heads, length)
        if full is None:
            if got.shape == (batch_size, length):
                return Feedback.wrong(
                    f"{where}: your mask has shape (B, Lk) = {tuple(got.shape)}."
                    " Against the scores (B, Lq, Lk) it lines up B with Lq (and where"
                    " B = Lq it runs, giving query i example i's mask). Add a query"
                    f" axis: mask[:, None, :], shape {shapes}."
                )
            return Feedback.wrong(
                f"{where}: your mask of shape {tuple(got.shape)} does not broadcast to"
                f" the scores (B, Lq, Lk) = {(batch_size, length, length)}: return"
                f" shape {shapes}."
            )
        if bool((full == expected).all()):
            continue
        queries_real = keys_real[:, None, :, None]  # (B, 1, Lq, 1)
        variants = [
            (
                ~expected,
                "your mask is inverted: True at the padding. In the library and in"
                " F.scaled_dot_product_attention True means 'may attend', so the mask"
                " is tokens != pad_id. (torch.nn.MultiheadAttention's key_padding_mask"
                " uses the opposite convention, True = ignore, which is where inverted"
                " masks come from.)",
            ),
            (
                queries_real.expand_as(expected),
                "your mask runs over the queries, not the keys: (B, Lq, 1) hides the"
                " padded queries' rows and lets every real query attend to the"
                " padding. Padding is a property of keys: put the sentence axis last,"
                " (B, 1, Lk).",
            ),
            (
                ~queries_real.expand_as(expected),
                "your mask is inverted *and* runs over the queries: True must mark the"
                " real keys, along the last axis: (tokens != pad_id)[:, None, :].",
            ),
            (
                queries_real & expected,
                "you masked the padded queries too: their rows have no key left, so"
                " their weights are all zero in the library, and NaN in a hand-written"
                " softmax that fills with -inf. The loss ignores those positions"
                " anyway: mask the keys only, (tokens != pad_id)[:, None, :].",
            ),
        ]
        if pad_id != 0:
            zeros_real = (tokens != 0)[:, None, None, :].expand_as(expected)
            variants.append((
                zeros_real,
                f"your mask treats token 0 as padding, but here the pad id is {pad_id}"
                " and 0 is a real token: use the pad_id argument.",
            ))
        for variant, message in variants:
            if bool((full == variant).all()):
                return Feedback.wrong(f"{where}: {message}")
        return Feedback.wrong(
            f"{where}: your mask, broadcast to (B, H, Lq, Lk), differs from the padding"
            f" mask: the first query of example 1 may attend to keys"
            f" {expected[1, 0, 0].tolist()}, yours says {full[1, 0, 0].tolist()}."
        )
    return Feedback.ok(
        "Correct: (tokens != pad_id)[:, None, :] (B, 1, Lk) is True at every real key"
        " for every query and head, the mask that valid_lens stands for."
    )


# --- 7. the number of parameters ------------------------------------------------------

_PARAMETER_CASES = ((8, 2), (12, 3), (512, 8), (64, 1), (64, 16))  # (D, H)


def _count(formula, cases=_PARAMETER_CASES) -> list[float]:
    return [float(formula(width, heads)) for width, heads in cases]


_PARAMETER_MISTAKES = [
    (
        lambda d, h: h * (4 * d * d + 4 * d),
        "you multiplied by H. Splitting D into H heads of Dh = D/H features only"
        " reshapes the projections' output: W_q, W_k, W_v and W_o are D × D whatever"
        " H is, and the heads share them out (head h uses output features h·Dh to"
        " (h+1)·Dh).",
    ),
    (
        lambda d, h: 3 * h * (d * d + d) + h * d * d + d,
        "you gave each head its own D × D projections (and W_o an H·D × D input):"
        " that would be H full-width heads. Each head projects to Dh = D/H features"
        " only, so the H heads together hold D × D numbers per projection.",
    ),
    (
        lambda d, h: 4 * d * d,
        "the biases are missing: each of the four projections (W_q, W_k, W_v, W_o)"
        " has a bias of D numbers: 4D more.",
    ),
    (
        lambda d, h: 3 * d * d + 3 * d,
        "W_o is missing: after the heads are concatenated, one more D × D projection"
        " (with its bias) mixes them.",
    ),
    (
        lambda d, h: 3 * d * d,
        "W_o and the biases are missing: four D × D projections, each with a bias of"
        " D numbers.",
    ),
    (
        lambda d, h: 4 * (d * (d // h) + d // h),
        "you counted one head's projections, D × Dh: the H heads together project to"
        " H·Dh = D features, so each projection is D × D.",
    ),
]


@checker
def check_mha_parameter_count(fn) -> Feedback:
    """Check ``fn(embed_dim, num_heads) -> int``: the number of parameters of
    multi-head attention of width D with H heads and biases, against
    :class:`~attention_lib.MultiHeadAttention`.

    The answer is 4D² + 4D: four D × D projections (W_q, W_k, W_v, W_o) with a bias of D
    each, whatever H is. Five (D, H) pairs, two with the same D and different H, so that
    H times the count, full-width heads, missing biases, a missing W_o and one head's
    projections are each named.

    Shapes:
        fn: (int D, int H) -> one number

    Taught in ``chapters/04_self_attention/05_exercises.ipynb``.
    """
    answers, error = read_numbers(fn, _PARAMETER_CASES, "number of parameters")
    if error is not None:
        return error
    answers = [float(answer) for answer in answers]
    expected = []
    for width, num_heads in _PARAMETER_CASES:
        with torch.device("meta"):  # sizes only: no memory, no random numbers drawn
            layer = MultiHeadAttention(width, num_heads)
        expected.append(float(sum(p.numel() for p in layer.parameters())))
    if answers == expected:
        return Feedback.ok(
            f"Correct: 4D² + 4D, {expected[2]:,.0f} for D = 512, with 1 head or 8."
            " Splitting into heads reshapes the projections' outputs; it adds no"
            " parameters."
        )
    for formula, message in _PARAMETER_MISTAKES:
        if answers == _count(formula):
            return Feedback.wrong(f"Not yet: {message}")
    same_width = [i for i, (width, _) in enumerate(_PARAMETER_CASES) if width == 64]
    if answers[same_width[0]] != answers[same_width[1]]:
        return Feedback.wrong(
            f"Your count changes with H (D = 64: {answers[same_width[0]]:,.0f} with H ="
            f" 1, {answers[same_width[1]]:,.0f} with H = 16). The number of heads"
            " only decides how the D projected features are grouped; count W_q, W_k,"
            " W_v and W_o with their biases."
        )
    bad = next(i for i, (a, e) in enumerate(zip(answers, expected)) if a != e)
    width, num_heads = _PARAMETER_CASES[bad]
    return Feedback.wrong(
        f"For D = {width}, H = {num_heads} you count {answers[bad]:,.0f}; the layer"
        f" has {expected[bad]:,.0f}. Count the four projections W_q, W_k, W_v, W_o and"
        " their biases."
    )

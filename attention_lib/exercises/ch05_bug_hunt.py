"""Checkers for chapter 5's bug hunt: three places where a Transformer decoder block
runs and computes the wrong thing (the causal mask, the cross-attention's inputs,
the attention step between the projections and W_o).

Taught in ``chapters/05_transformer/04_bug_hunt.ipynb``.
"""
from __future__ import annotations

import itertools
import math

import torch
from torch import Tensor

from ..masking import causal_mask, valid_lens_to_mask
from ..multihead import MultiHeadAttention, merge_heads, split_heads
from ._common import heads_attention, merge_view, read_mask, split_view, triangle
from ._feedback import (
    Feedback,
    checker,
    close_where_defined,
    diagnose,
    sizes,
)

__all__ = ["check_causal_mask", "check_cross_attention", "check_attention_step"]


# --- 1. the causal mask ---------------------------------------------------------------

# (Lq, Lk): no cache; three new positions after four cached ones; one step after four
_MASK_CASES = ((4, 4), (3, 7), (1, 5))


def _mask_variants(num_queries: int, num_kv: int) -> list[tuple[Tensor, str]]:
    offset = num_kv - num_queries  # positions already in the cache
    expected = triangle(num_queries, num_kv, offset)
    variants = [
        (~expected,
         "your mask is inverted: True where a query may NOT attend. That is the"
         " convention of torch.nn.Transformer's bool masks; in the library and in"
         " F.scaled_dot_product_attention True means 'may attend'. Negate it."),
        (torch.ones_like(expected),
         "no mask: every query may attend to every position, the future included,"
         " so in training each position can read the token it must predict. Keep"
         " the lower triangle."),
        (triangle(num_queries, num_kv, offset - 1),
         "diagonal hidden: query i does not see its own position (tril(-1), or"
         " triu(0) negated). The first position then has no key at all. A query"
         " may attend to itself: keep the diagonal, tril(diagonal=0) without a"
         " cache."),
        (triangle(num_queries, num_kv, offset, upper=True),
         "transposed (hides the past): query i sees its own position and the later"
         " ones, not the earlier ones: you kept the upper triangle (triu). Keep the"
         " lower one, tril."),
        (triangle(num_queries, num_kv, offset)
         & triangle(num_queries, num_kv, offset, upper=True),
         "each query sees only its own position: it must see every earlier"
         " position too (the lower triangle, diagonal included)."),
    ]
    if offset:
        variants.append((
            triangle(num_queries, num_kv, 0),
            f"offset wrong with a cache: your query i sees positions 0 to i, but with"
            f" t = Lk - Lq = {offset} positions in the cache it sits at position t + i"
            f" and must see positions 0 to t + i. Shift the diagonal:"
            f" tril(diagonal=num_kv - num_queries).",
        ))
    return variants


def _mask_shape_feedback(got: Tensor, expected: Tensor, where: str) -> Feedback:
    """A mask of another shape: name the cache ignored, the full (Lk, Lk) mask and
    the swapped axes."""
    num_queries, num_kv = expected.shape
    if num_queries != num_kv and got.shape == (num_queries, num_queries):
        return Feedback.wrong(
            f"{where}: cache ignored: your mask has shape (Lq, Lq) ="
            f" {tuple(got.shape)}, but the queries attend to the {num_kv - num_queries}"
            f" cached positions as well as to the {num_queries} new ones: the mask has"
            f" shape (Lq, Lk) = {tuple(expected.shape)}."
        )
    if (got.shape == (num_kv, num_kv) and got.dtype == torch.bool
            and torch.equal(got[-num_queries:], expected)):
        return Feedback.wrong(
            f"{where}: you built the mask of all Lk = {num_kv} positions, shape"
            f" {tuple(got.shape)}. Only the last Lq = {num_queries} are queries: keep"
            " its last Lq rows, mask[-num_queries:], shape (Lq, Lk)."
        )
    if num_queries != num_kv and got.shape == (num_kv, num_queries):
        return Feedback.wrong(
            f"{where}: your mask has shape (Lk, Lq) = {tuple(got.shape)}: rows are"
            f" queries and columns keys, (Lq, Lk) = {tuple(expected.shape)}."
        )
    return Feedback.wrong(
        f"{where}: your mask has shape {tuple(got.shape)}, expected (Lq, Lk) ="
        f" {tuple(expected.shape)}: one row per query, one column per key."
    )


def _mask_where(num_queries: int, num_kv: int) -> str:
    offset = num_kv - num_queries
    return f"For num_queries={num_queries}, num_kv={num_kv}" + (
        f" ({offset} cached positions)" if offset else " (no cache)"
    )


def _read_mask(got, num_queries: int, num_kv: int):
    """The reader's mask as an (Lq, Lk) bool tensor, or the feedback."""
    expected, where = causal_mask(num_queries, num_kv), _mask_where(num_queries, num_kv)
    return read_mask(got, expected, where,
                     lambda got: _mask_shape_feedback(got, expected, where))


@checker
def check_causal_mask(fn) -> Feedback:
    """Check ``fn(num_queries, num_kv) -> mask``: a decoder's self-attention mask, True
    where a query may attend, as :func:`~attention_lib.causal_mask`; the queries are the
    last Lq of Lk positions (a cache). Names an inverted mask, no mask, the diagonal
    hidden, the upper triangle, a diagonal alone, the cache's offset forgotten or the
    cache ignored, and masks of numbers.

    Shapes:
        fn: (int Lq, int Lk) -> (Lq, Lk) bool (leading dimensions of size 1 are fine)

    Taught in ``chapters/05_transformer/04_bug_hunt.ipynb``.
    """
    return diagnose(
        fn, _MASK_CASES, causal_mask, _mask_variants, what="mask",
        hint=[("positional argument",
               "(The function takes two numbers: num_queries and num_kv.)")],
        read=_read_mask, compare=torch.equal,
        explain=lambda got, expected, num_queries, num_kv: (
            "your mask differs from the causal mask: query 0, at position"
            f" {num_kv - num_queries}, may attend to {expected[0].int().tolist()},"
            f" yours says {got[0].int().tolist()} (1 = may attend)."
        ),
        where=_mask_where,
        correct="Correct: torch.ones(Lq, Lk, dtype=torch.bool).tril(diagonal=Lk - Lq)."
        " Query i sits at position Lk - Lq + i and sees every position up to its own,"
        " cached or new.",
    )


# --- 2. the cross-attention call ------------------------------------------------------

# (B, Lq, Lk, D, H, src_valid_lens): more target positions than source ones, and fewer
_CROSS_CASES = ((3, 5, 7, 8, 2, (5, 2, 4)),
                (2, 6, 4, 12, 3, (4, 1)))

_CROSS_HINTS = [
    ("keys and values must come in pairs",
     "(Keys and values are the same positions, both from the memory: the encoder's"
     " outputs.)"),
    ("valid_lens must lie in",
     "(src_valid_lens count the real positions of the memory, which gives the"
     " cross-attention its keys: pass them unchanged, with keys from the memory.)"),
    ("num_kv",
     "(A causal mask needs at least as many keys as queries; the cross-attention"
     " needs no causal mask at all.)"),
]


def _cross_variants(attention, x, memory, src_valid_lens) -> list:
    """The typical wrong calls, as (output, message); calls that fail are left out.
    (Attention does not care about the order of its keys, so [target; memory] with the
    matching mask is [memory; target].)"""
    num_queries, num_kv = x.shape[1], memory.shape[1]
    source = valid_lens_to_mask(src_valid_lens, num_kv)  # (B, Lk)
    target = torch.ones(x.shape[:2], dtype=torch.bool)  # (B, Lq)
    both = torch.cat([memory, x], dim=1)  # (B, Lk + Lq, D)
    from_target = (
        "keys from the target: your keys and values are the target x, which is"
        " self-attention again. In cross-attention the queries come from the target"
        " and the keys and values from the memory (the encoder's outputs):"
        " attention(x, memory, memory, src_valid_lens)."
    )
    over_both = (
        "attends over [memory; target]: your keys and values are the memory and the"
        " target side by side, so each query also reads the target, its future"
        " included. The target has its own (causal) self-attention; the"
        " cross-attention's keys and values are the memory alone."
    )
    calls = [
        (lambda: attention(x, x, x), from_target),
        (lambda: attention(x, x, x, src_valid_lens), from_target),
        (lambda: attention(x, x, x, mask=causal_mask(num_queries)), from_target),
        (lambda: attention(x, both, both), over_both + " And the padding is ignored."),
        (lambda: attention(
             x, both, both, mask=torch.cat([source, target], 1)[:, None, :]
         ),
         over_both),
        (lambda: attention(x, memory, memory),
         "padding ignored: your queries attend to the padded positions of the"
         " memory as well. Pass src_valid_lens (or the equivalent mask), so that"
         " positions at or after each sentence's length get zero weight."),
        (lambda: attention(x, memory, memory, mask=~source[:, None, :]),
         "your padding mask is inverted: the queries attend to the padding only,"
         " and a sentence without padding gets no key at all. True marks the"
         " positions a query may attend to: the real ones."),
        (lambda: attention(
             x, memory, memory, src_valid_lens, mask=causal_mask(num_queries, num_kv)
         ),
         _CAUSAL_SOURCE),
        (lambda: attention(
             x, memory, memory, src_valid_lens,
             mask=torch.ones(num_queries, num_kv, dtype=torch.bool).tril(),
         ),
         _CAUSAL_SOURCE),
    ]
    variants = []
    for call, message in calls:
        try:
            variants.append((call(), message))
        except (ValueError, RuntimeError):  # e.g. a causal mask with Lk < Lq
            continue
    return variants


def _cross_setup(case, seed: int):
    batch_size, num_queries, num_kv, width, num_heads, lens = case
    with torch.random.fork_rng(devices=[]):  # the reader's random state stays as it was
        torch.manual_seed(seed)
        attention = MultiHeadAttention(width, num_heads).double().eval()
        x = torch.randn(batch_size, num_queries, width, dtype=torch.float64)
        memory = torch.randn(batch_size, num_kv, width, dtype=torch.float64)
    return attention, x, memory, torch.tensor(lens)


_CAUSAL_SOURCE = (
    "causal mask in the cross-attention: the whole source sentence is known before the"
    " first target word, so every query may read every real position of the memory."
    " Only the target's self-attention is causal."
)


@checker
def check_cross_attention(fn) -> Feedback:
    """Check ``fn(attention, x, memory, src_valid_lens) -> output``: the decoder's
    cross-attention call, ``attention(x, memory, memory, src_valid_lens)``. Names keys
    and values from the target, keys over [memory; target], the padding ignored or
    inverted, a causal mask on the source, and queries from the memory.

    Shapes:
        fn: (MultiHeadAttention, x (B, Lq, D), memory (B, Lk, D), src_valid_lens (B,))
            -> (B, Lq, D)

    Taught in ``chapters/05_transformer/04_bug_hunt.ipynb``.
    """
    def where(attention, x, memory, lens):
        return "For " + sizes(B=x.shape[0], Lq=x.shape[1], Lk=memory.shape[1],
                              D=x.shape[2], H=attention.num_heads) + (
            f", src_valid_lens={lens.tolist()}"
        )

    def explain(got, expected, attention, x, memory, lens):
        if got.shape == memory.shape:
            return (
                f"your output has one row per memory position, (B, Lk, D) ="
                f" {tuple(got.shape)}: the queries come from the memory. Queries and"
                " keys swapped: the target asks (queries), the memory answers (keys and"
                " values)."
            )
        if got.shape == expected.shape:
            return (
                "your output differs from attention(x, memory, memory, src_valid_lens)"
                f" by up to {(got.double() - expected).abs().max():.3f}."
            )
        return None

    # run without gradients, so that any answer form works, NumPy included
    answer = torch.no_grad()(fn) if callable(fn) else fn
    return diagnose(
        answer, [_cross_setup(case, seed) for seed, case in enumerate(_CROSS_CASES)],
        lambda attention, x, memory, lens: attention(x, memory, memory, lens),
        _cross_variants, what="output (B, Lq, D)", where=where, hint=_CROSS_HINTS,
        explain=explain,
        correct="Correct: attention(x, memory, memory, src_valid_lens). The target"
        " asks, the memory answers, and the source's padding gets zero weight.",
    )


# --- 3. the attention step: split, scale, masked softmax, merge ---------------------

# (B, Lq, Lk, D, H, mask): self-attention with the causal mask; cross-attention with
# a padding mask (B, 1, 1, Lk) whose lengths are 6, 2 and 4
_STEP_CASES = ((2, 5, 5, 12, 3, "causal"),
               (3, 4, 6, 10, 2, "padding"))

# (step, way) -> what that way of doing the step gets wrong
_STEP_MISTAKES = {
    ("split", "view"): (
        "view without transpose: you split the heads with .view(B, H, L, Dh) (or"
        " reshape). The shape is right, but 'head' h then holds whole feature vectors"
        " of a few tokens cut into pieces, not features h·Dh to (h+1)·Dh of every"
        " token. Reshape to (B, L, H, Dh), then .transpose(1, 2)."
    ),
    ("scale", "none"): (
        "no scale: divide each head's scores by √Dh before the softmax. Without it"
        " the scores' spread grows like √Dh (for entries of variance 1), and with"
        " large heads the softmax saturates."
    ),
    ("scale", "D"): (
        "scale √D instead of √Dh: each head's dot product adds only Dh terms, so"
        " divide by √Dh, the size of one head."
    ),
    ("softmax", "queries"): (
        "softmax over the queries (dim=-2, or dim=2 copied from three-dimensional"
        " code): each query's weights must sum to 1 over the keys, dim=-1. Over the"
        " queries a position's weights also depend on the later queries."
    ),
    ("mask", "ignored"): (
        "mask ignored: fill the scores where allowed is False with a very negative"
        " number (masked_fill(~allowed, ...)) before the softmax."
    ),
    ("mask", "inverted"): (
        "mask inverted: you hid the positions where allowed is True. True means 'may"
        " attend' (as in F.scaled_dot_product_attention): fill the scores where the"
        " mask is *False*, masked_fill(~allowed, ...)."
    ),
    ("merge", "view"): (
        "merge without transpose: you reshaped the heads (B, H, Lq, Dh) straight to"
        " (B, Lq, D), so row i holds numbers from several positions of one head."
        " Transpose to (B, Lq, H, Dh) first, then reshape."
    ),
}
_STEP_WAYS = {
    "split": ("right", "view"),
    "scale": ("right", "none", "D"),
    "softmax": ("right", "queries"),
    "mask": ("right", "ignored", "inverted"),
    "merge": ("right", "view"),
}
# every combination of ways, one mistake first, then two, ...
_STEP_COMBOS = sorted(
    (combo for combo in itertools.product(*_STEP_WAYS.values())
     if any(way != "right" for way in combo)),
    key=lambda combo: sum(way != "right" for way in combo),
)

_STEP_HINTS = [
    ("3D tensor",
     "(torch.bmm takes three-dimensional tensors only; with the heads as an axis"
     " they have four: use @ or torch.matmul, which batch over every leading"
     " axis.)"),
    ("view size is not compatible",
     "(After a transpose the numbers are no longer in row-major order and .view"
     " cannot regroup them: use .reshape(...), or .contiguous().view(...).)"),
    ("must match the size",
     "(Check the shapes: as heads, q, k and v are (B, H, L, Dh) and the scores (B,"
     " H, Lq, Lk). Reshaped to (B, L, H, Dh) without .transpose(1, 2), q kᵀ would"
     " be (B, L, H, H): heads attending to heads.)"),
]


def _attend(q, k, v, num_heads, allowed, split, scale, softmax, mask, merge):
    """The attention step done one way per step (see ``_STEP_WAYS``), by the library;
    NaN where a query is left without a key (an inverted mask), whatever the fill."""
    width = q.shape[-1]
    scale = {"right": None, "none": 1.0, "D": 1 / math.sqrt(width)}[scale]
    mask = {"right": allowed, "ignored": None, "inverted": ~allowed}[mask]
    ways = dict(dim=-2 if softmax == "queries" else -1, mask=mask,
                split=split_view if split == "view" else split_heads,
                merge=merge_view if merge == "view" else merge_heads)
    out = heads_attention(q, k, v, num_heads, scale, **ways)
    # weights summing to 1 add 1 to the output when 1 is added to the values
    no_key = (heads_attention(q, k, v + 1, num_heads, scale, **ways) - out).abs() < 0.5
    return out.masked_fill(no_key, math.nan)


def _step_setup(case, seed: int):
    batch_size, num_queries, num_kv, width, num_heads, kind = case
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch_size, num_queries, width, generator=gen, dtype=torch.float64)
    k, v = torch.randn(2, batch_size, num_kv, width, generator=gen, dtype=torch.float64)
    if kind == "causal":
        allowed = causal_mask(num_queries, num_kv)  # (Lq, Lk)
    else:
        lens = torch.tensor([6, 2, 4])
        allowed = valid_lens_to_mask(lens, num_kv)[:, None, None, :]  # (B, 1, 1, Lk)
    return q, k, v, num_heads, allowed


def _step_mistake(combo):
    def mistake(q, k, v, num_heads, allowed):
        return _attend(q, k, v, num_heads, allowed, *combo)

    named = [_STEP_MISTAKES[step, way] for step, way in zip(_STEP_WAYS, combo)
             if way != "right"]
    listed = " ".join(f"({i}) {m}" for i, m in enumerate(named, 1))
    return mistake, named[0] if len(named) == 1 else (
        f"{len(named)} mistakes together. {listed}"
    )


def _explain_step(got, expected, q, k, v, num_heads, allowed):
    heads_shape = split_heads(q, num_heads).shape
    if got.shape == heads_shape:
        return (
            f"you returned the heads, (B, H, Lq, Dh) = {tuple(got.shape)}: merge them"
            f" back to (B, Lq, D) = {tuple(expected.shape)}, transpose(1, 2) then"
            " reshape."
        )
    if got.shape == expected.shape:
        return (
            "your output differs from multi-head attention by up to"
            f" {(got.double() - expected).abs().max():.3f}. Split into (B, H, L, Dh),"
            " scores q kᵀ / √Dh, masked softmax over the keys, weights @ v, merge."
        )
    return None


@checker
def check_attention_step(fn) -> Feedback:
    """Check ``fn(q, k, v, num_heads, allowed) -> context``: multi-head attention on
    projected inputs with a bool mask (True = may attend): split, masked softmax(q kᵀ /
    √Dh) over the keys, merge. Names every combination of heads split or merged without
    the transpose, no scale or √D, the softmax over the queries, the mask ignored or
    inverted; hints at ``torch.bmm`` on 4-D, ``.view`` after a transpose, bad shapes.

    Shapes:
        fn: (q (B, Lq, D), k (B, Lk, D), v (B, Lk, D), int H, allowed broadcastable
            to (B, H, Lq, Lk)) -> (B, Lq, D)

    Taught in ``chapters/05_transformer/04_bug_hunt.ipynb``.
    """
    def where(q, k, v, num_heads, allowed):
        kind = "causal" if allowed.dim() == 2 else "padding"
        return "For " + sizes(B=q.shape[0], Lq=q.shape[1], Lk=k.shape[1], D=q.shape[2],
                              H=num_heads) + f" and a {kind} mask"

    return diagnose(
        fn, [_step_setup(case, seed) for seed, case in enumerate(_STEP_CASES)],
        lambda q, k, v, num_heads, allowed: heads_attention(q, k, v, num_heads,
                                                            mask=allowed),
        [_step_mistake(combo) for combo in _STEP_COMBOS],
        what="context (B, Lq, D)", where=where, hint=_STEP_HINTS,
        compare=close_where_defined, explain=_explain_step,
        correct="Correct: reshape and transpose into heads, q kᵀ / √Dh, the mask, a"
        " softmax over the keys, weights @ v, transpose and reshape back: what the"
        " fixed block does between W_q, W_k, W_v and W_o.",
    )

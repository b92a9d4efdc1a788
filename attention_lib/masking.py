"""Masks and the masked softmax: which keys a query may attend to.

One convention everywhere (the same as
``torch.nn.functional.scaled_dot_product_attention``): a boolean ``mask`` is **True
where a query may attend**. ``valid_lens`` is the compact way to describe padding: key
positions ``>= valid_len`` are padding.

Taught in ``chapters/02_attention/02_masked_softmax.ipynb``; chapter 1 uses
:func:`valid_lens_to_mask` for padded sequences.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from ._checks import (
    check_float,
    check_int,
    check_lengths,
    check_mask,
    checked_by,
    tracing,
)

__all__ = ["valid_lens_to_mask", "causal_mask", "masked_softmax"]


def valid_lens_to_mask(valid_lens: Tensor, num_kv: int) -> Tensor:
    """Turn lengths into a boolean mask that is True at positions ``< valid_len``.

    Shapes:
        valid_lens: (B,) or (B, Lq), integer, each in ``[0, num_kv]``
        returns:    (B, Lk) or (B, Lq, Lk), bool, with Lk = ``num_kv``

    Taught in ``chapters/02_attention/02_masked_softmax.ipynb``.
    """
    check_lengths("valid_lens", valid_lens, check_int("num_kv", num_kv, 0))
    return lengths_mask(valid_lens, num_kv)


def causal_mask(num_queries: int, num_kv: int | None = None, device=None) -> Tensor:
    """The mask of a decoder's self-attention: True where a query may attend.

    The queries are the last ``num_queries`` of ``num_kv`` positions (default: as many
    as the queries; more when earlier positions are cached), and query i, at position
    ``num_kv - num_queries + i``, sees every position up to its own.

    Shapes:
        returns: (Lq, Lk), bool, with Lq = ``num_queries`` and Lk = ``num_kv``

    Taught in ``chapters/04_self_attention/02_multihead_attention.ipynb``.
    """
    num_kv = num_queries if num_kv is None else num_kv
    if not tracing() and num_kv < num_queries:
        raise ValueError(
            f"num_kv ({num_kv}) must be at least num_queries ({num_queries}): every"
            " query sees its own position"
        )
    query_positions = torch.arange(num_queries, device=device) + (num_kv - num_queries)
    key_positions = torch.arange(num_kv, device=device)
    return key_positions <= query_positions.unsqueeze(-1)  # (Lq, Lk)


def lengths_mask(valid_lens: Tensor, num_kv: int) -> Tensor:
    """True at key positions ``< valid_len`` (unchecked: for code inside the library).

    Shapes:
        valid_lens: (B,) or (B, Lq); returns: (B, Lk) or (B, Lq, Lk), bool
    """
    positions = torch.arange(num_kv, device=valid_lens.device)  # (Lk,)
    return positions < valid_lens.unsqueeze(-1)  # (B, Lk) or (B, Lq, Lk)


def allowed_keys(
    scores_shape: tuple, valid_lens: Tensor | None, mask: Tensor | None
) -> Tensor | None:
    """Both ways of saying "may attend" as one boolean mask that broadcasts to scores
    of shape (B, ..., Lq, Lk), or None (unchecked: the boundary checked both).

    ``valid_lens`` count keys per example (B,) or per query (B, Lq); the axes between
    B and Lq (heads, say) share them.
    """
    allowed = None
    if valid_lens is not None:
        allowed = lengths_mask(valid_lens, scores_shape[-1])  # (B, Lk) or (B, Lq, Lk)
        if allowed.dim() == 2:
            allowed = allowed.unsqueeze(-2)  # (B, 1, Lk)
        allowed = allowed.reshape(
            allowed.shape[:1] + (1,) * (len(scores_shape) - 3) + allowed.shape[1:]
        )  # (B, 1, ..., Lq or 1, Lk)
    if mask is not None:
        allowed = mask if allowed is None else allowed & mask
    return allowed


def check_masks(scores_shape: tuple, valid_lens, mask) -> None:
    """The boundary's check of ``valid_lens`` and ``mask`` against scores of shape
    (B, ..., Lq, Lk)."""
    if valid_lens is not None:
        check_lengths("valid_lens", valid_lens, scores_shape[-1], scores_shape[0],
                      scores_shape[-2])
    if mask is not None:
        check_mask(mask, scores_shape)


def softmax_lse(
    attn_scores: Tensor, allowed: Tensor | None = None, *, overwrite: bool = False
) -> tuple[Tensor, Tensor]:
    """The masked softmax and each row's log-sum-exp, unchecked: the one place where a
    mask meets scores.

    A key a query may not attend to gets the score −∞, so its weight is exactly 0. The
    row's maximum is subtracted before ``exp`` (nothing overflows); a row with no
    finite score left has weights 0 and log-sum-exp −∞, never NaN. 16-bit scores are
    exponentiated and summed in float32, as ``torch.softmax`` does. ``overwrite=True``
    lets it reuse the scores' memory when autograd does not need them.

    Shapes:
        attn_scores: (..., Lq, Lk); allowed: bool, broadcastable to it, or None
        returns: weights (..., Lq, Lk), scores' dtype; lse (..., Lq, 1), float32 or
            float64
    """
    scores = attn_scores if attn_scores.dtype == torch.float64 else attn_scores.float()
    recorded = torch.is_grad_enabled() and scores.requires_grad  # autograd needs them
    in_place = (overwrite or scores is not attn_scores) and not recorded
    if allowed is not None and in_place:
        scores.masked_fill_(~allowed, -math.inf)
    elif allowed is not None:
        scores, in_place = torch.where(allowed, scores, -math.inf), not recorded
    if scores.shape[-1]:
        top = scores.detach().amax(dim=-1, keepdim=True)  # (..., Lq, 1)
        top = top.masked_fill(top == -math.inf, 0.0)  # a row with nothing to attend to
    else:  # no keys at all (Lk = 0): empty rows, lse -inf
        top = scores.new_zeros(scores.shape[:-1] + (1,))  # (..., Lq, 1)
    if in_place:
        exp = scores.sub_(top).exp_()  # one (Lq, Lk) buffer, not three
    else:
        exp = torch.exp(scores - top)  # (..., Lq, Lk): 0 where masked
    total = exp.sum(dim=-1, keepdim=True)  # (..., Lq, 1)
    lse = top + total.log()  # (..., Lq, 1)
    total = total.clamp_min(torch.finfo(total.dtype).tiny)
    weights = exp / total if recorded else exp.div_(total)  # (..., Lq, Lk)
    return weights.to(attn_scores.dtype), lse


def _check_softmax(attn_scores, valid_lens=None, mask=None) -> None:
    check_float("attn_scores", attn_scores, "(..., Lq, Lk)", 2, 64)
    check_masks(attn_scores.shape, valid_lens, mask)


@checked_by(_check_softmax)
def masked_softmax(
    attn_scores: Tensor, valid_lens: Tensor | None = None, mask: Tensor | None = None
) -> Tensor:
    """Softmax over the last axis (the keys), giving zero weight to keys a query may not
    attend to.

    Masked scores become −∞ and the row's maximum is subtracted first, so float16 and
    bfloat16 work and a query with no key to attend to gets all-zero weights, never
    NaN.

    Shapes:
        attn_scores: (B, Lq, Lk) or (B, ..., Lq, Lk)
        valid_lens:  (B,) or (B, Lq), optional
        mask:        bool, broadcastable to ``attn_scores``, True = may attend; optional
        returns:     same shape as ``attn_scores``; each row sums to 1 over allowed keys
            (or is all 0)

    Taught in ``chapters/02_attention/02_masked_softmax.ipynb``.
    """
    allowed = allowed_keys(attn_scores.shape, valid_lens, mask)  # bool or None
    return softmax_lse(attn_scores, allowed)[0]  # (..., Lq, Lk)

"""Masks and the masked softmax: which keys a query may attend to.

One convention everywhere (the same as
``torch.nn.functional.scaled_dot_product_attention``): a boolean ``mask`` is **True
where a query may attend**. ``valid_lens`` is the compact way to describe padding: key
positions ``>= valid_len`` are padding.

Taught in ``chapters/02_attention/02_masked_softmax.ipynb``; chapter 1 uses
:func:`valid_lens_to_mask` for padded sequences.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ._checks import check_int, describe

__all__ = ["valid_lens_to_mask", "causal_mask", "masked_softmax"]


def valid_lens_to_mask(valid_lens: Tensor, num_kv: int) -> Tensor:
    """Turn lengths into a boolean mask that is True at positions ``< valid_len``.

    Shapes:
        valid_lens: (B,) or (B, Lq), integer, each in ``[0, num_kv]``
        returns:    (B, Lk) or (B, Lq, Lk), bool, with Lk = ``num_kv``

    Taught in ``chapters/02_attention/02_masked_softmax.ipynb``.
    """
    _check_valid_lens(valid_lens, check_int("num_kv", num_kv, 0))
    return _lengths_to_mask(valid_lens, num_kv)


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
    if num_kv < num_queries:
        raise ValueError(
            f"num_kv ({num_kv}) must be at least num_queries ({num_queries}): every"
            " query sees its own position"
        )
    offset = num_kv - num_queries  # positions already in the cache
    ones = torch.ones(num_queries, num_kv, dtype=torch.bool, device=device)
    return ones.tril(diagonal=offset)  # (Lq, Lk)


def _lengths_to_mask(valid_lens: Tensor, num_kv: int) -> Tensor:
    positions = torch.arange(num_kv, device=valid_lens.device)  # (Lk,)
    return positions < valid_lens.unsqueeze(-1)  # (B, Lk) or (B, Lq, Lk)


def _check_valid_lens(
    valid_lens,
    num_kv: int,
    batch_size: int | None = None,
    num_queries: int | None = None,
    name: str = "valid_lens",
    per_query: bool = True,
) -> None:
    """The one check of ``valid_lens``: an integer tensor of shape (B,) (or (B, Lq) when
    ``per_query``), each length in ``[0, num_kv]``. ``batch_size``/``num_queries``, when
    given, must match.

    Lists and NumPy arrays are refused with a message saying how to convert them:
    lengths live on the model's device next to the scores, and a silent conversion would
    hide which device that is.
    """
    known = [f"B={batch_size}"] * (batch_size is not None) + [f"Lq={num_queries}"] * (
        per_query and num_queries is not None)
    expected = ("(B,) or (B, Lq)" if per_query else "(B,)") + (
        f" with {', '.join(known)}" if known else ""
    )
    if not isinstance(valid_lens, Tensor):
        hint = (
            " (convert it with torch.as_tensor(...))"
            if isinstance(valid_lens, (list, tuple, np.ndarray))
            else ""
        )
        raise TypeError(
            f"{name} must be a torch.Tensor of integer lengths with shape {expected}, "
            f"got {describe(valid_lens)}{hint}"
        )
    if (
        valid_lens.dtype.is_floating_point
        or valid_lens.dtype == torch.bool
        or valid_lens.is_complex()
    ):
        raise TypeError(f"{name} must hold integers, got dtype {valid_lens.dtype}")
    if valid_lens.dim() not in ((1, 2) if per_query else (1,)) or (
            batch_size is not None and valid_lens.shape[0] != batch_size):
        raise ValueError(
            f"{name} must have shape {expected}, got {tuple(valid_lens.shape)}"
        )
    if (
        num_queries is not None
        and valid_lens.dim() == 2
        and valid_lens.shape[1] != num_queries
    ):
        raise ValueError(
            f"{name} of shape (B, Lq) must have Lq={num_queries}, got"
            f" {tuple(valid_lens.shape)}"
        )
    if valid_lens.numel() and (
        int(valid_lens.min()) < 0 or int(valid_lens.max()) > num_kv
    ):
        raise ValueError(
            f"{name} must lie in [0, {num_kv}] (the number of keys), "
            f"got values from {int(valid_lens.min())} to {int(valid_lens.max())}"
        )


def _check_mask(mask, scores_shape: torch.Size) -> None:
    """The one check of a boolean ``mask``: a bool tensor that broadcasts to the scores'
    shape, no larger."""
    if not isinstance(mask, Tensor):
        hint = (
            " (convert it with torch.as_tensor(...))"
            if isinstance(mask, (list, tuple, np.ndarray))
            else ""
        )
        raise TypeError(
            "mask must be a bool torch.Tensor (True = may attend) broadcastable to the"
            f" scores' shape {tuple(scores_shape)} (..., Lq, Lk), got"
            f" {describe(mask)}{hint}"
        )
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must be a bool tensor (True = may attend), got dtype {mask.dtype}"
        )
    try:
        broadcast = torch.broadcast_shapes(mask.shape, scores_shape)
        # a mask with extra dims would silently grow the output
        if broadcast != scores_shape:
            raise RuntimeError
    except RuntimeError:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape"
            f" {tuple(scores_shape)} (..., Lq, Lk)"
        ) from None


def _check_scores(attn_scores) -> None:
    if not isinstance(attn_scores, Tensor) or not attn_scores.dtype.is_floating_point:
        raise TypeError("attn_scores must be a floating-point torch.Tensor")
    if attn_scores.dim() < 2:
        raise ValueError(
            f"attn_scores must have shape (..., Lq, Lk), got {tuple(attn_scores.shape)}"
        )


def _combine_masks(
    attn_scores: Tensor, valid_lens: Tensor | None, mask: Tensor | None
) -> Tensor | None:
    """Both ways of saying 'may attend', as one boolean mask broadcastable to
    ``attn_scores``."""
    num_kv = attn_scores.shape[-1]
    combined = None
    if valid_lens is not None:
        _check_valid_lens(
            valid_lens, num_kv, attn_scores.shape[0], attn_scores.shape[-2]
        )
        lens_mask = _lengths_to_mask(valid_lens, num_kv)  # (B, Lk) or (B, Lq, Lk)
        if lens_mask.dim() == 2:
            lens_mask = lens_mask.unsqueeze(-2)  # (B, 1, Lk)
        # Extra leading dims of the scores (e.g. heads: (B, H, Lq, Lk)) sit between B
        # and Lq.
        while lens_mask.dim() < attn_scores.dim():
            lens_mask = lens_mask.unsqueeze(1)
        combined = lens_mask
    if mask is not None:
        _check_mask(mask, attn_scores.shape)
        combined = mask if combined is None else combined & mask
    return combined


def masked_softmax(
    attn_scores: Tensor, valid_lens: Tensor | None = None, mask: Tensor | None = None
) -> Tensor:
    """Softmax over the last axis (the keys), giving zero weight to keys a query may not
    attend to.

    Masked scores are filled with the most negative number of the scores' dtype (not a
    magic constant), so float16 and bfloat16 work. A query with no key to attend to gets
    all-zero weights, never NaN.

    Shapes:
        attn_scores: (B, Lq, Lk) or (B, ..., Lq, Lk)
        valid_lens:  (B,) or (B, Lq), optional
        mask:        bool, broadcastable to ``attn_scores``, True = may attend; optional
        returns:     same shape as ``attn_scores``; each row sums to 1 over allowed keys
            (or is all 0)

    Taught in ``chapters/02_attention/02_masked_softmax.ipynb``.
    """
    _check_scores(attn_scores)
    allowed = _combine_masks(attn_scores, valid_lens, mask)
    if allowed is None:
        return torch.softmax(attn_scores, dim=-1)
    lowest = torch.finfo(attn_scores.dtype).min
    # torch.where, not masked_fill: same result, several times faster on the CPU with a
    # broadcast mask.
    filled = torch.where(allowed, attn_scores, lowest)  # (..., Lq, Lk)
    attn_weights = torch.softmax(filled, dim=-1)  # (..., Lq, Lk)
    # In a row with an allowed key, exp(lowest - max) underflows to exactly 0 at every
    # masked key. A fully masked row came out uniform: zero it.
    return _zero_rows_without_keys(attn_weights, allowed)


def _zero_rows_without_keys(rows: Tensor, allowed: Tensor) -> Tensor:
    """The library's rule for a query with no key to attend to: its row is zeros, never
    NaN.

    ``rows`` holds one row per query (weights (..., Lq, Lk) or outputs (..., Lq, Dv));
    ``allowed`` is the boolean mask (..., Lq or 1, Lk). On the CPU the pass is skipped
    when every row has a key (elsewhere that check would cost a host-device sync, so the
    pass always runs).
    """
    row_has_key = allowed.any(dim=-1, keepdim=True)  # (..., Lq or 1, 1)
    if rows.device.type != "cpu" or not bool(row_has_key.all()):
        rows = torch.where(row_has_key, rows, 0.0)
    return rows

"""Attention as weighted averaging: scoring functions and the two classic attention
layers.

Chapter 1's decoder saw the source through one context vector. Attention forms, for
every query, a weighted average of the values, with weights from how well the query
matches each key:

    attn_scores  = a(q_i, k_j)                                   (B, Lq, Lk)
    attn_weights = masked_softmax(attn_scores, valid_lens, mask)  (B, Lq, Lk)  rows sum
        to 1
    output       = attn_weights @ values                          (B, Lq, Dv)

In an RNN encoder–decoder the query is the decoder's state s_{t'-1} and the keys and
values are the encoder's states h_t, so ``output`` is the context c_t' = Σ_t α_t't h_t.

Scoring functions ``a``:

* additive (Bahdanau et al., 2014): ``w_vᵀ tanh(W_q q + W_k k)``, for queries and keys
  of any sizes;
* dot product (Luong et al., 2015): ``qᵀk``;
* scaled dot product (Vaswani et al., 2017): ``qᵀk / √D``, which keeps the scores'
  variance at 1
  whatever the size D, so the softmax does not saturate.

Every layer has the signature ``forward(queries, keys, values, valid_lens=None,
mask=None)`` and keeps its last ``attention_weights`` for heat maps. A boolean ``mask``
is True where a query may attend; ``valid_lens`` describes padding (see
:mod:`attention_lib.masking`).

Taught in ``chapters/02_attention/`` (``01_queries_keys_values``,
``03_scoring_functions``, ``04_vectorised_attention``).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import (
    check_float,
    check_like,
    check_qkv,
    check_scale,
    check_sizes,
    checked_by,
    tracing,
)
from .masking import allowed_keys, check_masks, softmax_lse

__all__ = [
    "softmax_attention",
    "dot_product_scores",
    "additive_scores",
    "attention_pooling",
    "dot_product_attention",
    "attention_loop",
    "DotProductAttention",
    "AdditiveAttention",
]


# --- the kernel: unchecked, mask in ---------------------------------------------------

def softmax_attention(
    queries: Tensor,
    keys: Tensor,
    values: Tensor,
    mask: Tensor | None = None,
    scale: float | None = None,
    dropout_p: float = 0.0,
    *,
    lse: bool = False,
) -> tuple[Tensor, Tensor]:
    """softmax(Q Kᵀ · scale) V, written out: the library's one attention kernel.

    Unchecked (the public functions check their arguments once and call it). ``mask``
    is True where a query may attend; ``scale=None`` means 1/√D. Returns the output and
    the weights (before dropout), or with ``lse=True`` the output and each query's
    log-sum-exp of scores, which lets partial results over disjoint keys merge
    (:func:`~attention_lib.efficient.merge_partials`). A query with no key to attend
    to gets weights 0, output 0 and log-sum-exp −∞.

    Shapes:
        queries: (..., Lq, D);  keys: (..., Lk, D);  values: (..., Lk, Dv)
        mask:    bool, broadcastable to (..., Lq, Lk), optional
        returns: output (..., Lq, Dv), and weights (..., Lq, Lk) or lse (..., Lq, 1)

    Taught in ``chapters/02_attention/04_vectorised_attention.ipynb``.
    """
    scale = 1 / math.sqrt(queries.shape[-1]) if scale is None else scale
    attn_scores = (queries * scale) @ keys.transpose(-2, -1)  # (..., Lq, Lk)
    output, attn_weights, log_sum_exp = _pool(attn_scores, values, mask, dropout_p,
                                              overwrite=True)
    return output, (log_sum_exp if lse else attn_weights)


def _pool(attn_scores, values, mask, dropout_p, overwrite=False):
    """Masked softmax, dropout on the weights used, weighted average (unchecked).
    Returns output (..., Lq, Dv), weights (..., Lq, Lk) before dropout, lse."""
    attn_weights, log_sum_exp = softmax_lse(attn_scores, mask, overwrite=overwrite)
    used = F.dropout(attn_weights, dropout_p) if dropout_p > 0 else attn_weights
    return used @ values, attn_weights, log_sum_exp  # (..., Lq, Dv)


def fused_attention(
    queries: Tensor,
    keys: Tensor,
    values: Tensor,
    mask: Tensor | None = None,
    scale: float | None = None,
    dropout_p: float = 0.0,
) -> Tensor:
    """The fast path: PyTorch's fused ``scaled_dot_product_attention``, which never
    builds the (Lq, Lk) weights in full, with the library's rule for a query with no
    key to attend to (output 0, never NaN). Unchecked, like :func:`softmax_attention`.

    Shapes:
        as :func:`softmax_attention`; returns: output (..., Lq, Dv)
    """
    if mask is not None and mask.dim() < 2:
        mask = mask.unsqueeze(0)  # (Lk,) -> (1, Lk): SDPA wants two dimensions
    output = F.scaled_dot_product_attention(
        queries, keys, values, attn_mask=mask, dropout_p=dropout_p, scale=scale
    )  # (..., Lq, Dv)
    if mask is None:
        return output
    row_has_key = mask.any(dim=-1, keepdim=True)  # (..., Lq or 1, 1)
    # On a CPU, asking whether every row has a key costs nothing, and skips a pass.
    if tracing() or output.device.type != "cpu" or not bool(row_has_key.all()):
        output = torch.where(row_has_key, output, 0.0)
    return output


# --- the mathematics, checked ---------------------------------------------------------

def _check_scores(queries, keys, scale=None) -> None:
    check_qkv(queries, keys, keys)
    check_scale(scale)


@checked_by(_check_scores)
def dot_product_scores(
    queries: Tensor, keys: Tensor, scale: float | None = None
) -> Tensor:
    """Dot-product scores ``scale · q_i · k_j`` for every query and key.

    ``scale=None`` means ``1/√D``, the scaled dot product of Vaswani et al. (2017) and
    the default of ``torch.nn.functional.scaled_dot_product_attention``; ``scale=1.0``
    is Luong et al.'s (2015) plain dot product.

    Shapes:
        queries: (B, Lq, D) or (B, ..., Lq, D)
        keys:    (B, Lk, D) or (B, ..., Lk, D)
        returns: (B, Lq, Lk) or (B, ..., Lq, Lk)

    Taught in ``chapters/02_attention/03_scoring_functions.ipynb``.
    """
    if scale is None:
        scale = 1 / math.sqrt(queries.shape[-1])
    # Scale the queries (Lq·D numbers), not the scores (Lq·Lk numbers): same result,
    # less work.
    return (queries * scale) @ keys.transpose(-2, -1)  # (B, Lq, Lk)


def additive_scores(
    projected_queries: Tensor, projected_keys: Tensor, w_v: Tensor
) -> Tensor:
    """Additive scores ``w_vᵀ tanh(W_q q_i + W_k k_j)`` from queries and keys already
    projected.

    Bahdanau et al. (2014). The projections ``W_q q`` and ``W_k k`` are computed by the
    caller (:class:`AdditiveAttention`), so a decoder can project the keys once per
    sentence.

    Shapes:
        projected_queries: (B, Lq, Da)   W_q q for every query
        projected_keys:    (B, Lk, Da)   W_k k for every key
        w_v:               (Da,) or (1, Da)
        returns:           (B, Lq, Lk)

    Taught in ``chapters/02_attention/03_scoring_functions.ipynb``.
    """
    check_qkv(projected_queries, projected_keys, projected_keys)
    size = projected_queries.shape[-1]
    if not isinstance(w_v, Tensor) or w_v.reshape(-1).shape != (size,) or w_v.dim() > 2:
        raise ValueError(
            f"w_v must have shape ({size},) or (1, {size}) (Da, the projected size),"
            f" got {_shape_of(w_v)}"
        )
    return _additive_scores(projected_queries, projected_keys, w_v)


def _shape_of(value) -> str:
    if isinstance(value, Tensor):
        return str(tuple(value.shape))
    return type(value).__name__


def _additive_scores(projected_queries, projected_keys, w_v) -> Tensor:
    # Every query with every key: broadcast (B, Lq, 1, Da) + (B, 1, Lk, Da).
    features = torch.tanh(
        projected_queries.unsqueeze(-2) + projected_keys.unsqueeze(-3)
    )  # (B, Lq, Lk, Da)
    return features @ w_v.reshape(-1)  # (B, Lq, Lk)


def _check_pooling(attn_scores, values, valid_lens=None, mask=None, dropout_p=0.0):
    check_float("attn_scores", attn_scores, "(B, ..., Lq, Lk)", 2, 64)
    shape = tuple(attn_scores.shape)
    check_float("values", values, f"{shape[:-2] + (shape[-1],)} + (Dv,)", 2, 64)
    if values.shape[:-2] != attn_scores.shape[:-2] or values.shape[-2] != shape[-1]:
        raise ValueError(
            f"values must have shape {shape[:-2] + (shape[-1],)} + (Dv,) to match"
            f" scores of shape {shape} (B, Lq, Lk), got {tuple(values.shape)}"
        )
    check_masks(shape, valid_lens, mask)


@checked_by(_check_pooling)
def attention_pooling(
    attn_scores: Tensor,
    values: Tensor,
    valid_lens: Tensor | None = None,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[Tensor, Tensor]:
    """Turn scores into weights (masked softmax) and take the weighted average of the
    values.

    Dropout, if any, is applied to the weights used for the average; the returned
    weights are before dropout.

    Shapes:
        attn_scores: (B, Lq, Lk) or (B, ..., Lq, Lk)
        values:      (B, Lk, Dv) or (B, ..., Lk, Dv)
        valid_lens:  (B,) or (B, Lq), optional; mask: bool, broadcastable to the scores,
            optional
        returns:     output (B, Lq, Dv), attn_weights (B, Lq, Lk)

    Taught in ``chapters/02_attention/01_queries_keys_values.ipynb``.
    """
    allowed = allowed_keys(attn_scores.shape, valid_lens, mask)  # bool or None
    output, attn_weights, _ = _pool(attn_scores, values, allowed, dropout_p)
    return output, attn_weights  # (B, Lq, Dv), (B, Lq, Lk)


def dot_product_attention(
    queries: Tensor,
    keys: Tensor,
    values: Tensor,
    valid_lens: Tensor | None = None,
    mask: Tensor | None = None,
    scale: float | None = None,
    dropout_p: float = 0.0,
    need_weights: bool = True,
) -> tuple[Tensor, Tensor | None]:
    """softmax(Q Kᵀ · scale) V for a whole batch at once, with padding and masks.

    ``scale=None`` means ``1/√D`` (Vaswani et al., 2017); ``scale=1.0`` is the plain dot
    product. Two paths, one meaning:

    * ``need_weights=True`` (default): the written-out kernel,
      :func:`softmax_attention`; returns the weights for heat maps.
    * ``need_weights=False``: the fast path, PyTorch's fused
      ``torch.nn.functional.scaled_dot_product_attention`` (it never builds the
      (Lq, Lk) weight matrix in full); returns ``None`` for the weights. Queries with
      no key to attend to get zeros, as on the written-out path. The tests check that
      both paths agree.

    Shapes:
        queries:    (B, Lq, D) or (B, ..., Lq, D)
        keys:       (B, Lk, D) or (B, ..., Lk, D)
        values:     (B, Lk, Dv) or (B, ..., Lk, Dv)
        valid_lens: (B,) or (B, Lq), integer in [0, Lk], optional
        mask:       bool, broadcastable to (B, Lq, Lk), True = may attend, optional
        returns:    output (B, Lq, Dv), attn_weights (B, Lq, Lk) or None

    Taught in ``chapters/02_attention/03_scoring_functions.ipynb`` and
    ``chapters/02_attention/04_vectorised_attention.ipynb``.
    """
    check_qkv(queries, keys, values)
    scale = check_scale(scale)
    scores_shape = tuple(queries.shape[:-1]) + (keys.shape[-2],)  # (B, ..., Lq, Lk)
    check_masks(scores_shape, valid_lens, mask)
    allowed = allowed_keys(scores_shape, valid_lens, mask)  # bool or None
    if need_weights:
        return softmax_attention(queries, keys, values, allowed, scale, dropout_p)
    return fused_attention(queries, keys, values, allowed, scale, dropout_p), None


def attention_loop(
    queries: Tensor,
    keys: Tensor,
    values: Tensor,
    valid_lens: Tensor | None = None,
    mask: Tensor | None = None,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """Scaled dot-product attention one query at a time, the way a decoder meets them.

    A reference for the vectorised :func:`dot_product_attention`, which it equals
    (the tests check): for each example ``b`` and query ``i``, score every key, softmax
    over the keys this query may see, and average the values. Slow on purpose: used by
    the benchmark and the chapter to show what stacking the queries into Q buys.

    Shapes:
        queries: (B, Lq, D); keys: (B, Lk, D); values: (B, Lk, Dv)
        valid_lens: (B,) or (B, Lq), optional; mask: bool, broadcastable to (B, Lq, Lk),
            optional
        returns: output (B, Lq, Dv), attn_weights (B, Lq, Lk)

    Taught in ``chapters/02_attention/04_vectorised_attention.ipynb``.
    """
    check_qkv(queries, keys, values, min_dim=3)
    if queries.dim() != 3:
        raise ValueError(
            "attention_loop takes queries of shape (B, Lq, D), got"
            f" {tuple(queries.shape)}"
        )
    scale = check_scale(scale)
    batch_size, num_queries, _ = queries.shape
    num_kv = keys.shape[1]
    check_masks((batch_size, num_queries, num_kv), valid_lens, mask)
    allowed = allowed_keys((batch_size, num_queries, num_kv), valid_lens, mask)
    if allowed is not None:
        allowed = allowed.expand(batch_size, num_queries, num_kv)  # (B, Lq, Lk)
    output = values.new_zeros(batch_size, num_queries, values.shape[-1])  # (B, Lq, Dv)
    attn_weights = queries.new_zeros(batch_size, num_queries, num_kv)  # (B, Lq, Lk)
    for b in range(batch_size):
        for i in range(num_queries):
            row_mask = None if allowed is None else allowed[b, i]  # (Lk,)
            out, weights = softmax_attention(queries[b, i][None], keys[b],
                                             values[b], row_mask, scale)
            # out (1, Dv), weights (1, Lk)
            output[b, i], attn_weights[b, i] = out[0], weights[0]
    return output, attn_weights


# --- the layers -----------------------------------------------------------------------

class DotProductAttention(nn.Module):
    """Dot-product attention (Luong et al., 2015), scaled by ``1/√D`` (Vaswani et al.,
    2017) by default.

    ``scale`` means what it means everywhere in the library: None (the default)
    divides the scores by √D, and a number multiplies them by that number (1.0: the
    plain dot product; in general 1/temperature). No parameters:
    queries and keys must already have one size D. ``need_weights=False`` (the
    default, for training) takes PyTorch's fused kernel and leaves ``attention_weights``
    at None; ``need_weights=True`` keeps the weights (detached, before dropout) in
    ``attention_weights`` for heat maps.

    Shapes:
        queries:    (B, Lq, D);  keys: (B, Lk, D);  values: (B, Lk, Dv)
        valid_lens: (B,) or (B, Lq), optional;  mask: bool, broadcastable to (B, Lq,
            Lk), optional
        returns:    (B, Lq, Dv)
        attention_weights: (B, Lq, Lk)

    Taught in ``chapters/02_attention/03_scoring_functions.ipynb``.
    """

    def __init__(self, dropout: float = 0.0, scale: float | None = None):
        super().__init__()
        self.scale = check_scale(scale)
        self.dropout = nn.Dropout(dropout)
        self.attention_weights: Tensor | None = None

    def forward(
        self,
        queries: Tensor,
        keys: Tensor,
        values: Tensor,
        valid_lens: Tensor | None = None,
        mask: Tensor | None = None,
        *,
        need_weights: bool = False,
    ) -> Tensor:
        dropout_p = self.dropout.p if self.training else 0.0
        output, weights = dot_product_attention(  # (B, Lq, Dv), (B, Lq, Lk) or None
            queries, keys, values, valid_lens, mask, self.scale, dropout_p, need_weights
        )
        self.attention_weights = None if weights is None else weights.detach()
        return output

    def extra_repr(self) -> str:
        return f"scale={self.scale}"


class AdditiveAttention(nn.Module):
    """Additive attention (Bahdanau et al., 2014): scores ``w_vᵀ tanh(W_q q + W_k k)``.

    Queries and keys may have different sizes; both are projected to
    ``attention_size`` (Da; *Dive into Deep Learning* calls it ``num_hiddens``, the
    name this library keeps for an RNN's state size Ds). The submodules are named as
    in *Dive into Deep Learning* (``W_k``, ``W_q``, ``w_v``), so weights copy one to
    one. A decoder that queries the same keys at every
    step can call :meth:`project_keys` once per sentence and pass the result as
    ``projected_keys``. With ``need_weights=True``, ``attention_weights`` keeps the
    weights (detached, before dropout) for heat maps; otherwise it is None (there is no
    fused kernel for additive scores: the switch only decides what is kept).

    Shapes:
        queries:    (B, Lq, query_size);  keys: (B, Lk, key_size);  values: (B, Lk, Dv)
        valid_lens: (B,) or (B, Lq), optional;  mask: bool, broadcastable to (B, Lq,
            Lk), optional
        projected_keys: (B, Lk, Da), optional, from :meth:`project_keys`
        returns:    (B, Lq, Dv)
        attention_weights: (B, Lq, Lk)

    Taught in ``chapters/02_attention/03_scoring_functions.ipynb``.
    """

    def __init__(
        self, key_size: int, query_size: int, attention_size: int, dropout: float = 0.0
    ):
        super().__init__()
        self.key_size, self.query_size = key_size, query_size
        self.attention_size = attention_size
        self.W_k = nn.Linear(key_size, attention_size, bias=False)
        self.W_q = nn.Linear(query_size, attention_size, bias=False)
        self.w_v = nn.Linear(attention_size, 1, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.attention_weights: Tensor | None = None

    def _check_inputs(self, queries, keys, values, projected_keys, valid_lens,
                      mask) -> None:
        check_qkv(queries, keys, values, same_size=False)
        check_sizes([("queries", queries, self.query_size, "query_size"),
                     ("keys", keys, self.key_size, "key_size")])
        check_like("queries", queries, self.W_q.weight, "the layer's parameters")
        expected = tuple(keys.shape[:-1]) + (self.attention_size,)
        if projected_keys is not None and (
            not isinstance(projected_keys, Tensor) or projected_keys.shape != expected
        ):
            raise ValueError(
                f"projected_keys must have shape {expected} (B, Lk, Da), as returned"
                f" by project_keys(keys); got {_shape_of(projected_keys)}"
            )
        check_masks(tuple(queries.shape[:-1]) + (keys.shape[-2],), valid_lens, mask)

    def project_keys(self, keys: Tensor) -> Tensor:
        """``W_k k`` for every key: compute once, pass to :meth:`forward` as
        ``projected_keys``.

        Shapes:
            keys:    (B, Lk, key_size)
            returns: (B, Lk, Da)
        """
        check_float("keys", keys, "(B, Lk, key_size)", 3, 64)
        check_sizes([("keys", keys, self.key_size, "key_size")])
        return self.W_k(keys)  # (B, Lk, Da)

    def forward(
        self,
        queries: Tensor,
        keys: Tensor,
        values: Tensor,
        valid_lens: Tensor | None = None,
        mask: Tensor | None = None,
        *,
        projected_keys: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor:
        self._check_inputs(queries, keys, values, projected_keys, valid_lens, mask)
        allowed = allowed_keys(tuple(queries.shape[:-1]) + (keys.shape[-2],),
                               valid_lens, mask)  # bool or None
        if projected_keys is None:
            projected_keys = self.W_k(keys)  # (B, Lk, Da)
        attn_scores = _additive_scores(
            self.W_q(queries), projected_keys, self.w_v.weight
        )  # (B, Lq, Lk)
        dropout_p = self.dropout.p if self.training else 0.0
        output, weights, _ = _pool(attn_scores, values, allowed, dropout_p)
        # output (B, Lq, Dv), weights (B, Lq, Lk)
        self.attention_weights = weights.detach() if need_weights else None
        return output

    def extra_repr(self) -> str:
        return (
            f"key_size={self.key_size}, query_size={self.query_size},"
            f" attention_size={self.attention_size}"
        )

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

from ._checks import describe
from .masking import _combine_masks, _zero_rows_without_keys, masked_softmax

__all__ = [
    "dot_product_scores",
    "additive_scores",
    "attention_pooling",
    "dot_product_attention",
    "attention_loop",
    "DotProductAttention",
    "AdditiveAttention",
]


# --- input checks: every bad shape, dtype or device gets a message naming what was
# expected ---------

def _shape(t: Tensor) -> tuple:
    return tuple(t.shape)


def _check_tensor(name: str, t) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {describe(t)}")
    if not t.dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")
    if t.dim() < 3:
        raise ValueError(
            f"{name} must have shape (B, L, size) (or (B, ..., L, size)), got"
            f" {_shape(t)}"
        )


def _check_same_kind(names_tensors) -> None:
    (first_name, first), *rest = names_tensors
    for name, t in rest:
        if t.dtype != first.dtype:
            raise TypeError(
                f"{name} has dtype {t.dtype} but {first_name} has dtype {first.dtype}; "
                f"convert them to one dtype (e.g. {name}.to({first_name}.dtype))"
            )
        if t.device != first.device:
            raise ValueError(
                f"{name} is on {t.device} but {first_name} is on {first.device}"
            )
        if t.dim() != first.dim() or t.shape[:-2] != first.shape[:-2]:
            raise ValueError(
                f"{name} must have the same leading (batch) dimensions as {first_name}:"
                f" expected {_shape(first)[:-2]} + (L, size), got {_shape(t)}"
            )


def _check_qk(queries: Tensor, keys: Tensor, same_size: bool = True) -> None:
    _check_tensor("queries", queries)
    _check_tensor("keys", keys)
    _check_same_kind([("queries", queries), ("keys", keys)])
    if same_size and queries.shape[-1] != keys.shape[-1]:
        raise ValueError(
            "dot-product scores need queries and keys of one size D: queries have"
            f" shape {_shape(queries)} (B, Lq, D), so keys must have shape (B, Lk,"
            f" {queries.shape[-1]}), got {_shape(keys)}"
        )


def _check_kv(keys: Tensor, values: Tensor) -> None:
    _check_tensor("values", values)
    _check_same_kind([("keys", keys), ("values", values)])
    if keys.shape[-2] != values.shape[-2]:
        raise ValueError(
            f"keys and values must come in pairs: keys have Lk={keys.shape[-2]} (shape"
            f" {_shape(keys)}), so values must have shape (B, {keys.shape[-2]}, Dv),"
            f" got {_shape(values)}"
        )


def _check_values_for_scores(attn_scores: Tensor, values: Tensor) -> None:
    if not isinstance(values, Tensor):
        raise TypeError(f"values must be a torch.Tensor, got {describe(values)}")
    if (
        isinstance(attn_scores, Tensor)
        and attn_scores.dim() >= 2
        and (
            values.dim() != attn_scores.dim()
            or values.shape[:-2] != attn_scores.shape[:-2]
            or values.shape[-2] != attn_scores.shape[-1]
        )
    ):
        raise ValueError(
            "values must have shape"
            f" {_shape(attn_scores)[:-2] + (attn_scores.shape[-1],)} + (Dv,) to match"
            f" scores of shape {_shape(attn_scores)} (B, Lq, Lk), got {_shape(values)}"
        )


def _resolve_scale(scale: float | None, size: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(size)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise TypeError(f"scale must be a number or None (meaning 1/√D), got {scale!r}")
    return float(scale)


# --- the mathematics ------------------------------------------------------------------

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
    _check_qk(queries, keys)
    scale = _resolve_scale(scale, queries.shape[-1])
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
    _check_qk(projected_queries, projected_keys)
    if (
        not isinstance(w_v, Tensor)
        or w_v.dim() not in (1, 2)
        or w_v.shape[-1] != projected_queries.shape[-1]
        or (w_v.dim() == 2 and w_v.shape[0] != 1)
    ):
        got = _shape(w_v) if isinstance(w_v, Tensor) else type(w_v).__name__
        raise ValueError(
            f"w_v must have shape ({projected_queries.shape[-1]},) or (1, "
            f"{projected_queries.shape[-1]}) (Da, the projected size), got {got}"
        )
    # Every query with every key: broadcast (B, Lq, 1, Da) + (B, 1, Lk, Da).
    features = torch.tanh(
        projected_queries.unsqueeze(-2) + projected_keys.unsqueeze(-3)
    )  # (B, Lq, Lk, Da)
    return features @ w_v.reshape(-1)  # (B, Lq, Lk)


def attention_pooling(
    attn_scores: Tensor,
    values: Tensor,
    valid_lens: Tensor | None = None,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[Tensor, Tensor]:
    """Turn scores into weights (masked softmax) and take the weighted average of the
    values.

    The one place where weights meet values; every layer of the library ends here.
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
    _check_values_for_scores(attn_scores, values)
    attn_weights = masked_softmax(attn_scores, valid_lens, mask)  # (B, Lq, Lk)
    used = F.dropout(attn_weights, dropout_p) if dropout_p > 0 else attn_weights
    return used @ values, attn_weights  # (B, Lq, Dv), (B, Lq, Lk)


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
    product.

    Two paths, one meaning:

    * ``need_weights=True`` (default): the explicit path, :func:`dot_product_scores`
      then :func:`attention_pooling`; returns the weights for heat maps.
    * ``need_weights=False``: the fast path, which hands the work to PyTorch's fused
      ``torch.nn.functional.scaled_dot_product_attention`` (it never builds the
      (Lq, Lk) weight matrix in full) and returns ``None`` for the weights.
      ``valid_lens`` become a boolean mask, and queries with no key to attend to are
      set to zero, as on the explicit path. The tests check that both paths agree.

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
    _check_qk(queries, keys)
    _check_kv(keys, values)
    if need_weights:
        attn_scores = dot_product_scores(queries, keys, scale)  # (B, Lq, Lk)
        return attention_pooling(attn_scores, values, valid_lens, mask, dropout_p)
    # Fast path. A zero-stride stand-in for the scores lets the masking code check
    # shapes for free.
    scores_shape = queries.shape[:-1] + (keys.shape[-2],)
    allowed = _combine_masks(
        queries.new_empty(()).expand(scores_shape), valid_lens, mask
    )  # bool or None
    if allowed is not None and allowed.dim() < 2:
        allowed = allowed.unsqueeze(0)  # (Lk,) -> (1, Lk): SDPA wants two dimensions
    output = F.scaled_dot_product_attention(
        queries,
        keys,
        values,
        attn_mask=allowed,
        dropout_p=dropout_p,
        scale=_resolve_scale(scale, queries.shape[-1]),
    )  # (B, Lq, Dv)
    # the library's rule for a query with no key: zeros, never NaN
    if allowed is not None:
        output = _zero_rows_without_keys(output, allowed)  # (B, Lq, Dv)
    return output, None


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
    _check_qk(queries, keys)
    _check_kv(keys, values)
    if queries.dim() != 3:
        raise ValueError(
            f"attention_loop takes queries of shape (B, Lq, D), got {_shape(queries)}"
        )
    batch_size, num_queries, size = queries.shape
    num_kv = keys.shape[1]
    scale = _resolve_scale(scale, size)
    allowed = _combine_masks(
        queries.new_empty(()).expand(batch_size, num_queries, num_kv), valid_lens, mask
    )
    if allowed is not None:
        allowed = allowed.expand(batch_size, num_queries, num_kv)  # (B, Lq, Lk)
    output = values.new_zeros(batch_size, num_queries, values.shape[-1])  # (B, Lq, Dv)
    attn_weights = queries.new_zeros(batch_size, num_queries, num_kv)  # (B, Lq, Lk)
    for b in range(batch_size):
        for i in range(num_queries):
            attn_scores = (keys[b] @ queries[b, i]) * scale  # (Lk,)
            row_mask = None if allowed is None else allowed[b, i][None]  # (1, Lk)
            weights = masked_softmax(attn_scores[None], mask=row_mask)[0]  # (Lk,)
            attn_weights[b, i] = weights
            output[b, i] = weights @ values[b]  # (Dv,)
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
        if scale is not None:
            _resolve_scale(scale, 1)  # a number or None, or a TypeError that says so
        self.scale = scale
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

    Queries and keys may have different sizes; both are projected to ``num_hiddens``
    (Da). The submodules are named as in *Dive into Deep Learning* (``W_k``, ``W_q``,
    ``w_v``), so weights copy one to one. A decoder that queries the same keys at every
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
        self, key_size: int, query_size: int, num_hiddens: int, dropout: float = 0.0
    ):
        super().__init__()
        self.key_size, self.query_size, self.num_hiddens = (
            key_size,
            query_size,
            num_hiddens,
        )
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.attention_weights: Tensor | None = None

    def _check_size(self, name: str, t: Tensor, size: int, size_name: str) -> None:
        _check_tensor(name, t)
        if t.shape[-1] != size:
            raise ValueError(
                f"{name} must have last dimension {size_name}={size}, got shape"
                f" {_shape(t)}"
            )

    def _check_inputs(self, queries, keys, values, projected_keys) -> None:
        self._check_size("queries", queries, self.query_size, "query_size")
        self._check_size("keys", keys, self.key_size, "key_size")
        _check_qk(queries, keys, same_size=False)
        _check_kv(keys, values)
        if queries.dtype != self.W_q.weight.dtype:
            raise TypeError(
                f"queries have dtype {queries.dtype} but the layer's parameters have"
                f" {self.W_q.weight.dtype}; call layer.to({queries.dtype}) or convert"
                " the inputs"
            )
        if projected_keys is not None and (
            not isinstance(projected_keys, Tensor)
            or projected_keys.shape != keys.shape[:-1] + (self.num_hiddens,)
        ):
            got = (
                _shape(projected_keys)
                if isinstance(projected_keys, Tensor)
                else type(projected_keys).__name__
            )
            raise ValueError(
                "projected_keys must have shape"
                f" {_shape(keys)[:-1] + (self.num_hiddens,)} (B, Lk, Da), as returned"
                f" by project_keys(keys); got {got}"
            )

    def project_keys(self, keys: Tensor) -> Tensor:
        """``W_k k`` for every key: compute once, pass to :meth:`forward` as
        ``projected_keys``.

        Shapes:
            keys:    (B, Lk, key_size)
            returns: (B, Lk, Da)
        """
        self._check_size("keys", keys, self.key_size, "key_size")
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
        self._check_inputs(queries, keys, values, projected_keys)
        if projected_keys is None:
            projected_keys = self.W_k(keys)  # (B, Lk, Da)
        attn_scores = additive_scores(
            self.W_q(queries), projected_keys, self.w_v.weight
        )  # (B, Lq, Lk)
        dropout_p = self.dropout.p if self.training else 0.0
        output, weights = attention_pooling(
            attn_scores, values, valid_lens, mask, dropout_p
        )  # (B, Lq, Dv), (B, Lq, Lk)
        self.attention_weights = weights.detach() if need_weights else None
        return output

    def extra_repr(self) -> str:
        return (
            f"key_size={self.key_size}, query_size={self.query_size},"
            f" num_hiddens={self.num_hiddens}"
        )

"""Multi-head attention: H scaled dot-product attentions side by side, each on its own
learned projection of the queries, keys and values.

One head looks at the tokens through one set of projections, so it can follow one
kind of relation at a time. Multi-head attention (Vaswani et al., 2017) splits the
model width D into H heads of Dh = D / H features, lets every head attend on its
own, and mixes the heads' results with one more projection:

    Q = queries W_q,  K = keys W_k,  V = values W_v              (B, L, D) each
    head_h = softmax(Q_h K_hᵀ / √Dh) V_h     for h = 1, ..., H    (B, Lq, Dh)
    output = concat(head_1, ..., head_H) W_o                     (B, Lq, D)

where Q_h holds features h·Dh to (h+1)·Dh of Q. Splitting the width costs nothing:
the H heads together do the work of one head of width D. Self-attention and
cross-attention are the same layer: self-attention passes one sequence as queries,
keys and values; cross-attention takes its keys and values from another sequence.

A boolean ``mask`` is True where a query may attend; ``valid_lens`` describes
padding (see :mod:`attention_lib.masking`).

Taught in ``chapters/04_self_attention/02_multihead_attention.ipynb``.
"""
from __future__ import annotations

from torch import Tensor, nn

from ._checks import check_int, check_probability, describe
from .attention import _check_kv, _check_qk, dot_product_attention
from .masking import _combine_masks

__all__ = ["split_heads", "merge_heads", "MultiHeadAttention"]


# --- input checks: every bad shape names what it got and what was expected ----------

def _check_split_heads(x, num_heads: int) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {describe(x)}")
    if x.dim() != 3:
        raise ValueError(f"x must have shape (B, L, D), got {tuple(x.shape)}")
    if x.shape[-1] % num_heads:
        raise ValueError(
            f"x has width D={x.shape[-1]} (shape {tuple(x.shape)}), which does not"
            f" split into num_heads={num_heads} heads of equal size"
        )


def _check_merge_heads(x) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {describe(x)}")
    if x.dim() != 4:
        raise ValueError(f"x must have shape (B, H, L, Dh), got {tuple(x.shape)}")


def _check_sizes(embed_dim, num_heads, dropout, kdim, vdim) -> tuple:
    embed_dim = check_int("embed_dim", embed_dim, 1)
    num_heads = check_int("num_heads", num_heads, 1)
    if embed_dim % num_heads:
        raise ValueError(
            f"embed_dim (D={embed_dim}) must be divisible by num_heads"
            f" (H={num_heads}): every head gets D / H features"
        )
    dropout = check_probability("dropout", dropout)
    kdim = embed_dim if kdim is None else check_int("kdim", kdim, 1)
    vdim = embed_dim if vdim is None else check_int("vdim", vdim, 1)
    return embed_dim, num_heads, dropout, kdim, vdim


def _check_inputs(layer: MultiHeadAttention, queries, keys, values) -> None:
    _check_qk(queries, keys, same_size=False)
    _check_kv(keys, values)
    if queries.dim() != 3:
        raise ValueError(
            "MultiHeadAttention takes queries of shape (B, Lq, D), got"
            f" {tuple(queries.shape)}"
        )
    for name, t, size, size_name in [
        ("queries", queries, layer.embed_dim, "embed_dim"),
        ("keys", keys, layer.kdim, "kdim"),
        ("values", values, layer.vdim, "vdim"),
    ]:
        if t.shape[-1] != size:
            raise ValueError(
                f"{name} must have last dimension {size_name}={size}, got shape"
                f" {tuple(t.shape)}"
            )
    if queries.dtype != layer.W_q.weight.dtype:
        raise TypeError(
            f"queries have dtype {queries.dtype} but the layer's parameters have"
            f" {layer.W_q.weight.dtype}; call layer.to({queries.dtype}) or convert"
            " the inputs"
        )


def _mask_for_heads(
    queries: Tensor,
    keys: Tensor,
    num_heads: int,
    valid_lens: Tensor | None,
    mask: Tensor | None,
) -> Tensor | None:
    """``valid_lens`` and ``mask`` as one boolean mask that broadcasts to the heads'
    scores (B, H, Lq, Lk), or None.

    A mask of up to three dimensions is read against (B, Lq, Lk) and shared by every
    head; a four-dimensional mask is read against (B, H, Lq, Lk), one per head.
    """
    batch_size, num_queries, num_kv = queries.shape[0], queries.shape[1], keys.shape[1]
    if isinstance(mask, Tensor) and mask.dim() > 4:
        raise ValueError(
            "mask must broadcast to (B, Lq, Lk) (one for all heads) or to (B, H, Lq,"
            f" Lk) = {(batch_size, num_heads, num_queries, num_kv)} (one per head),"
            f" got shape {tuple(mask.shape)}"
        )
    per_head = isinstance(mask, Tensor) and mask.dim() == 4
    scores_shape = (batch_size, num_heads) if per_head else (batch_size,)
    scores_shape += (num_queries, num_kv)
    # A zero-stride stand-in for the scores lets the masking code check the shapes.
    stand_in = queries.new_empty(()).expand(scores_shape)
    allowed = _combine_masks(stand_in, valid_lens, mask)  # bool or None
    if allowed is not None and not per_head:
        # (Lk,) or (Lq, Lk) -> (1, 1, Lk) or (1, Lq, Lk): the rank of (B, Lq, Lk)
        allowed = allowed.reshape((1,) * (3 - allowed.dim()) + allowed.shape)
        allowed = allowed.unsqueeze(1)  # (B, 1, Lq, Lk): the same for every head
    return allowed


# --- the mathematics -----------------------------------------------------------------

def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """Split the width D into H heads of Dh = D / H features: head h gets features
    h·Dh to (h+1)·Dh.

    The heads move next to the batch axis, so that every head is one more batch of
    attention for :func:`~attention_lib.attention.dot_product_attention`.

    Shapes:
        x:       (B, L, D)
        returns: (B, H, L, Dh), a view of ``x``

    Taught in ``chapters/04_self_attention/02_multihead_attention.ipynb``.
    """
    num_heads = check_int("num_heads", num_heads, 1)
    _check_split_heads(x, num_heads)
    batch_size, length, width = x.shape
    x = x.reshape(batch_size, length, num_heads, width // num_heads)  # (B, L, H, Dh)
    return x.transpose(1, 2)  # (B, H, L, Dh)


def merge_heads(x: Tensor) -> Tensor:
    """Concatenate the heads' features again: the inverse of :func:`split_heads`.

    Shapes:
        x:       (B, H, L, Dh)
        returns: (B, L, D) with D = H·Dh

    Taught in ``chapters/04_self_attention/02_multihead_attention.ipynb``.
    """
    _check_merge_heads(x)
    batch_size, num_heads, length, head_dim = x.shape
    x = x.transpose(1, 2)  # (B, L, H, Dh)
    return x.reshape(batch_size, length, num_heads * head_dim)  # (B, L, D)


# --- the layer -----------------------------------------------------------------------

class MultiHeadAttention(nn.Module):
    """Multi-head scaled dot-product attention (Vaswani et al., 2017).

    Four projections with names: ``W_q``, ``W_k``, ``W_v`` (to D = ``embed_dim``
    features, split into H = ``num_heads`` heads) and ``W_o`` (mixes the concatenated
    heads). Keys and values may come with other sizes (``kdim``, ``vdim``), as in
    cross-attention. Each head's scores are scaled by 1/√Dh.

    ``need_weights=False`` (the default, for training) hands the heads to PyTorch's
    fused ``torch.nn.functional.scaled_dot_product_attention`` and leaves
    ``attention_weights`` at None; ``need_weights=True`` computes the weights
    explicitly and keeps them, detached and before dropout, in ``attention_weights``
    for heat maps. Both give the same output (the tests check). A query with no key
    to attend to gets zero weights and a zero context in every head, never NaN, so
    its output is ``W_o``'s bias. Dropout acts on the weights, in training mode
    only.

    Shapes:
        queries:    (B, Lq, D);  keys: (B, Lk, kdim);  values: (B, Lk, vdim)
        valid_lens: (B,) or (B, Lq), optional
        mask:       bool, True = may attend, broadcastable to (B, Lq, Lk) (all heads)
            or to (B, H, Lq, Lk) (one mask per head), optional
        returns:    (B, Lq, D)
        attention_weights: (B, H, Lq, Lk), or None after ``need_weights=False``

    Taught in ``chapters/04_self_attention/02_multihead_attention.ipynb``.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        kdim: int | None = None,
        vdim: int | None = None,
    ):
        super().__init__()
        embed_dim, num_heads, dropout, kdim, vdim = _check_sizes(
            embed_dim, num_heads, dropout, kdim, vdim
        )
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.kdim, self.vdim = kdim, vdim
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.W_k = nn.Linear(kdim, embed_dim, bias=bias)
        self.W_v = nn.Linear(vdim, embed_dim, bias=bias)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=bias)
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
        _check_inputs(self, queries, keys, values)
        allowed = _mask_for_heads(queries, keys, self.num_heads, valid_lens, mask)
        # 1. Project, then split the width D into H heads of Dh features.
        q = split_heads(self.W_q(queries), self.num_heads)  # (B, H, Lq, Dh)
        k = split_heads(self.W_k(keys), self.num_heads)  # (B, H, Lk, Dh)
        v = split_heads(self.W_v(values), self.num_heads)  # (B, H, Lk, Dh)
        # 2. Attend in every head at once: the heads are one more batch axis.
        dropout_p = self.dropout.p if self.training else 0.0
        context, attn_weights = dot_product_attention(
            q, k, v, mask=allowed, dropout_p=dropout_p, need_weights=need_weights
        )  # (B, H, Lq, Dh), (B, H, Lq, Lk) or None
        self.attention_weights = (
            None if attn_weights is None else attn_weights.detach()
        )
        # 3. Concatenate the heads and mix them.
        return self.W_o(merge_heads(context))  # (B, Lq, D)

    def extra_repr(self) -> str:
        return (
            f"embed_dim={self.embed_dim}, num_heads={self.num_heads},"
            f" head_dim={self.head_dim}, kdim={self.kdim}, vdim={self.vdim}"
        )

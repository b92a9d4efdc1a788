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

A decoder that generates one token at a time keeps a :class:`KVCache`: the keys and
values already projected and split into heads at the positions before, so that a step
projects only the new position, O(t·D) work at step t instead of O(t·D²).

Taught in ``chapters/04_self_attention/02_multihead_attention.ipynb``.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from ._checks import (
    check_float,
    check_int,
    check_lengths,
    check_like,
    check_mask,
    check_probability,
    check_qkv,
    check_rotary,
    check_sizes,
    checked_by,
    describe,
)
from .attention import fused_attention, softmax_attention
from .masking import allowed_keys
from .positional import RotaryEmbedding

__all__ = ["split_heads", "merge_heads", "KVCache", "MultiHeadAttention"]


# --- the mathematics -----------------------------------------------------------------

def _check_split(x, num_heads) -> None:
    num_heads = check_int("num_heads", num_heads, 1)
    check_float("x", x, "(B, L, D)", 3, floating=False)
    if x.shape[-1] % num_heads:
        raise ValueError(
            f"x has width D={x.shape[-1]} (shape {tuple(x.shape)}), which does not"
            f" split into num_heads={num_heads} heads of equal size"
        )


def _check_merge(x) -> None:
    check_float("x", x, "(B, H, L, Dh)", 4, floating=False)


@checked_by(_check_split)
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
    batch_size, length, width = x.shape
    x = x.reshape(batch_size, length, num_heads, width // num_heads)  # (B, L, H, Dh)
    return x.transpose(1, 2)  # (B, H, L, Dh)


@checked_by(_check_merge)
def merge_heads(x: Tensor) -> Tensor:
    """Concatenate the heads' features again: the inverse of :func:`split_heads`.

    Shapes:
        x:       (B, H, L, Dh)
        returns: (B, L, D) with D = H·Dh

    Taught in ``chapters/04_self_attention/02_multihead_attention.ipynb``.
    """
    batch_size, num_heads, length, head_dim = x.shape
    x = x.transpose(1, 2)  # (B, L, H, Dh)
    return x.reshape(batch_size, length, num_heads * head_dim)  # (B, L, D)


_split, _merge = split_heads.__wrapped__, merge_heads.__wrapped__  # unchecked


class KVCache(NamedTuple):
    """The keys and values a :class:`MultiHeadAttention` has projected at the t
    positions before, split into heads.

    Shapes:
        keys, values: (B, H, t, Dh)

    Taught in ``chapters/05_transformer/01_transformer.ipynb``.
    """

    keys: Tensor
    values: Tensor

    def index_select(self, index: Tensor) -> KVCache:
        """Pick (and repeat) batch rows, as beam search needs.

        Shapes:
            index: (B',) long; returns: a cache with batch size B'
        """
        return KVCache(self.keys.index_select(0, index),
                       self.values.index_select(0, index))


# --- the layer -----------------------------------------------------------------------

class MultiHeadAttention(nn.Module):
    """Multi-head scaled dot-product attention (Vaswani et al., 2017).

    Four projections with names: ``W_q``, ``W_k``, ``W_v`` (to D = ``embed_dim``
    features, split into H = ``num_heads`` heads) and ``W_o`` (mixes the concatenated
    heads). Keys and values may come with other sizes (``kdim``, ``vdim``), as in
    cross-attention. Each head's scores are scaled by 1/√Dh.

    ``need_weights=False`` (the default) hands the heads to PyTorch's fused
    ``torch.nn.functional.scaled_dot_product_attention`` and leaves
    ``attention_weights`` at None; ``need_weights=True`` computes the weights
    explicitly and keeps them, detached and before dropout, in ``attention_weights``
    for heat maps. Both give the same output (the tests check). A query with no key
    to attend to gets zero weights and a zero context in every head, never NaN, so
    its output is ``W_o``'s bias. Dropout acts on the weights, in training mode
    only.

    With ``cache`` (a :class:`KVCache`; :meth:`empty_cache` starts one), ``keys`` and
    ``values`` are the newest positions only: the layer projects them, attends over
    the cached positions and them, and returns the output and the cache grown by them.

    :meth:`forward` checks its arguments once and calls :meth:`attend`, the
    mathematics, which the Transformer's blocks call directly with masks they built
    once.

    Shapes:
        queries:    (B, Lq, D);  keys: (B, Lk, kdim);  values: (B, Lk, vdim)
        valid_lens: (B,) or (B, Lq), optional
        mask:       bool, True = may attend, broadcastable to (B, Lq, Lk) (all heads)
            or to (B, H, Lq, Lk) (one mask per head), optional; with a cache, Lk
            counts the cached positions too
        cache:      :class:`KVCache` of (B, H, t, Dh), optional
        returns:    (B, Lq, D); with a cache: (B, Lq, D), the cache of (B, H, t + Lk,
            Dh)
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
        rotary: RotaryEmbedding | None = None,
    ):
        super().__init__()
        self.embed_dim = check_int("embed_dim", embed_dim, 1)
        self.num_heads = check_int("num_heads", num_heads, 1)
        if embed_dim % num_heads:
            raise ValueError(
                f"embed_dim (D={embed_dim}) must be divisible by num_heads"
                f" (H={num_heads}): every head gets D / H features"
            )
        self.head_dim = embed_dim // num_heads
        self.kdim = embed_dim if kdim is None else check_int("kdim", kdim, 1)
        self.vdim = embed_dim if vdim is None else check_int("vdim", vdim, 1)
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.W_k = nn.Linear(self.kdim, embed_dim, bias=bias)
        self.W_v = nn.Linear(self.vdim, embed_dim, bias=bias)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self.rotary = rotary
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
        cache: KVCache | None = None,
        positions: Tensor | None = None,
    ) -> Tensor | tuple[Tensor, KVCache]:
        self.check_inputs(queries, keys, values, valid_lens, mask, cache, positions)
        num_kv = keys.shape[1] + (0 if cache is None else cache.keys.shape[2])
        # (B, 1, Lq or 1, Lk) or (B, H, Lq, Lk), or None
        allowed = head_mask(queries.shape[:2] + (num_kv,), valid_lens, mask)
        return self.attend(queries, keys, values, allowed, need_weights=need_weights,
                           cache=cache, positions=positions)

    def attend(
        self,
        queries: Tensor,
        keys: Tensor,
        values: Tensor,
        mask: Tensor | None = None,
        *,
        need_weights: bool = False,
        cache: KVCache | None = None,
        positions: Tensor | None = None,
    ) -> Tensor | tuple[Tensor, KVCache]:
        """The layer's mathematics, unchecked; ``mask`` broadcasts to (B, H, Lq, Lk).
        With ``keys=values=None`` the cache holds all the keys and values (a
        cross-attention's memory, projected once by :meth:`project`). With a
        ``rotary`` embedding (self-attention), the queries and the new keys are rotated
        at ``positions``, (L,), (1, L) or (B, L), by default t + arange(L) with t the
        cached length; the cache keeps its keys rotated.

        Shapes:
            as :meth:`forward`
        """
        # 1. Project, then split the width D into H heads of Dh features.
        q = _split(self.W_q(queries), self.num_heads)  # (B, H, Lq, Dh)
        if keys is None:
            k, v = cache  # (B, H, Lk, Dh) each
        else:
            k, v = self.project(keys, values)  # (B, H, Lk, Dh) each
            if self.rotary is not None:
                if positions is None:
                    start = 0 if cache is None else cache.keys.shape[2]
                    positions = torch.arange(start, start + k.shape[2],
                                             device=k.device)  # (Lk,)
                q = self.rotary.at(q, positions)  # (B, H, Lq, Dh)
                k = self.rotary.at(k, positions)  # (B, H, Lk, Dh)
            if cache is not None and cache.keys.shape[2] > 0:
                # the positions before, projected at their own step
                k = torch.cat([cache.keys, k], dim=2)  # (B, H, t + Lk, Dh)
                v = torch.cat([cache.values, v], dim=2)  # (B, H, t + Lk, Dh)
        # 2. Attend in every head at once: the heads are one more batch axis.
        dropout_p = self.dropout.p if self.training else 0.0
        if need_weights:
            context, weights = softmax_attention(q, k, v, mask, None, dropout_p)
            self.attention_weights = weights.detach()  # (B, H, Lq, Lk)
        else:
            context = fused_attention(q, k, v, mask, None, dropout_p)
            self.attention_weights = None
        # 3. Concatenate the heads and mix them.
        output = self.W_o(_merge(context))  # (B, Lq, D)
        return output if cache is None else (output, KVCache(k, v))

    def project(self, keys: Tensor, values: Tensor | None = None) -> KVCache:
        """Keys and values projected and split into heads, unchecked (``values=None``:
        the keys serve as values too).

        Shapes:
            keys: (B, Lk, kdim); values: (B, Lk, vdim); returns: KVCache of (B, H, Lk,
            Dh)
        """
        values = keys if values is None else values
        return KVCache(_split(self.W_k(keys), self.num_heads),
                       _split(self.W_v(values), self.num_heads))

    def empty_cache(self, batch_size: int, like: Tensor) -> KVCache:
        """A cache of no positions for ``batch_size`` sequences, with ``like``'s dtype
        and device.

        Shapes:
            returns: :class:`KVCache` of (B, H, 0, Dh)
        """
        empty = like.new_zeros(batch_size, self.num_heads, 0, self.head_dim)
        return KVCache(empty, empty)

    def check_inputs(self, queries, keys, values, valid_lens=None, mask=None,
                     cache=None, positions=None) -> None:
        """What :meth:`forward` checks, once: each bad shape, dtype or device named with
        what it got and what was expected."""
        check_qkv(queries, keys, values, same_size=False)
        if queries.dim() != 3:
            raise ValueError("MultiHeadAttention takes queries of shape (B, Lq, D), got"
                             f" {tuple(queries.shape)}")
        check_sizes([("queries", queries, self.embed_dim, "embed_dim"),
                     ("keys", keys, self.kdim, "kdim"),
                     ("values", values, self.vdim, "vdim")])
        check_like("queries", queries, self.W_q.weight, "the layer's parameters")
        batch_size, num_queries = queries.shape[:2]
        num_kv = keys.shape[1]
        if cache is not None:
            expected = f"(B, H, t, Dh) = ({batch_size}, {self.num_heads}, t,"
            expected += f" {self.head_dim})"
            if not isinstance(cache, KVCache):
                raise TypeError(f"cache must be a KVCache {expected}, got"
                                f" {describe(cache)}")
            for name, t in zip(("cache.keys", "cache.values"), cache):
                check_float(name, t, expected, 4, like=queries, like_name="queries")
                if t.shape[:2] != (batch_size, self.num_heads) or (
                        t.shape[3] != self.head_dim or t.shape != cache.keys.shape):
                    raise ValueError(f"{name} must have shape {expected}, got"
                                     f" {tuple(t.shape)}")
            num_kv += cache.keys.shape[2]
        if self.rotary is not None or positions is not None:
            check_rotary(self.rotary, positions, batch_size, num_queries, keys.shape[1],
                         num_kv)
        if valid_lens is not None:
            check_lengths("valid_lens", valid_lens, num_kv, batch_size, num_queries)
        if isinstance(mask, Tensor) and mask.dim() > 4:
            raise ValueError(
                "mask must broadcast to (B, Lq, Lk) (one for all heads) or to (B, H,"
                f" Lq, Lk) = {(batch_size, self.num_heads, num_queries, num_kv)} (one"
                f" per head), got shape {tuple(mask.shape)}"
            )
        if isinstance(mask, Tensor) and mask.dim() == 4:
            check_mask(mask, (batch_size, self.num_heads, num_queries, num_kv))
        elif mask is not None:
            check_mask(mask, (batch_size, num_queries, num_kv))

    def extra_repr(self) -> str:
        return (
            f"embed_dim={self.embed_dim}, num_heads={self.num_heads},"
            f" head_dim={self.head_dim}, kdim={self.kdim}, vdim={self.vdim}"
        )


def head_mask(
    scores_shape: tuple, valid_lens: Tensor | None, mask: Tensor | None
) -> Tensor | None:
    """``valid_lens`` and ``mask`` as one boolean mask that broadcasts to the heads'
    scores (B, H, Lq, Lk), or None (unchecked).

    ``scores_shape`` is (B, Lq, Lk). A mask of up to three dimensions is read against
    (B, Lq, Lk) and shared by every head; a four-dimensional mask is one per head.
    """
    if mask is not None and mask.dim() < 4:
        # (Lk,), (Lq, Lk) or (B, Lq, Lk) -> (1 or B, 1, Lq or 1, Lk): every head
        mask = mask.reshape((1,) * (3 - mask.dim()) + tuple(mask.shape)).unsqueeze(1)
    batch_size, num_queries, num_kv = scores_shape
    return allowed_keys((batch_size, 1, num_queries, num_kv), valid_lens, mask)

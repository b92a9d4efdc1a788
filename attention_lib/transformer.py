"""The Transformer (Vaswani et al., 2017): attention, a feed-forward network, residual
connections and layer normalisation, stacked.

Every block is built from two kinds of sublayer, each wrapped in a residual connection
and a LayerNorm (:class:`AddNorm`):

    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2                  the same MLP at every
                                                            position, (B, L, D)
    post-norm (the paper):  x ← LayerNorm(x + Sublayer(x))
    pre-norm (GPT-2 on):    x ← x + Sublayer(LayerNorm(x))

An encoder block is self-attention then FFN; a decoder block is causal self-attention,
cross-attention to the encoder's outputs, then FFN. Tokens enter as embeddings scaled by
√D plus the sinusoidal positional encoding
(:class:`~attention_lib.positional.SinusoidalPositionalEncoding`).

The decoder follows the library's decoder protocol (:mod:`attention_lib.decoding`), so
``greedy_decode``, ``beam_search`` and ``translate`` work unchanged. Its state is a
cache (:class:`TransformerState`): for each layer, the keys and values its causal
self-attention has projected so far, and the cross-attention's keys and values,
projected once from the encoder's outputs (:class:`~attention_lib.multihead.KVCache`,
(B, H, t, Dh)). A step feeds only the new tokens and projects only them; their queries
attend to the cache plus themselves, which gives the same numbers as running the whole
target at once (the tests check).

The stacks and blocks check their arguments once, in ``forward``, and turn lengths
into boolean masks once; inside, :meth:`TransformerEncoderBlock.encode`,
:meth:`TransformerDecoderBlock.decode` and
:meth:`~attention_lib.multihead.MultiHeadAttention.attend` run unchecked.

Training uses the paper's learning rate, :func:`warmup_rate`: a linear warm-up, then
decay as 1/√step.

Taught in ``chapters/05_transformer/01_transformer.ipynb``.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.optim.lr_scheduler import LambdaLR

from ._checks import (
    check_int,
    check_memory,
    check_probability,
    check_sequence,
    check_src_lengths,
    check_tokens,
    describe,
    tracing,
)
from .masking import causal_mask
from .multihead import KVCache, MultiHeadAttention, head_mask
from .positional import RotaryEmbedding, SinusoidalPositionalEncoding

__all__ = [
    "PositionWiseFFN",
    "AddNorm",
    "RMSNorm",
    "NORMS",
    "make_norm",
    "make_ffn",
    "SwiGLU",
    "swiglu_hidden",
    "TransformerEncoderBlock",
    "TransformerDecoderBlock",
    "TransformerEncoder",
    "TransformerState",
    "TransformerDecoder",
    "torch_twin",
    "warmup_rate",
    "warmup_schedule",
]

_ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu}


# --- the two sublayer wrappers -------------------------------------------------------

class PositionWiseFFN(nn.Module):
    """The position-wise feed-forward network: one MLP applied to every position alone.

    ``FFN(x) = W_2 dropout(activation(W_1 x + b_1)) + b_2`` with W_1: D → ``ffn_hidden``
    and W_2: ``ffn_hidden`` → D; ``activation`` is ``"relu"`` (the paper) or
    ``"gelu"``; ``bias=False`` drops b_1 and b_2. Dropout sits where
    ``torch.nn.TransformerEncoderLayer`` puts it.

    Shapes:
        x:       (B, L, D) with D = ``embed_dim``
        returns: (B, L, D)

    Taught in ``chapters/05_transformer/01_transformer.ipynb``.
    """

    def __init__(
        self,
        embed_dim: int,
        ffn_hidden: int,
        dropout: float = 0.0,
        activation: str = "relu",
        bias: bool = True,
    ):
        super().__init__()
        self.embed_dim = check_int("embed_dim", embed_dim, 1)
        self.ffn_hidden = check_int("ffn_hidden", ffn_hidden, 1)
        if activation not in _ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(_ACTIVATIONS)}, got"
                f" {describe(activation)}"
            )
        self.activation = activation
        self.W_1 = nn.Linear(embed_dim, ffn_hidden, bias=bias)
        self.W_2 = nn.Linear(ffn_hidden, embed_dim, bias=bias)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))

    def forward(self, x: Tensor) -> Tensor:
        hidden = _ACTIVATIONS[self.activation](self.W_1(x))  # (B, L, ffn_hidden)
        return self.W_2(self.dropout(hidden))  # (B, L, D)

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}"


class AddNorm(nn.Module):
    """The residual connection and LayerNorm around a sublayer, in either order.

    A block uses it in two calls, so that the sublayer in between stays visible::

        y = sublayer(add_norm.sublayer_input(x))
        x = add_norm(x, y)

    * ``norm_first=False``, post-norm (the paper): ``sublayer_input(x) = x`` and
      ``add_norm(x, y) = LayerNorm(x + dropout(y))``;
    * ``norm_first=True``, pre-norm: ``sublayer_input(x) = LayerNorm(x)`` and
      ``add_norm(x, y) = x + dropout(y)``. The residual path is never normalised, which
      trains deep stacks without a warm-up; the stack then needs one final LayerNorm.

    ``norm="rms"`` puts an :class:`RMSNorm` where the LayerNorm was; ``bias=False``
    drops the LayerNorm's bias (:func:`make_norm`).

    Shapes:
        x, y:    (B, L, D) with D = ``embed_dim``
        returns: (B, L, D)

    Taught in ``chapters/05_transformer/01_transformer.ipynb``.
    """

    def __init__(self, embed_dim: int, dropout: float = 0.0, norm_first: bool = False,
                 norm: str = "layer", bias: bool = True):
        super().__init__()
        self.embed_dim = check_int("embed_dim", embed_dim, 1)
        self.norm_first = bool(norm_first)
        self.norm = make_norm(norm, embed_dim, bias)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))

    def sublayer_input(self, x: Tensor) -> Tensor:
        """What the sublayer reads: LayerNorm(x) for pre-norm, x itself for post-norm.

        Shapes:
            x: (B, L, D); returns: (B, L, D)
        """
        return self.norm(x) if self.norm_first else x  # (B, L, D)

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        if self.norm_first:
            return x + self.dropout(y)  # (B, L, D)
        return self.norm(x + self.dropout(y))  # (B, L, D)

    def extra_repr(self) -> str:
        return f"norm_first={self.norm_first}"


class RMSNorm(nn.Module):
    """Root-mean-square normalisation (Zhang & Sennrich, 2019): LayerNorm without the
    mean and the bias, ``y = x / sqrt(mean(x², over D) + eps) * weight``. The paper's
    equation has no eps; this puts it inside the root, as ``torch.nn.RMSNorm`` and
    Llama do.

    Computed in float32 and cast back to the input's dtype, like ``torch.nn.RMSNorm``
    (the tests check parity in float32 and bfloat16).

    Shapes:
        x:       (..., D) with D = ``embed_dim``
        returns: (..., D)

    Taught in ``chapters/08_pretraining/02_modern_block.ipynb``.
    """

    def __init__(self, embed_dim: int, eps: float = 1e-6):
        super().__init__()
        self.embed_dim = check_int("embed_dim", embed_dim, 1)
        self.eps = float(eps)
        self.weight = nn.Parameter(torch.ones(embed_dim))

    def forward(self, x: Tensor) -> Tensor:
        x32 = x.float()  # (..., D)
        rms = torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)  # (..., 1)
        return (x32 * rms * self.weight.float()).to(x.dtype)  # (..., D)

    def extra_repr(self) -> str:
        return f"{self.embed_dim}, eps={self.eps}"


NORMS = ("layer", "rms")


def make_norm(norm: str, embed_dim: int, bias: bool = True) -> nn.Module:
    """The normalisation a block uses: ``"layer"``, ``torch.nn.LayerNorm`` (with a bias
    unless ``bias=False``), or ``"rms"``, :class:`RMSNorm`; both with eps = 1e-5.

    Shapes:
        returns: a module mapping (..., D) to (..., D)

    Taught in ``chapters/08_pretraining/02_modern_block.ipynb``.
    """
    if norm == "layer":
        return nn.LayerNorm(embed_dim, eps=1e-5, bias=bias)
    if norm == "rms":
        return RMSNorm(embed_dim, eps=1e-5)
    raise ValueError(f"norm must be one of {NORMS}, got {describe(norm)}")


def make_ffn(embed_dim: int, ffn_hidden: int, dropout: float = 0.0,
             activation: str = "relu", bias: bool = True) -> nn.Module:
    """The feed-forward sublayer a block uses: :class:`PositionWiseFFN` for
    ``activation`` ``"relu"`` or ``"gelu"``, :class:`SwiGLU` of hidden size
    ``ffn_hidden`` for ``"swiglu"`` (for the parameters of a two-matrix FFN of width F,
    pass ``swiglu_hidden(F)``).

    Shapes:
        returns: a module mapping (B, L, D) to (B, L, D)

    Taught in ``chapters/08_pretraining/02_modern_block.ipynb``.
    """
    if activation == "swiglu":
        return SwiGLU(embed_dim, ffn_hidden, bias=bias)
    return PositionWiseFFN(embed_dim, ffn_hidden, dropout, activation, bias=bias)


def swiglu_hidden(ffn_hidden: int, multiple_of: int = 1) -> int:
    """The SwiGLU hidden size h whose parameter count matches a 2-matrix FFN of width F.

    Three matrices D×h against two D×F: ``3·D·h = 2·D·F``, so ``h = 2F/3``, rounded
    to the nearest integer and then up to a multiple of ``multiple_of`` (Llama uses
    256; 1 keeps the nearest integer, exact when 3 divides 2F).

    Shapes:
        ffn_hidden: int F; returns: int h

    Taught in ``chapters/08_pretraining/02_modern_block.ipynb``.
    """
    check_int("ffn_hidden", ffn_hidden, 1)
    check_int("multiple_of", multiple_of, 1)
    hidden = max(1, round(2 * ffn_hidden / 3))
    return -(-hidden // multiple_of) * multiple_of


class SwiGLU(nn.Module):
    """The gated feed-forward network (Shazeer, 2020; Llama):
    ``SwiGLU(x) = W_2(silu(W_1 x) ⊙ W_3 x)``.

    The gate is on W_1's branch; ``W_1``, ``W_2``, ``W_3`` map one to one onto the
    ``w1``, ``w2``, ``w3`` of CS336 and Llama. Use :func:`swiglu_hidden` to match the
    parameters of a :class:`PositionWiseFFN`.

    Shapes:
        x:       (B, L, D) with D = ``embed_dim``
        returns: (B, L, D)

    Taught in ``chapters/08_pretraining/02_modern_block.ipynb``.
    """

    def __init__(self, embed_dim: int, hidden: int, bias: bool = False):
        super().__init__()
        self.embed_dim = check_int("embed_dim", embed_dim, 1)
        self.hidden = check_int("hidden", hidden, 1)
        self.W_1 = nn.Linear(embed_dim, hidden, bias=bias)
        self.W_2 = nn.Linear(hidden, embed_dim, bias=bias)
        self.W_3 = nn.Linear(embed_dim, hidden, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        gated = F.silu(self.W_1(x)) * self.W_3(x)  # (B, L, hidden)
        return self.W_2(gated)  # (B, L, D)


# --- the blocks -----------------------------------------------------------------------

class TransformerEncoderBlock(nn.Module):
    """Self-attention, then the feed-forward network, each inside an :class:`AddNorm`.

    ``valid_lens`` marks the padding of each sentence: no position attends to it. The
    outputs at padded positions are computed but mean nothing. With dropout 0 and the
    same weights this is ``torch.nn.TransformerEncoderLayer(batch_first=True)`` with a
    ``src_key_padding_mask`` (the tests check, in both norm orders).
    ``need_weights=True`` keeps the self-attention weights in
    ``self_attention.attention_weights``.

    With a causal mask it is also the block of a decoder-only language model
    (:class:`~attention_lib.lm.TransformerLM`), and the keyword options build today's
    variants of it: ``norm="rms"`` (:class:`RMSNorm`), ``activation="swiglu"``
    (:class:`SwiGLU` of hidden size ``ffn_hidden``), ``bias=False`` (no bias in any
    projection or norm) and ``rotary`` (RoPE on the queries and keys).

    Shapes:
        x:          (B, L, D) with D = ``embed_dim``
        valid_lens: (B,), integer in [0, L], optional
        returns:    (B, L, D)

    Taught in ``chapters/05_transformer/01_transformer.ipynb``.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        ffn_hidden: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        activation: str = "relu",
        *,
        norm: str = "layer",
        bias: bool = True,
        rotary: RotaryEmbedding | None = None,
    ):
        super().__init__()
        self.embed_dim = check_int("embed_dim", embed_dim, 1)
        self.self_attention = MultiHeadAttention(embed_dim, num_heads, dropout,
                                                 bias=bias, rotary=rotary)
        self.add_norm1 = AddNorm(embed_dim, dropout, norm_first, norm, bias)
        self.ffn = make_ffn(embed_dim, ffn_hidden, dropout, activation, bias)
        self.add_norm2 = AddNorm(embed_dim, dropout, norm_first, norm, bias)

    def forward(
        self, x: Tensor, valid_lens: Tensor | None = None, *, need_weights: bool = False
    ) -> Tensor:
        check_sequence("x", x, self.embed_dim)
        if valid_lens is not None:
            check_src_lengths(x, valid_lens)
        mask = head_mask(x.shape[:2] + x.shape[1:2], valid_lens, None)  # (B, 1, 1, L)
        return self.encode(x, mask, need_weights=need_weights)

    def encode(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        *,
        need_weights: bool = False,
        cache: KVCache | None = None,
        positions: Tensor | None = None,
    ) -> Tensor | tuple[Tensor, KVCache]:
        """The block's mathematics, unchecked; ``mask`` (True = may attend) broadcasts
        to (B, H, L, t + L). With a ``cache`` (a decoder-only model generating), x
        holds the newest positions, attends over the cache and itself, and the cache
        grown by x comes back too; ``positions`` go to a rotary embedding.

        Shapes:
            x: (B, L, D); cache: KVCache of (B, H, t, Dh), optional
            returns: (B, L, D); with a cache: (B, L, D), KVCache of (B, H, t + L, Dh)
        """
        # 1. Every position attends to the positions the mask allows.
        h = self.add_norm1.sublayer_input(x)  # (B, L, D)
        y = self.self_attention.attend(h, h, h, mask, need_weights=need_weights,
                                       cache=cache, positions=positions)
        if cache is not None:
            y, cache = y  # (B, L, D), (B, H, t + L, Dh)
        x = self.add_norm1(x, y)  # (B, L, D)
        # 2. The same MLP at every position.
        y = self.ffn(self.add_norm2.sublayer_input(x))  # (B, L, D)
        x = self.add_norm2(x, y)  # (B, L, D)
        return x if cache is None else (x, cache)


class TransformerDecoderBlock(nn.Module):
    """Causal self-attention, cross-attention to the encoder's outputs, then the
    feed-forward network, each inside an :class:`AddNorm`.

    ``x`` holds the newest Lq target positions; ``cache`` holds the keys and values
    the self-attention projected at the t positions before them (a
    :class:`~attention_lib.multihead.KVCache`; None or an empty cache: x starts the
    target). Query i of x, at position t + i, attends to positions 0, ..., t + i: the
    cache and x up to itself. The block returns its output and the cache extended by
    x's keys and values, (B, H, t + Lq, Dh), for the next step. So a target fed in one
    call or in pieces gives the same outputs (the tests check).

    Cross-attention ignores the source padding given by ``src_valid_lens``. With dropout
    0 and the same weights, one call without a cache is
    ``torch.nn.TransformerDecoderLayer(batch_first=True)`` with a causal ``tgt_mask``
    and a ``memory_key_padding_mask`` (the tests check, in both norm orders). With
    ``need_weights=True`` the layers keep their weights, e.g.
    ``cross_attention.attention_weights`` (B, H, Lq, Lk).

    Shapes:
        x:              (B, Lq, D) with D = ``embed_dim``
        enc_outputs:    (B, Lk, D)
        src_valid_lens: (B,), integer in [0, Lk], optional
        cache:          :class:`~attention_lib.multihead.KVCache` of (B, H, t, Dh),
            optional
        returns:        output (B, Lq, D), cache of (B, H, t + Lq, Dh)

    Taught in ``chapters/05_transformer/01_transformer.ipynb``.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        ffn_hidden: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        activation: str = "relu",
    ):
        super().__init__()
        self.embed_dim = check_int("embed_dim", embed_dim, 1)
        self.self_attention = MultiHeadAttention(embed_dim, num_heads, dropout)
        self.add_norm1 = AddNorm(embed_dim, dropout, norm_first)
        self.cross_attention = MultiHeadAttention(embed_dim, num_heads, dropout)
        self.add_norm2 = AddNorm(embed_dim, dropout, norm_first)
        self.ffn = PositionWiseFFN(embed_dim, ffn_hidden, dropout, activation)
        self.add_norm3 = AddNorm(embed_dim, dropout, norm_first)

    def forward(
        self,
        x: Tensor,
        enc_outputs: Tensor,
        src_valid_lens: Tensor | None = None,
        cache: KVCache | None = None,
        *,
        need_weights: bool = False,
    ) -> tuple[Tensor, KVCache]:
        check_sequence("x", x, self.embed_dim)
        check_memory(x, enc_outputs, src_valid_lens, self.embed_dim)
        if cache is None:
            cache = self.self_attention.empty_cache(x.shape[0], x)
        self.self_attention.check_inputs(x, x, x, cache=cache)
        num_kv = cache.keys.shape[2] + x.shape[1]  # t + Lq
        causal = causal_mask(x.shape[1], num_kv, x.device)  # (Lq, t + Lq)
        src_mask = head_mask(x.shape[:2] + enc_outputs.shape[1:2], src_valid_lens, None)
        memory = self.cross_attention.project(enc_outputs)
        return self.decode(x, memory, src_mask, causal, cache,
                           need_weights=need_weights)

    def decode(
        self,
        x: Tensor,
        memory: KVCache,
        src_mask: Tensor | None,
        causal: Tensor | None,
        cache: KVCache,
        *,
        need_weights: bool = False,
    ) -> tuple[Tensor, KVCache]:
        """The block's mathematics, unchecked. ``memory`` holds the cross-attention's
        keys and values, projected once from the encoder's outputs; ``src_mask`` and
        ``causal`` (True = may attend) broadcast to the cross- and self-attention's
        scores.

        Shapes:
            x: (B, Lq, D); memory: KVCache of (B, H, Lk, Dh); src_mask: (B, 1, 1, Lk)
            or None; causal: (Lq, t + Lq); cache: KVCache of (B, H, t, Dh)
            returns: (B, Lq, D), the cache of (B, H, t + Lq, Dh)
        """
        # 1. Causal self-attention over the cached positions and the new ones.
        h = self.add_norm1.sublayer_input(x)  # (B, Lq, D)
        y, cache = self.self_attention.attend(h, h, h, causal, cache=cache,
                                              need_weights=need_weights)
        x = self.add_norm1(x, y)  # (B, Lq, D)
        # 2. Cross-attention: the queries come from the target, keys and values from
        # the source (projected once, in memory).
        h = self.add_norm2.sublayer_input(x)  # (B, Lq, D)
        y, _ = self.cross_attention.attend(h, None, None, src_mask, cache=memory,
                                           need_weights=need_weights)  # (B, Lq, D)
        x = self.add_norm2(x, y)  # (B, Lq, D)
        # 3. The same MLP at every position.
        y = self.ffn(self.add_norm3.sublayer_input(x))  # (B, Lq, D)
        return self.add_norm3(x, y), cache  # (B, Lq, D), (B, H, t + Lq, Dh)


# --- the blocks' PyTorch twins --------------------------------------------------------

def _copy_attention(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    """PyTorch keeps W^Q, W^K, W^V stacked in one ``in_proj`` matrix."""
    projections = [ours.W_q, ours.W_k, ours.W_v]
    theirs.in_proj_weight.copy_(torch.cat([p.weight for p in projections]))
    theirs.in_proj_bias.copy_(torch.cat([p.bias for p in projections]))
    theirs.out_proj.load_state_dict(ours.W_o.state_dict())


def torch_twin(block: nn.Module) -> nn.Module:
    """PyTorch's own layer with the weights of ``block``: a
    ``torch.nn.TransformerEncoderLayer`` for a :class:`TransformerEncoderBlock`, a
    ``torch.nn.TransformerDecoderLayer`` for a :class:`TransformerDecoderBlock`, with
    the same sizes, norm order, activation, dtype and device, ``batch_first=True`` and
    dropout 0. Fed the same input (PyTorch's masks say True where ours say False), it
    must give the same output: the parity check of each block.

    Shapes:
        returns: the twin, in training mode (PyTorch's eval-mode fast path drops padded
        positions from its output, which ours computes)

    Taught in ``chapters/05_transformer/01_transformer.ipynb``.
    """
    if isinstance(block, TransformerEncoderBlock):
        twin_class, attentions = nn.TransformerEncoderLayer, ["self_attention"]
    elif isinstance(block, TransformerDecoderBlock):
        twin_class = nn.TransformerDecoderLayer
        attentions = ["self_attention", "cross_attention"]
    else:
        raise TypeError(
            "block must be a TransformerEncoderBlock or TransformerDecoderBlock, got"
            f" {describe(block)}"
        )
    weight = block.ffn.W_1.weight
    norms = [m for m in block.children() if isinstance(m, AddNorm)]
    twin = twin_class(
        block.embed_dim, block.self_attention.num_heads, block.ffn.ffn_hidden,
        dropout=0.0, activation=block.ffn.activation, batch_first=True,
        norm_first=norms[0].norm_first, device=weight.device, dtype=weight.dtype,
    )
    theirs = [twin.self_attn] + ([twin.multihead_attn] if len(attentions) > 1 else [])
    with torch.no_grad():
        for name, their_attention in zip(attentions, theirs):
            _copy_attention(getattr(block, name), their_attention)
        twin.linear1.load_state_dict(block.ffn.W_1.state_dict())
        twin.linear2.load_state_dict(block.ffn.W_2.state_dict())
        for i, add_norm in enumerate(norms, 1):
            getattr(twin, f"norm{i}").load_state_dict(add_norm.norm.state_dict())
    return twin.train()


# --- the stacks -----------------------------------------------------------------------

def _token_embedding(vocab_size, embed_dim: int) -> nn.Embedding:
    """The token embedding, initialised with standard deviation D^-1/2: scaled by √D
    in ``forward`` it has unit size, like the positional encoding added to it (as in
    fairseq)."""
    embedding = nn.Embedding(check_int("vocab_size", vocab_size, 1), embed_dim)
    nn.init.normal_(embedding.weight, std=embed_dim**-0.5)
    return embedding


class _Stack(nn.Module):
    """What the encoder and the decoder share: token embeddings scaled by √D plus
    sinusoidal positions, ``num_layers`` blocks, and (pre-norm) a final LayerNorm."""

    block_class: type[nn.Module]

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        num_heads: int,
        ffn_hidden: int,
        num_layers: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        max_len: int = 1000,
    ):
        super().__init__()
        num_layers = check_int("num_layers", num_layers, 1)
        self.embed_dim = check_int("embed_dim", embed_dim, 1)
        self.embedding = _token_embedding(vocab_size, embed_dim)
        self.positional = SinusoidalPositionalEncoding(embed_dim, max_len, dropout)
        self.blocks = nn.ModuleList(
            self.block_class(embed_dim, num_heads, ffn_hidden, dropout, norm_first)
            for _ in range(num_layers)
        )
        self.final_norm = nn.LayerNorm(embed_dim) if norm_first else None

    def embed(self, tokens: Tensor, offset: int = 0) -> Tensor:
        """Embeddings × √D plus the encodings of positions offset, offset + 1, ...
        (unchecked: :meth:`check_tokens` checks the tokens).

        Shapes:
            tokens: (B, L); returns: (B, L, D)
        """
        x = self.embedding(tokens) * math.sqrt(self.embed_dim)  # (B, L, D)
        return self.positional.add(x, offset)  # (B, L, D)

    def check_tokens(self, name: str, tokens, offset: int = 0) -> None:
        """Token indices (B, L) of this vocabulary, at positions within
        ``max_len``."""
        check_tokens(name, tokens, self.embedding.num_embeddings)
        max_len = self.positional.max_len
        if not tracing() and offset + tokens.shape[1] > max_len:
            start = f" after {offset} earlier positions" if offset else ""
            raise ValueError(
                f"{name} has L={tokens.shape[1]} positions{start}, more than the"
                f" model's max_len={max_len} (the positions its encoding was built"
                " for); cut the input or build the model with a larger max_len"
            )


class TransformerEncoder(_Stack):
    """A stack of ``num_layers`` :class:`TransformerEncoderBlock` over embedded tokens.

    Tokens are embedded, scaled by √D, and given the sinusoidal positional encoding
    (dropout after the sum, as in the paper). With ``norm_first=True`` a final LayerNorm
    follows the stack. Called like :class:`~attention_lib.seq2seq.Seq2SeqEncoder`,
    ``encoder(src, src_valid_lens)``, it returns the outputs that
    :meth:`TransformerDecoder.init_state` takes. With ``need_weights=True`` the blocks
    keep their self-attention weights (``blocks[i].self_attention.attention_weights``).

    Shapes:
        src:            (B, Lk) token indices, Lk <= ``max_len``
        src_valid_lens: (B,) or None (no padding)
        returns:        (B, Lk, D); rows at padding are computed but mean nothing

    Taught in ``chapters/05_transformer/01_transformer.ipynb``.
    """

    block_class = TransformerEncoderBlock

    def forward(
        self,
        src: Tensor,
        src_valid_lens: Tensor | None = None,
        *,
        need_weights: bool = False,
    ) -> Tensor:
        self.check_tokens("src", src)
        if src_valid_lens is not None:
            check_src_lengths(src, src_valid_lens)
        # One mask for every layer: each position attends to the real tokens.
        mask = head_mask(src.shape + src.shape[1:], src_valid_lens, None)  # (B,1,1,Lk)
        x = self.embed(src)  # (B, Lk, D)
        for block in self.blocks:
            x = block.encode(x, mask, need_weights=need_weights)  # (B, Lk, D)
        if self.final_norm is not None:
            x = self.final_norm(x)  # (B, Lk, D)
        return x


class TransformerState(NamedTuple):
    """What :class:`TransformerDecoder` carries from step to step.

    Shapes:
        enc_outputs:    (B, Lk, D)  the encoder's outputs
        src_valid_lens: (B,)        real source tokens per sentence; None: no padding
        cache:          num_layers :class:`~attention_lib.multihead.KVCache` of
                        (B, H, t, Dh): the keys and values each layer's
                        self-attention has projected, t = target positions fed so far
        memory:         num_layers :class:`~attention_lib.multihead.KVCache` of
                        (B, H, Lk, Dh): each layer's cross-attention keys and values,
                        projected once from ``enc_outputs``
    """

    enc_outputs: Tensor
    src_valid_lens: Tensor | None
    cache: tuple[KVCache, ...]
    memory: tuple[KVCache, ...]


class TransformerDecoder(_Stack):
    """A stack of ``num_layers`` :class:`TransformerDecoderBlock` and an output layer,
    following the library's decoder protocol (:mod:`attention_lib.decoding`).

    ``init_state(enc_outputs, src_valid_lens)`` projects the cross-attention's keys and
    values once and starts an empty cache; ``decoder(tgt_input, state)`` feeds the next
    Lq target tokens (all of them for teacher forcing, one at a time for decoding) at
    positions t, ..., t + Lq − 1 and returns their logits and the state with the cache
    grown by Lq; ``reorder_state(state, index)`` picks batch rows of everything, cache
    included, for beam search. With ``norm_first=True`` a final LayerNorm comes before
    the output layer.

    With ``need_weights=True``, ``attention_weights`` holds the last layer's
    cross-attention weights of the call, (B, H, Lq, Lk), zero at source padding;
    otherwise the fused attention runs and they are None.

    Shapes:
        init_state(enc_outputs (B, Lk, D), src_valid_lens (B,) or None)
            -> :class:`TransformerState`
        forward(tgt_input (B, Lq), state, need_weights=False) -> logits (B, Lq, V),
            state
        attention_weights: (B, H, Lq, Lk), or None

    Taught in ``chapters/05_transformer/01_transformer.ipynb``.
    """

    block_class = TransformerDecoderBlock

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        num_heads: int,
        ffn_hidden: int,
        num_layers: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        max_len: int = 1000,
    ):
        super().__init__(vocab_size, embed_dim, num_heads, ffn_hidden, num_layers,
                         dropout, norm_first, max_len)
        self.dense = nn.Linear(embed_dim, vocab_size)
        self.attention_weights: Tensor | None = None

    def init_state(
        self, enc_outputs: Tensor, src_valid_lens: Tensor | None = None
    ) -> TransformerState:
        check_sequence("enc_outputs", enc_outputs, self.embed_dim)
        if src_valid_lens is not None:
            check_src_lengths(enc_outputs, src_valid_lens)
        batch_size = enc_outputs.shape[0]
        return TransformerState(
            enc_outputs,
            src_valid_lens,
            tuple(block.self_attention.empty_cache(batch_size, enc_outputs)
                  for block in self.blocks),  # num_layers × (B, H, 0, Dh)
            tuple(block.cross_attention.project(enc_outputs)
                  for block in self.blocks),  # num_layers × (B, H, Lk, Dh)
        )

    def forward(
        self, tgt_input: Tensor, state: TransformerState, *, need_weights: bool = False
    ) -> tuple[Tensor, TransformerState]:
        if not isinstance(state, TransformerState):
            raise TypeError(
                "state must be the TransformerState that init_state returns, got"
                f" {describe(state)}"
            )
        enc_outputs, src_valid_lens, cache, memory = state
        num_steps = cache[0].keys.shape[2]  # t: target positions fed before
        self.check_tokens("tgt_input", tgt_input, num_steps)
        if tgt_input.shape[0] != enc_outputs.shape[0]:
            raise ValueError(
                f"tgt_input has B={tgt_input.shape[0]} sentences but the state holds"
                f" {enc_outputs.shape[0]}"
            )
        # 1. Embed the new tokens at their positions t, ..., t + Lq − 1.
        x = self.embed(tgt_input, offset=num_steps)  # (B, Lq, D)
        # 2. One pair of masks for every layer: the causal one over the cache and the
        # new positions (none for one new position, which may see them all), and the
        # source's padding.
        causal = None if x.shape[1] == 1 else causal_mask(
            x.shape[1], num_steps + x.shape[1], x.device)
        src_mask = head_mask(x.shape[:2] + enc_outputs.shape[1:2], src_valid_lens,
                             None)  # (B, 1, 1, Lk) or None
        # 3. Every block reads its cache and returns it grown by the new positions.
        new_cache = []
        for block, layer_cache, layer_memory in zip(self.blocks, cache, memory):
            x, layer_cache = block.decode(x, layer_memory, src_mask, causal,
                                          layer_cache, need_weights=need_weights)
            new_cache.append(layer_cache)  # (B, H, t + Lq, Dh) each
        if self.final_norm is not None:
            x = self.final_norm(x)  # (B, Lq, D)
        self.attention_weights = self.blocks[-1].cross_attention.attention_weights
        logits = self.dense(x)  # (B, Lq, V)
        return logits, state._replace(cache=tuple(new_cache))

    @staticmethod
    def reorder_state(state: TransformerState, index: Tensor) -> TransformerState:
        """Pick (and repeat) batch rows of a state, cache included, as beam search
        needs.

        Shapes:
            index: (B',) long; returns: a state with batch size B'
        """
        enc_outputs, src_valid_lens, cache, memory = state
        return TransformerState(
            enc_outputs.index_select(0, index),
            None if src_valid_lens is None else src_valid_lens.index_select(0, index),
            tuple(layer_cache.index_select(index) for layer_cache in cache),
            tuple(layer_memory.index_select(index) for layer_memory in memory),
        )


# --- the paper's learning rate --------------------------------------------------------

def warmup_rate(step: int, embed_dim: int, warmup_steps: int) -> float:
    """The learning rate of Vaswani et al. (2017), equation 3, at update ``step``:

        lr = D^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)

    It grows linearly for ``warmup_steps`` updates, peaks at
    (D · warmup_steps)^-0.5, then decays as 1/√step.

    Shapes:
        step >= 1, embed_dim, warmup_steps >= 1: ints; returns: float

    Taught in ``chapters/05_transformer/01_transformer.ipynb``.
    """
    step = check_int("step", step, 1)
    embed_dim = check_int("embed_dim", embed_dim, 1)
    warmup_steps = check_int("warmup_steps", warmup_steps, 1)
    return embed_dim**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def warmup_schedule(optimizer, embed_dim: int | None, warmup_steps: int = 4000
                    ) -> LambdaLR:
    """A ``LambdaLR`` that multiplies the optimiser's learning rate by
    :func:`warmup_rate`; give the optimiser ``lr=1.0`` to get the paper's rate (the
    paper uses Adam with betas (0.9, 0.98) and eps 1e-9). With ``embed_dim=None`` the
    factor is ``min(1, n / warmup_steps)`` instead: the same linear warm-up, to the
    optimiser's own rate, which is then held (chapter 5's short race, whose peak rate
    is a setting).

    Stepped after every update, as :func:`~attention_lib.training.train_seq2seq` does:
    update n = 1, 2, ... runs at ``warmup_rate(n, ...)``. For ``train_seq2seq``'s
    ``schedule`` argument: ``lambda opt: warmup_schedule(opt, D, 4000)``.

    Shapes:
        optimizer: a ``torch.optim.Optimizer``; returns: ``LambdaLR``

    Taught in ``chapters/05_transformer/01_transformer.ipynb``.
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(
            f"optimizer must be a torch.optim.Optimizer, got {describe(optimizer)}"
        )
    warmup_steps = check_int("warmup_steps", warmup_steps, 1)
    if embed_dim is None:
        def factor(n):
            return min(1.0, n / warmup_steps)
    else:
        embed_dim = check_int("embed_dim", embed_dim, 1)

        def factor(n):
            return warmup_rate(n, embed_dim, warmup_steps)
    # LambdaLR counts the scheduler's steps from 0; update n comes after n − 1 of them.
    return LambdaLR(optimizer, lambda count: factor(count + 1))

"""Attention for long sequences: local and sparse patterns computed in blocks, the
online softmax (chunked, memory-efficient attention), generation with and without the
decoder's cache, and the tools to measure what each costs.

Dense attention builds an n × m matrix of scores: its work and memory grow as n·m. Three
answers, each exact for what it computes:

* **Patterns** (:class:`AttentionPattern`): each query sees only some keys: a window of
  w around it (Longformer, Mistral), every d-th key (dilated / strided, Sparse
  Transformer), and a few global tokens that see and are seen by all. A pattern is
  written once as a function ``allows(query_index, key_index)`` and gives a boolean
  mask for SDPA (:meth:`AttentionPattern.mask`) and, where PyTorch has it, a
  ``flex_attention`` block mask (:meth:`AttentionPattern.block_mask`).
  :func:`local_attention` computes a windowed pattern block by block, so its work and
  memory grow as n·w, not n².
* **Online softmax** (:func:`chunked_attention`, Rabe & Staats 2021; FlashAttention):
  the keys arrive in blocks; each block's partial result carries its log-sum-exp, and
  two partial results merge exactly (:func:`merge_partials`):

      lse = log(e^lse₁ + e^lse₂),   out = e^(lse₁ − lse) out₁ + e^(lse₂ − lse) out₂

  so the n × m matrix never exists. Its backward (written out, as FlashAttention's)
  recomputes each block's weights from the saved log-sum-exp instead of storing
  them, so training memory is linear too.
* **The key/value cache** (:func:`generate`): a decoder that caches what its
  self-attention has read feeds one token per step instead of the whole prefix,
  T positions in all instead of T(T+1)/2.

A boolean mask is True where a query may attend (the library's convention, as in
:mod:`attention_lib.masking`). A query with no key to attend to gets a zero output.

Measuring: :func:`~attention_lib.measure.peak_memory` (imported here too) reads the
kernel's peak resident memory of this process on CPU, and PyTorch's allocator
statistics on CUDA.

Taught in ``chapters/06_efficient/``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import Tensor

from ._checks import check_int, check_mask, check_qkv, check_scale, describe
from .attention import softmax_attention
from .measure import fitted_threads
from .measure import peak_memory  # here too: chapter 6's pages import it from here

__all__ = [
    "AttentionPattern",
    "attend",
    "merge_partials",
    "chunked_attention",
    "local_attention",
    "generate",
    "peak_memory",
    "flex_attention_available",
]


# --- patterns: which keys a query may see, written once ------------------------------

@dataclass(frozen=True)
class AttentionPattern:
    """Which keys each query may attend to, for self-attention over n positions.

    * ``window=None``: every key (dense); ``window=w``: the keys near the query. With
      ``causal=False``, keys j with |i − j| ≤ w // 2 (w/2 on each side and itself, as
      in Longformer); with ``causal=True``, the w keys i − w < j ≤ i (itself and the
      w − 1 before it, as in Mistral's sliding window).
    * ``dilation=d``: only keys whose distance is a multiple of d, the window stretched
      d times (d·w positions, w + 1 or w of them seen). With ``window=None`` that is
      the Sparse Transformer's strided pattern: every d-th key.
    * ``causal=True``: no key after the query.
    * ``global_tokens=g``: the first g positions attend to every key and every query
      attends to them (Longformer's global attention; causal still applies).

    :meth:`allows` is the pattern: it takes query and key indices as tensors (any
    broadcastable shapes) and returns a boolean tensor, so the same function builds
    :meth:`mask` and is a ``flex_attention`` ``mask_mod``.
    """

    window: int | None = None
    causal: bool = False
    dilation: int = 1
    global_tokens: int = 0

    def __post_init__(self):
        if self.window is not None:
            check_int("window", self.window, 1)
        check_int("dilation", self.dilation, 1)
        check_int("global_tokens", self.global_tokens, 0)
        if not isinstance(self.causal, bool):
            raise TypeError(
                f"causal must be True or False, got {describe(self.causal)}"
            )

    @property
    def reach(self) -> tuple[int, int]:
        """How far the window reaches (before, after) the query, in positions
        (dilation included); None for a side without limit."""
        d = self.dilation
        if self.window is None:
            return None, (0 if self.causal else None)
        if self.causal:
            return (self.window - 1) * d, 0
        return (self.window // 2) * d, (self.window // 2) * d

    def allows(self, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        """True where query ``q_idx`` may attend to key ``kv_idx`` (broadcasting)."""
        offset = q_idx - kv_idx  # > 0: the key lies before the query
        ok = (offset % self.dilation) == 0
        before, after = self.reach
        if before is not None:
            ok = ok & (offset <= before)
        if after is not None:
            ok = ok & (offset >= -after)
        if self.global_tokens:
            is_global = (q_idx < self.global_tokens) | (kv_idx < self.global_tokens)
            ok = ok | is_global
            if self.causal:
                ok = ok & (offset >= 0)
        return ok

    @property
    def mask_mod(self) -> Callable[[Any, Any, Tensor, Tensor], Tensor]:
        """:meth:`allows` as a plain function with ``flex_attention``'s mask signature
        ``(batch, head, q_idx, kv_idx)`` (batch and head unused). A function, not a
        method: flex attention tells mask functions by their four arguments."""

        def mask_mod(batch, head, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            return self.allows(q_idx, kv_idx)

        return mask_mod

    def mask(self, num_queries: int, num_kv: int | None = None, device=None) -> Tensor:
        """The pattern as a boolean mask, True = may attend.

        Shapes:
            returns: (Lq, Lk), Lk = ``num_kv`` (default Lq)
        """
        num_queries = check_int("num_queries", num_queries, 0)
        num_kv = num_queries if num_kv is None else check_int("num_kv", num_kv, 0)
        q_idx = torch.arange(num_queries, device=device).unsqueeze(1)  # (Lq, 1)
        kv_idx = torch.arange(num_kv, device=device).unsqueeze(0)  # (1, Lk)
        return self.allows(q_idx, kv_idx)  # (Lq, Lk)

    def pairs(self, n: int) -> int:
        """The number of (query, key) pairs the pattern allows over n positions: the
        work of attention with this pattern, in units of one dot product."""
        return int(self.mask(n).sum())

    def block_mask(self, n: int, device="cpu", block_size: int = 128):
        """The pattern as a ``flex_attention`` BlockMask over n positions (built with
        ``device``; on CPU it must be ``"cpu"``). Raises RuntimeError where the
        installed PyTorch has no flex attention (see
        :func:`flex_attention_available`)."""
        if not flex_attention_available():
            raise RuntimeError(
                "this PyTorch has no torch.nn.attention.flex_attention (it came in"
                f" torch 2.5; installed: {torch.__version__}); use mask() with SDPA"
            )
        from torch.nn.attention.flex_attention import create_block_mask

        return create_block_mask(
            self.mask_mod, None, None, n, n, device=device, BLOCK_SIZE=block_size
        )


def flex_attention_available() -> bool:
    """Whether ``torch.nn.attention.flex_attention`` can be imported here."""
    try:
        from torch.nn.attention import flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


# --- the exact pieces: attend to some keys, merge partial results --------------------

def _accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """Scores, sums and partial outputs in float32 at least (FlashAttention's rule)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def attend(
    queries: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None = None,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """Softmax attention of the queries over some keys, returning the output and its
    log-sum-exp, the piece that lets partial results merge (:func:`merge_partials`).

    The library's kernel (:func:`~attention_lib.attention.softmax_attention`) at the
    accumulation precision: float32 (float64 for float64 inputs), at which partial
    results are merged before the final cast. A query with no allowed key gets output
    0 and log-sum-exp −∞.

    Shapes:
        queries: (..., Lq, D);  keys: (..., Lk, D);  values: (..., Lk, Dv)
        mask: bool, broadcastable to (..., Lq, Lk), True = may attend, optional
        returns: out (..., Lq, Dv), lse (..., Lq, 1)
    """
    acc = _accumulation_dtype(queries.dtype)
    return softmax_attention(queries.to(acc), keys.to(acc), values.to(acc), mask,
                             scale, lse=True)


def merge_partials(
    out1: Tensor, lse1: Tensor, out2: Tensor, lse2: Tensor
) -> tuple[Tensor, Tensor]:
    """Merge two softmax-attention results over disjoint sets of keys into the result
    over their union, exactly: the online softmax's step.

    With lse = log Σ exp(scores) over each set, the union's weights are each set's
    weights times e^(lse_i − lse), lse = log(e^lse₁ + e^lse₂). The larger lse is
    subtracted first so that nothing overflows; a side with lse = −∞ (no keys) weighs 0.

    Shapes:
        out1, out2: (..., Lq, Dv);  lse1, lse2: (..., Lq, 1)
        returns:    out (..., Lq, Dv), lse (..., Lq, 1)
    """
    top = torch.maximum(lse1, lse2)  # the running maximum
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    w1, w2 = torch.exp(lse1 - top), torch.exp(lse2 - top)  # (..., Lq, 1)
    total = w1 + w2
    out = (w1 * out1 + w2 * out2) / total.clamp_min(torch.finfo(total.dtype).tiny)
    return out, top + torch.log(total)


# --- chunked attention: the online softmax -------------------------------------------

def _block_allowed(mask, pattern, q_start, q_stop, k_start, k_stop, device):
    """The mask of one block of queries and keys, or None (everything allowed)."""
    if pattern is not None:
        q_idx = torch.arange(q_start, q_stop, device=device).unsqueeze(1)
        kv_idx = torch.arange(k_start, k_stop, device=device).unsqueeze(0)
        return pattern.allows(q_idx, kv_idx)  # (bq, bk)
    if mask is None:
        return None
    return mask[..., q_start:q_stop, k_start:k_stop]


def _blocks(length: int, size: int):
    """(start, stop) of consecutive blocks of ``size`` covering ``range(length)``."""
    return [(i, min(i + size, length)) for i in range(0, length, size)]


def _query_block(q, k, v, mask, pattern, q_start, kv_block, scale):
    """One block of queries against every block of keys, merged as they come.
    Returns out (..., bq, Dv) and lse (..., bq, 1), at the accumulation precision."""
    out = lse = None
    q_stop = q_start + q.shape[-2]
    for k_start, k_stop in _blocks(k.shape[-2], kv_block):
        allowed = _block_allowed(mask, pattern, q_start, q_stop, k_start, k_stop,
                                 q.device)
        if allowed is not None and not bool(allowed.any()):
            continue  # nothing to see in this block (e.g. the future, for causal)
        part = attend(q, k[..., k_start:k_stop, :], v[..., k_start:k_stop, :],
                      allowed, scale)  # (..., bq, Dv), (..., bq, 1)
        out, lse = part if out is None else merge_partials(out, lse, *part)
    if out is None:  # no key at all for this block of queries
        acc = _accumulation_dtype(q.dtype)
        out = q.new_zeros(q.shape[:-1] + (v.shape[-1],), dtype=acc)
        lse = q.new_full(q.shape[:-1] + (1,), -math.inf, dtype=acc)
    return out, lse


def _chunked_forward(q, k, v, mask, pattern, q_block, kv_block, scale):
    parts = [
        _query_block(q[..., start:stop, :], k, v, mask, pattern, start, kv_block,
                     scale)
        for start, stop in _blocks(q.shape[-2], q_block)
    ]
    if not parts:
        acc = _accumulation_dtype(q.dtype)
        empty = q.new_zeros(q.shape[:-1] + (v.shape[-1],), dtype=acc)
        return empty, empty[..., :1]
    return torch.cat([p[0] for p in parts], -2), torch.cat([p[1] for p in parts], -2)


class _ChunkedAttention(torch.autograd.Function):
    """Blocked attention whose backward recomputes each block's weights from the
    saved log-sum-exp, FlashAttention's backward written out, instead of storing them.

    With P = exp(S − lse) for a block of scores S = Q Kᵀ · scale, and dO the gradient
    of the output O:  dV += Pᵀ dO;  dP = dO Vᵀ;  dS = P ∘ (dP − rowsum(dO ∘ O));
    dQ += dS K · scale;  dK += dSᵀ Q · scale. Saved: q, k, v, O and lse, all O(n).
    """

    @staticmethod
    def forward(ctx, q, k, v, mask, pattern, q_block, kv_block, scale):
        out, lse = _chunked_forward(q, k, v, mask, pattern, q_block, kv_block, scale)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.blocks = mask, pattern, q_block, kv_block, scale
        return out.to(q.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        mask, pattern, q_block, kv_block, scale = ctx.blocks
        acc = out.dtype
        dq, dk, dv = (torch.zeros_like(t, dtype=acc) for t in (q, k, v))
        d_out = grad_out.to(acc)
        delta = (d_out * out).sum(dim=-1, keepdim=True)  # (..., Lq, 1)
        lse = torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))
        for q_start, q_stop in _blocks(q.shape[-2], q_block):
            rows = slice(q_start, q_stop)
            q_b = q[..., rows, :].to(acc) * scale
            for k_start, k_stop in _blocks(k.shape[-2], kv_block):
                allowed = _block_allowed(mask, pattern, q_start, q_stop, k_start,
                                         k_stop, q.device)
                if allowed is not None and not bool(allowed.any()):
                    continue
                cols = slice(k_start, k_stop)
                k_b, v_b = k[..., cols, :].to(acc), v[..., cols, :].to(acc)
                p = torch.exp(q_b @ k_b.transpose(-1, -2) - lse[..., rows, :])
                if allowed is not None:
                    p = p.masked_fill(~allowed, 0.0)  # (..., bq, bk)
                dv[..., cols, :] += (p.transpose(-1, -2) @ d_out[..., rows, :]
                                     ).sum_to_size(dv[..., cols, :].shape)
                ds = p * (d_out[..., rows, :] @ v_b.transpose(-1, -2)
                          - delta[..., rows, :])
                dq[..., rows, :] += (ds @ k_b).sum_to_size(dq[..., rows, :].shape)
                dk[..., cols, :] += (ds.transpose(-1, -2) @ q_b).sum_to_size(
                    dk[..., cols, :].shape)
        dq = dq * scale
        return (dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None, None,
                None, None)


def chunked_attention(
    queries: Tensor,
    keys: Tensor,
    values: Tensor,
    mask: Tensor | None = None,
    *,
    pattern: AttentionPattern | None = None,
    q_block: int = 256,
    kv_block: int = 256,
    scale: float | None = None,
    recompute: bool = True,
) -> Tensor:
    """softmax(Q Kᵀ · scale) V computed block by block with the online softmax, never
    holding more than a (q_block × kv_block) piece of the scores.

    Each block of queries visits the blocks of keys in turn and merges the partial
    results with :func:`merge_partials`. Equal to ``scaled_dot_product_attention`` up
    to rounding, for any block sizes (the tests check). Low-precision inputs
    (bfloat16, float16) are accumulated in float32 and the output cast back.

    Gradients: with ``recompute=True`` (the default) the backward pass is written out
    (FlashAttention's): it keeps only the inputs, the output and each query's
    log-sum-exp, and recomputes every block's weights from them, so training memory
    grows as n, not n². With ``recompute=False`` autograd differentiates the forward
    loop and stores every block's weights: n² again.

    Which keys a query sees: ``mask`` (bool, True = may attend, broadcastable to
    (..., Lq, Lk)) or ``pattern`` (an :class:`AttentionPattern`, evaluated block by
    block, so no n × m mask is built either). A query with no key gets zeros.

    Shapes:
        queries: (..., Lq, D);  keys: (..., Lk, D);  values: (..., Lk, Dv)
        returns: (..., Lq, Dv), the queries' dtype
    """
    check_qkv(queries, keys, values, min_dim=2)
    q, k, v = queries, keys, values
    q_block = check_int("q_block", q_block, 1)
    kv_block = check_int("kv_block", kv_block, 1)
    scale = check_scale(scale)
    if mask is not None and pattern is not None:
        raise ValueError("give mask or pattern, not both")
    if mask is not None:
        check_mask(mask, tuple(q.shape[:-1]) + (k.shape[-2],))
    if pattern is not None and not isinstance(pattern, AttentionPattern):
        raise TypeError(f"pattern must be an AttentionPattern, got {describe(pattern)}")
    if mask is not None:  # a view of shape (..., Lq, Lk), so that blocks slice it
        mask = mask.reshape((1,) * max(0, 2 - mask.dim()) + tuple(mask.shape))
        mask = mask.expand(*mask.shape[:-2], q.shape[-2], k.shape[-2])
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    args = (q, k, v, mask, pattern, q_block, kv_block, scale)
    if recompute and torch.is_grad_enabled() and any(
            t.requires_grad for t in (q, k, v)):
        return _ChunkedAttention.apply(*args)
    return _chunked_forward(*args)[0].to(q.dtype)  # (..., Lq, Dv)


# --- local attention, computed in blocks ---------------------------------------------

def _banded(q, k, v, before, after, key_ok, block, scale):
    """Each query i attends to keys i − before, ..., i + after (where ``key_ok``),
    computed for blocks of ``block`` queries against their window of keys only.

    Shapes: q, k, v (..., L, D); key_ok (..., L) bool or None;
    returns out (..., L, Dv), lse (..., L, 1)
    """
    length = q.shape[-2]
    num_blocks = -(-length // block)
    pad_end = num_blocks * block - length
    span = block + before + after  # the keys one block of queries can see

    def windows(x, fill):  # (..., L, E) -> (..., num_blocks, span, E)
        padded = torch.nn.functional.pad(x, (0, 0, before, after + pad_end),
                                         value=fill)
        return padded.unfold(-2, span, block).transpose(-1, -2)

    ok = torch.ones(length, dtype=torch.bool, device=q.device) if key_ok is None \
        else key_ok
    ok_windows = windows(ok.unsqueeze(-1), False).squeeze(-1)  # (..., nb, span)
    # Query r of a block sits at window column r + before; it may see columns r to
    # r + before + after.
    col = torch.arange(span, device=q.device)
    row = torch.arange(block, device=q.device).unsqueeze(1)
    band = (col >= row) & (col <= row + before + after)  # (block, span)
    allowed = band & ok_windows.unsqueeze(-2)  # (..., nb, block, span)
    q_blocks = torch.nn.functional.pad(q, (0, 0, 0, pad_end))
    q_blocks = q_blocks.unflatten(-2, (num_blocks, block))  # (..., nb, block, D)
    out, lse = attend(q_blocks, windows(k, 0.0), windows(v, 0.0), allowed, scale)
    out = out.flatten(-3, -2)[..., :length, :]  # (..., L, Dv)
    return out, lse.flatten(-3, -2)[..., :length, :]


def local_attention(
    queries: Tensor,
    keys: Tensor,
    values: Tensor,
    pattern: AttentionPattern,
    *,
    block_size: int | None = None,
    scale: float | None = None,
) -> Tensor:
    """Self-attention with a windowed :class:`AttentionPattern`, computed so that
    work and memory grow as n·w, not n².

    The queries go in blocks of ``block_size`` (default: the window's reach, at least
    32); each block sees only the keys its window reaches, block + reach keys, so no
    n × n matrix is built. A dilation d splits the positions into d interleaved
    sequences (positions ≡ r mod d), each a plain window; global tokens add one
    small dense attention (every query to the g global keys, merged with the window's
    result by :func:`merge_partials`) and g dense rows (the global queries). Equal to
    dense attention with ``pattern.mask(n)`` (the tests check, in float64).

    Shapes:
        queries, keys: (..., n, D);  values: (..., n, Dv)  (self-attention: one n)
        returns: (..., n, Dv), the queries' dtype
    """
    check_qkv(queries, keys, values, min_dim=2)
    q, k, v = queries, keys, values
    scale = check_scale(scale)
    if not isinstance(pattern, AttentionPattern):
        raise TypeError(f"pattern must be an AttentionPattern, got {describe(pattern)}")
    if pattern.window is None:
        raise ValueError(
            "local_attention needs a pattern with a window; for a pattern without one"
            " use chunked_attention(queries, keys, values, pattern=pattern)"
        )
    n = q.shape[-2]
    if k.shape[-2] != n:
        raise ValueError(
            "local attention is self-attention: queries and keys must have the same"
            f" length, got {n} and {k.shape[-2]}"
        )
    if n == 0:
        return q.new_zeros(q.shape[:-1] + (v.shape[-1],))  # no positions, no output
    d, g = pattern.dilation, min(pattern.global_tokens, n)
    before, after = pattern.reach
    before, after = before // d, after // d  # in steps of the dilated sequence
    block = max(before + after, 32) if block_size is None else block_size
    block = check_int("block_size", block, 1)
    key_ok = torch.arange(n, device=q.device) >= g  # global keys: attended apart
    # 1. The window, on each of the d interleaved sequences.
    padded = -(-n // d) * d  # n rounded up to a multiple of d

    def interleave(x):  # (..., n, E) -> (..., d, n/d, E): position m·d + r at [r, m]
        x = torch.nn.functional.pad(x, (0, 0, 0, padded - n))
        return x.unflatten(-2, (padded // d, d)).transpose(-2, -3)

    ok = interleave(key_ok.unsqueeze(-1))  # padding: False
    out, lse = _banded(interleave(q), interleave(k), interleave(v), before, after,
                       ok.squeeze(-1), block, scale)  # (..., d, n/d, Dv)
    out = out.transpose(-2, -3).flatten(-3, -2)[..., :n, :]  # (..., n, Dv)
    lse = lse.transpose(-2, -3).flatten(-3, -2)[..., :n, :]  # (..., n, 1)
    if g:
        # 2. Every query also sees the g global keys (the causal rule still applies).
        glob = pattern.allows(torch.arange(n, device=q.device).unsqueeze(1),
                              torch.arange(g, device=q.device).unsqueeze(0))
        part = attend(q, k[..., :g, :], v[..., :g, :], glob, scale)
        out, lse = merge_partials(out, lse, *part)
        # 3. The global queries see every key their pattern allows.
        rows = pattern.mask(g, n, q.device)  # (g, n)
        out = out.clone()
        out[..., :g, :] = attend(q[..., :g, :], k, v, rows, scale)[0]
    return out.to(q.dtype)


# --- generation with and without the cache -------------------------------------------

@torch.no_grad()
def generate(
    decoder,
    state: Any,
    start: Tensor,
    num_tokens: int,
    use_cache: bool = True,
    *,
    choose: Callable[[Tensor], Tensor] | None = None,
    eos: int | None = None,
) -> Tensor:
    """Generate ``num_tokens`` tokens, with the decoder's cache or without it.

    With the cache, the first step feeds ``start`` and each later step only the newest
    token; the decoder's state carries what came before: T positions processed for T
    tokens. Without it, each step feeds the whole prefix again from ``state`` as
    given: 1 + 2 + ... + T = T(T+1)/2 positions. Both give the same tokens (the tests
    check); the difference is time. It runs on as many threads as the machine can give
    (:func:`~attention_lib.measure.fitted_threads`).

    ``decoder(tokens, state)`` returns ``(logits, state)``, as the library's decoder
    protocol does (:mod:`attention_lib.decoding`); ``state`` is its ``init_state(...)``
    (or an empty cache), ``start`` the first input tokens of each sequence (usually
    <bos>; a language model's prompt). ``choose`` turns the last position's logits
    into the next tokens (default: the most likely; a sampler for sampling). With
    ``eos``, a sequence that has produced it gets ``eos`` from then on, and
    generation stops early once every sequence has.

    Shapes:
        start:   (B, L0) long, L0 >= 1
        returns: (B, T) long, T = ``num_tokens`` (fewer if every row ended at eos)

    Taught in ``chapters/06_efficient/04_kv_cache.ipynb``.
    """
    num_tokens = check_int("num_tokens", num_tokens, 0)
    if not isinstance(start, Tensor) or start.dim() != 2 or start.shape[1] < 1:
        raise ValueError(
            f"start must be a (B, L0) tensor of token indices, got {describe(start)}"
        )
    choose = choose or (lambda logits: logits.argmax(dim=-1))
    done = torch.zeros(start.shape[0], dtype=torch.bool, device=start.device)
    tokens = [start]
    current = state
    with fitted_threads():  # as many threads as the machine can give
        for _ in range(num_tokens):
            if use_cache:
                logits, current = decoder(tokens[-1], current)  # (B, L, V)
            else:
                logits, _ = decoder(torch.cat(tokens, dim=1), state)  # (B, t + 1, V)
            next_tokens = choose(logits[:, -1])  # (B,)
            if eos is not None:
                next_tokens = next_tokens.masked_fill(done, eos)
                done = done | (next_tokens == eos)
            tokens.append(next_tokens[:, None])  # (B, 1)
            if eos is not None and bool(done.all()):
                break
    return torch.cat(tokens[1:], dim=1) if len(tokens) > 1 else start[:, :0]

"""Choosing the next token from a language model's logits: greedy, temperature, top-k
and top-p (nucleus) sampling.

Each filter takes logits (B, V) and returns logits of the same shape with the tokens it
rules out set to −inf, so that they compose; :func:`sample` then draws from the softmax
with an optional ``torch.Generator`` for reproducible draws.

Taught in ``chapters/08_pretraining/01_decoder_only.ipynb``.
"""
from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["greedy", "apply_temperature", "top_k_filter", "top_p_filter", "sample"]


def greedy(logits: Tensor) -> Tensor:
    """The most likely token of every row (the first one on a tie).

    Shapes:
        logits: (B, V); returns: (B,), int64

    Taught in ``chapters/08_pretraining/01_decoder_only.ipynb``.
    """
    return logits.argmax(dim=-1)  # (B,)


def apply_temperature(logits: Tensor, temperature: float) -> Tensor:
    """Logits divided by ``temperature`` > 0, BEFORE the softmax: below 1 sharpens the
    distribution, above 1 flattens it.

    Shapes:
        logits: (B, V); returns: (B, V)

    Taught in ``chapters/08_pretraining/01_decoder_only.ipynb``.
    """
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    return logits / temperature  # (B, V)


def top_k_filter(logits: Tensor, k: int) -> Tensor:
    """Keep the k largest logits of every row (ties at the k-th value all kept); the
    others become −inf.

    Shapes:
        logits: (B, V); returns: (B, V)

    Taught in ``chapters/08_pretraining/01_decoder_only.ipynb``.
    """
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    kth = logits.topk(min(k, logits.shape[-1]), dim=-1).values[..., -1:]  # (B, 1)
    return logits.masked_fill(logits < kth, float("-inf"))  # (B, V)


def top_p_filter(logits: Tensor, p: float) -> Tensor:
    """Nucleus filter: keep the smallest set of most likely tokens whose probability
    reaches p; the others become −inf.

    Boundary convention: sorted by probability, a token is kept when the probability
    of the tokens before it is < p (strictly). So the top token is always kept, and
    when a prefix sums to exactly p, the tokens after it are dropped.

    Shapes:
        logits: (B, V); returns: (B, V)

    Taught in ``chapters/08_pretraining/01_decoder_only.ipynb``.
    """
    if not 0 < p <= 1:
        raise ValueError(f"p must lie in (0, 1], got {p!r}")
    sorted_logits, order = logits.sort(dim=-1, descending=True)  # (B, V) each
    probs = sorted_logits.softmax(dim=-1)  # (B, V)
    before = probs.cumsum(dim=-1) - probs  # (B, V): probability of the tokens before
    drop_sorted = before >= p  # (B, V)
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # (B, V), back in token order
    return logits.masked_fill(drop, float("-inf"))  # (B, V)


def sample(logits: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """One token per row drawn from softmax(logits).

    Shapes:
        logits: (B, V); returns: (B,), int64

    Taught in ``chapters/08_pretraining/01_decoder_only.ipynb``.
    """
    probs = logits.float().softmax(dim=-1)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # (B,)

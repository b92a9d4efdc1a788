"""Language-model pretraining pieces: BERT's masked-language-model corruption.

Taught in ``chapters/08_pretraining/03_bert.ipynb``.
"""
from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["IGNORE_INDEX", "mask_tokens"]

IGNORE_INDEX = -100  # the label of a position the loss skips (F.cross_entropy default)


def mask_tokens(
    tokens: Tensor,
    mask_id: int,
    vocab_size: int,
    special_ids: tuple[int, ...] = (),
    p: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """BERT's corruption (Devlin et al., 2019): choose each ordinary token with
    probability p; of the chosen, 80 % become ``mask_id``, 10 % a random token of the
    vocabulary, 10 % stay. Padding and other ``special_ids`` are never chosen.

    Returns ``(inputs, labels)``: labels hold the original token where chosen and
    :data:`IGNORE_INDEX` elsewhere. Random tokens are drawn from the whole vocabulary,
    as BERT does. Draws come from ``generator`` (on the tokens' device).

    Shapes:
        tokens: (B, L), int64; returns: inputs (B, L), labels (B, L)

    Taught in ``chapters/08_pretraining/03_bert.ipynb``.
    """
    if not 0 <= p <= 1:
        raise ValueError(f"p must lie in [0, 1], got {p!r}")
    special = torch.tensor(list(special_ids) + [mask_id], device=tokens.device)
    ordinary = ~torch.isin(tokens, special)  # (B, L)
    draw = torch.rand(tokens.shape, generator=generator, device=tokens.device)
    chosen = ordinary & (draw < p)  # (B, L)
    # One more uniform draw per position splits the chosen 80 / 10 / 10.
    split = torch.rand(tokens.shape, generator=generator, device=tokens.device)
    random_tokens = torch.randint(vocab_size, tokens.shape, generator=generator,
                                  device=tokens.device)  # (B, L)
    inputs = torch.where(chosen & (split < 0.8), mask_id, tokens)  # (B, L)
    inputs = torch.where(chosen & (split >= 0.8) & (split < 0.9), random_tokens,
                         inputs)  # (B, L)
    labels = torch.where(chosen, tokens, IGNORE_INDEX)  # (B, L)
    return inputs, labels

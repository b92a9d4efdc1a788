"""Beam search with length normalisation, for decoders that can reorder their state.

Greedy decoding keeps the one most likely word at each step; beam search keeps the
``beam_size`` most likely *prefixes* and, at the end, picks the finished hypothesis with
the best length-normalised log-probability ``log p(y) / len(y) ** length_penalty`` (the
score that *Dive into Deep Learning* uses; without it, short outputs win because every
extra word costs log-probability).

A decoder qualifies if it has ``reorder_state(state, index)`` (pick batch rows of a
state), as :class:`~attention_lib.bahdanau.BahdanauDecoder` does.

Taught in ``chapters/03_bahdanau/02_training_and_results.ipynb``.
"""
from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional as F

from ._checks import check_int, check_real
from .seq2seq import _cut_at_eos, _start_decoding

__all__ = ["beam_search"]


@torch.no_grad()
def beam_search(
    model,
    src: Tensor,
    src_valid_lens: Tensor | None,
    bos: int,
    eos: int,
    max_len: int,
    beam_size: int = 4,
    length_penalty: float = 0.75,
) -> tuple[list[list[int]], list[Tensor]]:
    """Translate a batch with beam search; every sentence keeps ``beam_size``
    hypotheses.

    Returns, like :func:`~attention_lib.seq2seq.greedy_decode`, the best output per
    sentence (without ``<bos>``, cut before ``<eos>``) and, when the decoder keeps
    ``attention_weights``, the weights of that output's steps, one (T, Lk) tensor per
    sentence (an empty list otherwise). With ``beam_size=1`` the result is the greedy
    translation; ``max_len=0`` gives empty outputs, as greedy decoding does.

    Shapes:
        src: (B, Lk); src_valid_lens: (B,) or None
        returns: B lists of at most ``max_len`` ints; B tensors of (T, Lk) (or an empty
            list)

    Taught in ``chapters/03_bahdanau/02_training_and_results.ipynb``.
    """
    check_int("beam_size", beam_size, 1)
    check_real("length_penalty", length_penalty, " (0 = no length normalisation)")
    decoder = model.decoder
    if not hasattr(decoder, "reorder_state"):
        raise TypeError(
            "beam search needs a decoder with reorder_state(state, index); "
            f"{type(decoder).__name__} has none"
        )
    state, device = _start_decoding(model, src, src_valid_lens, bos, eos, max_len)
    batch_size, k = src.shape[0], beam_size
    rows = torch.arange(batch_size, device=device)
    # B*k rows, sentence-major
    state = decoder.reorder_state(state, rows.repeat_interleave(k))
    # Only the first copy of each sentence is live at the start, so the k beams do not
    # coincide.
    scores = torch.full((batch_size, k), float("-inf"), device=device)
    scores[:, 0] = 0.0  # (B, k): log-probability of each hypothesis
    lengths = torch.zeros(batch_size, k, device=device)  # tokens so far, <eos> included
    finished = torch.zeros(batch_size, k, dtype=torch.bool, device=device)
    # (B*k, 1)
    tokens = torch.full((batch_size * k, 1), bos, dtype=torch.long, device=device)
    # (B, k, t)
    history = torch.empty(batch_size, k, 0, dtype=torch.long, device=device)
    weights = None  # (B, k, t, Lk)
    for _ in range(max_len):
        logits, state = decoder(tokens, state)  # (B*k, 1, V)
        # (B, k, V)
        log_probs = F.log_softmax(logits[:, 0].float(), dim=-1).view(batch_size, k, -1)
        vocab_size = log_probs.shape[-1]
        # 1. A finished hypothesis can only be continued by <eos> at no cost: it stays
        # as it is.
        log_probs = torch.where(
            finished.unsqueeze(-1), torch.full_like(log_probs, float("-inf")), log_probs
        )
        log_probs[..., eos] = torch.where(finished, 0.0, log_probs[..., eos])
        # 2. Keep the k best extensions of all k hypotheses of each sentence.
        candidates = (scores.unsqueeze(-1) + log_probs).view(batch_size, -1)  # (B, k*V)
        scores, flat = candidates.topk(k, dim=-1)  # (B, k)
        parent, token = flat // vocab_size, flat % vocab_size  # (B, k) each
        lengths = lengths.gather(1, parent) + (~finished.gather(1, parent)).float()
        finished = finished.gather(1, parent) | (token == eos)
        history = torch.cat(
            [
                history.gather(1, parent.unsqueeze(-1).expand_as(history)),
                token.unsqueeze(-1),
            ],
            dim=2,
        )
        step_weights = getattr(decoder, "attention_weights", None)
        if step_weights is not None:
            # (B, k, 1, Lk)
            step_weights = step_weights.reshape(batch_size, k, 1, -1).float()
            if weights is not None:
                weights = weights.gather(1, parent[:, :, None, None].expand_as(weights))
            step_weights = step_weights.gather(
                1, parent[:, :, None, None].expand_as(step_weights)
            )
            weights = (
                step_weights
                if weights is None
                else torch.cat([weights, step_weights], dim=2)
            )
        # 3. Continue from the chosen parents.
        state = decoder.reorder_state(
            state, (rows.unsqueeze(1) * k + parent).reshape(-1)
        )
        tokens = token.reshape(-1, 1)
        if bool(finished.all()):
            break
    # 4. The best hypothesis by length-normalised score (a dead beam scores -inf and
    # never wins).
    normalised = scores / lengths.clamp(min=1) ** length_penalty  # (B, k)
    best = normalised.argmax(dim=1)  # (B,)
    sentences, attention = [], []
    for i in range(batch_size):
        row = _cut_at_eos(history[i, best[i]].tolist(), eos)
        sentences.append(row)
        if weights is not None:
            attention.append(weights[i, best[i], : max(len(row), 1)].cpu())  # (T, Lk)
    return sentences, attention

"""Decoding, written once for every decoder: greedy decoding, beam search, translation.

A decoder takes part by following one protocol, :class:`Decoder`:

- ``init_state(enc_outputs, src_valid_lens) -> state``: what it needs from the encoder;
- ``decoder(tgt_input, state, need_weights=False) -> (logits, state)``: one or more
  steps; logits are (B, Lq, V);
- ``reorder_state(state, index) -> state``: pick (and repeat) batch rows of a state, as
  beam search needs when it keeps k hypotheses per sentence and reorders them;
- ``attention_weights``: the weights of its last call made with ``need_weights=True``,
  (B, Lq, Lk) or, with several heads, (B, H, Lq, Lk); ``None`` otherwise, and for a
  decoder without attention.

The state is whatever the decoder needs: chapter 1's (context, hidden), chapter 3's
:class:`~attention_lib.bahdanau.BahdanauState`, a Transformer's key/value cache.

Weights cost time (a Transformer's fused attention never writes them), so every
function here computes them only when asked, ``need_weights=True``, and returns them
in one layout: per sentence, the weights of the
steps that wrote its output, ``(..., T, Lk)`` with T = max(len(output), 1) and ``...``
the decoder's own leading axes (none, or H).

The source is whatever the encoder reads: tokens (B, Lk), checked here, or a float
tensor such as a batch of images (B, C, Hgt, W), which the encoder checks.

Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb`` (greedy decoding),
``chapters/03_bahdanau/02_training_and_results.ipynb`` (beam search) and
``chapters/07_visual/02_cross_attention.ipynb`` (decoding from images).
"""
from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

import torch
from torch import Tensor
from torch.nn import functional as F

from ._checks import (
    check_int,
    check_real,
    check_src_lengths,
    check_str_list,
    check_tokens,
)
from .data import TranslationData

__all__ = ["Decoder", "greedy_decode", "beam_search", "translate"]


@runtime_checkable
class Decoder(Protocol):
    """What :func:`greedy_decode`, :func:`beam_search` and :func:`translate` need from
    a decoder (see the module's docstring)."""

    attention_weights: Tensor | None

    def init_state(self, enc_outputs: Any, src_valid_lens: Tensor | None) -> Any: ...

    def __call__(
        self, tgt_input: Tensor, state: Any, *, need_weights: bool = False
    ) -> tuple[Tensor, Any]: ...

    def reorder_state(self, state: Any, index: Tensor) -> Any: ...


def _check_decoder(decoder) -> None:
    missing = [
        name
        for name in ("init_state", "reorder_state", "attention_weights")
        if not hasattr(decoder, name)
    ]
    if missing:
        raise TypeError(
            f"{type(decoder).__name__} does not follow the decoder protocol "
            f"(attention_lib.decoding.Decoder): it has no {', '.join(missing)}"
        )


def _start_decoding(model, src, src_valid_lens, bos, eos, max_len):
    """What every decoding loop does first: check its arguments, switch to eval mode,
    move the batch to the model's device and encode it. Returns the decoder's initial
    state and the device."""
    _check_decoder(model.decoder)
    # A source of tokens is checked here; a float source (a batch of images, say) is
    # the encoder's to check, and its valid lengths the decoder's (they count keys).
    if not (isinstance(src, Tensor) and src.is_floating_point()):
        check_tokens("src", src)
        if src_valid_lens is not None:
            check_src_lengths(src, src_valid_lens)
    check_int("max_len", max_len, 0)
    embedding = getattr(model.decoder, "embedding", None)
    for name, token in (("bos", bos), ("eos", eos)):
        if check_int(name, token, 0) >= getattr(
            embedding, "num_embeddings", float("inf")
        ):
            raise ValueError(
                f"{name} must be a token index of the target vocabulary, in [0, "
                f"{embedding.num_embeddings}), got {token}"
            )
    model.eval()
    device = next(model.parameters()).device
    src = src.to(device)
    src_valid_lens = None if src_valid_lens is None else src_valid_lens.to(device)
    state = model.decoder.init_state(model.encoder(src, src_valid_lens), src_valid_lens)
    return state, device


def _last_step_weights(decoder) -> Tensor | None:
    """The decoder's weights for the step it just took: (B, ..., 1, Lk), or None."""
    weights = decoder.attention_weights
    return None if weights is None else weights[..., -1:, :].detach().float()


def _cut_at_eos(indices: list[int], eos: int) -> list[int]:
    """The output proper: the indices before the first ``<eos>`` (all of them if there
    is none)."""
    return indices[: indices.index(eos)] if eos in indices else indices


@torch.no_grad()
def greedy_decode(
    model,
    src: Tensor,
    src_valid_lens: Tensor | None,
    bos: int,
    eos: int,
    max_len: int,
    need_weights: bool = False,
) -> tuple[list[list[int]], list[Tensor]]:
    """Translate a batch greedily: feed back the most likely token until ``<eos>`` or
    ``max_len``.

    Returns the output indices per sentence (without ``<bos>``, cut before ``<eos>``)
    and, with ``need_weights=True`` and a decoder with attention, each sentence's
    weights, (..., T, Lk) with T = max(len(output), 1) (an empty list otherwise).
    ``max_len=0`` gives empty outputs; a negative ``max_len`` is a ValueError.

    Shapes:
        src: (B, Lk) tokens, or a float batch the encoder reads (e.g. images
        (B, C, Hgt, W)); src_valid_lens: (B,) or None
        returns: B lists of at most ``max_len`` ints; B tensors of (..., T, Lk)
    """
    state, device = _start_decoding(model, src, src_valid_lens, bos, eos, max_len)
    batch_size = src.shape[0]
    token = torch.full((batch_size, 1), bos, dtype=torch.long, device=device)  # (B, 1)
    finished = torch.zeros(batch_size, dtype=torch.bool, device=device)
    outputs, steps = [], []
    for _ in range(max_len):
        logits, state = model.decoder(token, state, need_weights=need_weights)
        token = logits.argmax(dim=-1)  # (B, 1)
        outputs.append(token.squeeze(1))
        step_weights = _last_step_weights(model.decoder)  # (B, ..., 1, Lk) or None
        if step_weights is not None:
            steps.append(step_weights.cpu())
        finished |= token.squeeze(1) == eos
        if bool(finished.all()):
            break
    rows = [[] for _ in range(batch_size)]
    if outputs:
        rows = torch.stack(outputs, dim=1).tolist()  # (B, T)
    sentences = [_cut_at_eos(row, eos) for row in rows]
    if not steps:
        return sentences, []
    weights = torch.cat(steps, dim=-2)  # (B, ..., T, Lk)
    return sentences, [w[..., : max(len(s), 1), :] for w, s in zip(weights, sentences)]


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
    need_weights: bool = False,
) -> tuple[list[list[int]], list[Tensor]]:
    """Translate a batch with beam search; every sentence keeps ``beam_size``
    hypotheses.

    Greedy decoding keeps the one most likely word at each step; beam search keeps the
    ``beam_size`` most likely *prefixes* and, at the end, picks the finished hypothesis
    with the best length-normalised log-probability ``log p(y) / len(y) **
    length_penalty`` (the score *Dive into Deep Learning* uses; without it, short
    outputs win because every extra word costs log-probability).

    Returns what :func:`greedy_decode` returns, for the best hypothesis of each
    sentence. With ``beam_size=1`` the result is the greedy translation.

    Shapes:
        src: (B, Lk) tokens, or a float batch the encoder reads (e.g. images
        (B, C, Hgt, W)); src_valid_lens: (B,) or None
        returns: B lists of at most ``max_len`` ints; B tensors of (..., T, Lk)
    """
    check_int("beam_size", beam_size, 1)
    check_real("length_penalty", length_penalty, " (0 = no length normalisation)")
    state, device = _start_decoding(model, src, src_valid_lens, bos, eos, max_len)
    decoder = model.decoder
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
    tokens = torch.full((batch_size * k, 1), bos, dtype=torch.long, device=device)
    history = torch.empty(batch_size, k, 0, dtype=torch.long, device=device)  # (B,k,t)
    weights = None  # (B, k, ..., t, Lk)
    for _ in range(max_len):
        logits, state = decoder(tokens, state, need_weights=need_weights)  # (B*k, 1, V)
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
        history = torch.cat([_pick(history, parent), token.unsqueeze(-1)], dim=2)
        step_weights = _last_step_weights(decoder)  # (B*k, ..., 1, Lk) or None
        if step_weights is not None:
            step_weights = _pick(step_weights.unflatten(0, (batch_size, k)), parent)
            weights = (
                step_weights
                if weights is None
                else torch.cat([_pick(weights, parent), step_weights], dim=-2)
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
            attention.append(weights[i, best[i], ..., : max(len(row), 1), :].cpu())
    return sentences, attention


def _pick(x: Tensor, parent: Tensor) -> Tensor:
    """The rows of ``x`` (B, k, ...) that ``parent`` (B, k) picks:
    x[b, parent[b, j], ...]."""
    index = parent.reshape(*parent.shape, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, index)


def translate(
    model,
    data: TranslationData,
    sentences: Sequence[str],
    max_len: int | None = None,
    batch_size: int = 256,
    beam_size: int = 1,
    need_weights: bool = False,
) -> tuple[list[str], list[Tensor]]:
    """Translations of raw English sentences, as space-separated French tokens.

    ``beam_size=1`` decodes greedily (:func:`greedy_decode`); a larger beam uses
    :func:`beam_search`. With ``need_weights=True`` it also returns each sentence's
    attention weights, (..., T, Lk), when the decoder has attention (an empty list
    otherwise); without, decoding takes the fast path.

    ``sentences`` must be a list of strings (a single string is refused, not split into
    characters); an empty list gives empty results. ``max_len=None`` means
    ``data.num_steps + 2``.

    Shapes:
        sentences: N strings; returns: N strings, N tensors of (..., T, Lk)
    """
    sentences = check_str_list("sentences", sentences)
    max_len = (
        data.num_steps + 2 if max_len is None else check_int("max_len", max_len, 0)
    )
    check_int("batch_size", batch_size, 1)
    check_int("beam_size", beam_size, 1)
    vocab = data.tgt_vocab
    out, attention = [], []
    for start in range(0, len(sentences), batch_size):
        src, src_valid_lens = data.encode_source(sentences[start : start + batch_size])
        args = (model, src, src_valid_lens, vocab.bos, vocab.eos, max_len)
        if beam_size == 1:
            indices, weights = greedy_decode(*args, need_weights=need_weights)
        else:
            indices, weights = beam_search(*args, beam_size=beam_size,
                                           need_weights=need_weights)
        out.extend(" ".join(vocab.to_tokens(row)) for row in indices)
        attention.extend(weights)
    return out, attention

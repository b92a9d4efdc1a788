"""Language models from the Transformer's halves: a decoder-only model trained to
predict the next word (GPT), the same stack without the causal mask trained to fill in
masked words (BERT), and what they need around them.

* :class:`TransformerLM`: token embeddings, ``num_layers``
  :class:`~attention_lib.transformer.TransformerEncoderBlock` (self-attention and a
  feed-forward network; causal or bidirectional), a final norm and an output layer
  over the vocabulary. Its keyword options build the 2017 block or today's (RMSNorm,
  SwiGLU, RoPE, no biases, tied embeddings). Generating, it keeps each layer's
  projected keys and values in a :class:`~attention_lib.multihead.KVCache`.
* :func:`generate`: greedy decoding or sampling (temperature, top-k, top-p, from
  :mod:`attention_lib.sampling`), with or without the cache.
* :func:`mask_tokens`: BERT's 80/10/10 corruption; :func:`lm_loss`,
  :func:`train_lm`, :func:`evaluate_lm`.
* :func:`load_sentences`: the corpus's English sentences, each once, as rows of
  ``<bos> w_1 ... w_n <eos>``.

Taught in ``chapters/08_pretraining/01_decoder_only.ipynb``.
"""
from __future__ import annotations

import math
import time
from typing import Callable, NamedTuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from tqdm.auto import tqdm

from ._checks import (
    check_int,
    check_rotary,
    check_src_lengths,
    check_tokens,
    describe,
)
from .data import Vocab, load_fra_eng
from .efficient import generate as generate_tokens
from .multihead import KVCache, head_mask
from .masking import causal_mask
from .measure import fitted_threads
from .positional import RotaryEmbedding, SinusoidalPositionalEncoding
from .sampling import apply_temperature, greedy, sample, top_k_filter, top_p_filter
from .training import History
from .transformer import TransformerEncoderBlock, _token_embedding, make_norm

__all__ = [
    "IGNORE_INDEX",
    "MASK",
    "POSITIONS",
    "SentenceData",
    "load_sentences",
    "next_word_examples",
    "mask_tokens",
    "TransformerLM",
    "SequenceClassifier",
    "generate",
    "lm_loss",
    "train_lm",
    "evaluate_lm",
]

IGNORE_INDEX = -100  # the label of a position the loss skips (F.cross_entropy default)
MASK = "<mask>"  # BERT's [MASK], the last word of the vocabulary
POSITIONS = ("sinusoidal", "rope")


# --- data -----------------------------------------------------------------------------

class SentenceData(NamedTuple):
    """The corpus's English sentences for language modelling.

    ``vocab`` is built from the training sentences (words seen ``min_freq`` times,
    then ``<mask>`` last); each split is a tensor whose rows are ``<bos> w_1 ... w_n
    <eos>``, right-padded with ``<pad>``, at most ``num_steps + 1`` tokens; the
    sentences themselves (token lists) are in ``sentences[split]``.

    Shapes:
        tokens[split]: (N, num_steps + 1), int64

    Taught in ``chapters/08_pretraining/01_decoder_only.ipynb``.
    """

    vocab: Vocab
    tokens: dict
    sentences: dict

    @property
    def mask_id(self) -> int:
        """The index of ``<mask>``."""
        return self.vocab[MASK]


def load_sentences(num_steps: int = 12, min_freq: int = 2, max_train: int | None = None,
                   seed: int = 0) -> SentenceData:
    """The English sides of :func:`~attention_lib.data.load_fra_eng`'s splits, each
    sentence once (several French translations repeat it), with at most
    ``num_steps - 1`` words (longer ones are left out, not cut). The splits never share
    a sentence. ``max_train`` keeps a seeded random subset of the training pairs.

    Shapes:
        returns: :class:`SentenceData`; tokens (N, num_steps + 1)

    Taught in ``chapters/08_pretraining/01_decoder_only.ipynb``.
    """
    check_int("num_steps", num_steps, 2)
    data = load_fra_eng(num_steps, min_freq, max_train, seed)
    sentences = {}
    for split, pairs in data.pairs.items():
        unique = dict.fromkeys(tuple(english) for english, _ in pairs)
        sentences[split] = [list(s) for s in unique if 0 < len(s) < num_steps]
    vocab = Vocab(sentences["train"], min_freq=min_freq)
    vocab = Vocab.from_tokens(vocab.idx_to_token + [MASK])
    tokens = {}
    for split, rows in sentences.items():
        block = torch.full((len(rows), num_steps + 1), vocab.pad)
        for i, words in enumerate(rows):
            row = [vocab.bos] + vocab[words] + [vocab.eos]
            block[i, : len(row)] = torch.tensor(row)
        tokens[split] = block  # (N, num_steps + 1)
    return SentenceData(vocab, tokens, sentences)


def next_word_examples(tokens: Tensor, pad: int) -> tuple[Tensor, Tensor]:
    """Inputs and labels for next-word prediction: the input is every token but the
    last, the label at position i is token i + 1; labels at padding are
    :data:`IGNORE_INDEX`, and columns that are padding in every row are dropped.

    Shapes:
        tokens: (B, L + 1); returns: inputs (B, L'), labels (B, L') with L' <= L

    Taught in ``chapters/08_pretraining/01_decoder_only.ipynb``.
    """
    length = int((tokens != pad).sum(dim=1).max()) - 1  # the longest input
    inputs = tokens[:, :length]  # (B, L')
    labels = tokens[:, 1 : length + 1].masked_fill(
        tokens[:, 1 : length + 1] == pad, IGNORE_INDEX)  # (B, L')
    return inputs, labels


def mask_tokens(
    tokens: Tensor,
    mask_id: int,
    vocab_size: int,
    special_ids: tuple[int, ...] = (),
    p: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """BERT's corruption (Devlin et al., 2019), drawn per token as Hugging Face's
    collator does: choose each ordinary token with probability p (Google's code takes a
    fixed count per sequence instead); of the chosen, 80 % become ``mask_id``, 10 % a
    random token of the vocabulary, 10 % stay. Only ``mask_id`` and the ids in
    ``special_ids`` are never chosen: pass the padding id there.

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


# --- the model ------------------------------------------------------------------------

class TransformerLM(nn.Module):
    """A stack of self-attention blocks over embedded tokens, scoring every word of
    the vocabulary at every position: with ``causal=True`` a decoder-only language
    model (GPT), with ``causal=False`` a bidirectional encoder (BERT).

    The 2017 recipe by default: token embeddings × √D plus sinusoidal positions,
    post-norm LayerNorm blocks with ReLU feed-forward networks and biases, a separate
    output layer. Each option changes one thing:

    * ``norm_first=True``: pre-norm blocks and a final norm before the output layer;
    * ``norm="rms"``: :class:`~attention_lib.transformer.RMSNorm` for every norm;
    * ``activation="swiglu"``: :class:`~attention_lib.transformer.SwiGLU` of hidden
      size ``ffn_hidden``;
    * ``positions="rope"``: no added positions; queries and keys are rotated in every
      layer (:class:`~attention_lib.positional.RotaryEmbedding`, ``rope_base``);
    * ``bias=False``: no bias in any linear layer or norm;
    * ``tie_embeddings=True``: the output layer's weights are the token embeddings,
      and the output layer has no bias, whatever ``bias`` says.

    ``forward(tokens)`` returns the logits; ``valid_lens`` hides padding keys (for the
    encoder; a causal model's right padding is never seen by a real position). With
    ``cache`` (:meth:`empty_cache` starts one), ``tokens`` are the newest positions,
    and ``(logits, cache)`` comes back with every layer's keys and values grown by
    them: feeding a sequence in pieces gives the same logits as feeding it whole (the
    tests check). ``positions``, (L,) or (B, L), place the tokens for RoPE (default
    t + arange(L)). ``hidden(tokens)`` is the final states before the output layer.

    Shapes:
        tokens:     (B, L) int64, L <= ``max_len`` (counting cached positions)
        valid_lens: (B,), optional
        cache:      tuple of ``num_layers`` KVCache of (B, H, t, Dh), optional
        returns:    logits (B, L, V); with a cache: logits, the cache of (B, H, t + L,
            Dh)

    Taught in ``chapters/08_pretraining/01_decoder_only.ipynb``.
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        num_heads: int,
        ffn_hidden: int,
        num_layers: int,
        *,
        causal: bool = True,
        norm_first: bool = False,
        norm: str = "layer",
        activation: str = "relu",
        positions: str = "sinusoidal",
        bias: bool = True,
        tie_embeddings: bool = False,
        dropout: float = 0.0,
        max_len: int = 64,
        rope_base: float = 10000.0,
    ):
        super().__init__()
        if positions not in POSITIONS:
            raise ValueError(f"positions must be one of {POSITIONS}, got"
                             f" {describe(positions)}")
        num_layers = check_int("num_layers", num_layers, 1)
        self.embed_dim = check_int("embed_dim", embed_dim, 1)
        self.causal, self.max_len = bool(causal), check_int("max_len", max_len, 1)
        self.embedding = _token_embedding(vocab_size, embed_dim)
        self.positional = rotary = None
        if positions == "sinusoidal":
            self.positional = SinusoidalPositionalEncoding(embed_dim, max_len, dropout)
        else:
            rotary = RotaryEmbedding(embed_dim // num_heads, max_len, rope_base)
        self.blocks = nn.ModuleList(
            TransformerEncoderBlock(embed_dim, num_heads, ffn_hidden, dropout,
                                    norm_first, activation, norm=norm, bias=bias,
                                    rotary=rotary)
            for _ in range(num_layers)
        )
        self.final_norm = make_norm(norm, embed_dim, bias) if norm_first else None
        self.output = nn.Linear(embed_dim, vocab_size, bias=bias and not tie_embeddings)
        if tie_embeddings:
            self.output.weight = self.embedding.weight  # (V, D), one tensor

    def empty_cache(self, batch_size: int, like: Tensor | None = None
                    ) -> tuple[KVCache, ...]:
        """Every layer's cache of no positions.

        Shapes:
            returns: ``num_layers`` KVCache of (B, H, 0, Dh)
        """
        like = self.embedding.weight if like is None else like
        return tuple(block.self_attention.empty_cache(batch_size, like)
                     for block in self.blocks)

    def _check(self, tokens, valid_lens, cache, positions) -> int:
        check_tokens("tokens", tokens, self.embedding.num_embeddings)
        if valid_lens is not None:
            check_src_lengths(tokens, valid_lens)
        cached = 0
        if cache is not None:
            if not (isinstance(cache, tuple) and len(cache) == len(self.blocks)):
                raise TypeError(f"cache must be a tuple of {len(self.blocks)} KVCache"
                                f" (one per layer, from empty_cache), got"
                                f" {describe(cache)}")
            cached = cache[0].keys.shape[2]
        if positions is not None and self.positional is not None:
            raise ValueError("positions place tokens for RoPE; this model adds"
                             " sinusoidal positions (build it with positions='rope')")
        if positions is not None:
            batch_size, length = tokens.shape
            check_rotary(self.blocks[0].self_attention.rotary, positions, batch_size,
                         length, length, cached + length)
        if cached + tokens.shape[1] > self.max_len:
            raise ValueError(
                f"tokens has L={tokens.shape[1]} positions after {cached} cached ones,"
                f" more than the model's max_len={self.max_len}"
            )
        return cached

    def forward(
        self,
        tokens: Tensor,
        valid_lens: Tensor | None = None,
        *,
        cache: tuple[KVCache, ...] | None = None,
        positions: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, tuple[KVCache, ...]]:
        x = self.hidden(tokens, valid_lens, cache=cache, positions=positions,
                        need_weights=need_weights)
        if cache is None:
            return self.output(x)  # (B, L, V)
        x, cache = x
        return self.output(x), cache  # (B, L, V), the grown cache

    def hidden(self, tokens, valid_lens=None, *, cache=None, positions=None,
               need_weights=False):
        """The final states, before the output layer (see the class).

        Shapes:
            tokens: (B, L); returns: (B, L, D); with a cache: (B, L, D), the cache
        """
        cached = self._check(tokens, valid_lens, cache, positions)
        length = tokens.shape[1]
        # 1. Embed: × √D, plus sinusoidal positions t, ..., t + L − 1 (RoPE instead
        # rotates queries and keys inside every layer).
        x = self.embedding(tokens) * math.sqrt(self.embed_dim)  # (B, L, D)
        if self.positional is not None:
            x = self.positional.add(x, cached)  # (B, L, D)
        # 2. One mask for every layer: causal (query t + i sees keys up to t + i) and
        # the padding of valid_lens.
        causal = (causal_mask(length, cached + length, tokens.device)
                  if self.causal and length > 1 else None)  # (L, t + L)
        mask = head_mask((tokens.shape[0], length, cached + length), valid_lens,
                         causal)  # (B or 1, 1, L or 1, t + L), or None
        # 3. The blocks; with a cache each reads its layer's and returns it grown.
        new_cache = []
        for i, block in enumerate(self.blocks):
            if cache is None:
                x = block.encode(x, mask, need_weights=need_weights,
                                 positions=positions)  # (B, L, D)
            else:
                x, layer_cache = block.encode(x, mask, need_weights=need_weights,
                                              cache=cache[i], positions=positions)
                new_cache.append(layer_cache)  # (B, H, t + L, Dh)
        if self.final_norm is not None:
            x = self.final_norm(x)  # (B, L, D)
        return x if cache is None else (x, tuple(new_cache))


class SequenceClassifier(nn.Module):
    """A sentence classifier on a :class:`TransformerLM` (pretrained or fresh): the
    mean of its final states over each sentence's real tokens, then a linear layer.
    (BERT reads a ``[CLS]`` token instead; our pretraining has no task that trains
    one.)

    Shapes:
        tokens: (B, L); valid_lens: (B,); returns: logits (B, num_classes)

    Taught in ``chapters/08_pretraining/03_bert.ipynb``.
    """

    def __init__(self, encoder: TransformerLM, num_classes: int):
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(encoder.embed_dim, check_int("num_classes",
                                                           num_classes, 2))

    def forward(self, tokens: Tensor, valid_lens: Tensor) -> Tensor:
        states = self.encoder.hidden(tokens, valid_lens)  # (B, L, D)
        real = (torch.arange(tokens.shape[1], device=tokens.device)
                < valid_lens[:, None]).unsqueeze(-1)  # (B, L, 1)
        pooled = (states * real).sum(1) / real.sum(1).clamp(min=1)  # (B, D)
        return self.head(pooled)  # (B, num_classes)


# --- generating -----------------------------------------------------------------------

@torch.no_grad()
def generate(
    model: TransformerLM,
    prompt: Tensor,
    max_new_tokens: int,
    *,
    eos: int | None = None,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
) -> Tensor:
    """Continue every prompt by up to ``max_new_tokens`` tokens, with chapter 6's
    :func:`~attention_lib.efficient.generate` loop.

    Greedy (the most likely token) unless ``do_sample``: then temperature, top-k and
    top-p filter the logits (in that order) and a token is drawn with ``generator``.
    A row that has produced ``eos`` gets ``eos`` from then on; generation stops when
    every row has. With ``use_cache`` (the default) the prompt is fed once and then
    one token per step, each layer's keys and values kept in the cache; without it
    the whole sequence is fed again every step, which gives the same tokens (the tests
    check) at a cost that grows with the square of the length.

    Shapes:
        prompt: (B, L0) int64, no padding; returns: (B, L0 + n), n <= max_new_tokens

    Taught in ``chapters/08_pretraining/01_decoder_only.ipynb``.
    """
    if not model.causal:
        raise ValueError("generate needs a causal model (causal=True)")
    model.eval()

    def choose(logits: Tensor) -> Tensor:  # (B, V) -> (B,)
        if not do_sample:
            return greedy(logits)
        logits = apply_temperature(logits.float(), temperature)
        if top_k is not None:
            logits = top_k_filter(logits, top_k)
        if top_p is not None:
            logits = top_p_filter(logits, top_p)
        return sample(logits, generator)

    def decoder(tokens: Tensor, cache):  # the decoder protocol's call
        return model(tokens, cache=cache)

    new = generate_tokens(decoder, model.empty_cache(prompt.shape[0]), prompt,
                          max_new_tokens, use_cache, choose=choose, eos=eos)
    return torch.cat([prompt, new], dim=1)  # (B, L0 + n)


# --- training -------------------------------------------------------------------------

def lm_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Mean cross-entropy over the labelled positions (labels :data:`IGNORE_INDEX`
    are skipped): next-word prediction and masked-word prediction alike.

    Shapes:
        logits: (B, L, V); labels: (B, L); returns: scalar

    Taught in ``chapters/08_pretraining/01_decoder_only.ipynb``.
    """
    return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(),
                           ignore_index=IGNORE_INDEX)


def train_lm(
    model: nn.Module,
    batches: Callable[[torch.Generator], tuple],
    steps: int,
    optimizer: torch.optim.Optimizer,
    schedule=None,
    *,
    seed: int = 0,
    grad_clip: float = 1.0,
    device: torch.device | None = None,
    desc: str = "training",
    progress: bool = True,
) -> History:
    """Train for ``steps`` updates. ``batches(generator)`` returns one minibatch,
    ``(inputs, valid_lens, labels)`` with ``valid_lens`` possibly None, drawn with the
    seeded ``generator``; the loss is :func:`lm_loss` of ``model(inputs, valid_lens)``
    (a :class:`SequenceClassifier`'s (B, C) logits are read as one position per
    sentence). Gradient-norm clipping at ``grad_clip``; ``schedule`` is stepped after
    every update; one progress bar.

    Returns a :class:`~attention_lib.training.History` whose ``"train"`` holds the
    loss of every update, with its ``seconds``, ``batches`` and ``tokens``.

    Shapes:
        inputs: (B, L); valid_lens: (B,) or None; labels: (B, L), or (B,) for a
        classifier

    Taught in ``chapters/08_pretraining/01_decoder_only.ipynb``.
    """
    check_int("steps", steps, 1)
    device = device or next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    history = History(train=[], val=[])
    model.train()
    bar = tqdm(total=steps, desc=desc, unit="batch", disable=not progress,
               miniters=max(1, steps // 100))
    started = time.perf_counter()
    with fitted_threads() as refit:  # as many threads as the machine can give
        for _ in range(steps):
            refit()  # the machine's load may have changed
            inputs, valid_lens, labels = batches(generator)
            inputs, labels = inputs.to(device), labels.to(device)
            if valid_lens is not None:
                valid_lens = valid_lens.to(device)
            logits = model(inputs, valid_lens)  # (B, L, V) or (B, C)
            if logits.dim() == 2:
                logits, labels = logits[:, None], labels[:, None]  # one position each
            loss = lm_loss(logits, labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            optimizer.step()
            if schedule is not None:
                schedule.step()
            history["train"].append(loss.item())
            history.batches += 1
            history.tokens += int((labels != IGNORE_INDEX).sum())
            bar.update(1)
            bar.set_postfix(loss=f"{history['train'][-1]:.3f}", refresh=False)
    history.seconds = time.perf_counter() - started
    bar.close()
    model.eval()
    return history


@torch.no_grad()
def evaluate_lm(model: nn.Module, inputs: Tensor, valid_lens: Tensor | None,
                labels: Tensor, batch_size: int = 512) -> float:
    """Mean cross-entropy per labelled position over a whole split, in minibatches;
    ``math.exp`` of it is the perplexity.

    Shapes:
        inputs, labels: (N, L); valid_lens: (N,) or None; returns: float

    Taught in ``chapters/08_pretraining/01_decoder_only.ipynb``.
    """
    model.eval()
    device = next(model.parameters()).device
    total, count = 0.0, 0
    for start in range(0, len(inputs), batch_size):
        rows = slice(start, start + batch_size)
        lens = None if valid_lens is None else valid_lens[rows].to(device)
        logits = model(inputs[rows].to(device), lens)  # (b, L, V)
        target = labels[rows].to(device)  # (b, L)
        n = int((target != IGNORE_INDEX).sum())
        if n:
            total += lm_loss(logits, target).item() * n
            count += n
    return total / count

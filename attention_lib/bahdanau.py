"""Bahdanau attention in a GRU decoder (Bahdanau et al., 2014): a new context for every
output word.

Chapter 1's decoder sees the source through one vector. This decoder looks back at all
the encoder's states h_1 … h_Lk at every step t', with the *previous* decoder state as
the query:

    α_t't = softmax_t( w_vᵀ tanh(W_q s_{t'-1} + W_k h_t) )   additive scores over t
    c_t'  = Σ_t α_t't h_t                                      context
    s_t'  = g(y_{t'-1}, c_t', s_{t'-1})                        a GRU step, input
                                                               [y_{t'-1}; c_t']
    p(y_t' | …) = softmax(W_o s_t' + b_o)

``W_k h_t`` does not depend on t', so :meth:`BahdanauDecoder.init_state` computes it
once per sentence; only ``W_q s_{t'-1}`` is computed in the loop. With several layers
the context enters the first layer and the query is the top layer's state, as in *Dive
into Deep Learning*.

Taught in ``chapters/03_bahdanau/01_attention_decoder.ipynb`` (the decoder) and
``chapters/03_bahdanau/02_training_and_results.ipynb`` (training it and reading its
weights).
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from ._checks import check_src_lengths, check_tokens, describe
from .attention import AdditiveAttention
from .gru import GRUCell
from .masking import valid_lens_to_mask
from .seq2seq import EncoderDecoder, Seq2SeqEncoder

__all__ = ["BahdanauState", "BahdanauDecoder", "COMPARISON_MODELS", "comparison_models"]


class BahdanauState(NamedTuple):
    """What the decoder carries from step to step.

    Shapes:
        enc_outputs:    (B, Lk, Dk)  the encoder's states h_t (the values, and the
                                     keys before W_k)
        projected_keys: (B, Lk, Dk)  W_k h_t, or None when the decoder projects them
                                     at every step
        src_mask:       (B, 1, Lk)   bool, True at real source tokens; None when
                                     there is no padding
        hidden:         (num_layers, B, Ds)  the decoder's state s_{t'-1}
    """

    enc_outputs: Tensor
    projected_keys: Tensor | None
    src_mask: Tensor | None
    hidden: Tensor


class BahdanauDecoder(nn.Module):
    """GRU decoder with additive attention over the encoder's states.

    ``reset_after`` picks the GRU variant (see :mod:`attention_lib.gru`): ``False`` is
    Cho et al.'s EMNLP form, which Bahdanau et al.'s (2014) appendix uses, ``True`` is
    ``torch.nn.GRU``'s (and the d2l book's decoder's). ``precompute_keys=False``
    projects the keys at every step instead of once per sentence: the same numbers, more
    work (the chapter measures how much). ``dropout`` acts between GRU layers, as in
    ``torch.nn.GRU``. After a call with ``need_weights=True``, ``attention_weights``
    holds the weights of every step (otherwise None).

    ``attend=False`` builds the same decoder without attention: the context at every
    step is the encoder's final top-layer state, as in chapter 1's decoder, and there
    are no ``W_q``, ``W_k``, ``w_v``. Chapter 3 uses it as the fixed-context baseline,
    so that it runs the same GRU cell as the attention decoders (see
    :func:`comparison_models`).

    ``init`` says where the decoder's first state comes from. ``"final"`` copies the
    encoder's final state (the encoder and decoder have the same sizes; d2l's decoder
    does this). ``"backward"`` is Bahdanau et al.'s (2014) choice for a bidirectional
    encoder (``key_size`` = 2 × its state size): ``s_0 = tanh(W_s h_1^←)``, from the
    backward GRU's state after it has read the sentence from the end back to the first
    word.

    Shapes:
        init_state(enc_outputs ((B, Lk, Dk), state), src_valid_lens (B,) or None)
            -> :class:`BahdanauState`; Dk = key_size; state (num_layers, B, Ds) for
            ``init="final"``, (2*num_layers, B, Dk/2) for ``init="backward"``
        forward(tgt_input (B, Lq), state, need_weights=False) -> logits (B, Lq, V),
            state
        attention_weights: (B, Lq, Lk), zero at source padding, or None

    Taught in ``chapters/03_bahdanau/01_attention_decoder.ipynb``.
    """

    def __init__(
        self,
        vocab_size: int,
        embed_size: int,
        num_hiddens: int,
        num_layers: int = 1,
        dropout: float = 0.0,
        reset_after: bool = False,
        precompute_keys: bool = True,
        key_size: int | None = None,
        init: str = "final",
        attend: bool = True,
    ):
        super().__init__()
        if init not in ("final", "backward"):
            raise ValueError(f"init must be 'final' or 'backward', got {init!r}")
        key_size = num_hiddens if key_size is None else key_size
        if not attend and (init != "final" or key_size != num_hiddens):
            raise ValueError(
                "attend=False takes the context from the encoder's final state: it"
                f" needs init='final' and key_size == num_hiddens, got init={init!r},"
                f" key_size={key_size}"
            )
        if init == "backward" and key_size % 2:
            raise ValueError(
                "init='backward' needs a bidirectional encoder's states: key_size must"
                f" be 2 * the encoder's state size, an even number; got {key_size}"
            )
        self.num_layers, self.num_hiddens, self.key_size, self.init = (
            num_layers,
            num_hiddens,
            key_size,
            init,
        )
        self.precompute_keys = precompute_keys
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.attention = (
            AdditiveAttention(key_size, num_hiddens, num_hiddens) if attend else None
        )
        # The paper's s_0 = tanh(W_s h_1^←): the backward encoder's state after reading
        # the whole sentence.
        self.W_s = nn.Linear(key_size // 2, num_hiddens) if init == "backward" else None
        self.cells = nn.ModuleList(
            [
                GRUCell(
                    embed_size,
                    num_hiddens,
                    context_size=key_size,
                    reset_after=reset_after,
                )
            ]
            + [
                GRUCell(num_hiddens, num_hiddens, reset_after=reset_after)
                for _ in range(num_layers - 1)
            ]
        )
        self.dropout = nn.Dropout(dropout)
        self.dense = nn.Linear(num_hiddens, vocab_size)
        self.attention_weights: Tensor | None = None

    def init_state(
        self, enc_outputs: tuple[Tensor, Tensor], src_valid_lens: Tensor | None = None
    ) -> BahdanauState:
        self._check_inputs(enc_outputs, src_valid_lens)
        # (B, Lk, key_size), (num_layers, B, Ds) or (2*num_layers, B, key_size/2)
        outputs, hidden = enc_outputs
        if self.init == "backward":
            # Layer by layer, torch.nn.GRU stores (forward, backward): take the backward
            # states.
            hidden = torch.tanh(self.W_s(hidden[1::2]))  # (num_layers, B, Ds)
        if self.attention is None:
            # No attention: one context for every step, the encoder's final top-layer
            # state, kept where the attention decoder keeps its values.
            return BahdanauState(hidden[-1].unsqueeze(1), None, None, hidden)
        # W_k h_t does not depend on the decoder's step: project the keys once per
        # sentence.
        projected_keys = (
            self.attention.project_keys(outputs) if self.precompute_keys else None
        )  # (B, Lk, Da)
        src_mask = None
        if src_valid_lens is not None:
            # (B, 1, Lk)
            src_mask = valid_lens_to_mask(src_valid_lens, outputs.shape[1]).unsqueeze(1)
        return BahdanauState(outputs, projected_keys, src_mask, hidden)

    def _check_inputs(self, enc_outputs, src_valid_lens) -> None:
        """The encoder's (outputs, state) and the source lengths, checked against this
        decoder's sizes."""
        if self.init == "final":
            state_shape, state_text = (
                self.num_layers,
                self.num_hiddens,
            ), f"(num_layers={self.num_layers}, B, Ds)"
        else:
            state_shape = (2 * self.num_layers, self.key_size // 2)
            state_text = (
                f"a bidirectional encoder's state (2*num_layers={2 * self.num_layers},"
                f" B, key_size/2={self.key_size // 2})"
            )
        expected = (
            f"the encoder's (outputs, state): outputs (B, Lk, key_size={self.key_size})"
            f" and a state {state_text}"
        )
        if not (isinstance(enc_outputs, (tuple, list)) and len(enc_outputs) == 2
                and all(isinstance(t, Tensor) for t in enc_outputs)):
            raise TypeError(
                f"enc_outputs must be {expected}, got {describe(enc_outputs)}"
            )
        outputs, hidden = enc_outputs
        if (
            outputs.dim() != 3
            or hidden.shape != (state_shape[0], outputs.shape[0], state_shape[1])
            or outputs.shape[-1] != self.key_size
        ):
            raise ValueError(
                f"enc_outputs must be {expected}, got {tuple(outputs.shape)} and"
                f" {tuple(hidden.shape)}"
            )
        if src_valid_lens is not None:
            check_src_lengths(outputs, src_valid_lens)

    def forward(
        self, tgt_input: Tensor, state: BahdanauState, *, need_weights: bool = False
    ) -> tuple[Tensor, BahdanauState]:
        check_tokens("tgt_input", tgt_input, self.embedding.num_embeddings)
        enc_outputs, projected_keys, src_mask, hidden = state
        first = self.cells[0]
        # 1. The previous words' share of the first layer's gates, W_y y + b, for all
        # steps at once.
        input_projs = first.project_inputs(self.embedding(tgt_input))  # (B, Lq, 3*Ds)
        layers = list(hidden.unbind(0))  # num_layers × (B, Ds): s_{t'-1} per layer
        outputs, weights = [], []
        for t in range(tgt_input.shape[1]):
            # 2. Attend with the previous state of the top layer as the query.
            query = layers[-1].unsqueeze(1)  # (B, 1, Ds)
            if self.attention is None:  # the fixed context: (B, 1, Ds)
                context = enc_outputs
            else:
                context = self.attention(query, enc_outputs, enc_outputs, mask=src_mask,
                                         projected_keys=projected_keys,
                                         need_weights=need_weights)  # (B, 1, key_size)
                weights.append(self.attention.attention_weights)  # (B, 1, Lk) or None
            # 3. First layer: the GRU update with input [y_{t'-1}; c_t'], i.e. W_y y +
            # W_c c + b. (B, 3*Ds)
            input_proj = input_projs[:, t] + first.project_context(context.squeeze(1))
            layers[0] = first.step(input_proj, layers[0])  # (B, Ds)
            # 4. Upper layers read the layer below (dropout between layers, as in
            # nn.GRU).
            for i in range(1, self.num_layers):
                # (B, Ds)
                layers[i] = self.cells[i](self.dropout(layers[i - 1]), layers[i])
            outputs.append(layers[-1])
        # (B, Lq, Lk), or None
        self.attention_weights = (
            torch.cat(weights, dim=1) if need_weights and weights else None
        )
        # 5. One output projection for all steps after the loop.
        logits = self.dense(torch.stack(outputs, dim=1))  # (B, Lq, V)
        # hidden: (num_layers, B, Ds)
        return logits, state._replace(hidden=torch.stack(layers))

    @staticmethod
    def reorder_state(state: BahdanauState, index: Tensor) -> BahdanauState:
        """Pick (and repeat) batch rows of a state, as beam search needs.

        Shapes:
            index: (B',) long; returns: a state with batch size B'
        """
        def pick(x, dim=0):
            return None if x is None else x.index_select(dim, index)

        return BahdanauState(
            pick(state.enc_outputs),
            pick(state.projected_keys),
            pick(state.src_mask),
            pick(state.hidden, dim=1),
        )


#: Chapter 3's three models, in the order the chapter trains them.
COMPARISON_MODELS = ("fixed context", "attention", "attention, bidirectional")


def comparison_models(
    config, src_vocab_size: int, tgt_vocab_size: int, seed: int
) -> dict[str, EncoderDecoder]:
    """Chapter 3's three encoder–decoders, equal at initialisation wherever they do not
    differ by design.

    All three decoders run the same GRU cell (Cho et al.'s, the reset gate before the
    product: ``reset_after=False``) with input ``[y; c]``. They differ only in where
    ``c`` comes from:

    * ``"fixed context"``: the encoder's final state, the same at every step
      (``attend=False``);
    * ``"attention"``: additive attention over the encoder's states (adds ``W_q``,
      ``W_k``, ``w_v``);
    * ``"attention, bidirectional"``: the same attention over a bidirectional encoder
      (``config.num_hiddens // 2`` units per direction, so the keys have as many
      numbers as the others'), and the paper's first state ``s_0 = tanh(W_s h_1^←)``.

    The fixed-context model is built first from ``seed``; the others then take its
    source and target embeddings, its decoder's GRU cells and its output layer, and the
    left-to-right attention model its encoder GRU too. What remains different is what
    the names say: the attention parameters, and the bidirectional encoder's GRU and
    ``W_s``.

    Shapes:
        config: a :class:`~attention_lib.config.Seq2SeqConfig` (E = embed_size,
            Ds = num_hiddens, num_layers); returns {name: model}, each model
            src (B, Lk), src_valid_lens (B,), tgt_input (B, Lq) -> logits (B, Lq, V)

    Taught in ``chapters/03_bahdanau/02_training_and_results.ipynb``.
    """
    E, Ds, layers = config.embed_size, config.num_hiddens, config.num_layers

    def build(name: str) -> EncoderDecoder:
        torch.manual_seed(seed)
        bidirectional = name == "attention, bidirectional"
        encoder = Seq2SeqEncoder(
            src_vocab_size, E, Ds // 2 if bidirectional else Ds, layers,
            dropout=config.dropout, bidirectional=bidirectional,
        )
        decoder = BahdanauDecoder(
            tgt_vocab_size, E, Ds, layers, config.dropout, key_size=Ds,
            init="backward" if bidirectional else "final",
            attend=name != "fixed context",
        )
        return EncoderDecoder(encoder, decoder)

    models = {name: build(name) for name in COMPARISON_MODELS}
    shared = models["fixed context"]
    for name in COMPARISON_MODELS[1:]:
        model = models[name]
        parts = [
            (model.encoder.embedding, shared.encoder.embedding),
            (model.decoder.embedding, shared.decoder.embedding),
            (model.decoder.cells, shared.decoder.cells),
            (model.decoder.dense, shared.decoder.dense),
        ]
        if name == "attention":  # the same left-to-right encoder
            parts.append((model.encoder.rnn, shared.encoder.rnn))
        for part, source in parts:
            part.load_state_dict(source.state_dict())
    return models

"""Recurrent encoder–decoders: the GRU encoder, the fixed-context decoder, and greedy
decoding.

The encoder reads the source and returns its states ``h_1 … h_Lk``; the decoder of Cho
et al. (2014) / Sutskever et al. (2014) sees the source only through **one** vector, the
encoder's final state, at every step. That is the bottleneck chapter 1 measures and the
attention decoders of later chapters remove. All decoders share one interface:

    state = decoder.init_state(enc_outputs, src_valid_lens)
    logits, state = decoder(tgt_input, state)

Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ._checks import check_src_lengths, check_tokens

__all__ = ["Seq2SeqEncoder", "Seq2SeqDecoder", "EncoderDecoder"]


class Seq2SeqEncoder(nn.Module):
    """Embedding + multi-layer GRU over the source. Padding is skipped (packed
    sequences), so the final state is the state after each sentence's last real token.

    ``bidirectional=True`` adds a second GRU that reads each sentence from its last real
    token back to the first, as in Bahdanau et al. (2014): the output at position t is
    then ``[h_t^→; h_t^←]``, a description of word t from both sides, of size 2·Ds, and
    the state holds both directions' final states, layer by layer (forward, backward),
    as ``torch.nn.GRU`` does.

    Shapes:
        src:            (B, Lk) token indices
        src_valid_lens: (B,) or None (no padding)
        returns: outputs (B, Lk, Ds), or (B, Lk, 2*Ds) when bidirectional, zero
                 at padding; state (num_layers, B, Ds), or (2*num_layers, B, Ds)
                 when bidirectional

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """

    def __init__(
        self,
        vocab_size: int,
        embed_size: int,
        num_hiddens: int,
        num_layers: int = 1,
        dropout: float = 0.0,
        bidirectional: bool = False,
    ):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(
            embed_size,
            num_hiddens,
            num_layers,
            dropout=dropout if num_layers > 1 else 0.0,
            batch_first=True,
            bidirectional=bidirectional,
        )

    def forward(
        self, src: Tensor, src_valid_lens: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        check_tokens("src", src, self.embedding.num_embeddings)
        embs = self.embedding(src)  # (B, Lk, E)
        if src_valid_lens is None:
            return self.rnn(embs)  # (B, Lk, Ds), (num_layers, B, Ds)
        check_src_lengths(src, src_valid_lens)
        # an empty source still gets one step
        lengths = src_valid_lens.clamp(min=1).cpu()
        packed = pack_padded_sequence(
            embs, lengths, batch_first=True, enforce_sorted=False
        )
        outputs, state = self.rnn(packed)
        outputs, _ = pad_packed_sequence(
            outputs, batch_first=True, total_length=src.shape[1]
        )  # (B, Lk, Ds)
        return outputs, state


class Seq2SeqDecoder(nn.Module):
    """GRU decoder that sees the source only through one fixed context vector.

    The context c is the encoder's final top-layer state; at every step the decoder
    input is ``[embedding(y_{t-1}); c]`` and the GRU starts from the encoder's final
    state.

    Shapes:
        init_state(enc_outputs (B, Lk, Ds), src_valid_lens) -> state
        forward(tgt_input (B, Lq), state) -> logits (B, Lq, V), state
        (``need_weights`` is accepted, as the decoder protocol asks, and ignored:
        this decoder has no attention)

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """

    def __init__(
        self,
        vocab_size: int,
        embed_size: int,
        num_hiddens: int,
        num_layers: int = 1,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers,
                          dropout=dropout if num_layers > 1 else 0.0, batch_first=True)
        self.dense = nn.Linear(num_hiddens, vocab_size)
        self.attention_weights = None  # no attention: the decoder protocol's answer

    def init_state(
        self, enc_outputs: tuple[Tensor, Tensor], src_valid_lens: Tensor | None = None
    ):
        _, enc_state = enc_outputs  # (num_layers, B, Ds)
        # (B, Ds): the one vector that must carry the whole sentence
        context = enc_state[-1]
        return context, enc_state

    def forward(self, tgt_input: Tensor, state, *, need_weights: bool = False):
        check_tokens("tgt_input", tgt_input, self.embedding.num_embeddings)
        context, hidden = state
        embs = self.embedding(tgt_input)  # (B, Lq, E)
        context_rep = context.unsqueeze(1).expand(-1, embs.shape[1], -1)  # (B, Lq, Ds)
        # (B, Lq, Ds)
        outputs, hidden = self.rnn(torch.cat([embs, context_rep], dim=-1), hidden)
        return self.dense(outputs), (context, hidden)  # (B, Lq, V)

    @staticmethod
    def reorder_state(state, index: Tensor):
        """Pick (and repeat) batch rows of a state, as beam search needs.

        Shapes:
            index: (B',) long; returns: a state with batch size B'
        """
        context, hidden = state  # (B, Ds), (num_layers, B, Ds)
        return context.index_select(0, index), hidden.index_select(1, index)


class EncoderDecoder(nn.Module):
    """Wire an encoder to a decoder: ``logits = decoder(tgt_input,
    decoder.init_state(encoder(src)))``.

    Shapes:
        src (B, Lk), src_valid_lens (B,), tgt_input (B, Lq) -> logits (B, Lq, V);
        ``need_weights=True`` lets the decoder keep its attention weights

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """

    def __init__(self, encoder: nn.Module, decoder: nn.Module):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    def forward(
        self,
        src: Tensor,
        src_valid_lens: Tensor | None,
        tgt_input: Tensor,
        *,
        need_weights: bool = False,
    ) -> Tensor:
        enc_outputs = self.encoder(src, src_valid_lens)
        state = self.decoder.init_state(enc_outputs, src_valid_lens)
        logits, _ = self.decoder(tgt_input, state, need_weights=need_weights)
        return logits  # (B, Lq, V)

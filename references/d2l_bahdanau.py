"""The d2l book's Bahdanau decoder, assembled from the d2l package's classes, and weight
copying.

*Dive into Deep Learning* (section "The Bahdanau Attention Mechanism") defines
``Seq2SeqAttentionDecoder`` on its page only; the d2l package has its parts
(``d2l.AttentionDecoder``, ``d2l.AdditiveAttention``, ``d2l.Seq2SeqEncoder``,
``d2l.init_seq2seq``). The class below is the book's code, unchanged apart from
comments. ``tests/test_bahdanau.py`` compares the library against it, and
``bench/bench_bahdanau.py`` measures both, through :class:`D2LTranslator`, which puts
it behind the library's calling convention and decoder protocol. It is not part of the
library.
"""
from __future__ import annotations

import torch
from d2l import torch as d2l
from torch import nn


class Seq2SeqAttentionDecoder(d2l.AttentionDecoder):
    """The d2l book's decoder: nn.GRU fed [context; embedding], keys re-projected at
    every step."""

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0):
        super().__init__()
        self.attention = d2l.AdditiveAttention(num_hiddens, dropout)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(
            embed_size + num_hiddens, num_hiddens, num_layers, dropout=dropout
        )
        self.dense = nn.LazyLinear(vocab_size)
        self.apply(d2l.init_seq2seq)

    def init_state(self, enc_outputs, enc_valid_lens):
        # outputs: (num_steps, batch_size, num_hiddens); hidden_state: (num_layers,
        # batch_size, num_hiddens)
        outputs, hidden_state = enc_outputs
        return (outputs.permute(1, 0, 2), hidden_state, enc_valid_lens)

    def forward(self, X, state):
        # enc_outputs: (batch_size, num_steps, num_hiddens)
        enc_outputs, hidden_state, enc_valid_lens = state
        X = self.embedding(X).permute(1, 0, 2)  # (num_steps, batch_size, embed_size)
        outputs, self._attention_weights = [], []
        for x in X:
            # (batch_size, 1, num_hiddens)
            query = torch.unsqueeze(hidden_state[-1], dim=1)
            # (batch_size, 1, num_hiddens)
            context = self.attention(query, enc_outputs, enc_outputs, enc_valid_lens)
            x = torch.cat((context, torch.unsqueeze(x, dim=1)), dim=-1)
            out, hidden_state = self.rnn(x.permute(1, 0, 2), hidden_state)
            outputs.append(out)
            self._attention_weights.append(self.attention.attention_weights)
        # (num_steps, batch_size, vocab_size)
        outputs = self.dense(torch.cat(outputs, dim=0))
        return outputs.permute(1, 0, 2), [enc_outputs, hidden_state, enc_valid_lens]

    @property
    def attention_weights(self):
        return self._attention_weights


class D2LTranslator(nn.Module):
    """The d2l encoder and decoder behind the library's calling convention, so that the
    library's ``train_seq2seq``, ``greedy_decode`` and ``bleu_by_length`` run it
    unchanged.

    ``model(src, src_valid_lens, tgt_input)``; ``encoder(src, src_valid_lens)``; the
    decoder's ``attention_weights`` is the last step's (B, 1, Lk) tensor, as greedy
    decoding reads it.
    """

    def __init__(
        self,
        src_vocab_size,
        tgt_vocab_size,
        embed_size,
        num_hiddens,
        num_layers,
        dropout=0.0,
    ):
        super().__init__()
        self.encoder = _Encoder(
            d2l.Seq2SeqEncoder(
                src_vocab_size, embed_size, num_hiddens, num_layers, dropout
            )
        )
        self.decoder = _Decoder(
            tgt_vocab_size, embed_size, num_hiddens, num_layers, dropout
        )
        with torch.no_grad():  # materialise d2l's LazyLinear layers
            src = torch.ones(1, 2, dtype=torch.long)
            self(src, torch.tensor([2]), src)

    def forward(self, src, src_valid_lens, tgt_input):
        state = self.decoder.init_state(
            self.encoder(src, src_valid_lens), src_valid_lens
        )
        return self.decoder(tgt_input, state)[0]


class _Encoder(nn.Module):
    def __init__(self, encoder):
        super().__init__()
        self.d2l = encoder

    def forward(self, src, src_valid_lens=None):
        # d2l's encoder reads the padding too: ((Lk, B, Dh), (layers, B, Dh))
        return self.d2l(src, src_valid_lens)


class _Decoder(Seq2SeqAttentionDecoder):
    """The book's decoder behind the library's decoder protocol
    (``attention_lib.decoding.Decoder``), so that greedy decoding, beam search and
    ``translate`` run it: it takes ``need_weights`` (the book's decoder keeps its
    weights either way), its ``attention_weights`` are the last step's (B, 1, Lk), and
    ``reorder_state`` picks the rows of a beam."""

    def forward(self, X, state, *, need_weights=False):
        return super().forward(X, state)

    @property
    def attention_weights(self):
        return (
            self._attention_weights[-1]
            if getattr(self, "_attention_weights", None)
            else None
        )

    def reorder_state(self, state, index):
        # (B, Lk, Ds), (layers, B, Ds), (B,) or None: rows picked by index
        enc_outputs, hidden_state, enc_valid_lens = state
        return [
            enc_outputs[index],
            hidden_state[:, index],
            None if enc_valid_lens is None else enc_valid_lens[index],
        ]


def copy_d2l_into_library(d2l_encoder, d2l_decoder, encoder, decoder) -> None:
    """Copy the weights of d2l's encoder and decoder into the library's (PyTorch's GRU
    variant).

    d2l's GRU reads [context; embedding], the library's first cell [embedding; context]:
    the input weight's columns are swapped accordingly. Everything else maps one to one.
    """
    num_hiddens = decoder.num_hiddens
    with torch.no_grad():
        encoder.embedding.weight.copy_(d2l_encoder.embedding.weight)
        encoder.rnn.load_state_dict(d2l_encoder.rnn.rnn.state_dict())
        decoder.embedding.weight.copy_(d2l_decoder.embedding.weight)
        for name in ["W_k", "W_q", "w_v"]:
            getattr(decoder.attention, name).weight.copy_(
                getattr(d2l_decoder.attention, name).weight
            )
        for layer, cell in enumerate(decoder.cells):
            weight_ih = getattr(d2l_decoder.rnn, f"weight_ih_l{layer}")
            if layer == 0:  # [context; embedding] -> [embedding; context]
                weight_ih = torch.cat(
                    [weight_ih[:, num_hiddens:], weight_ih[:, :num_hiddens]], dim=1
                )
            cell.weight_ih.copy_(weight_ih)
            cell.weight_hh.copy_(getattr(d2l_decoder.rnn, f"weight_hh_l{layer}"))
            cell.bias_ih.copy_(getattr(d2l_decoder.rnn, f"bias_ih_l{layer}"))
            cell.bias_hh.copy_(getattr(d2l_decoder.rnn, f"bias_hh_l{layer}"))
        decoder.dense.load_state_dict(d2l_decoder.dense.state_dict())

"""The chapter-5 Transformer traces with ``torch.export``, with no patches: its encoder
and its cached decoder step, with the batch, the source length and the cache length
left dynamic (the argument checks that read values step aside while tracing), and the
traced programs give the eager model's numbers at other sizes. ``torch.compile`` with
``fullgraph=True`` finds no graph break."""
from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.export import Dim, export

from attention_lib import TransformerDecoder, TransformerEncoder
from attention_lib.multihead import KVCache
from attention_lib.transformer import TransformerState

V = 50
SIZES = dict(embed_dim=16, num_heads=2, ffn_hidden=32, num_layers=2, max_len=64)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return (TransformerEncoder(V, **SIZES).eval(),
            TransformerDecoder(V, **SIZES).eval())


def sources(batch_size, length, seed):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, V, (batch_size, length), generator=gen)
    lens = torch.randint(1, length + 1, (batch_size,), generator=gen)
    return src, lens


def is_dynamic(size) -> bool:
    return not isinstance(size, int)


class CachedStep(nn.Module):
    """One decoding step with flat tensor arguments: the new token, the encoder's
    outputs and lengths, then the self-attention caches and the cross-attention
    memories of every layer, keys and values."""

    def __init__(self, decoder):
        super().__init__()
        self.decoder = decoder

    def forward(self, token, enc_outputs, src_valid_lens, *kv):
        n = len(self.decoder.blocks)
        pairs = [KVCache(kv[2 * i], kv[2 * i + 1]) for i in range(2 * n)]
        state = TransformerState(enc_outputs, src_valid_lens, tuple(pairs[:n]),
                                 tuple(pairs[n:]))
        logits, state = self.decoder(token, state)
        return (logits,) + tuple(t for cache in state.cache for t in cache)


def flat_state(decoder, encoder, src, lens, steps, seed):
    enc_outputs = encoder(src, lens)
    state = decoder.init_state(enc_outputs, lens)
    gen = torch.Generator().manual_seed(seed)
    _, state = decoder(torch.randint(0, V, (src.shape[0], steps), generator=gen), state)
    kv = [t for pair in state.cache + state.memory for t in pair]
    return enc_outputs, state, kv


def test_the_encoder_exports_with_dynamic_batch_and_length(model):
    encoder, _ = model
    batch, length = Dim("B", min=1, max=64), Dim("Lk", min=1, max=64)
    program = export(encoder, sources(3, 7, 0), dynamic_shapes={
        "src": {0: batch, 1: length}, "src_valid_lens": {0: batch}})
    inputs = [n.meta["val"] for n in program.graph.nodes if n.op == "placeholder"]
    src, lens = inputs[-2:]
    assert all(is_dynamic(size) for size in (*src.shape, *lens.shape))
    other = sources(5, 11, 1)
    with torch.no_grad():
        torch.testing.assert_close(program.module()(*other), encoder(*other))


def test_the_cached_decoder_step_exports_with_a_dynamic_cache(model):
    encoder, decoder = model
    src, lens = sources(3, 7, 0)
    with torch.no_grad():
        enc_outputs, _, kv = flat_state(decoder, encoder, src, lens, 4, 0)
    batch, length = Dim("B", min=1, max=64), Dim("Lk", min=1, max=64)
    steps = Dim("t", min=1, max=63)
    n = len(decoder.blocks)
    dynamic = {"token": {0: batch}, "enc_outputs": {0: batch, 1: length},
               "src_valid_lens": {0: batch},
               "kv": tuple([{0: batch, 2: steps}] * 2 * n
                           + [{0: batch, 2: length}] * 2 * n)}
    token = torch.randint(0, V, (3, 1))
    program = export(CachedStep(decoder), (token, enc_outputs, lens, *kv),
                     dynamic_shapes=dynamic)
    inputs = [n.meta["val"] for n in program.graph.nodes if n.op == "placeholder"]
    cache_keys = inputs[-4 * n]  # the first layer's cached keys, (B, H, t, Dh)
    assert is_dynamic(cache_keys.shape[0]) and is_dynamic(cache_keys.shape[2])
    # Other sizes: 5 sentences of 11 tokens, 9 positions in the cache.
    src, lens = sources(5, 11, 1)
    with torch.no_grad():
        enc_outputs, state, kv = flat_state(decoder, encoder, src, lens, 9, 1)
        token = torch.randint(0, V, (5, 1))
        got = program.module()(token, enc_outputs, lens, *kv)
        expected, grown = decoder(token, state)
    torch.testing.assert_close(got[0], expected)
    assert got[1].shape == grown.cache[0].keys.shape == (5, 2, 10, 8)


def test_the_encoder_compiles_without_a_graph_break(model):
    encoder, _ = model
    compiled = torch.compile(encoder, fullgraph=True, backend="eager", dynamic=True)
    src, lens = sources(3, 7, 0)
    with torch.no_grad():
        torch.testing.assert_close(compiled(src, lens), encoder(src, lens))

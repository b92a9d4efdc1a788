"""MultiHeadAttention with a rotary embedding: by hand, with a cache, per example."""
import pytest
import torch

from attention_lib.masking import causal_mask
from attention_lib.multihead import KVCache, MultiHeadAttention
from attention_lib.positional import RotaryEmbedding, apply_rotary


def _layer():
    torch.manual_seed(0)
    return MultiHeadAttention(16, 2, bias=False, rotary=RotaryEmbedding(8, 64))


@pytest.mark.parametrize("need_weights", [False, True])
def test_rope_equals_rotating_by_hand(need_weights):
    layer, x = _layer(), torch.randn(2, 5, 16)
    positions = torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11]])
    out = layer(x, x, x, need_weights=need_weights, positions=positions)
    q = layer.W_q(x).view(2, 5, 2, 8).transpose(1, 2)
    k, v = (w(x).view(2, 5, 2, 8).transpose(1, 2) for w in (layer.W_k, layer.W_v))
    q = torch.stack([apply_rotary(q[b], positions[b]) for b in range(2)])
    k = torch.stack([apply_rotary(k[b], positions[b]) for b in range(2)])
    weights = torch.softmax(q @ k.transpose(-1, -2) / 8**0.5, dim=-1)
    expected = layer.W_o((weights @ v).transpose(1, 2).reshape(2, 5, 16))
    torch.testing.assert_close(out, expected)


def test_rope_cache_equals_recompute():
    layer, x = _layer(), torch.randn(2, 6, 16)
    full = layer(x, x, x, mask=causal_mask(6))
    cache = layer.empty_cache(2, x)
    steps = []
    for t in range(6):
        out, cache = layer(x[:, t : t + 1], x[:, t : t + 1], x[:, t : t + 1],
                           cache=cache)
        steps.append(out)
    assert isinstance(cache, KVCache)
    torch.testing.assert_close(torch.cat(steps, 1), full)


def test_rope_shifting_all_positions_keeps_scores():
    layer, x = _layer(), torch.randn(1, 4, 16)
    layer(x, x, x, need_weights=True)
    before = layer.attention_weights
    layer(x, x, x, need_weights=True, positions=torch.arange(4) + 20)
    torch.testing.assert_close(layer.attention_weights, before)


@pytest.mark.parametrize("positions", [torch.arange(3), torch.tensor([0, 1, 99, 3]),
                                       torch.zeros(4, 4, dtype=torch.long)])
def test_rope_rejects_bad_positions(positions):
    layer, x = _layer(), torch.randn(2, 4, 16)
    with pytest.raises(ValueError, match="positions"):
        layer(x, x, x, positions=positions)

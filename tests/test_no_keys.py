"""Attention over no keys, on every public path, weights requested or not.

Two ways a query can have nothing to attend to: every key masked (valid length 0), or
no keys at all (Lk = 0, an empty source). The documentation promises the same answer
for both: weights 0 (or an empty row), output 0 for the functional forms and the layers
without an output projection, and the output projection's bias for MultiHeadAttention.
Never NaN, never an error.
"""
import pytest
import torch

from attention_lib import (
    AdditiveAttention,
    DotProductAttention,
    MultiHeadAttention,
    attention_loop,
    dot_product_attention,
    masked_softmax,
)
from attention_lib.efficient import chunked_attention

B, LQ, D = 2, 3, 8

# (number of keys, valid lengths): all keys masked, no keys, no keys with lengths 0
CASES = [(4, torch.zeros(B, dtype=torch.long)), (0, None),
         (0, torch.zeros(B, dtype=torch.long))]
IDS = ["all-masked", "no-keys", "no-keys-lengths-0"]


def inputs(num_kv, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, LQ, D, generator=gen)  # (B, Lq, D)
    k = torch.randn(B, num_kv, D, generator=gen)  # (B, Lk, D)
    v = torch.randn(B, num_kv, D, generator=gen)  # (B, Lk, D)
    return q, k, v


def assert_zero_weights(weights, num_kv):
    assert weights.shape == (B, LQ, num_kv)
    assert torch.equal(weights, torch.zeros_like(weights))


@pytest.mark.parametrize("num_kv, valid_lens", CASES, ids=IDS)
@pytest.mark.parametrize("need_weights", [True, False])
def test_functional_attention_gives_zeros(num_kv, valid_lens, need_weights):
    q, k, v = inputs(num_kv)
    output, weights = dot_product_attention(q, k, v, valid_lens,
                                            need_weights=need_weights)
    assert torch.equal(output, torch.zeros(B, LQ, D))
    if need_weights:
        assert_zero_weights(weights, num_kv)
    else:
        assert weights is None


@pytest.mark.parametrize("num_kv, valid_lens", CASES, ids=IDS)
def test_the_loop_and_masked_softmax_give_zeros(num_kv, valid_lens):
    q, k, v = inputs(num_kv)
    output, weights = attention_loop(q, k, v, valid_lens)
    assert torch.equal(output, torch.zeros(B, LQ, D))
    assert_zero_weights(weights, num_kv)
    assert_zero_weights(masked_softmax(q @ k.transpose(1, 2), valid_lens), num_kv)


@pytest.mark.parametrize("num_kv, valid_lens", CASES, ids=IDS)
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("make_layer", [DotProductAttention,
                                        lambda: AdditiveAttention(D, D, 16)],
                         ids=["dot-product", "additive"])
def test_layers_without_an_output_projection_give_zeros(make_layer, num_kv, valid_lens,
                                                        need_weights):
    q, k, v = inputs(num_kv)
    layer = make_layer().eval()
    output = layer(q, k, v, valid_lens, need_weights=need_weights)
    assert torch.equal(output, torch.zeros(B, LQ, D))
    if need_weights:
        assert_zero_weights(layer.attention_weights, num_kv)


@pytest.mark.parametrize("num_kv, valid_lens", CASES, ids=IDS)
@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_attention_gives_the_output_projections_bias(num_kv, valid_lens,
                                                              need_weights):
    q, k, v = inputs(num_kv)
    torch.manual_seed(0)
    layer = MultiHeadAttention(D, num_heads=2).eval()
    with torch.no_grad():
        layer.W_o.bias.uniform_(-1, 1)  # a bias that is not zero
        output = layer(q, k, v, valid_lens, need_weights=need_weights)
    assert torch.allclose(output, layer.W_o.bias.expand(B, LQ, D))
    if need_weights:
        weights = layer.attention_weights
        assert weights.shape == (B, 2, LQ, num_kv)
        assert torch.equal(weights, torch.zeros_like(weights))


@pytest.mark.parametrize("num_kv", [4, 0], ids=["all-masked", "no-keys"])
def test_chunked_attention_gives_zeros(num_kv):
    q, k, v = inputs(num_kv)
    mask = torch.zeros(B, LQ, num_kv, dtype=torch.bool)
    output = chunked_attention(q, k, v, mask=mask)
    assert torch.equal(output, torch.zeros(B, LQ, D))


def test_no_keys_keeps_gradients_finite():
    q, k, v = inputs(0)
    q.requires_grad_(True)
    output, _ = dot_product_attention(q, k, v)
    output.sum().backward()
    assert torch.equal(q.grad, torch.zeros_like(q))

"""Chapter 8's library behind a peer test suite's interfaces: the adapter signatures of
Stanford CS336's assignment 1 (spring 2025, ``tests/adapters.py``), each wired to the
library's public classes with given weights and checked against a reference written
here from PyTorch primitives, with random weights.

CS336's conventions and how the adapters meet them:

* RMSNorm with the eps it is given (its tests pass 1e-5, the eps of ``make_norm``;
  ``RMSNorm``'s own default is 1e-6, so the adapter passes eps explicitly).
* SwiGLU ``w2(silu(w1 x) * w3 x)`` of the given d_ff: ``W_1``, ``W_2``, ``W_3`` are
  CS336's ``w1``, ``w2``, ``w3``.
* RoPE on adjacent pairs (x[2i], x[2i+1]) with angles p · theta^(-2i/d_k): the
  pairing of ``attention_lib.positional`` as well, so no weight is permuted.
* Multi-head self-attention with a causal mask and RoPE on queries and keys of each
  head (d_k = d_model / num_heads); q_proj's rows are the heads one after another,
  as ``split_heads`` reads them.
* Pre-norm blocks, no bias anywhere, a final RMSNorm, an untied output layer.
* Token embeddings are not scaled; ``TransformerLM`` multiplies them by √d_model, so
  the adapter loads them divided by √d_model.
* Positions of shape (..., L).
"""
import math

import pytest
import torch
from torch.nn import functional as F

from attention_lib.lm import TransformerLM
from attention_lib.masking import causal_mask
from attention_lib.multihead import MultiHeadAttention
from attention_lib.positional import RotaryEmbedding
from attention_lib.transformer import RMSNorm, SwiGLU, TransformerEncoderBlock

VOCAB, CONTEXT, D_MODEL, HEADS, D_FF, LAYERS, THETA = 97, 16, 32, 4, 48, 2, 10000.0
D_K = D_MODEL // HEADS

# CS336's names inside a block -> the library's TransformerEncoderBlock's
BLOCK_NAMES = {
    "attn.q_proj.weight": "self_attention.W_q.weight",
    "attn.k_proj.weight": "self_attention.W_k.weight",
    "attn.v_proj.weight": "self_attention.W_v.weight",
    "attn.output_proj.weight": "self_attention.W_o.weight",
    "ln1.weight": "add_norm1.norm.weight",
    "ffn.w1.weight": "ffn.W_1.weight",
    "ffn.w2.weight": "ffn.W_2.weight",
    "ffn.w3.weight": "ffn.W_3.weight",
    "ln2.weight": "add_norm2.norm.weight",
}


# --- the adapters: CS336's signatures, the library's public classes -------------------


def run_rmsnorm(d_model, eps, weights, in_features):
    norm = RMSNorm(d_model, eps=eps)
    norm.load_state_dict({"weight": weights})
    return norm(in_features)


def run_swiglu(d_model, d_ff, w1_weight, w2_weight, w3_weight, in_features):
    ffn = SwiGLU(d_model, d_ff, bias=False)
    ffn.load_state_dict({"W_1.weight": w1_weight, "W_2.weight": w2_weight,
                         "W_3.weight": w3_weight})
    return ffn(in_features)


def run_rope(d_k, theta, max_seq_len, in_query_or_key, token_positions):
    rope = RotaryEmbedding(d_k, max_seq_len, theta)
    # RotaryEmbedding.at reads 2-D positions as (B, L) against x of (B, H, L, d_k):
    # a head axis of size 1 lines positions (..., L) up with x (..., L, d_k).
    return rope.at(in_query_or_key.unsqueeze(-3), token_positions).squeeze(-3)


def run_multihead_self_attention_with_rope(
    d_model, num_heads, max_seq_len, theta, q_proj_weight, k_proj_weight,
    v_proj_weight, o_proj_weight, in_features, token_positions=None,
):
    layer = MultiHeadAttention(d_model, num_heads, bias=False,
                               rotary=RotaryEmbedding(d_model // num_heads,
                                                      max_seq_len, theta))
    layer.load_state_dict({"W_q.weight": q_proj_weight, "W_k.weight": k_proj_weight,
                           "W_v.weight": v_proj_weight, "W_o.weight": o_proj_weight})
    # The layer takes (B, L, D) and positions (L,), (1, L) or (B, L): more leading
    # axes are folded into the batch, positions with them.
    *lead, length, _ = in_features.shape
    x = in_features.reshape(-1, length, d_model)  # (B, L, D)
    positions = token_positions
    if positions is not None and positions.dim() > 1 and len(lead) != 1:
        positions = positions.expand(*lead, length).reshape(-1, length)  # (B, L)
    out = layer(x, x, x, mask=causal_mask(length), positions=positions)
    return out.reshape(in_features.shape)


def run_transformer_block(d_model, num_heads, d_ff, max_seq_len, theta, weights,
                          in_features):
    block = TransformerEncoderBlock(
        d_model, num_heads, d_ff, norm_first=True, activation="swiglu", norm="rms",
        bias=False, rotary=RotaryEmbedding(d_model // num_heads, max_seq_len, theta))
    block.load_state_dict({BLOCK_NAMES[name]: w for name, w in weights.items()})
    # forward() masks padding only; a causal block goes through encode() with a mask.
    return block.encode(in_features, causal_mask(in_features.shape[-2]))


def language_model(vocab_size, context_length, d_model, num_layers, num_heads, d_ff,
                   rope_theta, weights):
    """CS336's Transformer LM as a TransformerLM with its weights loaded."""
    model = TransformerLM(vocab_size, d_model, num_heads, d_ff, num_layers,
                          causal=True, norm_first=True, norm="rms",
                          activation="swiglu", positions="rope", bias=False,
                          max_len=context_length, rope_base=rope_theta)
    state = {
        # TransformerLM multiplies the embeddings by √d_model and CS336 does not:
        # load them divided by √d_model.
        "embedding.weight": weights["token_embeddings.weight"] / math.sqrt(d_model),
        "final_norm.weight": weights["ln_final.weight"],
        "output.weight": weights["lm_head.weight"],
    }
    for name, w in weights.items():
        if name.startswith("layers."):
            _, layer, rest = name.split(".", 2)
            state[f"blocks.{layer}.{BLOCK_NAMES[rest]}"] = w
    model.load_state_dict(state)  # strict: every parameter given, none left over
    return model


def run_transformer_lm(vocab_size, context_length, d_model, num_layers, num_heads,
                       d_ff, rope_theta, weights, in_indices):
    return language_model(vocab_size, context_length, d_model, num_layers,
                          num_heads, d_ff, rope_theta, weights)(in_indices)


# --- the references: PyTorch primitives -----------------------------------------------


def ref_rmsnorm(x, weight, eps=1e-5):
    norm = torch.nn.RMSNorm(x.shape[-1], eps=eps)
    with torch.no_grad():
        norm.weight.copy_(weight)
    return norm(x)


def ref_swiglu(x, w1, w2, w3):
    return (F.silu(x @ w1.T) * (x @ w3.T)) @ w2.T


def ref_rope(x, positions, theta):
    """Each adjacent pair (x[2i], x[2i+1]) as the complex number x[2i] + i·x[2i+1],
    multiplied by e^(i·p·θ^(-2i/d)); positions broadcast against x's leading axes."""
    d = x.shape[-1]
    freqs = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    angles = positions.to(torch.float64)[..., None] * freqs  # (..., L, d/2)
    turn = torch.polar(torch.ones_like(angles), angles)
    pairs = torch.view_as_complex(x.double().unflatten(-1, (d // 2, 2)).contiguous())
    return torch.view_as_real(pairs * turn).flatten(-2).to(x.dtype)


def ref_attention(x, wq, wk, wv, wo, num_heads, positions, theta):
    length, d = x.shape[-2:]

    def heads(w):  # (..., H, L, d_k)
        return (x @ w.T).unflatten(-1, (num_heads, d // num_heads)).transpose(-3, -2)

    if positions is None:
        positions = torch.arange(length)
    q, k, v = heads(wq), heads(wk), heads(wv)
    q, k = (ref_rope(t, positions.unsqueeze(-2), theta) for t in (q, k))
    context = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return context.transpose(-3, -2).flatten(-2) @ wo.T


def ref_block(x, w, num_heads, theta, positions=None):
    attn = [w[f"attn.{n}_proj.weight"] for n in ("q", "k", "v", "output")]
    x = x + ref_attention(ref_rmsnorm(x, w["ln1.weight"]), *attn, num_heads,
                          positions, theta)
    ffn = [w[f"ffn.w{i}.weight"] for i in (1, 2, 3)]
    return x + ref_swiglu(ref_rmsnorm(x, w["ln2.weight"]), *ffn)


def ref_lm(ids, w, num_layers, num_heads, theta, positions=None):
    x = w["token_embeddings.weight"][ids]  # not scaled
    for i in range(num_layers):
        prefix = f"layers.{i}."
        layer = {n[len(prefix):]: t for n, t in w.items() if n.startswith(prefix)}
        x = ref_block(x, layer, num_heads, theta, positions)
    return ref_rmsnorm(x, w["ln_final.weight"]) @ w["lm_head.weight"].T


# --- random weights with CS336's names ------------------------------------------------


def _weights(seed=0):
    g = torch.Generator().manual_seed(seed)

    def linear(rows, cols):
        return torch.randn(rows, cols, generator=g) / math.sqrt(cols)

    def gain():
        return 1 + 0.1 * torch.randn(D_MODEL, generator=g)

    w = {"token_embeddings.weight": torch.randn(VOCAB, D_MODEL, generator=g)}
    for i in range(LAYERS):
        w.update({
            f"layers.{i}.attn.q_proj.weight": linear(D_MODEL, D_MODEL),
            f"layers.{i}.attn.k_proj.weight": linear(D_MODEL, D_MODEL),
            f"layers.{i}.attn.v_proj.weight": linear(D_MODEL, D_MODEL),
            f"layers.{i}.attn.output_proj.weight": linear(D_MODEL, D_MODEL),
            f"layers.{i}.ln1.weight": gain(),
            f"layers.{i}.ffn.w1.weight": linear(D_FF, D_MODEL),
            f"layers.{i}.ffn.w2.weight": linear(D_MODEL, D_FF),
            f"layers.{i}.ffn.w3.weight": linear(D_FF, D_MODEL),
            f"layers.{i}.ln2.weight": gain(),
        })
    w["ln_final.weight"] = gain()
    w["lm_head.weight"] = linear(VOCAB, D_MODEL)
    return w


def _block_weights(w, layer=0):
    prefix = f"layers.{layer}."
    return {n[len(prefix):]: t for n, t in w.items() if n.startswith(prefix)}


def _randn(*shape, seed=1):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# --- the tests ------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [1e-5, 0.5])
def test_rmsnorm(eps):
    weight, x = _weights()["layers.1.ln1.weight"], _randn(2, 3, 5, D_MODEL)
    torch.testing.assert_close(run_rmsnorm(D_MODEL, eps, weight, x),
                               ref_rmsnorm(x, weight, eps))


def test_swiglu():
    w, x = _block_weights(_weights()), _randn(2, 3, 5, D_MODEL)
    ffn = [w[f"ffn.w{i}.weight"] for i in (1, 2, 3)]
    torch.testing.assert_close(run_swiglu(D_MODEL, D_FF, *ffn, x),
                               ref_swiglu(x, *ffn))


ROPE_CASES = {
    "(L,)": ((3, 12, D_K), torch.arange(12)),
    "(L,) shifted": ((3, 12, D_K), torch.arange(12) + 4),
    "(B, L)": ((3, 12, D_K), torch.randint(0, CONTEXT, (3, 12))),
    "(B, E, L)": ((3, 2, 12, D_K), torch.randint(0, CONTEXT, (3, 2, 12))),
    "(1, L) on (B, H, L)": ((3, HEADS, 12, D_K), torch.arange(12)[None]),
}


@pytest.mark.parametrize("case", ROPE_CASES)
def test_rope(case):
    shape, positions = ROPE_CASES[case]
    x = _randn(*shape)
    torch.testing.assert_close(run_rope(D_K, THETA, CONTEXT, x, positions),
                               ref_rope(x, positions, THETA))


def test_rope_pairs_adjacent_features():
    # position 1 turns the first pair by 1 radian: (1, 0) -> (cos 1, sin 1)
    x = torch.zeros(1, D_K)
    x[0, 0] = 1.0
    out = run_rope(D_K, THETA, CONTEXT, x, torch.tensor([1]))
    torch.testing.assert_close(out[0, :2], torch.tensor([math.cos(1), math.sin(1)]))
    assert not out[0, 2:].any()


MHA_CASES = {
    "default": ((4, 12, D_MODEL), None),
    "(L,)": ((4, 12, D_MODEL), torch.arange(12) + 3),
    "(1, L), as CS336 passes": ((4, 12, D_MODEL), torch.arange(12)[None]),
    "(B, L)": ((4, 12, D_MODEL), torch.randint(0, CONTEXT, (4, 12))),
    "(B, E, L)": ((2, 3, 12, D_MODEL), torch.randint(0, CONTEXT, (2, 3, 12))),
    "(L,) on (B, E, L, D)": ((2, 3, 12, D_MODEL), torch.arange(12)),
}


@pytest.mark.parametrize("case", MHA_CASES)
def test_multihead_self_attention_with_rope(case):
    shape, positions = MHA_CASES[case]
    w, x = _block_weights(_weights()), _randn(*shape)
    attn = [w[f"attn.{n}_proj.weight"] for n in ("q", "k", "v", "output")]
    got = run_multihead_self_attention_with_rope(D_MODEL, HEADS, CONTEXT, THETA, *attn,
                                                 x, positions)
    torch.testing.assert_close(got, ref_attention(x, *attn, HEADS, positions, THETA))


def test_attention_takes_one_row_of_positions_for_the_batch():
    torch.manual_seed(0)
    layer = MultiHeadAttention(D_MODEL, HEADS, bias=False,
                               rotary=RotaryEmbedding(D_K, CONTEXT))
    x, row = torch.randn(3, 5, D_MODEL), torch.arange(5) + 2
    one = layer(x, x, x, positions=row[None])
    torch.testing.assert_close(one, layer(x, x, x, positions=row.expand(3, 5)))
    torch.testing.assert_close(one, layer(x, x, x, positions=row))
    with pytest.raises(ValueError, match=r"\(1, L\)"):
        layer(x, x, x, positions=row.expand(2, 5))


def test_transformer_block():
    w, x = _block_weights(_weights()), _randn(4, 12, D_MODEL)
    got = run_transformer_block(D_MODEL, HEADS, D_FF, CONTEXT, THETA, w, x)
    torch.testing.assert_close(got, ref_block(x, w, HEADS, THETA))


@pytest.mark.parametrize("length", [CONTEXT, 5])
def test_transformer_lm(length):
    w = _weights()
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(0, VOCAB, (4, length), generator=g)
    got = run_transformer_lm(VOCAB, CONTEXT, D_MODEL, LAYERS, HEADS, D_FF, THETA, w,
                             ids)
    assert got.shape == (4, length, VOCAB)
    torch.testing.assert_close(got, ref_lm(ids, w, LAYERS, HEADS, THETA),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", ["(L,)", "(1, L)", "(B, L)"])
def test_transformer_lm_at_given_positions(shape):
    w = _weights()
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, VOCAB, (4, 8), generator=g)
    positions = {"(L,)": torch.arange(8) + 5, "(1, L)": torch.arange(8)[None] + 2,
                 "(B, L)": torch.randint(0, CONTEXT, (4, 8), generator=g)}[shape]
    model = language_model(VOCAB, CONTEXT, D_MODEL, LAYERS, HEADS, D_FF, THETA, w)
    torch.testing.assert_close(model(ids, positions=positions),
                               ref_lm(ids, w, LAYERS, HEADS, THETA, positions),
                               rtol=1e-4, atol=1e-4)


def test_the_models_have_no_bias():
    model = language_model(VOCAB, CONTEXT, D_MODEL, LAYERS, HEADS, D_FF, THETA,
                           _weights())
    assert not [n for n, _ in model.named_parameters() if "bias" in n]
    assert model.output.weight is not model.embedding.weight  # untied

"""attention_lib.multihead: parity with torch.nn.MultiheadAttention (weights copied)
and with the per-head formula, properties, and every error path."""
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attention_lib import valid_lens_to_mask
from attention_lib.multihead import MultiHeadAttention, merge_heads, split_heads


def make_layer(embed_dim=8, num_heads=2, dtype=torch.float32, seed=0, **kwargs):
    torch.manual_seed(seed)
    return MultiHeadAttention(embed_dim, num_heads, **kwargs).to(dtype).eval()


def make_inputs(
    batch_size=2, num_queries=3, num_kv=5, embed_dim=8, kdim=None, vdim=None,
    dtype=torch.float32, seed=0,
):
    gen = torch.Generator().manual_seed(seed)
    queries = torch.randn(batch_size, num_queries, embed_dim, generator=gen)
    keys = torch.randn(batch_size, num_kv, kdim or embed_dim, generator=gen)
    values = torch.randn(batch_size, num_kv, vdim or embed_dim, generator=gen)
    return queries.to(dtype), keys.to(dtype), values.to(dtype)


def torch_copy(ours: MultiHeadAttention) -> nn.MultiheadAttention:
    """PyTorch's layer with our weights: its in_proj stacks [W_q; W_k; W_v]."""
    bias = ours.W_q.bias is not None
    theirs = nn.MultiheadAttention(
        ours.embed_dim, ours.num_heads, bias=bias, kdim=ours.kdim, vdim=ours.vdim,
        batch_first=True, dtype=ours.W_q.weight.dtype,
    )
    projections = [ours.W_q, ours.W_k, ours.W_v]
    with torch.no_grad():
        if theirs._qkv_same_embed_dim:
            theirs.in_proj_weight.copy_(torch.cat([p.weight for p in projections]))
        else:
            theirs.q_proj_weight.copy_(ours.W_q.weight)
            theirs.k_proj_weight.copy_(ours.W_k.weight)
            theirs.v_proj_weight.copy_(ours.W_v.weight)
        theirs.out_proj.weight.copy_(ours.W_o.weight)
        if bias:
            theirs.in_proj_bias.copy_(torch.cat([p.bias for p in projections]))
            theirs.out_proj.bias.copy_(ours.W_o.bias)
    return theirs.eval()


# --- split and merge heads ------------------------------------------------------------

def test_split_heads_gives_head_h_the_features_h_dh_to_h_plus_1_dh():
    x = torch.arange(2 * 3 * 6.0).reshape(2, 3, 6)  # (B, L, D), D = 6
    heads = split_heads(x, 3)  # (B, H, L, Dh) = (2, 3, 3, 2)
    assert heads.shape == (2, 3, 3, 2)
    for h in range(3):
        assert torch.equal(heads[:, h], x[..., 2 * h: 2 * h + 2])
    assert torch.equal(merge_heads(heads), x)


@settings(max_examples=30, deadline=None)
@given(
    shape=st.tuples(
        st.integers(1, 3), st.integers(1, 5), st.integers(1, 4), st.integers(1, 4)
    ),
    seed=st.integers(0, 2**16),
)
def test_merge_heads_undoes_split_heads_exactly(shape, seed):
    batch_size, length, num_heads, head_dim = shape
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch_size, length, num_heads * head_dim, generator=gen)
    heads = split_heads(x, num_heads)
    assert heads.shape == (batch_size, num_heads, length, head_dim)
    assert torch.equal(merge_heads(heads), x)
    y = torch.randn(batch_size, num_heads, length, head_dim, generator=gen)
    assert torch.equal(split_heads(merge_heads(y), num_heads), y)


# --- parity with torch.nn.MultiheadAttention ------------------------------------------

MASK_KINDS = [
    "none", "valid_lens", "valid_lens_2d", "causal", "mask_3d", "mask_per_head",
    "valid_lens_and_causal",
]


def masks_for(kind, batch_size, num_heads, num_queries, num_kv, gen):
    """(valid_lens, mask) for us; (key_padding_mask, attn_mask) for PyTorch, where
    True means *ignored*. Every query keeps at least one key: PyTorch's explicit path
    gives NaN for a query with none."""
    none = (None, None, None, None)
    if kind == "none":
        return none
    if kind.startswith("valid_lens"):
        shape = (batch_size, num_queries) if kind == "valid_lens_2d" else (batch_size,)
        valid_lens = torch.randint(1, num_kv + 1, shape, generator=gen)
        allowed = valid_lens_to_mask(valid_lens, num_kv)
        if kind == "valid_lens_2d":  # PyTorch: one (Lq, Lk) mask per example and head
            attn_mask = ~allowed.repeat_interleave(num_heads, dim=0)  # (B·H, Lq, Lk)
            return valid_lens, None, None, attn_mask
        if kind == "valid_lens":
            return valid_lens, None, ~allowed, None
        causal = torch.ones(num_queries, num_kv, dtype=torch.bool).tril()
        return valid_lens, causal, ~allowed, ~causal
    if kind == "causal":
        causal = torch.ones(num_queries, num_kv, dtype=torch.bool).tril()
        return None, causal, None, ~causal
    if kind == "mask_3d":
        mask = torch.rand(batch_size, num_queries, num_kv, generator=gen) > 0.4
        mask[..., 0] = True
        return None, mask, None, ~mask.repeat_interleave(num_heads, dim=0)
    mask = torch.rand(batch_size, num_heads, num_queries, num_kv, generator=gen) > 0.4
    mask[..., -1] = True
    # PyTorch orders the (B·H) axis example-major: row b·H + h is example b, head h.
    return None, mask, None, ~mask.reshape(-1, num_queries, num_kv)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kind", MASK_KINDS)
@pytest.mark.parametrize("bias", [True, False])
def test_equals_torch_multihead_attention_with_weights_copied(dtype, kind, bias):
    gen = torch.Generator().manual_seed(1)
    ours = make_layer(12, 3, dtype, bias=bias)
    theirs = torch_copy(ours)
    queries, keys, values = make_inputs(2, 4, 6, 12, dtype=dtype)
    valid_lens, mask, key_padding_mask, attn_mask = masks_for(kind, 2, 3, 4, 6, gen)
    expected, expected_weights = theirs(
        queries, keys, values, key_padding_mask=key_padding_mask,
        attn_mask=attn_mask, need_weights=True, average_attn_weights=False,
    )
    fast = ours(queries, keys, values, valid_lens, mask)
    torch.testing.assert_close(fast, expected)
    explicit = ours(queries, keys, values, valid_lens, mask, need_weights=True)
    torch.testing.assert_close(explicit, expected)
    assert ours.attention_weights.shape == (2, 3, 4, 6)  # (B, H, Lq, Lk)
    torch.testing.assert_close(ours.attention_weights, expected_weights)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cross_attention_with_other_key_and_value_sizes_equals_torch(dtype):
    ours = make_layer(8, 4, dtype, kdim=5, vdim=3)
    theirs = torch_copy(ours)
    assert not theirs._qkv_same_embed_dim  # the separate-projection branch
    queries, keys, values = make_inputs(3, 2, 7, 8, kdim=5, vdim=3, dtype=dtype)
    valid_lens = torch.tensor([7, 1, 4])
    expected, _ = theirs(
        queries, keys, values, key_padding_mask=~valid_lens_to_mask(valid_lens, 7),
        need_weights=False,
    )
    for need_weights in (False, True):
        out = ours(queries, keys, values, valid_lens, need_weights=need_weights)
        assert out.shape == (3, 2, 8)  # (B, Lq, D)
        torch.testing.assert_close(out, expected)


def test_self_attention_equals_torch_on_its_fast_path():
    # Self-attention (one tensor for all three) in eval mode without gradients:
    # PyTorch takes its fused native path, whose arithmetic differs from its own
    # general path.
    ours = make_layer(16, 4)
    theirs = torch_copy(ours)
    x, _, _ = make_inputs(3, 5, 5, 16, seed=3)
    valid_lens = torch.tensor([5, 2, 3])
    with torch.no_grad():
        expected, _ = theirs(
            x, x, x, key_padding_mask=~valid_lens_to_mask(valid_lens, 5),
            need_weights=False,
        )
        out = ours(x, x, x, valid_lens)
    torch.testing.assert_close(out, expected)


def test_same_number_of_parameters_as_torch():
    for bias in (True, False):
        ours = MultiHeadAttention(12, 3, bias=bias, kdim=5, vdim=7)
        theirs = nn.MultiheadAttention(12, 3, bias=bias, kdim=5, vdim=7)
        count = sum(p.numel() for p in ours.parameters())
        assert count == sum(p.numel() for p in theirs.parameters())


# --- parity with the formula, one head at a time --------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_equals_softmax_qk_over_sqrt_dh_times_v_per_head(dtype):
    layer = make_layer(12, 3, dtype)
    queries, keys, values = make_inputs(2, 4, 5, 12, dtype=dtype)
    causal = torch.ones(4, 5, dtype=torch.bool).tril()
    head_dim = 4
    heads = []
    for h in range(3):
        rows = slice(h * head_dim, (h + 1) * head_dim)
        q = queries @ layer.W_q.weight[rows].T + layer.W_q.bias[rows]  # (B, Lq, Dh)
        k = keys @ layer.W_k.weight[rows].T + layer.W_k.bias[rows]  # (B, Lk, Dh)
        v = values @ layer.W_v.weight[rows].T + layer.W_v.bias[rows]  # (B, Lk, Dh)
        scores = q @ k.transpose(1, 2) / math.sqrt(head_dim)  # (B, Lq, Lk)
        weights = torch.softmax(scores.masked_fill(~causal, -math.inf), dim=-1)
        heads.append(weights @ v)  # (B, Lq, Dh)
    expected = torch.cat(heads, dim=-1) @ layer.W_o.weight.T + layer.W_o.bias
    with torch.no_grad():
        for need_weights in (False, True):
            out = layer(queries, keys, values, mask=causal, need_weights=need_weights)
            torch.testing.assert_close(out, expected)


def test_changing_one_heads_projection_changes_only_that_heads_weights():
    layer = make_layer(12, 3)
    queries, keys, values = make_inputs(2, 4, 5, 12)
    with torch.no_grad():
        layer(queries, keys, values, need_weights=True)
        before = layer.attention_weights
        layer.W_q.weight[4:8] += 1.0  # the features of head 1
        layer(queries, keys, values, need_weights=True)
    after = layer.attention_weights
    assert torch.equal(after[:, [0, 2]], before[:, [0, 2]])
    assert not torch.allclose(after[:, 1], before[:, 1])


# --- the two paths, masks of every shape, queries with no key -------------------------

def test_a_mask_per_example_is_not_read_as_a_mask_per_head():
    # With B == H a (B, Lq, Lk) mask broadcast naively against (B, H, Lq, Lk) would
    # silently give example b's mask to head b.
    layer = make_layer(8, 2)
    queries, keys, values = make_inputs(2, 3, 4, 8)
    mask = torch.tensor([[True, False, False, False], [False, True, True, True]])
    mask = mask[:, None, :].expand(2, 3, 4)  # (B, Lq, Lk)
    with torch.no_grad():
        out = layer(queries, keys, values, mask=mask, need_weights=True)
    weights = layer.attention_weights  # (B, H, Lq, Lk)
    assert torch.equal(weights[0, :, :, 1:], torch.zeros(2, 3, 3))
    assert torch.equal(weights[1, :, :, 0], torch.zeros(2, 3))
    with torch.no_grad():
        per_head = layer(queries, keys, values, mask=mask[:, None].expand(2, 2, 3, 4))
    torch.testing.assert_close(per_head, out)


@pytest.mark.parametrize("with_lens", [False, True])
@pytest.mark.parametrize(
    "shape", [(5,), (3, 5), (1, 3, 5), (2, 1, 5), (2, 3, 5), (1, 2, 1, 5),
              (2, 2, 3, 5)],
)
def test_every_mask_shape_is_read_as_its_full_per_head_mask(shape, with_lens):
    layer = make_layer(8, 2)
    queries, keys, values = make_inputs(2, 3, 5, 8)
    mask = torch.rand(shape, generator=torch.Generator().manual_seed(4)) > 0.5
    if len(shape) == 4:
        full = mask.expand(2, 2, 3, 5)
    else:
        full = mask.expand(2, 3, 5)[:, None].expand(2, 2, 3, 5)  # (B, H, Lq, Lk)
    valid_lens = torch.tensor([[5, 3, 4], [2, 5, 1]]) if with_lens else None
    if with_lens:
        full = full & valid_lens_to_mask(valid_lens, 5)[:, None]  # (B, H, Lq, Lk)
    with torch.no_grad():
        expected = layer(queries, keys, values, mask=full.clone(), need_weights=True)
        for need_weights in (False, True):
            out = layer(
                queries, keys, values, valid_lens, mask, need_weights=need_weights
            )
            torch.testing.assert_close(out, expected)
    weights = layer.attention_weights  # (B, H, Lq, Lk)
    assert torch.equal(weights[~full], torch.zeros_like(weights[~full]))
    torch.testing.assert_close(weights.sum(-1), full.any(-1).float())


def test_queries_with_no_key_get_zero_weights_and_the_output_bias_on_both_paths():
    layer = make_layer(8, 2)
    queries, keys, values = make_inputs(2, 3, 5, 8)
    valid_lens = torch.tensor([[0, 2, 5], [1, 0, 0]])
    with torch.no_grad():
        fast = layer(queries, keys, values, valid_lens)
        explicit = layer(queries, keys, values, valid_lens, need_weights=True)
    torch.testing.assert_close(fast, explicit)
    assert torch.isfinite(fast).all()
    empty = valid_lens == 0  # (B, Lq)
    assert torch.equal(layer.attention_weights.transpose(1, 2)[empty],
                       torch.zeros(3, 2, 5))
    # a zero context in every head: the output is W_o applied to zeros, its bias
    for out in (fast, explicit):
        assert torch.equal(out[empty], layer.W_o.bias.expand(3, 8))


def test_queries_with_no_key_are_zero_even_where_sdpa_returns_nan(monkeypatch):
    # PyTorch before 2.5 (and some GPU kernels) return NaN for a query with no key.
    real_sdpa = F.scaled_dot_product_attention

    def sdpa_with_nan_rows(q, k, v, attn_mask=None, **kwargs):
        out = real_sdpa(q, k, v, attn_mask=attn_mask, **kwargs)
        if attn_mask is not None:
            out = out.masked_fill(~attn_mask.any(-1, keepdim=True), math.nan)
        return out

    monkeypatch.setattr(F, "scaled_dot_product_attention", sdpa_with_nan_rows)
    layer = make_layer(8, 2)
    queries, keys, values = make_inputs(2, 3, 5, 8)
    valid_lens = torch.tensor([[0, 2, 5], [1, 0, 3]])
    with torch.no_grad():
        out = layer(queries, keys, values, valid_lens)
        explicit = layer(queries, keys, values, valid_lens, need_weights=True)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, explicit)


@pytest.mark.parametrize("kdim", [None, 6])
def test_both_paths_give_the_same_gradients_and_no_nan(kdim):
    layer = make_layer(8, 2, kdim=kdim).train()  # dropout 0: still deterministic
    queries, keys, values = make_inputs(2, 3, 5, 8, kdim=kdim)
    valid_lens = torch.tensor([[0, 2, 5], [1, 3, 4]])  # one query without a key
    grads = []
    for need_weights in (False, True):
        layer.zero_grad()
        inputs = [t.clone().requires_grad_() for t in (queries, keys, values)]
        layer(*inputs, valid_lens, need_weights=need_weights).square().sum().backward()
        grads.append([p.grad for p in layer.parameters()] + [t.grad for t in inputs])
    for fast, explicit in zip(*grads):
        assert torch.isfinite(fast).all()
        torch.testing.assert_close(fast, explicit)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("need_weights", [False, True])
def test_half_precision_has_no_nan_and_stays_close_to_float32(dtype, need_weights):
    layer = make_layer(16, 4)
    queries, keys, values = make_inputs(2, 4, 6, 16)
    queries = queries * 30  # large scores
    valid_lens = torch.tensor([[6, 3, 0, 1], [2, 2, 6, 0]])
    with torch.no_grad():
        expected = layer(queries, keys, values, valid_lens)
        out = layer.to(dtype)(
            queries.to(dtype), keys.to(dtype), values.to(dtype), valid_lens,
            need_weights=need_weights,
        )
    assert out.dtype == dtype
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.float(), expected, atol=0.1, rtol=0.05)


# --- properties -----------------------------------------------------------------------

sizes = st.tuples(
    st.integers(1, 3),  # B
    st.integers(1, 4),  # Lq
    st.integers(1, 5),  # Lk
    st.sampled_from([(4, 1), (4, 2), (6, 3), (8, 4)]),  # (D, H)
)


@settings(max_examples=30, deadline=None)
@given(sizes=sizes, seed=st.integers(0, 2**16), need_weights=st.booleans())
def test_self_attention_is_permutation_equivariant(sizes, seed, need_weights):
    batch_size, length, _, (embed_dim, num_heads) = sizes
    layer = make_layer(embed_dim, num_heads, seed=seed)
    x, _, _ = make_inputs(batch_size, length, length, embed_dim, seed=seed)
    perm = torch.randperm(length, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        out = layer(x, x, x, need_weights=need_weights)
        permuted = layer(x[:, perm], x[:, perm], x[:, perm], need_weights=need_weights)
    torch.testing.assert_close(permuted, out[:, perm])


@settings(max_examples=30, deadline=None)
@given(sizes=sizes, seed=st.integers(0, 2**16), need_weights=st.booleans())
def test_permuting_keys_and_values_together_leaves_the_output_unchanged(
    sizes, seed, need_weights
):
    batch_size, num_queries, num_kv, (embed_dim, num_heads) = sizes
    layer = make_layer(embed_dim, num_heads, seed=seed)
    queries, keys, values = make_inputs(
        batch_size, num_queries, num_kv, embed_dim, seed=seed
    )
    perm = torch.randperm(num_kv, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        out = layer(queries, keys, values, need_weights=need_weights)
        permuted = layer(
            queries, keys[:, perm], values[:, perm], need_weights=need_weights
        )
    torch.testing.assert_close(permuted, out)


def test_permuting_keys_without_values_changes_the_output():
    # The properties above could hold vacuously if the output ignored the keys.
    layer = make_layer()
    queries, keys, values = make_inputs()
    perm = torch.tensor([1, 0, 2, 3, 4])
    with torch.no_grad():
        assert not torch.allclose(
            layer(queries, keys[:, perm], values), layer(queries, keys, values)
        )


@settings(max_examples=30, deadline=None)
@given(
    sizes=sizes, seed=st.integers(0, 2**16), need_weights=st.booleans(),
    per_query=st.booleans(),
)
def test_masked_keys_get_zero_weight_and_do_not_change_the_output(
    sizes, seed, need_weights, per_query
):
    batch_size, num_queries, num_kv, (embed_dim, num_heads) = sizes
    layer = make_layer(embed_dim, num_heads, seed=seed)
    queries, keys, values = make_inputs(
        batch_size, num_queries, num_kv, embed_dim, seed=seed
    )
    shape = (batch_size, num_queries) if per_query else (batch_size,)
    gen = torch.Generator().manual_seed(seed)
    valid_lens = torch.randint(0, num_kv + 1, shape, generator=gen)
    with torch.no_grad():
        out = layer(queries, keys, values, valid_lens, need_weights=True)
        weights = layer.attention_weights  # (B, H, Lq, Lk)
        padding = ~valid_lens_to_mask(valid_lens, num_kv)  # (B, Lk) or (B, Lq, Lk)
        if not per_query:
            padding = padding[:, None, :].expand(batch_size, num_queries, num_kv)
        padding = padding[:, None].expand_as(weights)  # (B, H, Lq, Lk)
        assert torch.equal(weights[padding], torch.zeros_like(weights[padding]))
        has_key = (~padding).any(-1).to(weights.dtype)  # (B, H, Lq)
        torch.testing.assert_close(weights.sum(-1), has_key)
        # Change every key and value no query of its example may see: nothing changes.
        hidden = padding.all(dim=1).all(dim=1)  # (B, Lk)
        keys[hidden] = torch.randn_like(keys[hidden]) * 100
        values[hidden] = torch.randn_like(values[hidden]) * 100
        again = layer(queries, keys, values, valid_lens, need_weights=need_weights)
    torch.testing.assert_close(again, out)


# --- the stored weights and dropout ---------------------------------------------------

def test_attention_weights_are_stored_detached_only_when_asked():
    layer = make_layer().train()
    queries, keys, values = make_inputs()
    layer(queries, keys, values, need_weights=True)
    weights = layer.attention_weights
    assert weights.shape == (2, 2, 3, 5) and not weights.requires_grad
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 3))
    layer(queries, keys, values)
    assert layer.attention_weights is None  # no stale weights from an earlier call


@pytest.mark.parametrize("need_weights", [False, True])
def test_dropout_acts_in_training_mode_only(need_weights):
    layer = make_layer(dropout=0.5)
    plain = make_layer(dropout=0.0)  # the same weights (same seed)
    queries, keys, values = make_inputs()
    with torch.no_grad():
        expected = plain(queries, keys, values)
        evaluated = layer(queries, keys, values, need_weights=need_weights)
        torch.testing.assert_close(evaluated, expected)
        torch.manual_seed(0)
        trained = layer.train()(queries, keys, values, need_weights=need_weights)
    assert not torch.allclose(trained, expected)
    if need_weights:  # stored before dropout: still rows that sum to 1
        torch.testing.assert_close(layer.attention_weights.sum(-1), torch.ones(2, 2, 3))


@pytest.mark.parametrize("need_weights", [False, True])
def test_dropout_drops_a_heads_weight_not_single_features(need_weights):
    # One key, so each head's weight is 1; dropout turns it into 0 or 2. With W_v and
    # W_o the identity, each head's block of the output is 0 or 2·value, as a whole.
    layer = make_layer(8, 2, dropout=0.5, bias=False).train()
    with torch.no_grad():
        layer.W_v.weight.copy_(torch.eye(8))
        layer.W_o.weight.copy_(torch.eye(8))
    queries, keys, values = make_inputs(4, 16, 1, 8)
    torch.manual_seed(0)
    with torch.no_grad():
        out = layer(queries, keys, values, need_weights=need_weights)
    blocks = out.reshape(4, 16, 2, 4)  # (B, Lq, H, Dh)
    doubled = (2 * values).reshape(4, 1, 2, 4).expand_as(blocks)
    dropped = (blocks == 0).all(-1)  # (B, Lq, H)
    kept = torch.isclose(blocks, doubled).all(-1)
    assert (dropped | kept).all()
    assert 0.2 < dropped.float().mean() < 0.8


# --- bad input ----------------------------------------------------------------------

@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"embed_dim": 10, "num_heads": 3}, ValueError,
         r"embed_dim \(D=10\) must be divisible by num_heads \(H=3\)"),
        ({"embed_dim": 8, "num_heads": 0}, ValueError,
         "num_heads must be at least 1, got 0"),
        ({"embed_dim": 8.0, "num_heads": 2}, TypeError,
         "embed_dim must be an integer"),
        ({"embed_dim": 8, "num_heads": 2, "dropout": 1.0}, ValueError,
         r"dropout must lie in \[0, 1\), got 1.0"),
        ({"embed_dim": 8, "num_heads": 2, "dropout": "0.1"}, TypeError,
         "dropout must be a finite number"),
        ({"embed_dim": 8, "num_heads": 2, "kdim": 0}, ValueError,
         "kdim must be at least 1, got 0"),
    ],
)
def test_error_constructor_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        MultiHeadAttention(**kwargs)


def test_error_inputs_of_the_wrong_size_name_the_constructor_argument():
    layer = make_layer(8, 2, kdim=6)
    queries, keys, values = make_inputs(2, 3, 5, 8, kdim=6)
    with pytest.raises(
        ValueError,
        match=r"queries must have last dimension embed_dim=8, got shape \(2, 3, 6\)",
    ):
        layer(queries[..., :6], keys, values)
    with pytest.raises(
        ValueError, match=r"keys must have last dimension kdim=6, got shape \(2, 5, 8\)"
    ):
        layer(queries, values, values)
    with pytest.raises(
        ValueError,
        match=r"values must have last dimension vdim=8, got shape \(2, 5, 6\)",
    ):
        layer(queries, keys, keys)


def test_error_inputs_that_do_not_fit_together():
    layer = make_layer()
    queries, keys, values = make_inputs()
    with pytest.raises(ValueError, match=r"keys have Lk=5 .*got \(2, 4, 8\)"):
        layer(queries, keys, values[:, :4])
    with pytest.raises(ValueError, match=r"same leading \(batch\) dimensions"):
        layer(queries, keys[:1], values[:1])
    with pytest.raises(
        ValueError,
        match=r"takes queries of shape \(B, Lq, D\), got \(1, 2, 3, 8\)",
    ):
        layer(queries[None], keys[None], values[None])
    with pytest.raises(
        TypeError, match="queries have dtype torch.float64 but the layer's parameters"
    ):
        layer(queries.double(), keys.double(), values.double())
    with pytest.raises(TypeError, match="values must be a torch.Tensor, got a list"):
        layer(queries, keys, [[1.0]])


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"valid_lens": torch.tensor([1, 2, 3])}, ValueError,
         r"valid_lens must have shape \(B,\) or \(B, Lq\) with B=2, Lq=3, got \(3,\)"),
        ({"valid_lens": torch.tensor([1, 6])}, ValueError,
         r"valid_lens must lie in \[0, 5\]"),
        ({"valid_lens": [1, 2]}, TypeError,
         "valid_lens must be a torch.Tensor"),
        ({"mask": torch.ones(3, 3, 5, dtype=torch.bool)}, ValueError,
         r"mask of shape \(3, 3, 5\) does not broadcast to the scores' shape"
         r" \(2, 3, 5\)"),
        ({"mask": torch.ones(2, 3, 3, 5, dtype=torch.bool)}, ValueError,
         r"mask of shape \(2, 3, 3, 5\) does not broadcast to the scores' shape"
         r" \(2, 2, 3, 5\)"),
        ({"mask": torch.ones(1, 2, 2, 3, 5, dtype=torch.bool)}, ValueError,
         r"or to \(B, H, Lq, Lk\) = \(2, 2, 3, 5\) .* got shape \(1, 2, 2, 3, 5\)"),
        ({"mask": torch.ones(3, 5)}, TypeError,
         "mask must be a bool tensor"),
    ],
)
def test_error_valid_lens_and_masks(need_weights, kwargs, error, message):
    layer = make_layer()
    queries, keys, values = make_inputs()
    with pytest.raises(error, match=message):
        layer(queries, keys, values, need_weights=need_weights, **kwargs)


def test_error_split_and_merge_heads():
    with pytest.raises(
        ValueError,
        match=r"width D=6 \(shape \(2, 3, 6\)\), which does not split into "
        r"num_heads=4",
    ):
        split_heads(torch.zeros(2, 3, 6), 4)
    with pytest.raises(
        ValueError, match=r"x must have shape \(B, L, D\), got \(3, 6\)"
    ):
        split_heads(torch.zeros(3, 6), 2)
    with pytest.raises(TypeError, match="num_heads must be an integer"):
        split_heads(torch.zeros(2, 3, 6), 2.0)
    with pytest.raises(
        ValueError, match=r"x must have shape \(B, H, L, Dh\), got \(2, 3, 6\)"
    ):
        merge_heads(torch.zeros(2, 3, 6))
    with pytest.raises(TypeError, match="x must be a torch.Tensor, got a list"):
        merge_heads([1.0])

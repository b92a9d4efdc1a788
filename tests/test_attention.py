"""attention_lib.attention: parity with PyTorch's SDPA and d2l, properties, and every
error path."""
import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from d2l import torch as d2l
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_lib import (
    AdditiveAttention,
    DotProductAttention,
    additive_scores,
    attention_loop,
    attention_pooling,
    dot_product_scores,
    dot_product_attention,
    valid_lens_to_mask,
)


def make_qkv(
    batch_size=2,
    num_queries=3,
    num_kv=5,
    size=4,
    value_size=6,
    dtype=torch.float32,
    seed=0,
):
    gen = torch.Generator().manual_seed(seed)
    queries = torch.randn(batch_size, num_queries, size, generator=gen).to(dtype)
    keys = torch.randn(batch_size, num_kv, size, generator=gen).to(dtype)
    values = torch.randn(batch_size, num_kv, value_size, generator=gen).to(dtype)
    return queries, keys, values


def copy_additive_to_d2l(
    ours: AdditiveAttention, queries, keys, values
) -> d2l.AdditiveAttention:
    theirs = d2l.AdditiveAttention(ours.attention_size, dropout=0.0)
    # materialise the Lazy layers (float32)
    theirs(queries.float(), keys.float(), values.float(), None)
    # same names: W_k, W_q, w_v
    theirs.to(queries.dtype).load_state_dict(ours.state_dict())
    return theirs.eval()


# --- the course material's worked examples --------------------------------------------

H = torch.tensor([[[1.0, 2.0], [3.0, 4.0]]])  # h1, h2 as keys and values, (1, 2, 2)
S = torch.tensor([[[5.0, 6.0]]])  # the decoder state as the query, (1, 1, 2)


def test_worked_example_additive():
    attention = AdditiveAttention(key_size=2, query_size=2, attention_size=2)
    with torch.no_grad():
        attention.W_k.weight.copy_(torch.eye(2))
        attention.W_q.weight.copy_(torch.eye(2))
        attention.w_v.weight.fill_(1.0)
        context = attention(S, H, H, need_weights=True)
        scores = additive_scores(
            attention.W_q(S), attention.W_k(H), attention.w_v.weight
        )
    torch.testing.assert_close(scores, torch.full((1, 1, 2), 2.0), atol=1e-3, rtol=0)
    torch.testing.assert_close(
        attention.attention_weights, torch.tensor([[[0.5, 0.5]]]), atol=1e-4, rtol=0
    )
    torch.testing.assert_close(context, torch.tensor([[[2.0, 3.0]]]), atol=1e-4, rtol=0)


def test_worked_example_dot_and_scaled_dot():
    assert dot_product_scores(S, H, scale=1.0).tolist() == [[[17.0, 39.0]]]
    scaled = dot_product_scores(S, H)
    torch.testing.assert_close(
        scaled, torch.tensor([[[17 / math.sqrt(2), 39 / math.sqrt(2)]]])
    )
    assert [round(x, 2) for x in scaled[0, 0].tolist()] == [12.02, 27.58]
    context, weights = dot_product_attention(S, H, H)
    assert weights[0, 0, 0] < 1e-6 and weights[0, 0, 1] > 1 - 1e-6
    torch.testing.assert_close(context, torch.tensor([[[3.0, 4.0]]]))


# --- parity with torch.nn.functional.scaled_dot_product_attention ---------------------

MASK_KINDS = ["none", "valid_lens", "valid_lens_2d", "bool_mask", "causal"]


def masks_for(kind, batch_size, num_queries, num_kv, gen):
    """(valid_lens, mask) for the library and the equivalent boolean attn_mask for
    SDPA."""
    if kind == "none":
        return None, None, None
    if kind == "valid_lens":
        valid_lens = torch.randint(1, num_kv + 1, (batch_size,), generator=gen)
        return valid_lens, None, valid_lens_to_mask(valid_lens, num_kv)[:, None, :]
    if kind == "valid_lens_2d":
        valid_lens = torch.randint(
            1, num_kv + 1, (batch_size, num_queries), generator=gen
        )
        return valid_lens, None, valid_lens_to_mask(valid_lens, num_kv)
    if kind == "bool_mask":
        mask = torch.rand(batch_size, num_queries, num_kv, generator=gen) > 0.4
        # at least one key each, so SDPA's convention cannot differ from ours
        mask[..., 0] = True
        return None, mask, mask
    causal = torch.ones(num_queries, num_kv, dtype=torch.bool).tril()
    return None, causal, causal


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kind", MASK_KINDS)
@pytest.mark.parametrize("need_weights", [True, False])
def test_sdpa_parity(dtype, kind, need_weights):
    gen = torch.Generator().manual_seed(1)
    queries, keys, values = make_qkv(3, 4, 6, 8, 5, dtype=dtype)
    valid_lens, mask, attn_mask = masks_for(kind, 3, 4, 6, gen)
    ours, weights = dot_product_attention(
        queries, keys, values, valid_lens, mask, need_weights=need_weights
    )
    theirs = F.scaled_dot_product_attention(queries, keys, values, attn_mask=attn_mask)
    torch.testing.assert_close(ours, theirs)
    assert (weights is None) == (not need_weights)


@pytest.mark.parametrize("scale", [1.0, 0.25, 3.0])
def test_sdpa_parity_with_explicit_scale_and_4d_heads(scale):
    gen = torch.Generator().manual_seed(2)
    queries, keys, values = (
        torch.randn(2, 3, 4, 8, generator=gen),
        torch.randn(2, 3, 5, 8, generator=gen),
        torch.randn(2, 3, 5, 8, generator=gen),
    )  # (B, H, L, Dh)
    valid_lens = torch.tensor([2, 5])
    attn_mask = valid_lens_to_mask(valid_lens, 5)[:, None, None, :]  # (B, 1, 1, Lk)
    theirs = F.scaled_dot_product_attention(
        queries, keys, values, attn_mask=attn_mask, scale=scale
    )
    for need_weights in (True, False):
        ours, _ = dot_product_attention(
            queries, keys, values, valid_lens, scale=scale, need_weights=need_weights
        )
        torch.testing.assert_close(ours, theirs)


def test_module_scale_options():
    queries, keys, values = make_qkv()
    for scale, expected in [(None, 1 / 2), (1.0, 1.0), (0.1, 0.1)]:
        layer = DotProductAttention(scale=scale)
        out = layer(queries, keys, values)
        theirs = F.scaled_dot_product_attention(queries, keys, values, scale=expected)
        torch.testing.assert_close(out, theirs)


# --- parity with d2l (weights copied for the additive layer) --------------------------

@pytest.mark.parametrize(
    "valid_lens",
    [None, torch.tensor([2, 5]), torch.tensor([[1, 2, 3], [5, 4, 1]])],
    ids=["no-mask", "per-example", "per-query"],
)
def test_dot_product_attention_equals_d2l(valid_lens):
    queries, keys, values = make_qkv(size=7)
    ours = DotProductAttention().eval()
    theirs = d2l.DotProductAttention(dropout=0.0).eval()
    torch.testing.assert_close(
        ours(queries, keys, values, valid_lens, need_weights=True),
        theirs(queries, keys, values, valid_lens),
    )
    torch.testing.assert_close(ours.attention_weights, theirs.attention_weights)


@pytest.mark.parametrize(
    "valid_lens",
    [None, torch.tensor([2, 5]), torch.tensor([[1, 2, 3], [5, 4, 1]])],
    ids=["no-mask", "per-example", "per-query"],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_additive_attention_equals_d2l_with_weights_copied(valid_lens, dtype):
    torch.manual_seed(0)
    queries, keys, values = make_qkv(dtype=dtype)
    # query and key sizes differ: additive scoring allows it
    queries = torch.randn(2, 3, 9, dtype=dtype)
    ours = AdditiveAttention(key_size=4, query_size=9, attention_size=8)
    ours = ours.to(dtype).eval()
    theirs = copy_additive_to_d2l(ours, queries, keys, values)
    torch.testing.assert_close(
        ours(queries, keys, values, valid_lens, need_weights=True),
        theirs(queries, keys, values, valid_lens),
    )
    torch.testing.assert_close(ours.attention_weights, theirs.attention_weights)


def test_additive_attention_project_keys_once_equals_projecting_every_call():
    torch.manual_seed(0)
    layer = AdditiveAttention(key_size=4, query_size=4, attention_size=8)
    queries, keys, values = make_qkv()
    projected = layer.project_keys(keys)
    assert projected.shape == (2, 5, 8)
    # (B, 1, Lk)
    mask = torch.tensor([[True] * 3 + [False] * 2, [True] * 5])[:, None, :]
    with_cache = layer(
        queries, keys, values, mask=mask, projected_keys=projected, need_weights=True
    )
    weights_cache = layer.attention_weights
    without = layer(queries, keys, values, mask=mask, need_weights=True)
    torch.testing.assert_close(with_cache, without)
    torch.testing.assert_close(weights_cache, layer.attention_weights)


def test_projected_keys_are_used_not_recomputed():
    layer = AdditiveAttention(key_size=4, query_size=4, attention_size=8)
    queries, keys, values = make_qkv()
    a = layer(queries, keys, values, projected_keys=layer.project_keys(keys))
    b = layer(queries, keys, values, projected_keys=layer.project_keys(keys) * 5)
    assert not torch.allclose(a, b)


# --- the loop and the vectorised form -------------------------------------------------

@pytest.mark.parametrize("kind", MASK_KINDS)
def test_loop_equals_vectorised(kind):
    gen = torch.Generator().manual_seed(3)
    queries, keys, values = make_qkv(3, 4, 6, 8, 5)
    valid_lens, mask, _ = masks_for(kind, 3, 4, 6, gen)
    loop_out, loop_weights = attention_loop(queries, keys, values, valid_lens, mask)
    out, weights = dot_product_attention(queries, keys, values, valid_lens, mask)
    torch.testing.assert_close(loop_out, out)
    torch.testing.assert_close(loop_weights, weights)


def test_fast_and_explicit_paths_agree_with_fully_masked_queries():
    queries, keys, values = make_qkv()
    valid_lens = torch.tensor([[0, 2, 5], [0, 0, 1]])
    explicit, weights = dot_product_attention(queries, keys, values, valid_lens)
    fast, _ = dot_product_attention(
        queries, keys, values, valid_lens, need_weights=False
    )
    torch.testing.assert_close(explicit, fast)
    assert torch.equal(explicit[0, 0], torch.zeros(6)) and torch.equal(
        weights[1, 1], torch.zeros(5)
    )


def test_a_one_dimensional_mask_works_on_both_paths():
    """A mask of shape (Lk,) broadcasts like any other (the fused kernel alone would
    refuse it)."""
    queries, keys, values = make_qkv(2, 3, 5, 4, 6, seed=2)
    mask = torch.tensor([True, False, True, True, False])  # (Lk,)
    explicit, weights = dot_product_attention(queries, keys, values, mask=mask)
    fast, _ = dot_product_attention(
        queries, keys, values, mask=mask, need_weights=False
    )
    torch.testing.assert_close(fast, explicit)
    assert not weights[..., ~mask].any()


@pytest.mark.parametrize("make_layer", [
    lambda: DotProductAttention(), lambda: AdditiveAttention(4, 4, 8)
], ids=["dot", "additive"])
def test_layers_keep_weights_only_when_asked(make_layer):
    """need_weights=False (the default) is the training path: the same output, and no
    weights kept; need_weights=True keeps them, detached."""
    layer = make_layer()
    queries, keys, values = make_qkv(2, 3, 5, 4, 6, seed=1)
    queries.requires_grad_(True)
    valid_lens = torch.tensor([2, 5])
    fast = layer(queries, keys, values, valid_lens)
    assert layer.attention_weights is None
    explicit = layer(queries, keys, values, valid_lens, need_weights=True)
    torch.testing.assert_close(fast, explicit)
    weights = layer.attention_weights  # (B, Lq, Lk)
    assert weights.shape == (2, 3, 5) and not weights.requires_grad
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3))
    layer(queries, keys, values, valid_lens)
    assert layer.attention_weights is None  # no stale weights from the last call


# --- properties -----------------------------------------------------------------------

def all_layers(size, value_size):
    torch.manual_seed(0)
    return {
        "scaled": lambda q, k, v, vl=None, m=None: dot_product_attention(
            q, k, v, vl, m
        )[0],
        "fast": lambda q, k, v, vl=None, m=None: dot_product_attention(
            q, k, v, vl, m, need_weights=False
        )[0],
        "dot": DotProductAttention(scale=1.0),
        "additive": AdditiveAttention(size, size, 8),
    }


LAYER_NAMES = ["scaled", "fast", "dot", "additive"]

shapes = st.tuples(
    st.integers(1, 3),
    st.integers(1, 4),
    st.integers(1, 6),
    st.integers(1, 5),
    st.integers(1, 4),
)


@settings(max_examples=25, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**16), name=st.sampled_from(LAYER_NAMES))
def test_masked_keys_get_zero_weight_and_do_not_change_the_output(shape, seed, name):
    batch_size, num_queries, num_kv, size, value_size = shape
    layer = all_layers(size, value_size)[name]
    gen = torch.Generator().manual_seed(seed)
    queries, keys, values = make_qkv(
        batch_size, num_queries, num_kv, size, value_size, seed=seed
    )
    valid_lens = torch.randint(0, num_kv + 1, (batch_size, num_queries), generator=gen)
    kwargs = {"need_weights": True} if isinstance(layer, torch.nn.Module) else {}
    out = layer(queries, keys, values, valid_lens, **kwargs)
    padding = ~valid_lens_to_mask(valid_lens, num_kv)  # (B, Lq, Lk)
    if isinstance(layer, torch.nn.Module):
        weights = layer.attention_weights
        assert torch.equal(weights[padding], torch.zeros_like(weights[padding]))
        torch.testing.assert_close(weights.sum(-1), (valid_lens > 0).float())
    # Change every key and value that no query of that example may see: nothing may
    # change.
    hidden_from_all = padding.all(dim=1)  # (B, Lk)
    keys2, values2 = keys.clone(), values.clone()
    keys2[hidden_from_all] = torch.randn_like(keys2[hidden_from_all]) * 100
    values2[hidden_from_all] = torch.randn_like(values2[hidden_from_all]) * 100
    torch.testing.assert_close(layer(queries, keys2, values2, valid_lens), out)
    # A query with no valid key gets a zero output, never NaN.
    assert torch.isfinite(out).all()
    assert torch.equal(out[valid_lens == 0], torch.zeros_like(out[valid_lens == 0]))


@settings(max_examples=25, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**16), name=st.sampled_from(LAYER_NAMES))
def test_permuting_keys_and_values_together_leaves_the_output_unchanged(
    shape, seed, name
):
    batch_size, num_queries, num_kv, size, value_size = shape
    layer = all_layers(size, value_size)[name]
    queries, keys, values = make_qkv(
        batch_size, num_queries, num_kv, size, value_size, seed=seed
    )
    mask = (
        torch.rand(batch_size, 1, num_kv, generator=torch.Generator().manual_seed(seed))
        > 0.3
    )
    perm = torch.randperm(num_kv, generator=torch.Generator().manual_seed(seed + 1))
    out = layer(queries, keys, values, None, mask)
    permuted = layer(queries, keys[:, perm], values[:, perm], None, mask[..., perm])
    torch.testing.assert_close(permuted, out)


@pytest.mark.parametrize("name", LAYER_NAMES)
def test_permuting_keys_without_values_changes_the_output(name):
    # The property above could pass vacuously if the output ignored the keys; it does
    # not.
    layer = all_layers(4, 6)[name]
    queries, keys, values = make_qkv()
    perm = torch.tensor([1, 0, 2, 3, 4])
    assert not torch.allclose(
        layer(queries, keys[:, perm], values), layer(queries, keys, values)
    )


@pytest.mark.parametrize("name", LAYER_NAMES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_with_scores_of_1e4_has_no_nan_or_inf(name, dtype):
    layer = all_layers(2, 2)[name]
    if isinstance(layer, torch.nn.Module):
        layer.to(dtype)
    # q·k up to 1e4
    queries = torch.tensor([[[100.0, 0.0], [0.0, 100.0], [1.0, 1.0]]], dtype=dtype)
    keys = torch.tensor(
        [[[100.0, 0.0], [-100.0, 0.0], [0.0, 100.0], [50.0, 50.0]]], dtype=dtype
    )
    values = torch.randn(1, 4, 2).to(dtype)
    valid_lens = torch.tensor([[3, 4, 0]])
    out = layer(queries, keys, values, valid_lens)
    assert out.dtype == dtype
    assert torch.isfinite(out).all()
    assert torch.equal(out[0, 2], torch.zeros(2, dtype=dtype))


def test_output_is_a_convex_combination_of_the_values():
    queries, keys, values = make_qkv(value_size=1)
    out, _ = dot_product_attention(queries, keys, values)
    assert (out >= values.min(dim=1, keepdim=True).values - 1e-6).all()
    assert (out <= values.max(dim=1, keepdim=True).values + 1e-6).all()


def test_dropout_applies_to_the_average_not_to_the_stored_weights():
    torch.manual_seed(0)
    queries, keys, values = make_qkv()
    layer = DotProductAttention(dropout=0.5).train()
    out = layer(queries, keys, values, need_weights=True)
    torch.testing.assert_close(layer.attention_weights.sum(-1), torch.ones(2, 3))
    layer.eval()
    assert not torch.allclose(out, layer(queries, keys, values))


# --- bad input: every error names what it got and what it expected --------------------

def test_error_keys_of_another_size_for_dot_product():
    queries, keys, values = make_qkv()
    with pytest.raises(
        ValueError, match=r"keys must have shape \(B, Lk, 4\), got \(2, 5, 3\)"
    ):
        dot_product_attention(queries, keys[..., :3], values)
    with pytest.raises(ValueError, match=r"keys must have shape \(B, Lk, 4\)"):
        dot_product_scores(queries, keys[..., :3])


def test_error_values_not_paired_with_keys():
    queries, keys, values = make_qkv()
    with pytest.raises(
        ValueError,
        match=r"keys have Lk=5 .*values must have shape \(B, 5, Dv\), got \(2, 4, 6\)",
    ):
        dot_product_attention(queries, keys, values[:, :4])
    with pytest.raises(ValueError, match=r"keys have Lk=5"):
        AdditiveAttention(4, 4, 8)(queries, keys, values[:, :4])


def test_error_batch_sizes_differ_no_silent_broadcast():
    queries, keys, values = make_qkv()
    with pytest.raises(
        ValueError,
        match=r"keys must have the same leading \(batch\) dimensions as queries: "
        r"expected \(2,\) \+ \(L, size\), got \(1, 5, 4\)",
    ):
        dot_product_attention(queries, keys[:1], values[:1])


def test_error_dtypes_differ():
    queries, keys, values = make_qkv()
    with pytest.raises(
        TypeError,
        match="keys has dtype torch.float64 but queries has dtype torch.float32",
    ):
        dot_product_attention(queries, keys.double(), values)
    with pytest.raises(
        TypeError,
        match="values has dtype torch.float16 but keys has dtype torch.float32",
    ):
        DotProductAttention()(queries, keys, values.half())


def test_error_integer_or_low_rank_inputs():
    queries, keys, values = make_qkv()
    with pytest.raises(
        TypeError,
        match="queries must be a floating-point tensor, got dtype torch.int64",
    ):
        dot_product_attention(queries.long(), keys, values)
    with pytest.raises(
        ValueError, match=r"queries must have shape \(B, L, size\).*got \(3, 4\)"
    ):
        dot_product_attention(queries[0], keys, values)
    with pytest.raises(
        TypeError, match="values must be a torch.Tensor, got a list of length 1"
    ):
        dot_product_attention(queries, keys, [[1.0]])


@pytest.mark.parametrize("need_weights", [True, False])
def test_error_valid_lens_out_of_range(need_weights):
    queries, keys, values = make_qkv()
    with pytest.raises(
        ValueError,
        match=(
            r"valid_lens must lie in \[0, 5\] \(the number of keys\), got values from 1"
            r" to 6"
        ),
    ):
        dot_product_attention(
            queries, keys, values, torch.tensor([1, 6]), need_weights=need_weights
        )


def test_error_valid_lens_wrong_batch_size_in_layers():
    queries, keys, values = make_qkv()
    for layer in (DotProductAttention(), AdditiveAttention(4, 4, 8)):
        with pytest.raises(ValueError, match=r"with B=2, Lq=3, got \(3,\)"):
            layer(queries, keys, values, torch.tensor([1, 2, 3]))


def test_error_inputs_of_another_dtype_than_the_parameters():
    queries, keys, values = make_qkv(dtype=torch.float64)
    with pytest.raises(
        TypeError,
        match=r"queries have dtype torch.float64 but the layer's parameters have "
        r"torch.float32; call layer.to\(torch.float64\)",
    ):
        AdditiveAttention(4, 4, 8)(queries, keys, values)


def test_error_additive_sizes_name_the_constructor_argument():
    queries, keys, values = make_qkv()
    layer = AdditiveAttention(key_size=4, query_size=3, attention_size=8)
    with pytest.raises(
        ValueError,
        match=r"queries must have last dimension query_size=3, got shape \(2, 3, 4\)",
    ):
        layer(queries, keys, values)
    with pytest.raises(
        ValueError,
        match=r"keys must have last dimension key_size=4, got shape \(2, 5, 3\)",
    ):
        layer.project_keys(keys[..., :3])


def test_error_projected_keys_wrong_shape():
    queries, keys, values = make_qkv()
    layer = AdditiveAttention(4, 4, 8)
    with pytest.raises(
        ValueError,
        match=(
            r"projected_keys must have shape \(2, 5, 8\) \(B, Lk, Da\).*got \(2, 5, 4\)"
        ),
    ):
        layer(queries, keys, values, projected_keys=keys)


def test_error_w_v_wrong_shape():
    queries, keys, _ = make_qkv()
    with pytest.raises(
        ValueError, match=r"w_v must have shape \(4,\) or \(1, 4\).*got \(2, 4\)"
    ):
        additive_scores(queries, keys, torch.ones(2, 4))


def test_error_scale_not_a_number():
    queries, keys, values = make_qkv()
    with pytest.raises(TypeError, match="scale must be a number or None"):
        dot_product_attention(queries, keys, values, scale="sqrt")
    for bad in ("yes", True):  # True once meant 1/√D: now None does, as everywhere
        with pytest.raises(TypeError, match="scale must be a number or None"):
            DotProductAttention(scale=bad)


def test_error_pooling_values_do_not_match_scores():
    with pytest.raises(
        ValueError,
        match=(
            r"values must have shape \(2, 5\) \+ \(Dv,\) to match scores of shape \(2,"
            r" 3, 5\)"
        ),
    ):
        attention_pooling(torch.randn(2, 3, 5), torch.randn(2, 4, 6))


def test_error_loop_takes_3d_only():
    queries, keys, values = make_qkv()
    with pytest.raises(
        ValueError,
        match=r"attention_loop takes queries of shape \(B, Lq, D\), got \(1, 2, 3, 4\)",
    ):
        attention_loop(queries[None], keys[None], values[None])


def test_grid_of_sizes_matches_sdpa():
    # A parametrised grid on top of the hypothesis tests: odd sizes, one key, one query.
    for batch_size, num_queries, num_kv, size in itertools.product(
        [1, 2], [1, 7], [1, 9], [1, 16]
    ):
        queries, keys, values = make_qkv(batch_size, num_queries, num_kv, size, 3)
        torch.testing.assert_close(
            dot_product_attention(queries, keys, values)[0],
            F.scaled_dot_product_attention(queries, keys, values),
        )


# --- valid_lens and masks of the wrong kind reach every entry point with the same
# message -------------

@pytest.mark.parametrize(
    "call",
    [
        lambda q, k, v, **kw: dot_product_attention(q, k, v, **kw),
        lambda q, k, v, **kw: dot_product_attention(
            q, k, v, need_weights=False, **kw
        ),
        lambda q, k, v, **kw: attention_loop(q, k, v, **kw),
        lambda q, k, v, **kw: DotProductAttention()(q, k, v, **kw),
        lambda q, k, v, **kw: AdditiveAttention(4, 4, 8)(q, k, v, **kw),
        lambda q, k, v, **kw: attention_pooling(dot_product_scores(q, k), v, **kw),
    ],
    ids=["explicit", "fast", "loop", "dot_layer", "additive_layer", "pooling"],
)
@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (
            {"valid_lens": [1, 2]},
            TypeError,
            r"valid_lens must be a torch.Tensor .* got a list of length 2",
        ),
        (
            {"valid_lens": np.array([1, 2])},
            TypeError,
            r"valid_lens must be a torch.Tensor .* got a NumPy array",
        ),
        (
            {"valid_lens": torch.tensor(3)},
            ValueError,
            r"valid_lens must have shape \(B,\) or \(B, Lq\) .* got \(\)",
        ),
        (
            {"mask": np.ones((3, 5), dtype=bool)},
            TypeError,
            r"mask must be a bool torch.Tensor .* got a NumPy array",
        ),
        (
            {"mask": [[True] * 5] * 3},
            TypeError,
            r"mask must be a bool torch.Tensor .* got a list of length 3",
        ),
    ],
)
def test_bad_valid_lens_or_mask_named_at_every_entry_point(
    call, kwargs, error, message
):
    queries, keys, values = make_qkv()
    with pytest.raises(error, match=message):
        call(queries, keys, values, **kwargs)

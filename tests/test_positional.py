"""attention_lib.positional: the sinusoidal encoding against values worked by hand and
d2l, its two layouts, its geometry (row norms, dot products, shifts are rotations),
RoPE's relative-position property against independent formulations, the layers, and
every error path."""
import math

import pytest
import torch
from d2l import torch as d2l
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_lib import positional
from attention_lib.positional import (
    LearnedPositionalEncoding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    apply_rotary,
    interleaved_to_concatenated,
    position_angles,
    rotary_matrix,
    sinusoidal_encoding,
    sinusoidal_shift_matrix,
)

F64 = torch.float64


def frequencies(dim, base=10000.0):
    """ω_i = 1 / base^(2i/D), with math, not with the library."""
    return [1.0 / base ** (2 * i / dim) for i in range(dim // 2)]


# --- values worked by hand ------------------------------------------------------------

# D = 4, base 10000: ω_0 = 1 and ω_1 = 10000^(-2/4) = 0.01
# PE[p] = [sin p, cos p, sin 0.01p, cos 0.01p]
BY_HAND = {
    0: [0.0, 1.0, 0.0, 1.0],
    1: [0.8414709848, 0.5403023059, 0.0099998333, 0.9999500004],
    2: [0.9092974268, -0.4161468365, 0.0199986667, 0.9998000067],
    5: [-0.9589242747, 0.2836621855, 0.0499791693, 0.9987502604],
}


def test_sinusoidal_values_by_hand():
    pe = sinusoidal_encoding(6, 4, dtype=F64)
    assert pe.shape == (6, 4) and pe.dtype == F64
    for p, row in BY_HAND.items():
        expected = torch.tensor(row, dtype=F64)
        torch.testing.assert_close(pe[p], expected, atol=1e-9, rtol=0)
    # concatenated: [sin p, sin 0.01p | cos p, cos 0.01p]
    concatenated = sinusoidal_encoding(6, 4, interleaved=False, dtype=F64)
    a, b, c, d = BY_HAND[2]
    torch.testing.assert_close(
        concatenated[2], torch.tensor([a, c, b, d], dtype=F64), atol=1e-9, rtol=0
    )


def test_position_angles_by_hand():
    # D = 6, base 100: ω = 1, 100^(-1/3) = 0.2154434690, 100^(-2/3) = 0.0464158883
    angles = position_angles(torch.tensor([0, 3]), 6, base=100.0)
    assert angles.shape == (2, 3) and angles.dtype == torch.float32
    expected = torch.tensor([[0.0, 0.0, 0.0], [3.0, 0.6463304070, 0.1392476650]])
    torch.testing.assert_close(angles, expected, atol=1e-6, rtol=0)


def test_dtype_and_device_arguments():
    pe = sinusoidal_encoding(5, 8, dtype=torch.bfloat16, device="cpu")
    assert pe.dtype == torch.bfloat16 and pe.device.type == "cpu"
    torch.testing.assert_close(
        pe.double(), sinusoidal_encoding(5, 8, dtype=F64), atol=4e-3, rtol=0
    )
    assert sinusoidal_encoding(0, 8).shape == (0, 8)


def test_sinusoidal_encoding_equals_d2l():
    # d2l computes the angles in float32; 1000 positions stay within 1e-4 of ours
    for dim in (8, 32):
        theirs = d2l.PositionalEncoding(dim, dropout=0.0, max_len=1000).P[0]
        torch.testing.assert_close(
            sinusoidal_encoding(1000, dim), theirs, atol=1e-4, rtol=0
        )
    layer = SinusoidalPositionalEncoding(32).eval()
    reference = d2l.PositionalEncoding(32, dropout=0.0).eval()
    x = torch.randn(2, 50, 32)
    torch.testing.assert_close(layer(x), reference(x), atol=1e-4, rtol=0)


# --- the two layouts ------------------------------------------------------------------

def test_the_permutation_by_hand():
    assert interleaved_to_concatenated(8).tolist() == [0, 2, 4, 6, 1, 3, 5, 7]
    assert interleaved_to_concatenated(2).tolist() == [0, 1]


@pytest.mark.parametrize("dim", [2, 4, 8, 64])
def test_the_layouts_are_a_column_permutation_of_each_other(dim):
    interleaved = sinusoidal_encoding(50, dim, dtype=F64)
    concatenated = sinusoidal_encoding(50, dim, interleaved=False, dtype=F64)
    perm = interleaved_to_concatenated(dim)
    assert torch.equal(interleaved[:, perm], concatenated)
    assert torch.equal(concatenated[:, perm.argsort()], interleaved)
    # not vacuous: from D = 4 on the layouts differ (for D = 2 they coincide)
    assert torch.equal(interleaved, concatenated) == (dim == 2)


# --- geometry of the sinusoidal encoding ----------------------------------------------

@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("dim", [2, 8, 64, 512])
def test_every_row_has_norm_sqrt_of_half_D(dim, interleaved):
    pe = sinusoidal_encoding(2000, dim, interleaved=interleaved, dtype=F64)
    norms = pe.norm(dim=-1)  # (L,)
    torch.testing.assert_close(
        norms, torch.full((2000,), math.sqrt(dim / 2), dtype=F64), atol=1e-12, rtol=0
    )


@pytest.mark.parametrize("interleaved", [True, False])
def test_dot_product_depends_only_on_the_distance(interleaved):
    dim = 32
    pe = sinusoidal_encoding(700, dim, interleaved=interleaved, dtype=F64)
    by_distance = {}
    for k in (0, 1, 2, 7, 50, 200):
        dots = torch.stack([pe[p] @ pe[p + k] for p in (0, 3, 17, 100, 350, 499)])
        # the same for every p ...
        torch.testing.assert_close(dots, dots[:1].expand(6), atol=1e-12, rtol=0)
        # ... and equal to Σ_i cos(k ω_i)
        expected = sum(math.cos(k * w) for w in frequencies(dim))
        assert dots[0].item() == pytest.approx(expected, abs=1e-12)
        by_distance[k] = dots[0].item()
    # not vacuous: it does depend on k; at k = 0 it is the squared norm D/2
    assert by_distance[0] == pytest.approx(dim / 2)
    assert len({round(v, 6) for v in by_distance.values()}) == len(by_distance)


@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("k", [1, 3, 40])
def test_a_shift_by_k_is_one_rotation_for_every_position(k, interleaved):
    dim = 16
    pe = sinusoidal_encoding(300, dim, interleaved=interleaved, dtype=F64)
    shift = sinusoidal_shift_matrix(k, dim, interleaved=interleaved)  # (D, D)
    # PE[p + k] = M_k PE[p] for every p, one matrix
    torch.testing.assert_close(pe[k:], pe[:-k] @ shift.T, atol=1e-12, rtol=0)
    # M_k is a rotation: orthogonal with determinant +1
    torch.testing.assert_close(shift.T @ shift, torch.eye(dim, dtype=F64))
    assert torch.linalg.det(shift).item() == pytest.approx(1.0)
    # shifts compose: M_j M_k = M_{j+k}
    torch.testing.assert_close(
        sinusoidal_shift_matrix(2, dim, interleaved=interleaved) @ shift,
        sinusoidal_shift_matrix(k + 2, dim, interleaved=interleaved),
    )


def test_the_shift_is_linear_in_pe_found_without_the_library_formula():
    # Fit A with PE[p + k] ≈ PE[p] A by least squares on two separate windows of
    # positions: a linear map fits exactly, it is the same on both windows (it depends
    # only on k) and it is M_kᵀ. base 100 keeps the rows well spread for the fit.
    dim, k, base = 8, 5, 100.0
    pe = sinusoidal_encoding(200 + k, dim, base=base, dtype=F64)
    fits = []
    for start in (0, 100):
        before, after = pe[start : start + 100], pe[start + k : start + k + 100]
        fit = torch.linalg.lstsq(before, after).solution  # (D, D)
        torch.testing.assert_close(before @ fit, after, atol=1e-10, rtol=0)
        fits.append(fit)
    torch.testing.assert_close(fits[0], fits[1], atol=1e-8, rtol=0)
    torch.testing.assert_close(
        fits[0], sinusoidal_shift_matrix(k, dim, base).T, atol=1e-8, rtol=0
    )


# --- the sinusoidal and learned layers ------------------------------------------------

def test_sinusoidal_layer_adds_the_encoding_and_keeps_shapes():
    layer = SinusoidalPositionalEncoding(16, max_len=40)
    x = torch.randn(3, 7, 16)
    out = layer(x)
    assert out.shape == x.shape
    pe = sinusoidal_encoding(40, 16)
    torch.testing.assert_close(out - x, pe[:7].expand(3, 7, 16))
    torch.testing.assert_close(layer(x, offset=5) - x, pe[5:12].expand(3, 7, 16))
    # computed, not learned: a buffer, outside the state_dict
    assert list(layer.parameters()) == [] and layer.state_dict() == {}
    assert torch.equal(layer.encoding, pe)


def test_sinusoidal_layer_concatenated_layout():
    layer = SinusoidalPositionalEncoding(8, max_len=20, interleaved=False)
    x = torch.zeros(1, 20, 8)
    expected = sinusoidal_encoding(20, 8, interleaved=False)
    torch.testing.assert_close(layer(x)[0], expected)


def test_sinusoidal_layer_dropout_acts_on_the_sum_in_training_only():
    torch.manual_seed(0)
    layer = SinusoidalPositionalEncoding(16, dropout=0.5)
    x = torch.randn(4, 10, 16)
    total = x + sinusoidal_encoding(10, 16)
    out = layer.train()(x)
    dropped = out == 0
    assert 0.3 < dropped.float().mean().item() < 0.7
    torch.testing.assert_close(out[~dropped], 2 * total[~dropped])
    torch.testing.assert_close(layer.eval()(x), total)


def test_learned_layer_adds_its_rows_and_trains_only_the_rows_it_used():
    torch.manual_seed(0)
    layer = LearnedPositionalEncoding(7, max_len=30)  # any D, odd included
    weight = layer.embedding.weight  # (max_len, D)
    assert weight.shape == (30, 7)
    assert 0.015 < weight.std().item() < 0.025
    x = torch.randn(2, 6, 7)
    out = layer(x, offset=4)
    assert out.shape == x.shape
    torch.testing.assert_close(out - x, weight[4:10].detach().expand(2, 6, 7))
    out.sum().backward()
    used = torch.zeros(30, dtype=torch.bool)
    used[4:10] = True
    assert torch.equal(weight.grad[used], torch.full((6, 7), 2.0))  # B = 2
    assert torch.equal(weight.grad[~used], torch.zeros(24, 7))


LAYERS = {
    "sinusoidal": lambda: SinusoidalPositionalEncoding(8, max_len=10),
    "learned": lambda: LearnedPositionalEncoding(8, max_len=10),
    "rotary": lambda: RotaryEmbedding(8, max_len=10),
}


def reference_output(name, layer, x):
    """The layer's output computed in float64."""
    x = x.double()
    if name == "sinusoidal":
        return x + sinusoidal_encoding(x.shape[1], 8, dtype=F64)
    if name == "learned":
        return x + layer.embedding.weight[: x.shape[1]].detach().double()
    return apply_rotary(x)


@pytest.mark.parametrize("name", sorted(LAYERS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_layers_keep_the_input_dtype_and_shape(name, dtype):
    torch.manual_seed(0)
    layer = LAYERS[name]()
    x = torch.randn(2, 6, 8).to(dtype)
    out = layer(x)
    assert out.dtype == dtype and out.shape == x.shape
    tol = 1e-6 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(
        out.double(), reference_output(name, layer, x), atol=tol, rtol=tol
    )


# --- rotary position embedding --------------------------------------------------------

def test_rotary_by_hand():
    c1, s1 = 0.5403023059, 0.8414709848
    # Dh = 2, position 1: (1, 0) -> (cos 1, sin 1), (0, 1) -> (-sin 1, cos 1)
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=F64)  # (L=2, Dh=2)
    out = apply_rotary(x, positions=torch.tensor([1, 1]))
    expected = torch.tensor([[c1, s1], [-s1, c1]], dtype=F64)
    torch.testing.assert_close(out, expected, atol=1e-9, rtol=0)
    # Dh = 4, position 2: the second pair turns by 0.01 per position
    x = torch.tensor([[1.0, 0.0, 1.0, 0.0]] * 3, dtype=F64)  # (L=3, Dh=4)
    expected = [-0.4161468365, 0.9092974268, 0.9998000067, 0.0199986667]
    torch.testing.assert_close(
        apply_rotary(x)[2], torch.tensor(expected, dtype=F64), atol=1e-9, rtol=0
    )


@pytest.mark.parametrize("dtype", [torch.float32, F64, torch.bfloat16])
def test_rotary_at_position_zero_is_the_identity(dtype):
    x = torch.randn(2, 3, 5, 8).to(dtype)
    assert torch.equal(apply_rotary(x)[..., 0, :], x[..., 0, :])
    assert torch.equal(apply_rotary(x, positions=torch.zeros(5)), x)
    assert torch.equal(RotaryEmbedding(8, max_len=5)(x)[..., 0, :], x[..., 0, :])
    # not vacuous: later positions move
    assert not torch.allclose(apply_rotary(x)[..., 1, :].float(), x[..., 1, :].float())


def test_rotary_computes_half_precision_input_in_float32():
    # bfloat16 in, bfloat16 out, but the rotation itself is done in float32: the result
    # is the float32 rotation rounded once
    x = torch.randn(2, 3, 40, 16).bfloat16()
    expected = apply_rotary(x.float(), positions=torch.arange(500, 540)).bfloat16()
    assert torch.equal(apply_rotary(x, positions=torch.arange(500, 540)), expected)
    layer = RotaryEmbedding(16, max_len=540)
    assert torch.equal(layer(x, offset=500), layer(x.float(), offset=500).bfloat16())


@settings(max_examples=25, deadline=None)
@given(
    head_dim=st.sampled_from([2, 4, 8, 64]),
    seed=st.integers(0, 2**16),
    start=st.integers(0, 10_000),
)
def test_rotary_preserves_the_norm_of_every_pair(head_dim, seed, start):
    x = torch.randn(2, 3, 9, head_dim, generator=torch.Generator().manual_seed(seed))
    out = apply_rotary(x.double(), positions=torch.arange(start, start + 9))
    pair_norms = x.double().unflatten(-1, (-1, 2)).norm(dim=-1)  # (2, 3, 9, Dh/2)
    torch.testing.assert_close(
        out.unflatten(-1, (-1, 2)).norm(dim=-1), pair_norms, atol=1e-12, rtol=1e-12
    )


def test_rotary_equals_its_matrix_form():
    x = torch.randn(7, 16, dtype=F64)  # (L, Dh)
    positions = torch.tensor([0.0, 1.0, 5.0, 37.5, 999.0, 4096.0, -3.0], dtype=F64)
    out = apply_rotary(x, positions)
    for row, m in enumerate(positions.tolist()):
        rotation = rotary_matrix(m, 16)  # (Dh, Dh)
        torch.testing.assert_close(out[row], rotation @ x[row], atol=1e-12, rtol=0)
        torch.testing.assert_close(rotation.T @ rotation, torch.eye(16, dtype=F64))
    torch.testing.assert_close(rotary_matrix(0, 16), torch.eye(16, dtype=F64))
    # R_mᵀ R_n = R_{n-m}
    torch.testing.assert_close(
        rotary_matrix(3, 16).T @ rotary_matrix(11, 16), rotary_matrix(8, 16)
    )


def test_rotary_equals_the_complex_number_form():
    # RoPE as in the paper's section 3.4.2 and Meta's Llama: each adjacent pair is a
    # complex number a + ib, multiplied by e^{i m ω_j}.
    x = torch.randn(2, 4, 10, 12, dtype=F64)  # (B, H, L, Dh)
    m = torch.arange(10, dtype=F64)[:, None]  # (L, 1)
    w = torch.tensor(frequencies(12), dtype=F64)[None, :]  # (1, Dh/2)
    turn = torch.polar(torch.ones(10, 6, dtype=F64), m * w)  # (L, Dh/2)
    pairs = torch.view_as_complex(x.unflatten(-1, (-1, 2)).contiguous())
    expected = torch.view_as_real(pairs * turn).flatten(-2)  # (B, H, L, Dh)
    torch.testing.assert_close(apply_rotary(x), expected, atol=1e-12, rtol=0)


def rotate_half_rope(x, positions, base=10000.0):
    """The GPT-NeoX / Hugging Face Llama layout: feature i pairs with i + Dh/2."""
    head_dim = x.shape[-1]
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=F64) / head_dim)
    angles = positions.double()[:, None] * inv_freq[None, :]  # (L, Dh/2)
    cos, sin = angles.cos().repeat(1, 2), angles.sin().repeat(1, 2)  # (L, Dh)
    first, second = x[..., : head_dim // 2], x[..., head_dim // 2 :]
    rotated_half = torch.cat((-second, first), dim=-1)
    return x * cos + rotated_half * sin


def test_the_rotate_half_layout_is_the_same_rotation_on_permuted_columns():
    x = torch.randn(2, 3, 6, 8, dtype=F64)
    positions = torch.arange(6)
    perm = interleaved_to_concatenated(8)
    torch.testing.assert_close(
        rotate_half_rope(x[..., perm], positions), apply_rotary(x)[..., perm]
    )
    # not vacuous: on unpermuted columns the two layouts disagree
    assert not torch.allclose(rotate_half_rope(x, positions), apply_rotary(x))


def score(q, k, m, n):
    """(R_m q)ᵀ (R_n k) for single vectors q, k of shape (Dh,)."""
    rotated_q = apply_rotary(q[None], positions=torch.tensor([m]))[0]
    rotated_k = apply_rotary(k[None], positions=torch.tensor([n]))[0]
    return (rotated_q @ rotated_k).item()


@settings(max_examples=50, deadline=None)
@given(
    head_dim=st.sampled_from([2, 4, 8, 16, 64]),
    seed=st.integers(0, 2**16),
    m=st.integers(0, 5000),
    n=st.integers(0, 5000),
    shift=st.integers(-5000, 5000),
)
def test_rotary_scores_depend_only_on_the_distance(head_dim, seed, m, n, shift):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(head_dim, generator=gen, dtype=F64)
    k = torch.randn(head_dim, generator=gen, dtype=F64)
    tol = 1e-10 * q.norm().item() * k.norm().item()
    at_m_n = score(q, k, m, n)
    # move both tokens by the same amount: the score does not change
    assert score(q, k, m + shift, n + shift) == pytest.approx(at_m_n, abs=tol)
    # (R_m q)ᵀ (R_n k) = qᵀ R_{n-m} k
    assert score(q, k, 0, n - m) == pytest.approx(at_m_n, abs=tol)


def test_rotary_scores_do_change_with_the_distance():
    # the property above would hold for a rotary that did nothing; it does something
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 16, generator=gen, dtype=F64)
    scores = [score(q, k, 0, distance) for distance in range(8)]
    assert scores[0] == pytest.approx((q @ k).item())
    assert len({round(s, 6) for s in scores}) == 8


def test_rotary_embedding_equals_apply_rotary_with_offsets():
    layer = RotaryEmbedding(16, max_len=64)
    x = torch.randn(2, 4, 10, 16)  # (B, H, L, Dh)
    for offset in (0, 1, 54):
        torch.testing.assert_close(
            layer(x, offset=offset),
            apply_rotary(x, positions=torch.arange(offset, offset + 10)),
            atol=1e-5,
            rtol=1e-5,
        )
    assert list(layer.parameters()) == [] and layer.state_dict() == {}
    assert layer.cos.shape == layer.sin.shape == (64, 8)
    assert layer.cos.dtype == torch.float32
    # float64 input: float64 output, accurate to the float32 cache
    out = layer(x.double(), offset=3)
    assert out.dtype == F64
    reference = apply_rotary(x.double(), positions=torch.arange(3, 13))
    torch.testing.assert_close(out, reference, atol=1e-6, rtol=0)


# --- bad input: every error names what it got and what it expected --------------------

def test_odd_sizes_are_refused_with_the_size():
    with pytest.raises(ValueError, match=r"dim must be even .*got dim=7"):
        sinusoidal_encoding(10, 7)
    with pytest.raises(ValueError, match=r"embed_dim must be even .*got embed_dim=9"):
        SinusoidalPositionalEncoding(9)
    with pytest.raises(ValueError, match=r"head_dim must be even .*got head_dim=5"):
        RotaryEmbedding(5)
    with pytest.raises(ValueError, match=r"Dh even .*got \(2, 3, 7\)"):
        apply_rotary(torch.randn(2, 3, 7))
    with pytest.raises(ValueError, match=r"dim must be even .*got dim=3"):
        interleaved_to_concatenated(3)
    with pytest.raises(ValueError, match=r"dim must be even .*got dim=1"):
        rotary_matrix(2, 1)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_too_long_inputs_are_refused_naming_both_numbers(name):
    layer = LAYERS[name]()  # max_len = 10
    layer(torch.randn(2, 10, 8))  # exactly max_len: fine
    layer(torch.randn(2, 4, 8), offset=6)  # positions 6..9: fine
    with pytest.raises(ValueError, match=r"L=12 positions, .*max_len=10"):
        layer(torch.randn(2, 12, 8))
    with pytest.raises(
        ValueError, match=r"L=4 positions starting at offset=7, which needs max_len >="
        r" 11, but this encoding was built with max_len=10"
    ):
        layer(torch.randn(2, 4, 8), offset=7)
    with pytest.raises(ValueError, match=r"offset must be at least 0, got -1"):
        layer(torch.randn(2, 4, 8), offset=-1)


@pytest.mark.parametrize("name", ["sinusoidal", "learned"])
def test_additive_layers_refuse_a_wrong_width_token_ids_and_missing_batch(name):
    layer = LAYERS[name]()
    with pytest.raises(
        ValueError, match=r"x must have shape \(B, L, 8\).*got \(2, 3, 6\)"
    ):
        layer(torch.randn(2, 3, 6))
    with pytest.raises(ValueError, match=r"\(B, L, 8\).*got \(3, 8\)"):
        layer(torch.randn(3, 8))
    with pytest.raises(TypeError, match=r"floating-point .*embed the tokens first"):
        layer(torch.randint(0, 5, (2, 3, 8)))
    with pytest.raises(TypeError, match=r"x must be a torch.Tensor .*a list"):
        layer([[0.0] * 8])


def test_rotary_refuses_bad_positions_and_widths():
    x = torch.randn(2, 5, 8)
    with pytest.raises(
        ValueError, match=r"positions must have shape \(L,\) = \(5,\) .*got \(4,\)"
    ):
        apply_rotary(x, positions=torch.arange(4))
    with pytest.raises(TypeError, match=r"positions must be a tensor .*a list"):
        apply_rotary(x, positions=[0, 1, 2, 3, 4])
    with pytest.raises(ValueError, match=r"\(\.\.\., L, 16\) \(head_dim=16\), got"):
        RotaryEmbedding(16)(x)
    with pytest.raises(ValueError, match=r"\(\.\.\., L, Dh\) with Dh even.*got \(8,\)"):
        apply_rotary(torch.randn(8))
    with pytest.raises(ValueError, match=r"cos must have shape \(L, Dh/2\) = \(5, 4\)"):
        positional.rotate_pairs(x, torch.ones(5, 8), torch.ones(5, 4))


def test_other_arguments_are_checked():
    with pytest.raises(ValueError, match=r"num_positions must be at least 0, got -1"):
        sinusoidal_encoding(-1, 8)
    with pytest.raises(TypeError, match=r"dim must be an integer .*the float 8.0"):
        sinusoidal_encoding(10, 8.0)
    with pytest.raises(ValueError, match=r"base must be positive .*got -2.0"):
        sinusoidal_encoding(10, 8, base=-2)
    with pytest.raises(ValueError, match=r"max_len must be at least 1, got 0"):
        LearnedPositionalEncoding(8, max_len=0)
    with pytest.raises(ValueError, match=r"positions must have shape \(L,\), got"):
        position_angles(torch.zeros(2, 3), 8)


def test_apply_rotary_keeps_float32_precision_at_far_positions():
    """The angles are computed in float64, so the error does not grow with the
    position (it reached 6.6e-4 at position 4095 with float32 angles)."""
    x = torch.randn(1, 1, 4096, 64, generator=torch.Generator().manual_seed(0))
    error = (apply_rotary(x) - apply_rotary(x.double()).float()).abs()  # (1, 1, L, 64)
    assert error[..., 4000:, :].max() < 1e-5

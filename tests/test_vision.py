"""attention_lib.vision: the gates against their formulas written out in float64 (and a
wrong variant that the same check catches), images as row-major token sequences, patch
embedding as unfold + matmul, the ViT against PyTorch's encoder layer and the small
CNN. The chapter's additions to training and plotting are tested in test_training.py
and test_plotting.py."""
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attention_lib.bahdanau import BahdanauDecoder
from attention_lib.digits import CAPTION_VOCAB_SIZE, caption_batch
from attention_lib.transformer import torch_twin
from attention_lib.vision import (
    CBAM,
    ChannelAttention,
    DigitCNN,
    PatchEmbedding,
    SpatialAttention,
    VisionTransformer,
    channel_descriptors,
    image_to_tokens,
    spatial_descriptors,
    tokens_to_grid,
)

shapes = st.tuples(
    st.integers(1, 3), st.integers(1, 5), st.integers(1, 6), st.integers(1, 6)
)  # (B, C, Hgt, W)


def randn(*shape, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


# --- the formulas, written out --------------------------------------------------------

def mlp_by_hand(mlp: nn.Sequential, v: torch.Tensor) -> torch.Tensor:
    first, _, second = mlp
    hidden = torch.clamp(v @ first.weight.T + first.bias, min=0)
    return hidden @ second.weight.T + second.bias


def channel_gate_by_hand(x, mlp, pooling):
    avg = x.sum(dim=(2, 3)) / (x.shape[2] * x.shape[3])  # (B, C)
    top = x.flatten(2).max(dim=2).values  # (B, C)
    scores = mlp_by_hand(mlp, avg)
    if pooling == "avg+max":
        scores = scores + mlp_by_hand(mlp, top)
    return 1 / (1 + torch.exp(-scores))  # (B, C)


def spatial_gate_by_hand(x, conv, pool_dims=(1,)):
    """σ(conv([mean_C x; max_C x])); other pool_dims give the wrong variants."""
    avg = x.mean(dim=pool_dims, keepdim=True).expand(-1, 1, *x.shape[2:])
    top = x.amax(dim=pool_dims, keepdim=True).expand(-1, 1, *x.shape[2:])
    k = conv.kernel_size[0]
    scores = F.conv2d(torch.cat([avg, top], 1), conv.weight, conv.bias, padding=k // 2)
    return torch.sigmoid(scores)  # (B, 1, Hgt, W)


@settings(max_examples=25, deadline=None)
@given(shapes)
def test_descriptors_pool_over_the_right_axes(shape):
    x = randn(*shape)
    avg, top = channel_descriptors(x)
    flat = x.reshape(shape[0], shape[1], -1)  # (B, C, Hgt·W)
    torch.testing.assert_close(avg, flat.mean(-1))
    torch.testing.assert_close(top, flat.max(-1).values)
    both = spatial_descriptors(x)
    assert both.shape == (shape[0], 2, shape[2], shape[3])
    pixels = x.permute(0, 2, 3, 1)  # (B, Hgt, W, C): the channels of each pixel
    torch.testing.assert_close(both[:, 0], pixels.mean(-1))
    torch.testing.assert_close(both[:, 1], pixels.max(-1).values)


@pytest.mark.parametrize("pooling", ["avg", "avg+max"])
def test_channel_attention_is_its_formula(pooling):
    torch.manual_seed(0)
    gate = ChannelAttention(8, reduction=4, pooling=pooling).double()
    assert [type(m) for m in gate.mlp] == [nn.Linear, nn.ReLU, nn.Linear]
    assert gate.mlp[0].out_features == 2
    x = randn(3, 8, 5, 4)
    expected = channel_gate_by_hand(x, gate.mlp, pooling)
    torch.testing.assert_close(gate(x), x * expected[:, :, None, None])
    torch.testing.assert_close(gate.attention_weights, expected)
    assert not gate.attention_weights.requires_grad
    # The other pooling gives other numbers: the check can fail.
    other = "avg" if pooling == "avg+max" else "avg+max"
    assert not torch.allclose(gate(x), x * channel_gate_by_hand(x, gate.mlp, other)[
        :, :, None, None])


def test_channel_attention_sums_before_the_sigmoid():
    torch.manual_seed(1)
    gate = ChannelAttention(6, reduction=2).double()
    x = randn(2, 6, 3, 3)
    avg, top = channel_descriptors(x)
    wrong = (torch.sigmoid(gate.mlp(avg)) + torch.sigmoid(gate.mlp(top))) / 2
    gate(x)
    assert not torch.allclose(gate.attention_weights, wrong)


def test_channel_attention_keeps_one_hidden_unit():
    assert ChannelAttention(3, reduction=16).mlp[0].out_features == 1


def test_spatial_attention_is_its_formula_and_global_pooling_is_not():
    torch.manual_seed(0)
    gate = SpatialAttention(kernel_size=3).double()
    assert gate.conv.padding == (1, 1) and gate.conv.in_channels == 2
    x = randn(2, 5, 6, 7)
    expected = spatial_gate_by_hand(x, gate.conv)
    torch.testing.assert_close(gate(x), x * expected)
    torch.testing.assert_close(gate.attention_weights, expected)
    assert gate.attention_weights.shape == (2, 1, 6, 7)
    assert not gate.attention_weights.requires_grad
    # Read literally, "global pooling" pools over C, Hgt and W: one number per image,
    # a different (and nearly constant) gate.
    wrong = spatial_gate_by_hand(x, gate.conv, pool_dims=(1, 2, 3))
    assert not torch.allclose(gate(x), x * wrong)


def test_cbam_is_channel_then_spatial():
    torch.manual_seed(2)
    cbam = CBAM(8, reduction=2, kernel_size=5).double()
    assert cbam.channel.pooling == "avg+max"
    x = randn(2, 8, 6, 6)
    after_channel = x * channel_gate_by_hand(x, cbam.channel.mlp, "avg+max")[
        :, :, None, None]
    expected = after_channel * spatial_gate_by_hand(after_channel, cbam.spatial.conv)
    torch.testing.assert_close(cbam(x), expected)
    assert cbam.attention_weights is cbam.spatial.attention_weights
    assert cbam.channel.attention_weights.shape == (2, 8)
    # The other order differs.
    spatial_first = x * spatial_gate_by_hand(x, cbam.spatial.conv)
    spatial_first = spatial_first * channel_gate_by_hand(
        spatial_first, cbam.channel.mlp, "avg+max")[:, :, None, None]
    assert not torch.allclose(cbam(x), spatial_first)


def test_gates_reject_bad_input():
    with pytest.raises(ValueError, match=r"x must have shape \(B, 8, Hgt, W\), got"
                                         r" \(2, 4, 3, 3\)"):
        ChannelAttention(8)(torch.randn(2, 4, 3, 3))
    with pytest.raises(ValueError, match=r"x must have shape \(B, C, Hgt, W\), got"
                                         r" \(4, 3, 3\)"):
        SpatialAttention()(torch.randn(4, 3, 3))
    with pytest.raises(TypeError, match="floating-point"):
        channel_descriptors(torch.ones(1, 2, 3, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="kernel_size must be odd"):
        SpatialAttention(4)
    with pytest.raises(ValueError, match="pooling must be one of"):
        ChannelAttention(4, pooling="max")


# --- images as sequences --------------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(shapes)
def test_image_to_tokens_reads_row_by_row_and_folds_back(shape):
    batch, channels, height, width = shape
    x = randn(*shape)
    tokens = image_to_tokens(x)
    assert tokens.shape == (batch, height * width, channels)
    for row in range(height):
        for col in range(width):
            assert torch.equal(tokens[:, row * width + col], x[:, :, row, col])
    assert torch.equal(tokens_to_grid(tokens.transpose(1, 2), height, width), x)


def test_tokens_to_grid_checks_the_size():
    assert tokens_to_grid(torch.arange(6.0), 2, 3).tolist() == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(ValueError, match=r"\(\.\.\., 6\).*got \(2, 5\)"):
        tokens_to_grid(torch.zeros(2, 5), 2, 3)


def test_cnn_grid_is_the_keys_and_values_of_the_bahdanau_decoder():
    torch.manual_seed(0)
    cnn = DigitCNN(channels=(4, 8), pool_last=False)
    grid = cnn.features(torch.rand(3, 1, 12, 40))  # (3, 8, 6, 20)
    tokens = image_to_tokens(grid)  # (3, 120, 8)
    decoder = BahdanauDecoder(CAPTION_VOCAB_SIZE, 6, 10, key_size=8).eval()
    tgt_input, _, _ = caption_batch([[1, 2], [3], [4, 5, 6]])
    state = decoder.init_state((tokens, torch.zeros(1, 3, 10)))
    logits, _ = decoder(tgt_input, state, need_weights=True)
    assert logits.shape == (3, 4, CAPTION_VOCAB_SIZE)
    maps = tokens_to_grid(decoder.attention_weights, 6, 20)
    assert maps.shape == (3, 4, 6, 20)
    torch.testing.assert_close(maps.sum(dim=(2, 3)), torch.ones(3, 4))


# --- patches and the Vision Transformer -----------------------------------------------

def patches_by_hand(embedding: PatchEmbedding, images):
    p = embedding.patch_size
    columns = F.unfold(images, p, stride=p).transpose(1, 2)  # (B, P, C·p·p)
    weight = embedding.proj.weight.reshape(embedding.proj.out_channels, -1)
    return columns @ weight.T + embedding.proj.bias  # (B, P, D)


def test_patch_embedding_is_unfold_and_matmul():
    torch.manual_seed(0)
    embedding = PatchEmbedding((8, 12), 4, 3, 10).double()
    assert embedding.grid == (2, 3) and embedding.num_patches == 6
    images = randn(2, 3, 8, 12)
    torch.testing.assert_close(embedding(images), patches_by_hand(embedding, images))
    # Patch 4 is row 1, column 1: pixels 4..7 down, 4..7 across.
    patch = images[:, :, 4:8, 4:8].reshape(2, -1)
    torch.testing.assert_close(
        embedding(images)[:, 4],
        patch @ embedding.proj.weight.reshape(10, -1).T + embedding.proj.bias,
    )


def test_patch_embedding_bad_sizes():
    with pytest.raises(ValueError, match="multiple of patch_size=3"):
        PatchEmbedding(8, 3, 1, 4)
    with pytest.raises(ValueError, match=r"images must have shape \(B, 1, 8, 8\)"):
        PatchEmbedding(8, 2, 1, 4)(torch.zeros(2, 1, 8, 6))


def small_vit(num_layers=2, norm_first=True):
    torch.manual_seed(0)
    return VisionTransformer(8, 2, 1, 10, 16, 4, 32, num_layers,
                             norm_first=norm_first).double()


def test_vit_shapes_and_class_token_attention():
    vit = small_vit().eval()
    images = randn(3, 1, 8, 8)
    assert vit(images, need_weights=True).shape == (3, 10)
    assert vit.position_embedding.shape == (1, 17, 16)
    weights = vit.class_token_attention()
    assert weights.shape == (3, 4, 16)  # (B, H, P): the class token's own column out
    full = vit.blocks[-1].self_attention.attention_weights  # (B, H, P + 1, P + 1)
    torch.testing.assert_close(full[..., 0, :].sum(-1), torch.ones(3, 4).double())
    torch.testing.assert_close(weights.sum(-1), 1 - full[..., 0, 0])
    assert tokens_to_grid(weights, *vit.patch_embedding.grid).shape == (3, 4, 4, 4)


def test_vit_keeps_no_weights_unless_asked():
    vit = small_vit().eval()
    vit(randn(2, 1, 8, 8))
    with pytest.raises(RuntimeError, match=r"model\(images, need_weights=True\)"):
        vit.class_token_attention()


@pytest.mark.parametrize("norm_first", [True, False])
def test_vit_with_one_block_is_its_pieces_composed_by_hand(norm_first):
    vit = small_vit(num_layers=1, norm_first=norm_first)
    images = randn(2, 1, 8, 8)
    tokens = patches_by_hand(vit.patch_embedding, images)  # (2, 16, 16)
    x = torch.cat([vit.class_token.expand(2, 1, 16), tokens], 1)
    x = x + vit.position_embedding  # (2, 17, 16)
    x = torch_twin(vit.blocks[0])(x)  # PyTorch's own encoder layer, GELU
    x = F.layer_norm(x, (16,), vit.final_norm.weight, vit.final_norm.bias)
    expected = x[:, 0] @ vit.head.weight.T + vit.head.bias
    torch.testing.assert_close(vit.train()(images), expected)
    torch.testing.assert_close(vit.eval()(images), expected)


# --- the small CNN --------------------------------------------------------------------

@pytest.mark.parametrize(
    "gate, kind",
    [(None, None), ("se", ChannelAttention), ("channel", ChannelAttention),
     ("spatial", SpatialAttention), ("cbam", CBAM)],
)
def test_digit_cnn_stages_and_gates(gate, kind):
    torch.manual_seed(0)
    cnn = DigitCNN(gate=gate, channels=(4, 8))
    assert len(cnn.gates) == (0 if gate is None else 2)
    assert all(type(g) is kind for g in cnn.gates)
    if gate == "se":
        assert cnn.gates[0].pooling == "avg"
    x = torch.rand(3, 1, 24, 24)
    grid = cnn.features(x)
    assert grid.shape == (3, 8, 6, 6)
    torch.testing.assert_close(cnn(x), cnn.head(grid.mean(dim=(2, 3))))
    no_last_pool = DigitCNN(gate=gate, channels=(4, 8), pool_last=False)
    assert no_last_pool.features(x).shape == (3, 8, 12, 12)


def test_digit_cnn_bad_arguments():
    with pytest.raises(ValueError, match="gate must be None or one of"):
        DigitCNN(gate="se-net")
    with pytest.raises(ValueError, match=r"x must have shape \(B, 1, Hgt, W\)"):
        DigitCNN()(torch.rand(2, 3, 8, 8))


def test_float64_images_name_the_dtype_of_the_parameters():
    images = randn(2, 1, 8, 8).double()
    for module in (small_vit().float(), DigitCNN(gate="cbam"), ChannelAttention(1, 1),
                   SpatialAttention()):
        with pytest.raises(TypeError, match=r"ha(s|ve) dtype torch.float64 but the"
                           r" \w+'s parameters have torch.float32"):
            module(images)

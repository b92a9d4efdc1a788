"""Attention for images: gates that reweight a CNN's feature map, and the Transformer
on image patches.

A feature map F has C channels of Hgt × W pixels. Two gates rescale it (Woo et al.
2018, CBAM; Hu et al. 2018, SE):

    channel gate   M_c = σ(MLP(avg_{Hgt,W} F) + MLP(max_{Hgt,W} F))   (B, C)
                   (SE: σ(MLP(avg F)) only)
    spatial gate   M_s = σ(conv_k×k([avg_C F ; max_C F]))            (B, 1, Hgt, W)
    output         F' = F ⊗ M   (broadcast over the axes the gate lacks)

The channel gate pools over space (one number per channel); the spatial gate pools
over the channels (one pair of numbers per pixel). The MLP is shared by the two
descriptors. A gate is not a softmax: each weight lies in (0, 1) on its own, and they
do not sum to 1.

A grid of features is also a sequence: :func:`image_to_tokens` reads it row by row,
so it can be the keys and values of any attention layer (an image-captioning decoder
attends over it), and :func:`tokens_to_grid` folds weights back into the grid. The
Vision Transformer (Dosovitskiy et al. 2021) cuts the image into patches, embeds each
as a token (:class:`PatchEmbedding`), and runs chapter 5's encoder blocks over them
with a class token in front.

Taught in ``chapters/07_visual/01_channel_spatial.ipynb``.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ._checks import check_float, check_int, check_probability, describe
from .transformer import TransformerEncoderBlock

__all__ = [
    "channel_descriptors",
    "spatial_descriptors",
    "ChannelAttention",
    "SpatialAttention",
    "CBAM",
    "image_to_tokens",
    "tokens_to_grid",
    "PatchEmbedding",
    "VisionTransformer",
    "DigitCNN",
]


# --- input checks: every bad shape names what it got and what was expected ----------

def _check_feature_map(name: str, x, channels: int | None = None,
                       module: nn.Module | None = None) -> None:
    """x of shape (B, C, Hgt, W), floating, with C = channels when given, and the
    dtype and device of ``module``'s parameters when given."""
    expected = f"(B, {'C' if channels is None else channels}, Hgt, W)"
    weight = None if module is None else next(module.parameters())
    check_float(name, x, expected, 4, like=weight,
                like_name=f"the {type(module).__name__}'s parameters")
    if channels is not None and x.shape[1] != channels:
        raise ValueError(f"{name} must have shape {expected}, got {tuple(x.shape)}")


def _pair(name: str, value) -> tuple[int, int]:
    """An int n as (n, n); a pair of ints as itself."""
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return (check_int(f"{name}[0]", value[0], 1),
                check_int(f"{name}[1]", value[1], 1))
    n = check_int(name, value, 1)
    return n, n


# --- the two descriptors --------------------------------------------------------------

def channel_descriptors(x: Tensor) -> tuple[Tensor, Tensor]:
    """Average and maximum of every channel over all its pixels: what the channel gate
    reads (SE uses the average only).

    Shapes:
        x: (B, C, Hgt, W); returns: avg (B, C), max (B, C)

    Taught in ``chapters/07_visual/01_channel_spatial.ipynb``.
    """
    _check_feature_map("x", x)
    return x.mean(dim=(2, 3)), x.amax(dim=(2, 3))  # (B, C), (B, C)


def spatial_descriptors(x: Tensor) -> Tensor:
    """Average and maximum over the channels at every pixel, stacked as two channels:
    what the spatial gate reads.

    Shapes:
        x: (B, C, Hgt, W); returns: (B, 2, Hgt, W), channel 0 the mean, 1 the max

    Taught in ``chapters/07_visual/01_channel_spatial.ipynb``.
    """
    _check_feature_map("x", x)
    avg = x.mean(dim=1, keepdim=True)  # (B, 1, Hgt, W)
    top = x.amax(dim=1, keepdim=True)  # (B, 1, Hgt, W)
    return torch.cat([avg, top], dim=1)  # (B, 2, Hgt, W)


# --- the gates ----------------------------------------------------------------------

POOLINGS = ("avg", "avg+max")


class ChannelAttention(nn.Module):
    """The channel gate: one weight in (0, 1) per channel, from the whole map.

    ``pooling="avg"`` is squeeze-and-excitation (Hu et al. 2018):
    ``M_c = σ(MLP(avg))``; ``pooling="avg+max"`` is CBAM's channel gate (Woo et al.
    2018): ``M_c = σ(MLP(avg) + MLP(max))``, the same MLP on both descriptors. The MLP
    is ``mlp = Sequential(Linear(C, C // reduction), ReLU, Linear(C // reduction, C))``
    (at least one hidden unit). The last gate is kept, detached, in
    ``attention_weights``.

    Shapes:
        x:                 (B, C, Hgt, W) with C = ``channels``
        returns:           (B, C, Hgt, W), x times its channel's weight
        attention_weights: (B, C)

    Taught in ``chapters/07_visual/01_channel_spatial.ipynb``.
    """

    def __init__(self, channels: int, reduction: int = 4, pooling: str = "avg+max"):
        super().__init__()
        self.channels = check_int("channels", channels, 1)
        hidden = max(1, channels // check_int("reduction", reduction, 1))
        if pooling not in POOLINGS:
            raise ValueError(
                f"pooling must be one of {POOLINGS}, got {describe(pooling)}"
            )
        self.pooling = pooling
        self.mlp = nn.Sequential(
            nn.Linear(channels, hidden), nn.ReLU(), nn.Linear(hidden, channels)
        )
        self.attention_weights: Tensor | None = None

    def forward(self, x: Tensor) -> Tensor:
        _check_feature_map("x", x, self.channels, self)
        avg, top = channel_descriptors(x)  # (B, C), (B, C)
        scores = self.mlp(avg)  # (B, C)
        if self.pooling == "avg+max":
            scores = scores + self.mlp(top)  # (B, C)
        gate = torch.sigmoid(scores)  # (B, C)
        self.attention_weights = gate.detach()
        return x * gate[:, :, None, None]  # (B, C, Hgt, W)

    def extra_repr(self) -> str:
        return f"pooling={self.pooling!r}"


class SpatialAttention(nn.Module):
    """The spatial gate: one weight in (0, 1) per pixel, shared by all channels.

    ``M_s = σ(conv([avg_C x ; max_C x]))`` with ``conv = Conv2d(2, 1, kernel_size,
    padding=kernel_size // 2)``, so each pixel's weight looks at a k × k neighbourhood
    of the two descriptor maps. The last gate is kept, detached, in
    ``attention_weights``.

    Shapes:
        x:                 (B, C, Hgt, W)
        returns:           (B, C, Hgt, W), x times its pixel's weight
        attention_weights: (B, 1, Hgt, W)

    Taught in ``chapters/07_visual/01_channel_spatial.ipynb``.
    """

    def __init__(self, kernel_size: int = 7):
        super().__init__()
        kernel_size = check_int("kernel_size", kernel_size, 1)
        if kernel_size % 2 == 0:
            raise ValueError(
                "kernel_size must be odd (so the map keeps its size), got"
                f" {kernel_size}"
            )
        self.conv = nn.Conv2d(2, 1, kernel_size, padding=kernel_size // 2)
        self.attention_weights: Tensor | None = None

    def forward(self, x: Tensor) -> Tensor:
        _check_feature_map("x", x, module=self)
        gate = torch.sigmoid(self.conv(spatial_descriptors(x)))  # (B, 1, Hgt, W)
        self.attention_weights = gate.detach()
        return x * gate  # (B, C, Hgt, W)


class CBAM(nn.Module):
    """The convolutional block attention module (Woo et al. 2018): the channel gate
    (``channel``, avg+max) then the spatial gate (``spatial``), in sequence.

    Each gate keeps its own weights: ``channel.attention_weights`` (B, C) and
    ``spatial.attention_weights`` (B, 1, Hgt, W); ``attention_weights`` is the spatial
    one, where the module looks.

    Shapes:
        x:       (B, C, Hgt, W) with C = ``channels``
        returns: (B, C, Hgt, W)

    Taught in ``chapters/07_visual/01_channel_spatial.ipynb``.
    """

    def __init__(self, channels: int, reduction: int = 4, kernel_size: int = 7):
        super().__init__()
        self.channel = ChannelAttention(channels, reduction, pooling="avg+max")
        self.spatial = SpatialAttention(kernel_size)

    @property
    def attention_weights(self) -> Tensor | None:
        return self.spatial.attention_weights

    def forward(self, x: Tensor) -> Tensor:
        return self.spatial(self.channel(x))  # (B, C, Hgt, W)


# --- images as sequences ------------------------------------------------------------

def image_to_tokens(features: Tensor) -> Tensor:
    """A feature grid as a sequence of Hgt·W tokens, read row by row: token
    ``row * W + col`` is the C features at that pixel. The sequence can be the keys and
    values of any attention layer.

    Shapes:
        features: (B, C, Hgt, W); returns: (B, Hgt·W, C)

    Taught in ``chapters/07_visual/02_cross_attention.ipynb``.
    """
    _check_feature_map("features", features)
    return features.flatten(2).transpose(1, 2)  # (B, Hgt·W, C)


def tokens_to_grid(weights: Tensor, height: int, width: int) -> Tensor:
    """Undo :func:`image_to_tokens` on the last axis: Hgt·W values per row, e.g. one
    query's attention weights over the tokens, folded back into the grid.

    Shapes:
        weights: (..., Hgt·W); returns: (..., Hgt, W)

    Taught in ``chapters/07_visual/02_cross_attention.ipynb``.
    """
    height, width = check_int("height", height, 1), check_int("width", width, 1)
    if not isinstance(weights, Tensor) or weights.dim() == 0 or (
        weights.shape[-1] != height * width
    ):
        got = (
            tuple(weights.shape) if isinstance(weights, Tensor) else describe(weights)
        )
        raise ValueError(
            f"weights must have shape (..., Hgt·W) = (..., {height * width}) for"
            f" height={height}, width={width}, got {got}"
        )
    return weights.unflatten(-1, (height, width))  # (..., Hgt, W)


# --- the Vision Transformer ---------------------------------------------------------

class PatchEmbedding(nn.Module):
    """Cut the image into p × p patches and map each, flattened, to D features: a
    ``Conv2d(C, D, p, stride=p)`` (one matrix applied to every patch), then the grid
    read row by row (:func:`image_to_tokens`). ``grid`` is (Hgt / p, W / p) and
    ``num_patches`` P their product.

    Shapes:
        images:  (B, C, Hgt, W) with (Hgt, W) = ``image_size``, C = ``in_channels``
        returns: (B, P, D)

    Taught in ``chapters/07_visual/03_vision_transformer.ipynb``.
    """

    def __init__(
        self, image_size, patch_size: int, in_channels: int, embed_dim: int
    ):
        super().__init__()
        self.image_size = _pair("image_size", image_size)
        self.patch_size = check_int("patch_size", patch_size, 1)
        self.in_channels = check_int("in_channels", in_channels, 1)
        if any(side % patch_size for side in self.image_size):
            raise ValueError(
                f"image_size {self.image_size} must be a multiple of"
                f" patch_size={patch_size} on both sides"
            )
        self.grid = tuple(side // patch_size for side in self.image_size)
        self.num_patches = self.grid[0] * self.grid[1]
        self.proj = nn.Conv2d(in_channels, embed_dim, patch_size, stride=patch_size)

    def forward(self, images: Tensor) -> Tensor:
        _check_feature_map("images", images, self.in_channels, self)
        if tuple(images.shape[2:]) != self.image_size:
            raise ValueError(
                f"images must have shape (B, {self.in_channels}, {self.image_size[0]},"
                f" {self.image_size[1]}) (image_size), got {tuple(images.shape)}"
            )
        return image_to_tokens(self.proj(images))  # (B, P, D)


class VisionTransformer(nn.Module):
    """ViT (Dosovitskiy et al. 2021): patch embeddings, a learned class token in front,
    learned position embeddings, ``num_layers`` encoder blocks of chapter 5
    (:class:`~attention_lib.transformer.TransformerEncoderBlock`, GELU), a final
    LayerNorm, and a Linear head on the class token's output.

    With ``need_weights=True`` the blocks keep their self-attention weights;
    :meth:`class_token_attention` reads the last block's.

    Shapes:
        images:  (B, C, Hgt, W) with (Hgt, W) = ``image_size``, C = ``in_channels``
        returns: logits (B, num_classes)

    Taught in ``chapters/07_visual/03_vision_transformer.ipynb``.
    """

    def __init__(
        self,
        image_size,
        patch_size: int,
        in_channels: int,
        num_classes: int,
        embed_dim: int,
        num_heads: int,
        ffn_hidden: int,
        num_layers: int,
        dropout: float = 0.0,
        norm_first: bool = True,
    ):
        super().__init__()
        num_layers = check_int("num_layers", num_layers, 1)
        self.patch_embedding = PatchEmbedding(
            image_size, patch_size, in_channels, embed_dim
        )
        num_tokens = self.patch_embedding.num_patches + 1  # the class token first
        self.class_token = nn.Parameter(0.02 * torch.randn(1, 1, embed_dim))
        self.position_embedding = nn.Parameter(
            0.02 * torch.randn(1, num_tokens, embed_dim)
        )
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self.blocks = nn.ModuleList(
            TransformerEncoderBlock(
                embed_dim, num_heads, ffn_hidden, dropout, norm_first, "gelu"
            )
            for _ in range(num_layers)
        )
        self.final_norm = nn.LayerNorm(embed_dim)
        self.head = nn.Linear(embed_dim, check_int("num_classes", num_classes, 1))

    def forward(self, images: Tensor, *, need_weights: bool = False) -> Tensor:
        # 1. Patches become tokens; the class token goes in front; positions are added.
        x = self.patch_embedding(images)  # (B, P, D)
        cls = self.class_token.expand(x.shape[0], -1, -1)  # (B, 1, D)
        x = torch.cat([cls, x], dim=1)  # (B, P + 1, D)
        x = self.dropout(x + self.position_embedding)  # (B, P + 1, D)
        # 2. Every token attends to every token.
        for block in self.blocks:
            x = block.encode(x, need_weights=need_weights)  # (B, P + 1, D)
        # 3. The class token's output is the image's summary.
        return self.head(self.final_norm(x)[:, 0])  # (B, num_classes)

    def class_token_attention(self) -> Tensor:
        """The last block's attention weights of the class token over the P patches,
        from the last forward pass with ``need_weights=True``. The class token's weight
        on itself is left out, so each row sums to 1 minus that weight (at most 1).

        Shapes:
            returns: (B, H, P); fold with ``tokens_to_grid(w, *patch_embedding.grid)``
        """
        weights = self.blocks[-1].self_attention.attention_weights
        if weights is None:
            raise RuntimeError(
                "no attention weights kept: run a forward pass with need_weights=True"
                " first, model(images, need_weights=True)"
            )
        return weights[:, :, 0, 1:]  # (B, H, P)


# --- a small CNN with optional gates -------------------------------------------------

GATES = ("se", "channel", "spatial", "cbam")


def _make_gate(gate: str, channels: int, reduction: int, kernel_size: int) -> nn.Module:
    if gate == "se":
        return ChannelAttention(channels, reduction, pooling="avg")
    if gate == "channel":
        return ChannelAttention(channels, reduction, pooling="avg+max")
    if gate == "spatial":
        return SpatialAttention(kernel_size)
    return CBAM(channels, reduction, kernel_size)


class DigitCNN(nn.Module):
    """A small CNN for the digit images, with an optional attention gate per stage.

    Each stage: Conv 3 × 3 (padding 1) → ReLU → gate → MaxPool 2 × 2 (the last stage's
    pool only if ``pool_last``). ``gate`` is None, ``"se"`` (ChannelAttention, avg),
    ``"channel"`` (ChannelAttention, avg+max), ``"spatial"`` (SpatialAttention) or
    ``"cbam"``; the gates are in ``gates`` (empty without one). :meth:`features` returns
    the last stage's grid; ``forward`` averages it over space and classifies with a
    Linear layer.

    Shapes:
        x:                (B, in_channels, Hgt, W)
        features(x):      (B, channels[-1], Hgt', W'), Hgt' = Hgt / 2^k for k pools
        returns:          logits (B, num_classes)

    Taught in ``chapters/07_visual/01_channel_spatial.ipynb``.
    """

    def __init__(
        self,
        num_classes: int = 10,
        in_channels: int = 1,
        channels=(16, 32),
        gate: str | None = None,
        reduction: int = 4,
        kernel_size: int = 7,
        pool_last: bool = True,
    ):
        super().__init__()
        if gate is not None and gate not in GATES:
            raise ValueError(
                f"gate must be None or one of {GATES}, got {describe(gate)}"
            )
        self.in_channels = check_int("in_channels", in_channels, 1)
        sizes = [self.in_channels] + [check_int("channels", c, 1) for c in channels]
        self.convs = nn.ModuleList(
            nn.Conv2d(c_in, c_out, 3, padding=1)
            for c_in, c_out in zip(sizes, sizes[1:])
        )
        self.gates = nn.ModuleList(
            _make_gate(gate, c, reduction, kernel_size) for c in sizes[1:] if gate
        )
        self.pool_last = bool(pool_last)
        self.head = nn.Linear(sizes[-1], check_int("num_classes", num_classes, 1))

    def features(self, x: Tensor) -> Tensor:
        """The last stage's feature grid (the keys and values for cross-attention).

        Shapes:
            x: (B, in_channels, Hgt, W); returns: (B, channels[-1], Hgt', W')
        """
        _check_feature_map("x", x, self.in_channels, self)
        for i, conv in enumerate(self.convs):
            x = F.relu(conv(x))  # (B, C_i, Hgt_i, W_i)
            if self.gates:
                x = self.gates[i](x)  # (B, C_i, Hgt_i, W_i)
            if i < len(self.convs) - 1 or self.pool_last:
                x = F.max_pool2d(x, 2)  # (B, C_i, Hgt_i / 2, W_i / 2)
        return x

    def forward(self, x: Tensor) -> Tensor:
        grid = self.features(x)  # (B, C, Hgt', W')
        return self.head(grid.mean(dim=(2, 3)))  # (B, num_classes)

"""Checkers for chapter 7's exercises: attention over images, channel by channel, pixel
by pixel and patch by patch, against :mod:`attention_lib.vision`. The modules handed
to the reader's gates record the shape they are given, so that a gate that fails
inside them is told which axis it pooled over.

Taught in ``chapters/07_visual/04_exercises.ipynb``.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..digits import box_mask
from ..vision import (
    CBAM,
    GATES,
    ChannelAttention,
    SpatialAttention,
    channel_descriptors,
    image_to_tokens,
    spatial_descriptors,
)
from ._feedback import (
    Feedback,
    all_of,
    checker,
    close,
    diagnose,
    diagnose_numbers,
    read_number,
    read_tensor,
)

__all__ = [
    "check_spatial_gate",
    "check_channel_gate",
    "check_gate_parameters",
    "check_image_to_tokens",
    "check_patchify",
    "check_pointing_accuracy",
]

_PAGE = "chapters/07_visual/04_exercises.ipynb"


def _shape(sizes) -> str:
    return "(" + ", ".join(str(int(s)) for s in sizes) + ")"


def _finite(got: Tensor, what: str) -> str | None:
    if got.dtype.is_floating_point and not bool(torch.isfinite(got).all()):
        return (
            f"your {what} holds NaN or inf: check for a division by zero or a log of 0."
        )
    return None


class _ShapeRecorder:
    """A forward pre-hook that keeps the shape of every input its module is given."""

    def __init__(self, module: nn.Module):
        self.shapes: list[tuple[int, ...]] = []
        module.register_forward_pre_hook(self)

    def __call__(self, module, inputs):
        if inputs and isinstance(inputs[0], Tensor):
            self.shapes.append(tuple(inputs[0].shape))


def _raised(error: Feedback, diagnosis: str | None, where: str) -> Feedback:
    """The reader's exception, with what the hooks saw when they explain it."""
    if diagnosis is None:
        return error
    return Feedback.wrong(f"{where}: {diagnosis} ({error.message})")


# --- 1. CBAM's spatial gate -----------------------------------------------------------

# (B, C, Hgt, W, k): every size differs within a case, so that an axis mixed up shows;
# no batch of 2, which a 3-D input to the conv could pass for two channels.
_SPATIAL_CASES = ((3, 4, 5, 6, 3), (1, 6, 7, 4, 7))


def _spatial_case(batch, channels, height, width, kernel_size, seed):
    """Features x and a Conv2d(2, 1, k) with seeded weights (the global RNG is not
    touched)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, channels, height, width, generator=gen)  # (B, C, Hgt, W)
    conv = nn.utils.skip_init(nn.Conv2d, 2, 1, kernel_size, padding=kernel_size // 2)
    with torch.no_grad():
        conv.weight.copy_(torch.randn(conv.weight.shape, generator=gen) * 0.4)
        conv.bias.copy_(torch.randn(1, generator=gen) * 0.2)
    conv.seen = _ShapeRecorder(conv)  # what the reader's function gives it
    return x, conv


def _spatial_variants(x: Tensor, conv: nn.Conv2d) -> list:
    avg = x.mean(dim=1, keepdim=True)  # (B, 1, Hgt, W)
    top = x.amax(dim=1, keepdim=True)  # (B, 1, Hgt, W)
    total = x.sum(dim=1, keepdim=True)

    def gate(first, second):
        return torch.sigmoid(conv(torch.cat([first, second], dim=1)))  # (B, 1, Hgt, W)

    logits = conv(torch.cat([avg, top], dim=1))
    return [
        (gate(top, avg),
         "the maximum and the mean are swapped: cat([max, mean]). The conv's two"
         " input channels have their own weights, so the order matters: channel 0"
         " is the mean over channels, channel 1 the maximum (CBAM's [AvgPool; MaxPool],"
         " as spatial_descriptors returns them)."),
        (logits,
         "the sigmoid is missing: M_s = sigmoid(conv(...)), a weight in (0, 1) for"
         " every pixel."),
        (torch.softmax(logits.flatten(2), dim=-1).view_as(logits),
         "a softmax over the pixels makes them compete (the gate sums to 1 over the"
         " image). CBAM's gate is a sigmoid at every pixel, each in (0, 1) on its"
         " own."),
        (gate(avg, avg),
         "you used the mean over channels only (twice): the second descriptor is the"
         " maximum over channels, x.amax(dim=1, keepdim=True)."),
        (gate(top, top),
         "you used the maximum over channels only (twice): the first descriptor is"
         " the mean over channels, x.mean(dim=1, keepdim=True)."),
        (gate(total, top),
         "you summed over the channels: the first descriptor is their mean."),
        (x * gate(avg, top),
         "you returned the gated features x ⊗ M_s. Return the gate M_s itself,"
         " (B, 1, Hgt, W): SpatialAttention multiplies it with x."),
    ]


def _spatial_diagnosis(shape, batch, channels, height, width) -> str | None:
    """What the shape the conv was given says about the descriptors built."""
    if shape == (batch, 2, height, width):
        return None
    given = f"the conv was given a tensor of shape {_shape(shape)}, not (B, 2, Hgt, W)"
    if len(shape) == 4 and shape[0] == batch:
        if shape[2:] == (1, 1) or (shape[2] == 1) != (shape[3] == 1):
            return (
                f"{given}: you pooled over space. The spatial gate needs a map, one"
                " number per pixel: pool over the channel axis at every pixel,"
                " x.mean(dim=1, keepdim=True) and x.amax(dim=1, keepdim=True). The"
                " notes' \"global pooling\" means pooling over all channels, not over"
                " the image (that is the channel gate's descriptor)."
            )
        if shape[1:] == (1, height, width):
            return (f"{given}: you gave it one descriptor. The conv takes two maps, the"
                    " mean and the maximum over channels, concatenated on dim=1.")
        if shape[1:] == (channels, height, width):
            return (f"{given}: you gave it x itself. Pool over the channels first: the"
                    " mean and the maximum at every pixel, concatenated on dim=1.")
        if shape[2:] == (height, width):
            return (
                f"{given}: keep one mean and one maximum over the channels, 2 maps in"
                " all, whatever C is."
            )
    if len(shape) == 3:
        return (f"{given}: pooling with dim=1 dropped the channel axis, and cat put the"
                " two maps side by side. Keep it with keepdim=True, or use"
                " torch.stack([mean, maximum], dim=1).")
    return given + "."


def _max_hint(error: Feedback) -> Feedback:
    if "return_types.max" in error.message:
        return Feedback.wrong(
            error.message + " — x.max(dim=1) returns a pair (values, indices): take"
            " .values, or use x.amax(dim=1, keepdim=True)."
        )
    return error


@checker
def check_spatial_gate(fn) -> Feedback:
    """Check ``fn(x, conv) -> gate``: CBAM's spatial gate sigmoid(conv([mean; max] over
    channels)), as :class:`~attention_lib.vision.SpatialAttention`. Names pooling over
    space, the descriptors swapped, one descriptor, the sum, a missing sigmoid, a
    softmax over pixels, a lost channel axis, and the gated features.

    Shapes:
        fn: (x (B, C, Hgt, W), conv) -> gate (B, 1, Hgt, W)

    Taught in ``chapters/07_visual/04_exercises.ipynb``.
    """
    def explain_shape(got, expected):
        if got.numel() == expected.numel() and close(got.reshape(expected.shape),
                                                     expected):
            return (f"the values are right, but the gate has shape {_shape(got.shape)}:"
                    f" keep it (B, 1, Hgt, W) = {_shape(expected.shape)}, so that it"
                    " broadcasts against x.")
        return (f"the gate should have shape (B, 1, Hgt, W) = {_shape(expected.shape)},"
                f" yours has shape {_shape(got.shape)}.")

    return _check_gate(
        fn, [_spatial_case(*case, seed) for seed, case in enumerate(_SPATIAL_CASES)],
        lambda x, conv: torch.sigmoid(conv(spatial_descriptors(x))),  # (B, 1, Hgt, W)
        _spatial_variants, _spatial_diagnosis, explain_shape,
        where=lambda x, conv: f"For x of shape {_shape(x.shape)} and a"
        f" {conv.kernel_size[0]}×{conv.kernel_size[0]} conv",
        differs=lambda got, expected: "your gate differs; at pixel (0, 0) of image 0"
        f" it is {got[0, 0, 0, 0].item():.4f}, expected"
        f" {expected[0, 0, 0, 0].item():.4f}.",
        correct="Correct: torch.sigmoid(conv(torch.cat([x.mean(dim=1, keepdim=True),"
        " x.amax(dim=1, keepdim=True)], dim=1))), one weight in (0, 1) per pixel,"
        " shared by all C channels. The pooling is over the channel axis: over the"
        " image it would leave no map to weigh.",
    )


def _check_gate(fn, cases, reference, variants, diagnose_shape, explain_shape, *,
                where, differs, correct, read=None) -> Feedback:
    """:func:`diagnose` for a gate on (x, module): ``module.seen`` holds the shapes the
    reader's call gave it, ``diagnose_shape(shape, *x.shape)`` words a wrong one;
    ``explain_shape`` a gate of the wrong shape, ``differs`` wrong values."""
    def diagnosis(x, module):  # what the module was given, in the reader's call
        return next((d for s in module.seen.shapes
                     if (d := diagnose_shape(s, *x.shape))), None)

    def explain(got, expected, x, module):
        if diagnosis(x, module) is not None:
            return diagnosis(x, module)
        if got.shape != expected.shape:
            return explain_shape(got, expected)
        return _finite(got, "gate") or differs(got, expected)

    return diagnose(
        fn, cases, reference, variants, what="gate", where=where, read=read,
        explain=explain, correct=correct,
        hint=lambda error, x, module: _raised(_max_hint(error), diagnosis(x, module),
                                              where(x, module)))


# --- 2. CBAM's channel gate -----------------------------------------------------------

# (B, C, Hgt, W, r): W ≠ C, so that an MLP fed a map over the pixels fails and is named
_CHANNEL_CASES = ((3, 8, 5, 6, 4), (1, 6, 4, 5, 2))


def _channel_case(batch, channels, height, width, reduction, seed):
    """Features x (with a different offset per channel, so that the gates differ) and
    the shared MLP C -> C // r -> C with seeded weights."""
    gen = torch.Generator().manual_seed(100 + seed)
    x = torch.randn(batch, channels, height, width, generator=gen)
    x = x + torch.randn(1, channels, 1, 1, generator=gen)  # (B, C, Hgt, W)
    hidden = max(1, channels // reduction)
    mlp = nn.Sequential(nn.utils.skip_init(nn.Linear, channels, hidden), nn.ReLU(),
                        nn.utils.skip_init(nn.Linear, hidden, channels))
    with torch.no_grad():
        for layer in (mlp[0], mlp[2]):
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=gen) * 0.6)
            layer.bias.copy_(torch.randn(layer.bias.shape, generator=gen) * 0.3)
    mlp.seen = _ShapeRecorder(mlp[0])  # what the reader's function gives it
    return x, mlp


def _library_gate(x: Tensor, mlp: nn.Sequential, reduction: int, pooling: str):
    """The gate of the library's ChannelAttention with ``mlp``'s weights: (B, C)."""
    with torch.device("meta"):  # no initialisation drawn from the global RNG
        gate = ChannelAttention(x.shape[1], reduction=reduction, pooling=pooling)
    gate = gate.to_empty(device="cpu")
    gate.mlp.load_state_dict(mlp.state_dict())
    gate.eval()(x)
    return gate.attention_weights.reshape(x.shape[0], x.shape[1])


def _channel_variants(x: Tensor, mlp: nn.Sequential, reduction: int) -> list:
    avg, top = channel_descriptors(x)  # (B, C) each
    a, m = mlp(avg), mlp(top)
    return [
        (torch.sigmoid(a) + torch.sigmoid(m),
         "you applied the sigmoid to each branch and then added: your gate reaches"
         " up to 2. CBAM adds the MLP's two outputs first, then takes one sigmoid:"
         " sigmoid(mlp(avg) + mlp(max))."),
        ((torch.sigmoid(a) + torch.sigmoid(m)) / 2,
         "you applied the sigmoid to each branch and averaged. CBAM adds the MLP's"
         " two outputs first, then takes one sigmoid: sigmoid(mlp(avg) + mlp(max))."),
        (_library_gate(x, mlp, reduction, "avg"),
         "that is SE's gate (Hu et al., 2018), sigmoid(mlp(avg)): the average"
         " descriptor only. CBAM's channel gate adds the max-pooled descriptor"
         " through the same MLP: sigmoid(mlp(avg) + mlp(max))."),
        (torch.sigmoid(m),
         "you used the max-pooled descriptor only: add the average one through the"
         " same MLP, sigmoid(mlp(avg) + mlp(max))."),
        (torch.sigmoid(mlp(avg + top)),
         "you added the two descriptors before the MLP. The MLP is not linear (its"
         " ReLU): pass each descriptor through it, then add, mlp(avg) + mlp(max)."),
        (torch.sigmoid(mlp((avg + top) / 2)),
         "you averaged the two descriptors before the MLP. Pass each through it, then"
         " add: sigmoid(mlp(avg) + mlp(max))."),
        (a + m,
         "the sigmoid is missing: M_c = sigmoid(mlp(avg) + mlp(max)), a weight in"
         " (0, 1) for every channel."),
        (torch.softmax(a + m, dim=1),
         "a softmax over the channels makes them compete (the gate sums to 1). CBAM's"
         " gate is a sigmoid per channel, each in (0, 1) on its own."),
        (torch.sigmoid(mlp(x.sum(dim=(2, 3))) + m),
         "you summed over the pixels: the first descriptor is their mean."),
        (x * torch.sigmoid(a + m)[:, :, None, None],
         "you returned the gated features x ⊗ M_c. Return the gate M_c itself,"
         " (B, C): ChannelAttention multiplies it with x."),
    ]


def _channel_diagnosis(shape, batch, channels, height, width) -> str | None:
    """What the shape the MLP was given says about the descriptors built."""
    if shape[-1:] == (channels,) and math.prod(shape[:-1]) in (batch, 2 * batch):
        return None
    given = f"the MLP was given a tensor of shape {_shape(shape)}, not (B, C)"
    if shape in ((batch, height, width), (batch, 1, height, width)):
        return (f"{given}: you pooled over the channels, which gives a map (the spatial"
                " gate's descriptor). The channel gate needs one number per channel:"
                " pool over space, x.mean(dim=(2, 3)) and x.amax(dim=(2, 3)).")
    if shape in ((batch, channels, 1, 1),):
        return (f"{given}: nn.Linear acts on the last axis. Pool without keepdim,"
                " x.mean(dim=(2, 3)), or flatten the (B, C, 1, 1) descriptor with"
                " .flatten(1).")
    if shape == (batch, channels, height, width):
        return f"{given}: you gave it x itself. Pool over space first."
    if shape[:2] == (batch, channels) and len(shape) in (3, 4):
        return (f"{given}: you pooled over one spatial axis only. Pool over both,"
                " dim=(2, 3), to one number per channel.")
    if shape == (batch, 2 * channels):
        return (f"{given}: you concatenated the two descriptors. The MLP takes C"
                " features: pass each descriptor through it, then add the outputs.")
    return given + "."


@checker
def check_channel_gate(fn) -> Feedback:
    """Check ``fn(x, mlp) -> gate``: CBAM's channel gate sigmoid(mlp(avg) + mlp(max)),
    pooled over space, as :class:`~attention_lib.vision.ChannelAttention`
    (``pooling="avg+max"``). Names a sigmoid per branch, SE's gate, the max only,
    descriptors mixed before the MLP, a missing sigmoid, a softmax, the sum, pooling
    over channels, a (B, C, 1, 1) descriptor, and the gated features.

    Shapes:
        fn: (x (B, C, Hgt, W), mlp) -> gate (B, C) (or (B, C, 1, 1))

    Taught in ``chapters/07_visual/04_exercises.ipynb``.
    """
    cases = [_channel_case(*case, seed) for seed, case in enumerate(_CHANNEL_CASES)]
    reduction = {id(mlp): case[-1] for (_, mlp), case in zip(cases, _CHANNEL_CASES)}

    def read(got, x, mlp):
        got, error = read_tensor(got, "gate")
        if error is None and got.shape == x.shape[:2] + (1, 1):
            got = got.reshape(x.shape[:2])  # the gate shaped to broadcast: fine
        return got, error

    return _check_gate(
        fn, cases, lambda x, mlp: _library_gate(x, mlp, reduction[id(mlp)], "avg+max"),
        lambda x, mlp: _channel_variants(x, mlp, reduction[id(mlp)]),
        _channel_diagnosis,
        lambda got, expected: f"the gate should have shape (B, C) ="
        f" {_shape(expected.shape)}, yours has shape {_shape(got.shape)}.", read=read,
        where=lambda x, mlp: f"For x of shape {_shape(x.shape)} and r ="
        f" {reduction[id(mlp)]}",
        differs=lambda got, expected: "your gate differs; for image 0 it is"
        f" {[round(v, 4) for v in got[0, :4].tolist()]}..., expected"
        f" {[round(v, 4) for v in expected[0, :4].tolist()]}...",
        correct="Correct: torch.sigmoid(mlp(x.mean(dim=(2, 3))) + mlp(x.amax(dim=(2,"
        " 3)))), one weight in (0, 1) per channel, shared by all pixels. One MLP serves"
        " both descriptors, so CBAM's channel gate has exactly SE's parameters.",
    )


# --- 3. the parameters a gate adds ----------------------------------------------------

# (C, r, k): r divides C; it does not (C / r = 2.5); C < r (a hidden layer of 1)
_PARAM_CASES = ((64, 16, 7), (10, 4, 3), (48, 8, 5), (3, 4, 7))


def _gate_parameters(gate: str, channels: int, reduction: int, kernel_size: int) -> int:
    """The parameters of the library's gate, counted on the ``meta`` device."""
    with torch.device("meta"):  # the gates as vision.DigitCNN builds them
        module = {
            "se": lambda: ChannelAttention(channels, reduction, pooling="avg"),
            "channel": lambda: ChannelAttention(channels, reduction, pooling="avg+max"),
            "spatial": lambda: SpatialAttention(kernel_size),
            "cbam": lambda: CBAM(channels, reduction, kernel_size),
        }[gate]()
    return sum(p.numel() for p in module.parameters())


def _mlp(c, h, biases=2):
    return 2 * c * h + (h if biases == 2 else 0) + (c if biases >= 1 else 0)


def _param_variants(gate: str) -> list:
    hid = lambda c, r: max(1, c // r)  # noqa: E731
    mlp = lambda c, r, k: _mlp(c, hid(c, r))  # noqa: E731
    conv = lambda c, r, k: 2 * k * k + 1  # noqa: E731
    channel = [
        (lambda c, r, k: 2 * c * hid(c, r),
         "you forgot the biases: each of the two Linear layers has one, C // r"
         " numbers for the first and C for the second."),
        (lambda c, r, k: 2 * c * hid(c, r) + c,
         "you forgot the first Linear's bias (C // r numbers)."),
        (lambda c, r, k: 2 * c * hid(c, r) + hid(c, r),
         "you forgot the second Linear's bias (C numbers)."),
        (lambda c, r, k: 2 * c * c / r + c / r + c,
         "you counted C / r as a real number: the hidden layer has C // r units"
         " (at least one), a whole number."),
        (lambda c, r, k: _mlp(c, c // r),
         "the hidden layer has at least one unit: for C < r it is max(1, C // r) = 1,"
         " not 0."),
        (lambda c, r, k: 2 * c * c * r + c * r + c,
         "you multiplied by r: the MLP narrows to C // r units, then widens back to"
         " C."),
        (lambda c, r, k: c * c + c,
         "that is one Linear layer from C to C. The MLP has two, C → C // r → C,"
         " which is why r saves parameters."),
        (lambda c, r, k: 2 * mlp(c, r, k),
         "you counted two MLPs. One MLP is shared between the average and the"
         " maximum descriptors, so CBAM's channel gate has exactly SE's parameters."),
    ]
    if gate in ("se", "channel"):
        return channel + [
            (conv, "that is the spatial gate's count: this gate is the channel MLP."),
            (lambda c, r, k: mlp(c, r, k) + conv(c, r, k),
             "that is the whole CBAM: this gate is only the channel MLP."),
        ]
    if gate == "spatial":
        return [
            (lambda c, r, k: c * k * k + 1,
             "the conv takes 2 input maps, the mean and the maximum over the channels,"
             " not the C channels: 2·k² weights, whatever C is."),
            (lambda c, r, k: 2 * k * k,
             "you forgot the conv's bias: one number for its one output map."),
            (lambda c, r, k: k * k + 1,
             "the conv takes 2 input maps (mean and maximum), each with its own k × k"
             " weights."),
            (lambda c, r, k: 2 * k * k + 2,
             "one bias per output map, and the conv has one output map (not one per"
             " input)."),
            (lambda c, r, k: 2 * k + 1,
             "a k × k kernel has k² weights per input map, not k."),
            (lambda c, r, k: 2 * k * k * c + c,
             "the conv has one output map, the gate, shared by all C channels: 2·k²"
             " weights and one bias."),
            (mlp, "that is the channel gate's count: this gate is the k × k conv."),
            (lambda c, r, k: mlp(c, r, k) + conv(c, r, k),
             "that is the whole CBAM: this gate is only the k × k conv."),
        ]
    return [
        (mlp, "you counted only the channel gate: CBAM adds the spatial gate's conv,"
              " 2·k² + 1."),
        (conv, "you counted only the spatial gate: CBAM has the channel MLP too."),
        (lambda c, r, k: 2 * mlp(c, r, k) + conv(c, r, k),
         "you counted two MLPs: the average and maximum descriptors share one."),
        (lambda c, r, k: mlp(c, r, k) + c * k * k + 1,
         "the spatial conv takes 2 input maps (mean and maximum over the channels),"
         " not C: 2·k² + 1."),
        (lambda c, r, k: mlp(c, r, k) + 2 * k * k,
         "you forgot the spatial conv's bias."),
        (lambda c, r, k: 2 * c * hid(c, r) + 2 * k * k,
         "you forgot the biases, of the two Linear layers and of the conv."),
        (lambda c, r, k: 2 * c * hid(c, r) + conv(c, r, k),
         "you forgot the MLP's biases (C // r and C numbers)."),
        (lambda c, r, k: 2 * c * c / r + c / r + c + conv(c, r, k),
         "you counted C / r as a real number: the hidden layer has C // r units"
         " (at least one)."),
        (lambda c, r, k: _mlp(c, c // r) + conv(c, r, k),
         "the hidden layer has at least one unit: max(1, C // r)."),
    ]


def _same(answer: float, expected: float) -> bool:
    return math.isclose(answer, expected, rel_tol=1e-9, abs_tol=1e-9)


@checker
def check_gate_parameters(fn) -> Feedback:
    """Check ``fn(gate, channels, reduction, kernel_size) -> int``: the parameters that
    ``gate`` ("se", "channel", "spatial", "cbam") adds to C channels, counted from the
    library's modules. Names forgotten biases, C / r unrounded, a hidden layer of 0, two
    MLPs, a conv over C channels, the conv's bias, k for k², and another gate's count.

    Shapes:
        fn: (str gate, int C, int r, int k) -> one number

    Taught in ``chapters/07_visual/04_exercises.ipynb``.
    """
    return all_of((diagnose_numbers(
        fn, [(gate, *case) for case in _PARAM_CASES], _gate_parameters,
        [(lambda gate, c, r, k, formula=formula: formula(c, r, k), message)
         for formula, message in _param_variants(gate)],
        what="number of parameters", equal=_same, prefix=f'For gate="{gate}": ',
        explain_case=lambda answer, expected, gate, c, r, k: f'For gate="{gate}", C ='
        f" {c}, r = {r}, k = {k} you count {answer:,.6g} parameters; the library's gate"
        f" has {expected:,.0f}.", correct="") for gate in GATES),
        "Correct: SE and CBAM's channel gate 2·C·h + h + C with h = max(1, C // r)"
        f" ({_gate_parameters('se', 64, 16, 7):,} for C = 64, r = 16), the spatial gate"
        f" 2·k² + 1 ({_gate_parameters('spatial', 64, 16, 7)} for k = 7, whatever C"
        " is), CBAM their sum. A 3 × 3 conv from 64 channels to 64 has"
        f" {64 * 64 * 9 + 64:,}: the gates are cheap.")


# --- 4. a feature grid as tokens ------------------------------------------------------

# (B, C, Hgt, W): all sizes differ, and Hgt·W ≠ C
_TOKEN_CASES = ((2, 3, 4, 5), (1, 5, 3, 2))


def _coded(batch, channels, height, width) -> Tensor:
    """Features whose values say where they come from: 1000·b + 100·c + 10·row + col."""
    b = torch.arange(batch).view(-1, 1, 1, 1)
    c = torch.arange(channels).view(1, -1, 1, 1)
    row = torch.arange(height).view(1, 1, -1, 1)
    col = torch.arange(width).view(1, 1, 1, -1)
    return (1000 * b + 100 * c + 10 * row + col).float()  # (B, C, Hgt, W)


def _token_variants(x: Tensor) -> list:
    batch, channels, height, width = x.shape
    return [
        (x.reshape(batch, height * width, channels),
         "a reshape without moving the channels: the shape is right, the values"
         " scrambled. x.reshape reads the numbers in memory order, channel by"
         " channel; permute the channels last first, x.permute(0, 2, 3, 1), or use"
         " x.flatten(2).transpose(1, 2)."),
        (x.permute(0, 3, 2, 1).reshape(batch, height * width, channels),
         "column-major order: you went down each column (token = col·Hgt + row), the"
         " grid transposed. Row-major is token = row·W + col: permute(0, 2, 3, 1)"
         " before the reshape."),
        (x.flatten(2),
         "that is (B, C, Hgt·W): one row per channel. Tokens are the pixels:"
         " transpose(1, 2) to (B, Hgt·W, C)."),
        (x.permute(0, 2, 3, 1),
         "that is (B, Hgt, W, C): flatten the grid to one axis of Hgt·W tokens."),
        (x.flatten(2).permute(2, 0, 1),
         "that is (Hgt·W, B, C), sequence first. The library's attention takes the"
         " batch first: (B, Hgt·W, C)."),
    ]


@checker
def check_image_to_tokens(fn) -> Feedback:
    """Check ``fn(features) -> tokens``: a (B, C, Hgt, W) grid as (B, Hgt·W, C) tokens
    in row-major order, as :func:`~attention_lib.vision.image_to_tokens`; values code
    their origin. Names a reshape without a permute, column-major order, channels first,
    an unflattened grid and sequence first.

    Shapes:
        fn: features (B, C, Hgt, W) -> tokens (B, Hgt·W, C)

    Taught in ``chapters/07_visual/04_exercises.ipynb``.
    """
    def explain(got, expected, x):
        if got.shape != expected.shape:
            return ("the tokens should have shape (B, Hgt·W, C) ="
                    f" {_shape(expected.shape)}, yours have shape {_shape(got.shape)}.")
        t = next(i for i in range(expected.shape[1])
                 if not close(got[:, i], expected[:, i]))
        width = x.shape[3]
        return (
            f"token {t} should be the pixel at row {t // width}, column {t % width},"
            f" with features {expected[0, t].int().tolist()} (the values code"
            f" 100·channel + 10·row + column); yours is"
            f" {[round(v, 2) for v in got[0, t].tolist()]}."
        )

    return diagnose(
        fn, [(_coded(*sizes),) for sizes in _TOKEN_CASES], image_to_tokens,
        _token_variants, what="tokens", explain=explain,
        where=lambda x: f"For features of shape {_shape(x.shape)}",
        correct="Correct: features.flatten(2).transpose(1, 2), or .permute(0, 2, 3, 1)"
        ".reshape(B, Hgt * W, C): token row·W + col is the pixel (row, col), and"
        " tokens_to_grid turns weights over the tokens back into a map.",
    )


# --- 5. cutting an image into patches -------------------------------------------------

# (B, C, Hgt, W, p): grids of 3 × 2 and 2 × 3 patches, several channels
_PATCH_CASES = ((2, 3, 6, 4, 2), (1, 2, 6, 9, 3))


def _patch_grid(x: Tensor, p: int) -> Tensor:
    """(B, C, Hgt, W) -> (B, Hgt/p, W/p, C, p, p): the patches, not yet flattened."""
    batch, channels, height, width = x.shape
    grid = x.reshape(batch, channels, height // p, p, width // p, p)
    return grid.permute(0, 2, 4, 1, 3, 5)


def _patches(x: Tensor, p: int) -> Tensor:
    """The reference: ``F.unfold``, patches in row-major order, each flattened in the
    order (C, p, p) of Conv2d's weights. (B, P, C·p·p)."""
    return F.unfold(x, kernel_size=p, stride=p).transpose(1, 2)


def _patch_variants(x: Tensor, p: int) -> list:
    batch, channels, height, width = x.shape
    grid = _patch_grid(x, p)  # (B, gh, gw, C, p, p)
    num, size = (height // p) * (width // p), channels * p * p
    return [
        (grid.transpose(1, 2).reshape(batch, num, size),
         "your patches are in column-major order (down each column of patches"
         " first). Number them row by row: patch i·(W/p) + j is the one in row i,"
         " column j of the grid."),
        (grid.permute(0, 1, 2, 4, 5, 3).reshape(batch, num, size),
         "each patch is flattened channels last, in the order (p, p, C) (einops'"
         " (p1 p2 c), as in the original ViT code). Here the order is (C, p, p),"
         " channel by channel, the layout of Conv2d's weights: then a Linear on"
         " your patches equals PatchEmbedding's strided convolution."),
        (grid.transpose(-1, -2).reshape(batch, num, size),
         "each patch is flattened column by column (transposed): flatten it row by"
         " row, in the order (C, p, p)."),
        (x.reshape(batch, num, size),
         "a reshape does not cut patches: the p × p pixels of a patch are not next"
         " to each other in memory. Split the axes first, reshape(B, C, Hgt/p, p,"
         " W/p, p), permute to (B, Hgt/p, W/p, C, p, p), then flatten; or use"
         " F.unfold(x, p, stride=p).transpose(1, 2)."),
        (F.unfold(x, kernel_size=p, stride=p),
         "that is F.unfold's (B, C·p·p, P): one column per patch. transpose(1, 2)"
         " gives one row per patch."),
        (grid.reshape(batch, height // p, width // p, size),
         "that is (B, Hgt/p, W/p, C·p·p): flatten the grid of patches into one"
         " axis of P patches."),
        (grid.reshape(batch, num, channels, p, p),
         "that is (B, P, C, p, p): flatten each patch into C·p·p numbers."),
    ]


@checker
def check_patchify(fn) -> Feedback:
    """Check ``fn(images, patch_size) -> patches``: row-major p × p patches flattened as
    (C, p, p), as ``F.unfold(images, p, stride=p).transpose(1, 2)``; values code their
    origin. Names column-major order, channels last or columns first in a patch, a plain
    reshape, no transpose, and unflattened grids or patches.

    Shapes:
        fn: (images (B, C, Hgt, W), int p) -> patches (B, P, C·p·p), P = (Hgt/p)·(W/p)

    Taught in ``chapters/07_visual/04_exercises.ipynb``.
    """
    def explain(got, expected, x, p):
        if got.shape != expected.shape:
            return ("the patches should have shape (B, P, C·p·p) ="
                    f" {_shape(expected.shape)}, P = (Hgt/p)·(W/p) patches that do not"
                    f" overlap; yours have shape {_shape(got.shape)}.")
        n = next(i for i in range(expected.shape[1])
                 if not close(got[:, i], expected[:, i]))
        gw = x.shape[3] // p
        return (
            f"patch {n} should be rows {n // gw * p} to {n // gw * p + p - 1}, columns"
            f" {n % gw * p} to {n % gw * p + p - 1}, starting"
            f" {expected[0, n, :p + 1].int().tolist()} (the values code 100·channel +"
            " 10·row + column); yours starts"
            f" {[round(v, 2) for v in got[0, n, :p + 1].tolist()]}."
        )

    return diagnose(
        fn, [(_coded(*sizes), p) for *sizes, p in _PATCH_CASES], _patches,
        _patch_variants, what="patches", explain=explain,
        where=lambda x, p: f"For images of shape {_shape(x.shape)} and p = {p}",
        correct="Correct: x.reshape(B, C, Hgt // p, p, W // p, p).permute(0, 2, 4, 1,"
        " 3, 5).reshape(B, P, C * p * p), the same as F.unfold(x, p, stride=p)"
        ".transpose(1, 2). A Linear layer on these patches is PatchEmbedding's strided"
        " convolution.",
    )


# --- 6. pointing accuracy -------------------------------------------------------------

# (N, Hgt, W, seed): non-square grids, one taller than wide, one wider than tall
_POINT_CASES = ((40, 5, 7, 0), (36, 6, 4, 1))


def _pointing_case(num, height, width, seed):
    """Attention maps (softmax over the grid) with one clear peak each, and boxes.
    The peaks fall inside the box, just past its exclusive bottom or right end, at the
    transposed position, or anywhere, in turn, so that each mistake counts
    differently."""
    gen = torch.Generator().manual_seed(700 + seed)

    def draw(low, high):
        return int(torch.randint(low, high, (1,), generator=gen))

    boxes, peaks = [], []
    for i in range(num):
        top, left = draw(0, height - 1), draw(0, width - 1)
        bottom, right = draw(top + 1, height), draw(left + 1, width)
        kind = i % 5
        if kind in (0, 1):  # inside
            peak = (draw(top, bottom), draw(left, right))
        elif kind == 2:  # on the row just below the box (exclusive end)
            peak = (min(bottom, height - 1), draw(left, right))
        elif kind == 3:  # on the column just right of the box
            peak = (draw(top, bottom), min(right, width - 1))
        else:
            peak = (draw(0, height), draw(0, width))
        boxes.append((top, left, bottom, right))
        peaks.append(peak)
    scores = torch.randn(num, height, width, generator=gen)
    for i, (row, col) in enumerate(peaks):
        scores[i, row, col] = 4.0 + float(torch.rand(1, generator=gen))
    weights = torch.softmax(scores.flatten(1), dim=-1).view(num, height, width)
    return weights, torch.tensor(boxes, dtype=torch.long)


def _hits(weights, boxes, pick="max", unravel="row", inclusive=False):
    """Whether each map's chosen pixel is in its box, by the right rule or a wrong one.
    (N,) bool."""
    num, height, width = weights.shape
    flat = weights.reshape(num, -1)
    index = flat.argmax(dim=1) if pick == "max" else flat.argmin(dim=1)  # (N,)
    if unravel == "row":
        row, col = index // width, index % width
    elif unravel == "swap":
        row, col = index % width, index // width
    else:  # divided by the height
        row, col = index // height, index % height
    top, left, bottom, right = boxes.unbind(1)  # (N,) each
    if inclusive:
        return (top <= row) & (row <= bottom) & (left <= col) & (col <= right)
    return (top <= row) & (row < bottom) & (left <= col) & (col < right)


def _pointing(weights: Tensor, boxes: Tensor) -> float:
    """The reference: the share of maps whose largest weight lies in
    :func:`~attention_lib.digits.box_mask`."""
    num, height, width = weights.shape
    inside = box_mask(boxes, height, width).reshape(num, -1)  # (N, Hgt·W)
    index = weights.reshape(num, -1).argmax(dim=1)  # (N,)
    return inside[torch.arange(num), index].float().mean().item()


def _pointing_variants(weights: Tensor, boxes: Tensor) -> list:
    num, height, width = weights.shape
    share = _pointing(weights, boxes)
    mass = (weights * box_mask(boxes, height, width)).sum(dim=(1, 2)).mean().item()
    return [
        (_hits(weights, boxes, pick="min").float().mean().item(),
         "you took the smallest weight (argmin): pointing asks where the largest"
         " weight falls, argmax."),
        (_hits(weights, boxes, unravel="swap").float().mean().item(),
         "rows and columns are swapped: either the pixel index unravelled as"
         " (i % W, i // W) or the boxes read as (left, top, right, bottom) (the two"
         " give the same count). Pixel index i is at row i // W, column i % W, and a"
         " box is (top, left, bottom, right), rows first."),
        (_hits(weights, boxes, unravel="height").float().mean().item(),
         "you unravelled the index with the height: row-major order gives row"
         " i // W and column i % W (torch.unravel_index(i, (Hgt, W)))."),
        (_hits(weights, boxes, inclusive=True).float().mean().item(),
         "you treated the box's bottom and right as inside: they are exclusive ends,"
         " top ≤ row < bottom and left ≤ column < right, as in slicing"
         " image[top:bottom, left:right]."),
        (1 - share, "that is the share of misses: count the maps whose maximum is"
                    " inside the box."),
        (100 * share, "that is a percentage: return the share, between 0 and 1."),
        (share * num, "that is the number of hits: divide by the number of maps."),
        (mass,
         "that is the attention mass inside the box, averaged over the maps: pointing"
         " asks only where the largest weight falls."),
    ]


@checker
def check_pointing_accuracy(fn) -> Feedback:
    """Check ``fn(weights, boxes) -> share``: the share of maps whose largest weight
    lies in their box (top, left, bottom, right; exclusive ends), as
    :func:`~attention_lib.digits.box_mask`. Names argmin, rows and columns swapped, an
    index unravelled with the height, inclusive ends, misses, a percentage, a count and
    the mass in the box.

    Shapes:
        fn: (weights (N, Hgt, W), boxes (N, 4) long) -> one number

    Taught in ``chapters/07_visual/04_exercises.ipynb``.
    """
    def close_share(got, value) -> bool:
        tol = 1e-3 if got.dtype in (torch.float16, torch.bfloat16) else 1e-6
        return math.isclose(float(got), value, rel_tol=1e-4, abs_tol=tol)

    def explain(got, expected, weights, boxes):
        if not math.isfinite(float(got)):
            return f"your share is {float(got)}."
        return (
            f"your share is {float(got):.4f}; the largest weight falls inside the box"
            f" in {expected:.4f} of the maps."
        )

    return diagnose(
        fn, [_pointing_case(*case) for case in _POINT_CASES], _pointing,
        _pointing_variants, what="share", read=lambda got, *case: read_number(
            got, "share"), compare=close_share, explain=explain,
        where=lambda weights, boxes: f"For {len(weights)} maps of {weights.shape[1]} ×"
        f" {weights.shape[2]}",
        correct="Correct: idx = weights.flatten(1).argmax(1), row = idx // W, col = idx"
        " % W, and a hit when top ≤ row < bottom and left ≤ col < right. Compare it"
        " with chance, the boxes' average share of the grid.",
    )

"""Chapter 7's checkers accept the right answers in every form and name each typical
mistake with CBAM's spatial and channel gates, the parameters the gates add, a feature
grid read as tokens, patches and the pointing accuracy."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from answer_forms import (
    NUMBER_FORMS,
    TENSOR_FORMS,
    assert_rejects,
    in_form,
)

import attention_lib.exercises.ch07_visual as module
from attention_lib.digits import box_mask
from attention_lib.exercises.ch07_visual import (
    check_channel_gate,
    check_gate_parameters,
    check_image_to_tokens,
    check_patchify,
    check_pointing_accuracy,
    check_spatial_gate,
)
from attention_lib.vision import (
    CBAM,
    GATES,
    ChannelAttention,
    PatchEmbedding,
    SpatialAttention,
    image_to_tokens,
    spatial_descriptors,
)



# --- 1. the spatial gate --------------------------------------------------------------

def spatial_gate(x, conv):
    avg = x.mean(dim=1, keepdim=True)  # (B, 1, Hgt, W)
    top = x.amax(dim=1, keepdim=True)  # (B, 1, Hgt, W)
    return torch.sigmoid(conv(torch.cat([avg, top], dim=1)))  # (B, 1, Hgt, W)


def spatial_gate_stacked(x, conv):
    descriptors = torch.stack([x.mean(dim=1), x.max(dim=1).values], dim=1)
    weight, bias = conv.weight, conv.bias  # F.conv2d instead of the module
    return torch.sigmoid(F.conv2d(descriptors, weight, bias,
                                  padding=weight.shape[-1] // 2))


def with_descriptors(first, second, sigmoid=True):
    def gate(x, conv):
        logits = conv(torch.cat([first(x), second(x)], dim=1))
        return torch.sigmoid(logits) if sigmoid else logits
    return gate


def mean_c(x):
    return x.mean(dim=1, keepdim=True)


def max_c(x):
    return x.amax(dim=1, keepdim=True)


def test_the_spatial_reference_is_the_librarys_gate():
    for seed, (b, c, h, w, k) in enumerate(module._SPATIAL_CASES):
        x, conv = module._spatial_case(b, c, h, w, k, seed)
        gate = SpatialAttention(k)
        gate.conv.load_state_dict(conv.state_dict())
        out = gate(x)
        with torch.no_grad():
            torch.testing.assert_close(gate.attention_weights, spatial_gate(x, conv))
            torch.testing.assert_close(out, x * spatial_gate(x, conv))


@pytest.mark.parametrize(
    "solution",
    [spatial_gate, spatial_gate_stacked,
     lambda x, conv: torch.sigmoid(conv(spatial_descriptors(x)))],
    ids=["cat", "stack-F.conv2d", "library"],
)
def test_spatial_gate_accepts_the_solutions(solution):
    feedback = check_spatial_gate(solution)
    assert feedback and "over the channel axis" in feedback.message


@pytest.mark.parametrize("form", TENSOR_FORMS)
def test_spatial_gate_accepts_every_tensor_form(form):
    assert check_spatial_gate(in_form(lambda x, c: spatial_gate(x, c).detach(), form))


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (lambda x, conv: conv(torch.cat([x.mean(dim=(2, 3), keepdim=True),
                                         x.amax(dim=(2, 3), keepdim=True)], dim=1)),
         ["x of shape (3, 4, 5, 6)", "(3, 8, 1, 1)", "you pooled over space",
          "\"global pooling\" means pooling over all channels",
          "Your function raised RuntimeError"]),
        (lambda x, conv: conv(torch.cat([x.mean(dim=2, keepdim=True),
                                         x.amax(dim=2, keepdim=True)], dim=1)),
         ["(3, 8, 1, 6)", "you pooled over space"]),
        (with_descriptors(max_c, mean_c), ["the maximum and the mean are swapped"]),
        (with_descriptors(mean_c, max_c, sigmoid=False), ["the sigmoid is missing"]),
        (lambda x, conv: torch.softmax(
            with_descriptors(mean_c, max_c, False)(x, conv).flatten(1), -1
        ).view(x.shape[0], 1, *x.shape[2:]), ["a softmax over the pixels"]),
        (with_descriptors(mean_c, mean_c), ["the mean over channels only"]),
        (with_descriptors(max_c, max_c), ["the maximum over channels only"]),
        (with_descriptors(lambda x: x.sum(dim=1, keepdim=True), max_c),
         ["you summed over the channels"]),
        (lambda x, conv: x * spatial_gate(x, conv),
         ["you returned the gated features", "Return the gate M_s itself"]),
        (lambda x, conv: torch.sigmoid(conv(x.mean(dim=1, keepdim=True))),
         ["(3, 1, 5, 6)", "you gave it one descriptor"]),
        (lambda x, conv: torch.sigmoid(conv(x)), ["you gave it x itself"]),
        (lambda x, conv: torch.sigmoid(conv(torch.cat([x.mean(1), x.amax(1)], dim=1))),
         ["(3, 10, 6)", "keepdim=True", "torch.stack"]),
        (lambda x, conv: torch.cat([x.mean(1, keepdim=True), x.max(1, keepdim=True)]),
         ["returns a pair (values, indices)", ".values"]),
        (lambda x, conv: spatial_gate(x, conv)[:, 0],
         ["the values are right", "(3, 5, 6)", "(B, 1, Hgt, W) = (3, 1, 5, 6)"]),
        (lambda x, conv: spatial_gate(x, conv)[:, :, :-1],
         ["should have shape (B, 1, Hgt, W) = (3, 1, 5, 6)", "(3, 1, 4, 6)"]),
        (lambda x, conv: spatial_gate(x, conv) * float("nan"), ["NaN"]),
        (lambda x, conv: spatial_gate(x, conv) + 0.01,
         ["your gate differs; at pixel (0, 0) of image 0"]),
        (lambda x, conv: spatial_gate(x, conv) if x.shape[0] == 3 else x[:, :1],
         ["x of shape (1, 6, 7, 4) and a 7×7 conv"]),
    ],
)
def test_spatial_gate_names_each_mistake(wrong, phrases):
    assert_rejects(check_spatial_gate(wrong), *phrases)


def test_pooling_over_space_without_the_conv_module_is_still_an_error():
    def wrong(x, conv):  # F.conv2d: no hook sees the input
        pooled = torch.cat([x.mean(dim=(2, 3), keepdim=True),
                            x.amax(dim=(2, 3), keepdim=True)], dim=1)
        return torch.sigmoid(F.conv2d(pooled, conv.weight, conv.bias))

    assert_rejects(check_spatial_gate(wrong), "Your function raised RuntimeError")


def test_the_spatial_variants_differ_from_the_gate_and_each_other():
    for seed, case in enumerate(module._SPATIAL_CASES):
        x, conv = module._spatial_case(*case, seed)
        with torch.no_grad():
            answers = [spatial_gate(x, conv)]
            answers += [v for v, _ in module._spatial_variants(x, conv)]
        for i, a in enumerate(answers):
            for b in answers[i + 1:]:
                assert a.shape != b.shape or not torch.allclose(a, b, atol=1e-3)


# --- 2. the channel gate --------------------------------------------------------------

def channel_gate(x, mlp):
    avg, top = x.mean(dim=(2, 3)), x.amax(dim=(2, 3))  # (B, C) each
    return torch.sigmoid(mlp(avg) + mlp(top))  # (B, C)


def channel_gate_batched(x, mlp):  # both descriptors through the MLP in one call
    both = torch.stack([x.mean(dim=(2, 3)), x.flatten(2).max(dim=-1).values])
    return torch.sigmoid(mlp(both).sum(dim=0))[:, :, None, None]  # (B, C, 1, 1)


def branches(first, second, combine):
    return lambda x, mlp: combine(mlp(first(x)), mlp(second(x)))


def avg_s(x):
    return x.mean(dim=(2, 3))


def max_s(x):
    return x.amax(dim=(2, 3))


def test_the_channel_reference_is_the_librarys_gate():
    for seed, (b, c, h, w, r) in enumerate(module._CHANNEL_CASES):
        x, mlp = module._channel_case(b, c, h, w, r, seed)
        for pooling in ("avg", "avg+max"):
            gate = ChannelAttention(c, r, pooling=pooling)
            gate.mlp.load_state_dict(mlp.state_dict())
            gate(x)
            got = module._library_gate(x, mlp, r, pooling)
            torch.testing.assert_close(got, gate.attention_weights)
        with torch.no_grad():
            torch.testing.assert_close(got, channel_gate(x, mlp))


@pytest.mark.parametrize("solution", [channel_gate, channel_gate_batched])
def test_channel_gate_accepts_the_solutions(solution):
    feedback = check_channel_gate(solution)
    assert feedback and "exactly SE's parameters" in feedback.message


@pytest.mark.parametrize("form", TENSOR_FORMS)
def test_channel_gate_accepts_every_tensor_form(form):
    assert check_channel_gate(in_form(lambda x, m: channel_gate(x, m).detach(), form))


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (branches(avg_s, max_s, lambda a, m: torch.sigmoid(a) + torch.sigmoid(m)),
         ["x of shape (3, 8, 5, 6) and r = 4",
          "sigmoid to each branch and then added"]),
        (branches(avg_s, max_s, lambda a, m: (torch.sigmoid(a) + torch.sigmoid(m)) / 2),
         ["sigmoid to each branch and averaged"]),
        (lambda x, mlp: torch.sigmoid(mlp(avg_s(x))),
         ["that is SE's gate (Hu et al., 2018)", "average descriptor only"]),
        (lambda x, mlp: torch.sigmoid(mlp(max_s(x))), ["max-pooled descriptor only"]),
        (lambda x, mlp: torch.sigmoid(mlp(avg_s(x) + max_s(x))),
         ["added the two descriptors before the MLP"]),
        (lambda x, mlp: torch.sigmoid(mlp((avg_s(x) + max_s(x)) / 2)),
         ["averaged the two descriptors before the MLP"]),
        (branches(avg_s, max_s, lambda a, m: a + m), ["the sigmoid is missing"]),
        (branches(avg_s, max_s, lambda a, m: torch.softmax(a + m, dim=1)),
         ["a softmax over the channels"]),
        (lambda x, mlp: torch.sigmoid(mlp(x.sum(dim=(2, 3))) + mlp(max_s(x))),
         ["you summed over the pixels"]),
        (lambda x, mlp: x * channel_gate(x, mlp)[:, :, None, None],
         ["you returned the gated features"]),
        (lambda x, mlp: torch.sigmoid(mlp(x.mean(dim=1)) + mlp(x.amax(dim=1))),
         ["(3, 5, 6)", "you pooled over the channels",
          "pool over space, x.mean(dim=(2, 3))", "Your function raised RuntimeError"]),
        (lambda x, mlp: torch.sigmoid(mlp(x.mean(dim=(2, 3), keepdim=True))
                                      + mlp(x.amax(dim=(2, 3), keepdim=True))),
         ["(3, 8, 1, 1)", "nn.Linear acts on the last axis"]),
        (lambda x, mlp: torch.sigmoid(mlp(x.mean(dim=-1)) + mlp(x.amax(dim=-1))),
         ["(3, 8, 5)", "one spatial axis only"]),
        (lambda x, mlp: torch.sigmoid(mlp(torch.cat([avg_s(x), max_s(x)], dim=1))),
         ["(3, 16)", "you concatenated the two descriptors"]),
        (lambda x, mlp: torch.sigmoid(mlp(x)), ["you gave it x itself"]),
        (lambda x, mlp: torch.sigmoid(mlp(avg_s(x)) + mlp(x.max(dim=(2, 3)))),
         ["Your function raised"]),
        (lambda x, mlp: channel_gate(x, mlp)[:, :-1],
         ["should have shape (B, C) = (3, 8)", "(3, 7)"]),
        (lambda x, mlp: channel_gate(x, mlp) / 0 * 0, ["NaN"]),
        (lambda x, mlp: channel_gate(x, mlp) + 0.01, ["your gate differs"]),
    ],
)
def test_channel_gate_names_each_mistake(wrong, phrases):
    assert_rejects(check_channel_gate(wrong), *phrases)


def test_the_channel_variants_differ_from_the_gate_and_each_other():
    for seed, (b, c, h, w, r) in enumerate(module._CHANNEL_CASES):
        x, mlp = module._channel_case(b, c, h, w, r, seed)
        with torch.no_grad():
            answers = [channel_gate(x, mlp)]
            answers += [v for v, _ in module._channel_variants(x, mlp, r)]
        for i, a in enumerate(answers):
            for b_ in answers[i + 1:]:
                assert a.shape != b_.shape or not torch.allclose(a, b_, atol=1e-3)


# --- 3. the parameters the gates add --------------------------------------------------

def gate_parameters(gate, channels, reduction, kernel_size):
    hidden = max(1, channels // reduction)
    mlp = channels * hidden + hidden + hidden * channels + channels
    conv = 2 * kernel_size**2 + 1
    return {"se": mlp, "channel": mlp, "spatial": conv, "cbam": mlp + conv}[gate]


@pytest.mark.parametrize("channels, reduction, kernel_size",
                         [(64, 16, 7), (10, 4, 3), (3, 4, 7), (32, 4, 5), (1, 1, 1)])
def test_the_parameter_formula_counts_the_library(channels, reduction, kernel_size):
    modules = {
        "se": ChannelAttention(channels, reduction, pooling="avg"),
        "channel": ChannelAttention(channels, reduction, pooling="avg+max"),
        "spatial": SpatialAttention(kernel_size),
        "cbam": CBAM(channels, reduction, kernel_size),
    }
    for gate, m in modules.items():
        count = sum(p.numel() for p in m.parameters())
        assert count == gate_parameters(gate, channels, reduction, kernel_size)
        assert count == module._gate_parameters(gate, channels, reduction, kernel_size)


@pytest.mark.parametrize("form", NUMBER_FORMS)
def test_gate_parameters_accepts_any_number_form(form):
    feedback = check_gate_parameters(
        in_form(lambda *a: float(gate_parameters(*a)), form))
    assert feedback and "580" in feedback.message and "36,928" in feedback.message


def one_gate(gate, wrong):
    """The right count for the other gates, ``wrong`` for this one."""
    return lambda g, c, r, k: wrong(c, r, k) if g == gate else gate_parameters(
        g, c, r, k)


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (one_gate("se", lambda c, r, k: 2 * c * max(1, c // r)),
         ['For gate="se"', "you forgot the biases"]),
        (one_gate("se", lambda c, r, k: 2 * c * c / r + c / r + c),
         ["C / r as a real number"]),
        (one_gate("se", lambda c, r, k: 2 * c * (c // r) + c // r + c),
         ["at least one unit"]),
        (one_gate("channel", lambda c, r, k: 2 * gate_parameters("se", c, r, k)),
         ['For gate="channel"', "you counted two MLPs", "exactly SE's parameters"]),
        (one_gate("spatial", lambda c, r, k: c * k * k + 1),
         ['For gate="spatial"', "not the C channels"]),
        (one_gate("spatial", lambda c, r, k: 2 * k * k), ["the conv's bias"]),
        (one_gate("spatial", lambda c, r, k: k * k + 1), ["2 input maps"]),
        (one_gate("cbam", lambda c, r, k: gate_parameters("se", c, r, k)),
         ['For gate="cbam"', "only the channel gate"]),
        (one_gate("cbam", lambda c, r, k: 2 * c * max(1, c // r) + 2 * k * k),
         ["the biases, of the two Linear layers and of the conv"]),
        (lambda g, c, r, k: gate_parameters(g, c, r, k) + (c == 10),
         ['For gate="se", C = 10, r = 4, k = 3 you count 53', "has 52"]),
    ],
)
def test_gate_parameters_names_each_mistake(wrong, phrases):
    assert_rejects(check_gate_parameters(wrong), *phrases)


@pytest.mark.parametrize("gate", GATES)
def test_every_named_parameter_count_is_recognised_as_itself(gate):
    cases = module._PARAM_CASES
    seen = [[gate_parameters(gate, *case) for case in cases]]
    for formula, message in module._param_variants(gate):
        values = [formula(*case) for case in cases]
        assert values not in seen, message
        seen.append(values)
        assert_rejects(check_gate_parameters(one_gate(gate, formula)), message)


# --- 4. a grid as tokens --------------------------------------------------------------

def to_tokens(features):
    batch, channels, height, width = features.shape
    return features.permute(0, 2, 3, 1).reshape(batch, height * width, channels)


@pytest.mark.parametrize(
    "solution",
    [to_tokens, image_to_tokens, lambda f: f.flatten(2).transpose(1, 2).numpy(),
     lambda f: to_tokens(f).tolist()],
    ids=["permute", "library", "numpy", "list"],
)
def test_image_to_tokens_accepts_the_solutions(solution):
    feedback = check_image_to_tokens(solution)
    assert feedback and "tokens_to_grid" in feedback.message


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (lambda f: f.reshape(f.shape[0], -1, f.shape[1]),
         ["features of shape (2, 3, 4, 5)", "a reshape without moving the channels",
          "scrambled"]),
        (lambda f: f.permute(0, 3, 2, 1).reshape(f.shape[0], -1, f.shape[1]),
         ["column-major order", "token = col·Hgt + row"]),
        (lambda f: f.flatten(2), ["that is (B, C, Hgt·W)", "transpose(1, 2)"]),
        (lambda f: f.permute(0, 2, 3, 1), ["that is (B, Hgt, W, C)"]),
        (lambda f: f.flatten(2).permute(2, 0, 1), ["sequence first"]),
        (lambda f: to_tokens(f)[:, :-1],
         ["should have shape (B, Hgt·W, C) = (2, 20, 3)", "(2, 19, 3)"]),
        (lambda f: to_tokens(f).flip(1),
         ["token 0 should be the pixel at row 0, column 0, with features [0, 100, 200]",
          "yours is [34.0, 134.0, 234.0]"]),
        (lambda f: to_tokens(f) if f.shape[0] == 2 else to_tokens(f).roll(1, 1),
         ["features of shape (1, 5, 3, 2)"]),
    ],
)
def test_image_to_tokens_names_each_mistake(wrong, phrases):
    assert_rejects(check_image_to_tokens(wrong), *phrases)


def test_the_token_variants_differ_from_the_tokens_and_each_other():
    for sizes in module._TOKEN_CASES:
        x = module._coded(*sizes)
        answers = [image_to_tokens(x)] + [v for v, _ in module._token_variants(x)]
        for i, a in enumerate(answers):
            for b in answers[i + 1:]:
                assert a.shape != b.shape or not torch.equal(a, b)


# --- 5. patches -----------------------------------------------------------------------

def patchify(images, p):
    batch, channels, height, width = images.shape
    grid = images.reshape(batch, channels, height // p, p, width // p, p)
    grid = grid.permute(0, 2, 4, 1, 3, 5)  # (B, Hgt/p, W/p, C, p, p)
    return grid.reshape(batch, -1, channels * p * p)  # (B, P, C·p·p)


def patchify_loops(images, p):
    rows = [images[:, :, i:i + p, j:j + p].flatten(1)
            for i in range(0, images.shape[2], p)
            for j in range(0, images.shape[3], p)]
    return torch.stack(rows, dim=1)


def test_a_linear_map_of_the_patches_is_patch_embedding():
    torch.manual_seed(0)
    embed = PatchEmbedding((8, 12), 4, 3, 10)
    images = torch.randn(2, 3, 8, 12)
    weight = embed.proj.weight.reshape(10, -1)  # (D, C·p·p)
    expected = embed(images)  # (B, P, D)
    torch.testing.assert_close(patchify(images, 4) @ weight.T + embed.proj.bias,
                               expected)
    torch.testing.assert_close(module._patches(images, 4), patchify(images, 4))


@pytest.mark.parametrize(
    "solution",
    [patchify, patchify_loops,
     lambda x, p: F.unfold(x, p, stride=p).transpose(1, 2),
     lambda x, p: patchify(x, p).double().numpy()],
    ids=["reshape", "loops", "unfold", "numpy"],
)
def test_patchify_accepts_the_solutions(solution):
    feedback = check_patchify(solution)
    assert feedback and "PatchEmbedding's strided convolution" in feedback.message


def patch_grid(x, p):
    return module._patch_grid(x, p)


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (lambda x, p: patch_grid(x, p).transpose(1, 2).reshape(x.shape[0], -1,
                                                               x.shape[1] * p * p),
         ["images of shape (2, 3, 6, 4) and p = 2", "column-major order"]),
        (lambda x, p: patch_grid(x, p).permute(0, 1, 2, 4, 5, 3).reshape(
            x.shape[0], -1, x.shape[1] * p * p),
         ["channels last", "(p1 p2 c)", "Conv2d's weights"]),
        (lambda x, p: patch_grid(x, p).transpose(-1, -2).reshape(
            x.shape[0], -1, x.shape[1] * p * p),
         ["flattened column by column"]),
        (lambda x, p: x.reshape(x.shape[0], -1, x.shape[1] * p * p),
         ["a reshape does not cut patches"]),
        (lambda x, p: F.unfold(x, p, stride=p), ["F.unfold's (B, C·p·p, P)"]),
        (lambda x, p: patch_grid(x, p).flatten(3), ["flatten the grid of patches"]),
        (lambda x, p: patch_grid(x, p).flatten(1, 2),
         ["that is (B, P, C, p, p)"]),
        (lambda x, p: F.unfold(x, p, stride=1).transpose(1, 2),
         ["should have shape (B, P, C·p·p) = (2, 6, 12)", "(2, 15, 12)"]),
        (lambda x, p: patchify(x, p).roll(1, 1),
         ["patch 0 should be rows 0 to 1, columns 0 to 1, starting [0, 1, 10]",
          "yours starts [42.0, 43.0, 52.0]"]),
    ],
)
def test_patchify_names_each_mistake(wrong, phrases):
    assert_rejects(check_patchify(wrong), *phrases)


def test_the_patch_variants_differ_from_the_patches_and_each_other():
    for b, c, h, w, p in module._PATCH_CASES:
        x = module._coded(b, c, h, w)
        answers = [module._patches(x, p)] + [v for v, _ in module._patch_variants(x, p)]
        for i, a in enumerate(answers):
            for b_ in answers[i + 1:]:
                assert a.shape != b_.shape or not torch.equal(a, b_)


# --- 6. pointing accuracy -------------------------------------------------------------

def pointing(weights, boxes):
    num, height, width = weights.shape
    index = weights.reshape(num, -1).argmax(dim=1)  # (N,)
    row, col = index // width, index % width
    top, left, bottom, right = boxes.unbind(1)
    hit = (top <= row) & (row < bottom) & (left <= col) & (col < right)
    return hit.float().mean().item()


def pointing_with_box_mask(weights, boxes):
    num, height, width = weights.shape
    row, col = torch.unravel_index(weights.flatten(1).argmax(dim=1), (height, width))
    return box_mask(boxes, height, width)[torch.arange(num), row, col].double().mean()


def pointing_numpy(weights, boxes):
    w, b = weights.numpy(), boxes.numpy()
    hits = 0
    for k in range(len(w)):
        row, col = np.unravel_index(w[k].argmax(), w[k].shape)
        top, left, bottom, right = b[k]
        hits += top <= row < bottom and left <= col < right
    return hits / len(w)


@pytest.mark.parametrize("solution", [pointing, pointing_with_box_mask,
                                      pointing_numpy])
def test_pointing_accuracy_accepts_the_solutions(solution):
    feedback = check_pointing_accuracy(solution)
    assert feedback and "Compare it with chance" in feedback.message


@pytest.mark.parametrize("form", NUMBER_FORMS)
def test_pointing_accuracy_accepts_any_number_form(form):
    assert check_pointing_accuracy(in_form(lambda *a: float(pointing(*a)), form))


def hits_with(weights, boxes, **rule):
    return module._hits(weights, boxes, **rule).float().mean()


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (lambda w, b: hits_with(w, b, pick="min"), ["For 40 maps of 5 × 7", "argmin"]),
        (lambda w, b: hits_with(w, b, unravel="swap"),
         ["rows and columns are swapped"]),
        (lambda w, b: pointing(w, b[:, [1, 0, 3, 2]]),
         ["rows and columns are swapped", "(left, top, right, bottom)"]),
        (lambda w, b: hits_with(w, b, unravel="height"),
         ["unravelled the index with the height"]),
        (lambda w, b: hits_with(w, b, inclusive=True),
         ["exclusive ends", "image[top:bottom, left:right]"]),
        (lambda w, b: 1 - pointing(w, b), ["the share of misses"]),
        (lambda w, b: 100 * pointing(w, b), ["that is a percentage"]),
        (lambda w, b: pointing(w, b) * len(w), ["that is the number of hits"]),
        (lambda w, b: (w * box_mask(b, *w.shape[1:])).sum(dim=(1, 2)).mean(),
         ["the attention mass inside the box"]),
        (lambda w, b: pointing(w, b) if len(w) == 40 else 0.5,
         ["For 36 maps of 6 × 4: your share is 0.5000",
          "in 0.4444 of the maps"]),
        (lambda w, b: float("nan"), ["your share is nan"]),
        (lambda w, b: [pointing(w, b)] * 2, ["Return the share as one number"]),
    ],
)
def test_pointing_accuracy_names_each_mistake(wrong, phrases):
    assert_rejects(check_pointing_accuracy(wrong), *phrases)


def test_the_pointing_cases_tell_every_variant_apart():
    for case in module._POINT_CASES:
        weights, boxes = module._pointing_case(*case)
        values = [module._pointing(weights, boxes)]
        values += [v for v, _ in module._pointing_variants(weights, boxes)]
        for i, a in enumerate(values):
            for b in values[i + 1:]:
                assert not math.isclose(a, b, abs_tol=1e-3), (case, values)
        # the boxes leave room for a peak just past their exclusive ends
        assert (boxes[:, 2] < case[1]).all() and (boxes[:, 3] < case[2]).all()


# --- all checkers: the starter, odd answers, documentation ----------------------------


def test_the_readers_inputs_are_copies():
    """A function that writes into x or the weights does not change the reference."""
    def in_place(x, conv):
        return spatial_gate(x.mul_(1.0), conv)

    def sorting_boxes(weights, boxes):
        result = pointing(weights, boxes)
        boxes.zero_()
        return result

    assert check_spatial_gate(in_place)
    assert check_pointing_accuracy(sorting_boxes)


def test_checkers_leave_the_random_state_alone():
    state = torch.get_rng_state()
    check_spatial_gate(spatial_gate)
    check_channel_gate(channel_gate)
    check_gate_parameters(gate_parameters)
    check_pointing_accuracy(pointing)
    assert torch.equal(state, torch.get_rng_state())

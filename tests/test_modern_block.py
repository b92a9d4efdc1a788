"""RMSNorm and SwiGLU (chapter 8's modern block) against PyTorch and their formulas."""
import pytest
import torch
from torch.nn import functional as F

from attention_lib.transformer import PositionWiseFFN, RMSNorm, SwiGLU, swiglu_hidden


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rmsnorm_matches_torch(dtype):
    torch.manual_seed(0)
    ours, theirs = RMSNorm(16, eps=1e-5), torch.nn.RMSNorm(16, eps=1e-5)
    with torch.no_grad():
        ours.weight.copy_(torch.randn(16))
        theirs.weight.copy_(ours.weight)
    x = torch.randn(2, 5, 16).to(dtype)
    expected = theirs(x.float()).to(dtype)
    got = ours(x)
    assert got.dtype == dtype
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("ffn_hidden, expected", [(96, 64), (3, 2), (64, 43), (1, 1)])
def test_swiglu_hidden_is_two_thirds_rounded(ffn_hidden, expected):
    assert swiglu_hidden(ffn_hidden) == expected


def test_swiglu_hidden_rounds_up_to_a_multiple():
    assert swiglu_hidden(64, multiple_of=8) == 48


def test_swiglu_matches_a_two_matrix_ffn_in_parameters():
    ffn = PositionWiseFFN(32, 96)
    swiglu = SwiGLU(32, swiglu_hidden(96))
    weights = sum(p.numel() for n, p in ffn.named_parameters() if "weight" in n)
    assert sum(p.numel() for p in swiglu.parameters()) == weights


def test_swiglu_formula():
    torch.manual_seed(0)
    layer, x = SwiGLU(8, 12, bias=False), torch.randn(2, 3, 8)
    w1, w2, w3 = layer.W_1.weight, layer.W_2.weight, layer.W_3.weight
    expected = (F.silu(x @ w1.T) * (x @ w3.T)) @ w2.T
    torch.testing.assert_close(layer(x), expected)
    assert layer.W_1.bias is None


def test_ffn_without_bias():
    ffn = PositionWiseFFN(8, 16, bias=False)
    assert ffn.W_1.bias is None and ffn.W_2.bias is None
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(ffn(x), F.relu(x @ ffn.W_1.weight.T) @ ffn.W_2.weight.T)

"""The from-scratch GRU update: PyTorch's variant equals torch.nn.GRU exactly; the
material's does not."""
import pytest
import torch
from torch import nn

from attention_lib.gru import GRUCell, gru_update


def _material_gru(cell: GRUCell, y, c, s):
    """The course material's equations, written block by block: W_y*, W_c*, W_s* and b_*
    per gate."""
    E, Ds = cell.input_size, cell.num_hiddens
    W_y, W_c = cell.weight_ih[:, :E], cell.weight_ih[:, E:]
    (W_yr, W_yz, W_ys), (W_cr, W_cz, W_cs) = W_y.split(Ds), W_c.split(Ds)
    W_sr, W_sz, W_ss = cell.weight_hh.split(Ds)
    b = (cell.bias_ih + cell.bias_hh).split(Ds)  # one bias per gate in the equations
    r = torch.sigmoid(y @ W_yr.T + s @ W_sr.T + c @ W_cr.T + b[0])
    z = torch.sigmoid(y @ W_yz.T + s @ W_sz.T + c @ W_cz.T + b[1])
    s_tilde = torch.tanh(y @ W_ys.T + (s * r) @ W_ss.T + c @ W_cs.T + b[2])
    return z * s + (1 - z) * s_tilde


@pytest.mark.parametrize(
    "input_size, context_size, num_hiddens, batch_size",
    [(5, 3, 7, 4), (16, 32, 32, 1), (8, 0, 12, 3)],
)
def test_reset_after_equals_torch_gru_with_copied_weights(
    input_size, context_size, num_hiddens, batch_size
):
    torch.manual_seed(0)
    cell = GRUCell(input_size, num_hiddens, context_size, reset_after=True)
    reference = nn.GRU(input_size + context_size, num_hiddens, batch_first=True)
    with torch.no_grad():
        for name in ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]:
            getattr(reference, f"{name}_l0").copy_(getattr(cell, name))
    steps = 6
    ys = torch.randn(batch_size, steps, input_size)
    cs = torch.randn(batch_size, steps, context_size)
    s = torch.randn(batch_size, num_hiddens)
    # the stock GRU fed [y; c]
    expected, last = reference(torch.cat([ys, cs], dim=-1), s.unsqueeze(0))
    states = []
    for t in range(steps):
        s = cell(ys[:, t], s, cs[:, t] if context_size else None)
        states.append(s)
    torch.testing.assert_close(torch.stack(states, dim=1), expected)
    torch.testing.assert_close(s, last[0])


def test_state_dict_loads_into_torch_gru_cell():
    cell = GRUCell(4, 6, context_size=2, reset_after=True)
    reference = nn.GRUCell(6, 6)
    reference.load_state_dict(cell.state_dict())  # same names and shapes
    x, s = torch.randn(3, 6), torch.randn(3, 6)
    torch.testing.assert_close(cell(x[:, :4], s, x[:, 4:]), reference(x, s))


def test_material_variant_follows_the_equations_and_differs_from_torch():
    torch.manual_seed(1)
    cell = GRUCell(5, 7, context_size=3, reset_after=False)
    y, c, s = torch.randn(4, 5), torch.randn(4, 3), torch.randn(4, 7)
    torch.testing.assert_close(cell(y, s, c), _material_gru(cell, y, c, s))
    reference = nn.GRUCell(8, 7)
    reference.load_state_dict(cell.state_dict())
    assert (cell(y, s, c) - reference(torch.cat([y, c], -1), s)).abs().max() > 1e-3


def test_variants_agree_when_the_reset_gate_does_not_matter():
    """With r ⊙ (W s + b) versus W (r ⊙ s) + b: equal when s = 0 and the state bias of
    s̃ is 0."""
    cell = GRUCell(5, 7, reset_after=False)
    with torch.no_grad():
        cell.bias_hh[14:].zero_()
    x, s = torch.randn(4, 5), torch.zeros(4, 7)
    before = cell(x, s)
    cell.reset_after = True
    torch.testing.assert_close(cell(x, s), before)


def test_projected_inputs_give_the_same_step():
    cell = GRUCell(5, 7, context_size=3)
    y, c, s = torch.randn(4, 5), torch.randn(4, 3), torch.randn(4, 7)
    proj = cell.project_inputs(y) + cell.project_context(c)
    torch.testing.assert_close(cell.step(proj, s), cell(y, s, c))
    torch.testing.assert_close(
        gru_update(proj, s, cell.weight_hh, cell.bias_hh), cell(y, s, c)
    )


def test_bad_shapes_are_named():
    cell = GRUCell(5, 7, context_size=3)
    with pytest.raises(
        ValueError, match=r"context of shape \(B, context_size=3\), got None"
    ):
        cell(torch.randn(2, 5), torch.randn(2, 7))
    with pytest.raises(ValueError, match=r"state must be \(B, Ds=7\)"):
        cell(torch.randn(2, 5), torch.randn(2, 6), torch.randn(2, 3))
    with pytest.raises(ValueError, match=r"inputs must be \(\.\.\., input_size=5\)"):
        cell(torch.randn(2, 4), torch.randn(2, 7), torch.randn(2, 3))
    with pytest.raises(ValueError, match="built with context_size=0"):
        GRUCell(5, 7)(torch.randn(2, 5), torch.randn(2, 7), torch.randn(2, 3))
    with pytest.raises(ValueError, match=r"input_proj must be \(B, 3\*Ds\)"):
        gru_update(torch.randn(2, 20), torch.randn(2, 7), cell.weight_hh, cell.bias_hh)


@pytest.mark.parametrize(
    "args, error, message",
    [
        (
            (torch.randn(1, 21), torch.randn(3, 7)),
            ValueError,
            r"state of shape \(B, Ds\)=\(3, 7\), got \(1, 21\)",
        ),
        (
            (torch.randn(3, 21), [[0.0] * 7] * 3),
            TypeError,
            r"state must be a floating-point torch.Tensor, got a list",
        ),
        (
            (torch.randn(3, 21).long(), torch.randn(3, 7)),
            TypeError,
            r"input_proj must be a floating-point torch.Tensor, "
            r"got dtype torch.int64",
        ),
        (
            (torch.randn(3, 21).double(), torch.randn(3, 7)),
            TypeError,
            r"input_proj has dtype torch.float64 but state",
        ),
        (
            (torch.randn(3, 21), torch.randn(7)),
            ValueError,
            r"state must be \(B, Ds\), got \(7,\)",
        ),
    ],
)
def test_gru_update_names_bad_inputs_and_never_broadcasts_silently(
    args, error, message
):
    cell = GRUCell(5, 7)
    with pytest.raises(error, match=message):
        gru_update(*args, cell.weight_hh, cell.bias_hh)


def test_gru_update_checks_the_bias_and_allows_none():
    cell = GRUCell(5, 7)
    with pytest.raises(
        ValueError, match=r"bias_hh must be \(3\*Ds,\)=\(21,\) or None, got \(20,\)"
    ):
        gru_update(
            torch.randn(3, 21), torch.randn(3, 7), cell.weight_hh, cell.bias_hh[:20]
        )
    assert gru_update(
        torch.randn(3, 21), torch.randn(3, 7), cell.weight_hh, None
    ).shape == (3, 7)

"""The GRU update written out, in the two variants that textbooks and PyTorch disagree
on.

With the input x (for Bahdanau's decoder x = [y; c], the previous word's embedding and
the context) and the previous state s, both variants compute

    r  = σ(W_xr x + b_xr + W_sr s + b_sr)                reset gate
    z  = σ(W_xz x + b_xz + W_sz s + b_sz)                update gate
    s' = z ⊙ s + (1 − z) ⊙ s̃                            new state

and differ only in where the reset gate acts inside the candidate state s̃:

* ``reset_after=False`` (Cho et al.'s EMNLP 2014 form, arXiv v3; Bahdanau et al.'s
  appendix resets the same way, writing the update with z and 1 − z swapped):
  ``s̃ = tanh(W_xs x + b_xs + W_ss (r ⊙ s) + b_ss)`` — reset, *then* multiply by the
      matrix;
* ``reset_after=True`` (the first arXiv version, 1406.1078v1; ``torch.nn.GRU``, cuDNN,
  Keras' default since TensorFlow 2):
  ``s̃ = tanh(W_xs x + b_xs + r ⊙ (W_ss s + b_ss))`` — multiply, *then* reset.

The parameters are named and laid out exactly as in ``torch.nn.GRUCell`` (rows in the
gate order r, z, s̃), so weights copy across and, with ``reset_after=True``, the outputs
agree.

Taught in ``chapters/03_bahdanau/01_attention_decoder.ipynb``.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ._checks import describe

__all__ = ["gru_update", "GRUCell"]


def gru_update(
    input_proj: Tensor,
    state: Tensor,
    weight_hh: Tensor,
    bias_hh: Tensor | None,
    reset_after: bool = False,
) -> Tensor:
    """One GRU step, given the input's projection ``W_x x + b_x`` for all three gates.

    Taking the input's projection (rather than the input) lets a decoder project the
    inputs of all time steps in one matrix product before its loop; only the state's
    product stays in the loop.

    Shapes:
        input_proj: (B, 3*Ds), the rows for r, z and s̃ in that order
        state:      (B, Ds)
        weight_hh:  (3*Ds, Ds); bias_hh: (3*Ds,) or None
        returns:    (B, Ds), the new state

    Taught in ``chapters/03_bahdanau/01_attention_decoder.ipynb``.
    """
    num_hiddens = _check_gru_inputs(input_proj, state, weight_hh, bias_hh)  # Ds
    x_r, x_z, x_n = input_proj.chunk(3, dim=-1)  # each (B, Ds)
    if reset_after:
        # PyTorch: one product for all three gates, the reset gate applied to its
        # result. each (B, Ds)
        s_r, s_z, s_n = F.linear(state, weight_hh, bias_hh).chunk(3, dim=-1)
        reset = torch.sigmoid(x_r + s_r)
        update = torch.sigmoid(x_z + s_z)
        candidate = torch.tanh(x_n + reset * s_n)
    else:
        # Cho et al. (2014): the reset gate scales the state *before* the candidate's
        # product.
        b_rz, b_n = (
            (None, None)
            if bias_hh is None
            else (bias_hh[: 2 * num_hiddens], bias_hh[2 * num_hiddens :])
        )
        # each (B, Ds)
        s_r, s_z = F.linear(state, weight_hh[: 2 * num_hiddens], b_rz).chunk(2, dim=-1)
        reset = torch.sigmoid(x_r + s_r)
        update = torch.sigmoid(x_z + s_z)
        candidate = torch.tanh(
            x_n + F.linear(reset * state, weight_hh[2 * num_hiddens :], b_n)
        )
    return update * state + (1 - update) * candidate  # (B, Ds)


def _check_gru_inputs(input_proj, state, weight_hh, bias_hh) -> int:
    """The shapes :func:`gru_update` needs, with a message naming the argument; returns
    Ds."""
    for name, t in (
        ("state", state),
        ("input_proj", input_proj),
        ("weight_hh", weight_hh),
        ("bias_hh", bias_hh),
    ):
        if t is None and name == "bias_hh":
            continue
        if not isinstance(t, Tensor) or not t.dtype.is_floating_point:
            got = f"dtype {t.dtype}" if isinstance(t, Tensor) else describe(t)
            raise TypeError(f"{name} must be a floating-point torch.Tensor, got {got}")
        if t.dtype != state.dtype:
            raise TypeError(
                f"{name} has dtype {t.dtype} but state has dtype {state.dtype}"
            )
    if state.dim() != 2:
        raise ValueError(f"state must be (B, Ds), got {tuple(state.shape)}")
    num_hiddens = state.shape[-1]
    if input_proj.shape != (state.shape[0], 3 * num_hiddens) or weight_hh.shape != (
        3 * num_hiddens,
        num_hiddens,
    ):
        raise ValueError(
            "input_proj must be (B, 3*Ds) and weight_hh (3*Ds, Ds) for a state of"
            f" shape (B, Ds)={tuple(state.shape)}, got {tuple(input_proj.shape)} and"
            f" {tuple(weight_hh.shape)}"
        )
    if bias_hh is not None and bias_hh.shape != (3 * num_hiddens,):
        raise ValueError(
            f"bias_hh must be (3*Ds,)=({3 * num_hiddens},) or None, got"
            f" {tuple(bias_hh.shape)}"
        )
    return num_hiddens


class GRUCell(nn.Module):
    """A GRU cell whose input may come in two parts, the input proper and a context: x =
    [y; c].

    ``W_x = [W_y | W_c]``: the first ``input_size`` columns of ``weight_ih`` act on y,
    the last ``context_size`` on c, so ``W_y y + W_c c = W_x [y; c]`` — which is why a
    stock GRU fed the concatenation is the same model (up to ``reset_after``). Parameter
    names and layout follow ``torch.nn.GRUCell``; ``reset_after=True`` reproduces it.

    Shapes:
        inputs:  (B, input_size); context: (B, context_size) or None when
            ``context_size`` is 0
        state:   (B, Ds)
        returns: (B, Ds)

    Taught in ``chapters/03_bahdanau/01_attention_decoder.ipynb``.
    """

    def __init__(
        self,
        input_size: int,
        num_hiddens: int,
        context_size: int = 0,
        reset_after: bool = False,
        bias: bool = True,
    ):
        super().__init__()
        self.input_size, self.context_size, self.num_hiddens = (
            input_size,
            context_size,
            num_hiddens,
        )
        self.reset_after = reset_after
        self.weight_ih = nn.Parameter(
            torch.empty(3 * num_hiddens, input_size + context_size)
        )
        self.weight_hh = nn.Parameter(torch.empty(3 * num_hiddens, num_hiddens))
        self.bias_ih = nn.Parameter(torch.empty(3 * num_hiddens)) if bias else None
        self.bias_hh = nn.Parameter(torch.empty(3 * num_hiddens)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Uniform in ±1/√Ds, as ``torch.nn.GRU`` initialises."""
        bound = 1.0 / math.sqrt(self.num_hiddens)
        for param in self.parameters():
            nn.init.uniform_(param, -bound, bound)

    def project_inputs(self, inputs: Tensor) -> Tensor:
        """``W_y y + b_x`` for any number of leading dimensions (e.g. all time steps at
        once).

        Shapes:
            inputs: (..., input_size); returns: (..., 3*Ds)
        """
        if inputs.shape[-1] != self.input_size:
            raise ValueError(
                f"inputs must be (..., input_size={self.input_size}), got"
                f" {tuple(inputs.shape)}"
            )
        return F.linear(inputs, self.weight_ih[:, : self.input_size], self.bias_ih)

    def project_context(self, context: Tensor) -> Tensor:
        """``W_c c``, the context's share of every gate.

        Shapes:
            context: (..., context_size); returns: (..., 3*Ds)
        """
        if context.shape[-1] != self.context_size:
            raise ValueError(
                f"context must be (..., context_size={self.context_size}), got"
                f" {tuple(context.shape)}"
            )
        return F.linear(context, self.weight_ih[:, self.input_size:])

    def step(self, input_proj: Tensor, state: Tensor) -> Tensor:
        """The update from an already projected input: see :func:`gru_update`."""
        return gru_update(
            input_proj, state, self.weight_hh, self.bias_hh, self.reset_after
        )

    def forward(
        self, inputs: Tensor, state: Tensor, context: Tensor | None = None
    ) -> Tensor:
        if context is None and self.context_size:
            raise ValueError(
                "this cell expects a context of shape (B,"
                f" context_size={self.context_size}), got None"
            )
        if context is not None and not self.context_size:
            raise ValueError(
                "this cell was built with context_size=0, got a context of shape"
                f" {tuple(context.shape)}"
            )
        if state.dim() != 2 or state.shape[-1] != self.num_hiddens:
            raise ValueError(
                f"state must be (B, Ds={self.num_hiddens}), got {tuple(state.shape)}"
            )
        input_proj = self.project_inputs(inputs)  # (B, 3*Ds): W_y y + b
        if context is not None:
            # (B, 3*Ds): + W_c c
            input_proj = input_proj + self.project_context(context)
        return self.step(input_proj, state)  # (B, Ds)

    def extra_repr(self) -> str:
        return (
            f"input_size={self.input_size}, context_size={self.context_size},"
            f" num_hiddens={self.num_hiddens}, reset_after={self.reset_after}"
        )

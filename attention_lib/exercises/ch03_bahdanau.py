"""Checkers for chapter 3's exercises (Bahdanau attention in a GRU decoder).

Each checker runs the reader's function on small cases built so that each typical
mistake gives a different, recognisable answer, and names the mistake it recognises.

Taught in ``chapters/03_bahdanau/01_attention_decoder.ipynb`` and
``chapters/03_bahdanau/02_training_and_results.ipynb``.
"""
from __future__ import annotations


import torch
from torch import Tensor, nn

from ..gru import GRUCell, gru_update
from ..masking import masked_softmax
from ._common import check_choice
from ._feedback import (
    Feedback,
    checker,
    close,
    close_each,
    describe,
    diagnose,
    read_index,
    read_tensor,
    read_tensors,
    run_safely,
)

__all__ = [
    "check_why_nearly_uniform",
    "check_context",
    "check_decoder_step",
    "check_gru_update",
    "check_stock_gru",
    "check_best_hypothesis",
]


# --------------------------------------------------------------------------- scores to
# context


@checker
def check_context(fn) -> Feedback:
    """Check ``fn(attn_scores, enc_outputs, src_valid_lens) -> (context,
    attn_weights)``: the softmax over the source positions, zero at padding, and the
    weighted sum of the encoder states.

    Shapes:
        fn: (attn_scores (B, Lk), enc_outputs (B, Lk, Ds), src_valid_lens (B,)) -> ((B,
            Ds), (B, Lk))
    """
    generator = torch.Generator().manual_seed(0)
    cases = [
        (torch.randn(3, 5, generator=generator) * 2,
         torch.randn(3, 5, 4, generator=generator),
         torch.tensor([5, 3, 1])),
        (torch.randn(2, 6, generator=generator) * 2,
         torch.randn(2, 6, 3, generator=generator),
         torch.tensor([2, 6])),
    ]

    def reference(attn_scores, enc_outputs, src_valid_lens):
        weights = masked_softmax(attn_scores.unsqueeze(1), src_valid_lens).squeeze(1)
        return (weights.unsqueeze(-1) * enc_outputs).sum(dim=1), weights  # (B, Ds)

    def mistakes(attn_scores, enc_outputs, src_valid_lens):
        weights = reference(attn_scores, enc_outputs, src_valid_lens)[1]
        return [
            ((None, torch.softmax(attn_scores, dim=0)), _BATCH_AXIS),
            ((None, torch.softmax(attn_scores, dim=-1)),
             "The weights at source padding are not zero: you forgot to mask."
             " Positions at or after src_valid_lens must get weight 0 (fill their"
             " scores with a very negative number before the softmax, or use"
             " masked_softmax)."),
            ((enc_outputs.mean(dim=1), weights),
             "Your context is the plain average of the encoder states: weight them by"
             " attn_weights."),
        ]

    return diagnose(
        fn, cases, reference, mistakes, what="pair", compare=close_each,
        read=lambda got, *case: read_tensors(got, ("context", "attn_weights")),
        explain=_explain_context,
        correct="Correct: masked softmax over the source positions, then the weighted"
        " sum of the h_t.",
    )


_BATCH_AXIS = (
    "Your weights sum to 1 down each column: the softmax ran over the batch (dim=0)."
    " Each sentence's weights must sum to 1 over its source positions (dim=-1)."
)


def _explain_context(got, expected, attn_scores, enc_outputs, src_valid_lens) -> str:
    (context, attn_weights), (_, expected_weights) = got, expected
    batch_size, num_kv, num_hiddens = enc_outputs.shape
    ones = torch.ones(batch_size, dtype=attn_weights.dtype)
    if attn_weights.shape != (batch_size, num_kv):
        return (f"attn_weights must have shape (B, Lk) = {(batch_size, num_kv)}, one"
                f" weight per source position; got {tuple(attn_weights.shape)}.")
    if not close(attn_weights, expected_weights):
        if close(attn_weights.sum(dim=0), torch.ones(num_kv, dtype=attn_weights.dtype)):
            return _BATCH_AXIS
        if (close(attn_weights * (expected_weights > 0), attn_weights)
                and not close(attn_weights.sum(-1), ones)):
            return (
                "Padding gets weight 0, but the weights no longer sum to 1: mask the"
                " scores *before* the softmax, not the weights after it."
            )
        bad = next(i for i in range(batch_size)
                   if not close(attn_weights[i], expected_weights[i]))
        return (
            f"attn_weights for scores {attn_scores[bad].tolist()} and valid length"
            f" {int(src_valid_lens[bad])} should be {expected_weights[bad].tolist()},"
            f" got {attn_weights[bad].tolist()}."
        )
    if context.shape != (batch_size, num_hiddens):
        return (f"context must have shape (B, Ds) = {(batch_size, num_hiddens)}: a"
                f" weighted sum over the source positions; got {tuple(context.shape)}.")
    return ("The weights are right but the context is not Σ_t α_t h_t: multiply each"
            " encoder state by its weight and sum over the source positions (e.g."
            " torch.bmm).")


# --------------------------------------------------------------------------- the order
# of one step


class _Recorder:
    """An attention function and a GRU function that remember how they were called."""

    def __init__(self, embed_size: int, num_hiddens: int, seed: int):
        generator = torch.Generator().manual_seed(seed)
        self.W_att = torch.randn(num_hiddens, num_hiddens, generator=generator)
        self.W_gru = torch.randn(
            num_hiddens, embed_size + 2 * num_hiddens, generator=generator
        )
        self.attend_calls, self.gru_calls = [], []

    def attend(self, query: Tensor) -> Tensor:
        """context = attend(query): (B, Ds) -> (B, Ds)."""
        context = torch.tanh(query @ self.W_att)
        self.attend_calls.append((query.detach().clone(), context.detach().clone()))
        return context

    def gru(self, y: Tensor, context: Tensor, state: Tensor) -> Tensor:
        """new_state = gru(y, context, state): (B, E), (B, Ds), (B, Ds) -> (B, Ds)."""
        new_state = torch.tanh(torch.cat([y, context, state], dim=-1) @ self.W_gru.T)
        self.gru_calls.append(
            (y.detach().clone(),
             context.detach().clone(),
             state.detach().clone(),
             new_state.detach().clone())
        )
        return new_state


def _same(a: Tensor, b: Tensor) -> bool:
    return a.shape == b.shape and bool(torch.equal(a, b))


@checker
def check_decoder_step(fn) -> Feedback:
    """Check ``fn(attend, gru, y_prev, prev_state) -> (new_state, context)``: one step
    of Bahdanau's decoder.

    ``attend(query) -> context`` and ``gru(y, context, state) -> new_state`` are given;
    the step must attend with the *previous* state s_{t'-1}, then update the state with
    that context. Two cases of different sizes.

    Shapes:
        y_prev: (B, E); prev_state: (B, Ds); returns: new_state (B, Ds), context (B, Ds)
    """
    cases = []
    for batch_size, embed_size, num_hiddens, seed in ((2, 3, 4, 1), (3, 5, 2, 7)):
        recorder = _Recorder(embed_size, num_hiddens, seed)
        generator = torch.Generator().manual_seed(seed + 1)
        y_prev = torch.randn(batch_size, embed_size, generator=generator)
        prev_state = torch.randn(batch_size, num_hiddens, generator=generator)
        cases.append((recorder.attend, recorder.gru, y_prev, prev_state))

    def reference(attend, gru, y_prev, prev_state):  # what the reader's calls returned
        calls = attend.__self__.gru_calls, attend.__self__.attend_calls
        return None if not all(calls) else (calls[0][-1][3], calls[1][-1][1])

    return diagnose(
        fn, cases, reference, what="pair", read=_read_step, compare=close_each,
        explain=lambda got, expected, *case: (
            "Return the state that gru computed as new_state."
            if not close(got[0], expected[0]) else
            "Return the context that attend computed (for plotting and the next"
            " layers)."),
        correct="Correct: c_t' = attend(s_{t'-1}), then s_t' = g(y_{t'-1}, c_t',"
        " s_{t'-1}).",
    )


def _read_step(result, attend, gru, y_prev, prev_state):
    """The pair (new_state, context), or the feedback on the order of the calls."""
    recorder = attend.__self__
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        return None, Feedback.wrong("Return a pair (new_state, context).")
    if not recorder.attend_calls:
        return None, Feedback.wrong(
            "You never called attend: the context must come from attention over the"
            " encoder states, attend(query)."
        )
    if not recorder.gru_calls:
        return None, Feedback.wrong(
            "You never called gru: the new state is gru(y_prev, context, prev_state)."
        )
    query, att_context = recorder.attend_calls[-1]
    y, gru_context, state, _ = recorder.gru_calls[-1]
    if not _same(query, prev_state):
        if any(_same(query, call[3]) for call in recorder.gru_calls):
            message = (
                "You attended with the new state s_t' (computed by gru first). In"
                " Bahdanau's decoder the query is the previous state s_{t'-1}: attend"
                " first, then update. (Attending with s_t' is Luong et al.'s later"
                " design, which then needs a separate output layer that reads the"
                " context.)"
            )
        else:
            message = (
                "The query passed to attend is not prev_state: the query is s_{t'-1}."
            )
    elif len(recorder.gru_calls) > 1:
        message = (
            f"gru was called {len(recorder.gru_calls)} times: one step is one GRU"
            " update."
        )
    elif not _same(gru_context, att_context):
        message = (
            "gru did not read the context that attend returned: pass it as the context"
            " argument."
        )
    elif not _same(state, prev_state):
        message = (
            "gru must update the previous state: gru(y_prev, context, prev_state)."
        )
    elif not _same(y, y_prev):
        message = (
            "gru's first argument must be y_prev, the previous output word's embedding."
        )
    else:
        return read_tensors(result, ("new_state", "context"))
    return None, Feedback.wrong(message)


# --------------------------------------------------------------------------- the reset
# gate


def _gru_mistake(reset_after=False, no_reset=False, swap_update=False, swap_rz=False,
                 no_state_bias=False, transposed=False):
    """The library's GRU update with one thing changed, by changing the gates' rows:
    r, z swapped; z negated (sigmoid(-a) = 1 - sigmoid(a): z and 1 − z swapped); r = 1
    (no reset); bias_hh left out; each (Ds, Ds) block of weight_hh transposed; or
    PyTorch's reset after the product."""
    def update(input_proj, state, weight_hh, bias_hh):
        blocks = [list(t.chunk(3, dim=-1 if t is input_proj else 0))
                  for t in (input_proj, weight_hh, bias_hh)]  # r, z, s̃ rows of each
        for rows in blocks:
            if swap_rz:
                rows[0], rows[1] = rows[1], rows[0]
            if swap_update:
                rows[1] = -rows[1]
            if no_reset:  # a large input and no state term: r = sigmoid(1e4) = 1
                rows[0] = torch.full_like(rows[0], 1e4 if rows is blocks[0] else 0.0)
        if transposed:
            blocks[1] = [block.T for block in blocks[1]]
        input_proj, weight_hh, bias_hh = (torch.cat(rows, dim=-1 if rows is blocks[0]
                                                    else 0) for rows in blocks)
        return gru_update(input_proj, state, weight_hh,
                          None if no_state_bias else bias_hh, reset_after)
    return update


def _reset_after_bias_outside(input_proj, state, weight_hh, bias_hh):
    """tanh(x_s + r ⊙ (W_ss s) + b_s): the reset after the product, its bias outside."""
    ds = state.shape[-1]
    x_r, x_z, x_s = input_proj.split(ds, dim=-1)
    s_r, s_z, s_s = (state @ weight_hh.T).split(ds, dim=-1)
    b_r, b_z, b_s = bias_hh.split(ds)
    reset, update = torch.sigmoid(x_r + s_r + b_r), torch.sigmoid(x_z + s_z + b_z)
    candidate = torch.tanh(x_s + reset * s_s + b_s)
    return update * state + (1 - update) * candidate


_GRU_MISTAKES = [
    (_gru_mistake(reset_after=True),
     "You applied the reset gate after the matrix product, r ⊙ (W_ss s + b): that is"
     " PyTorch's (and cuDNN's) variant, the form of the first arXiv versions of Cho et"
     " al.'s paper. This exercise asks for this page's equations, which reset the"
     " state before the product, W_ss (r ⊙ s), as Cho et al.'s EMNLP paper and"
     " Bahdanau et al.'s appendix do."),
    (_reset_after_bias_outside,
     "You applied the reset gate after the matrix product, r ⊙ (W_ss s), with the"
     " bias outside it. This exercise asks for this page's equations, which reset the"
     " state before the product: W_ss (r ⊙ s) + b_s."),
    (_gru_mistake(no_reset=True),
     "The reset gate r is missing from the candidate state s̃."),
    (_gru_mistake(swap_update=True),
     "You wrote s' = (1 − z) ⊙ s + z ⊙ s̃, the convention of Bahdanau et al.'s"
     " appendix, in which z weighs the candidate. It is the same kind of GRU (negate"
     " z's weights and bias and one becomes the other), but this exercise's z follows"
     " this page's convention, Cho et al.'s and PyTorch's: s' = z ⊙ s + (1 − z) ⊙ s̃"
     " (z = 1 keeps the old state)."),
    (_gru_mistake(swap_rz=True),
     "The first Ds rows belong to the reset gate r and the next Ds to the update"
     " gate z (order r, z, s̃, as in torch.nn.GRU)."),
    (_gru_mistake(no_state_bias=True),
     "You left out bias_hh: each of the state's three products has its bias too,"
     " W_sr s + b_r, W_sz s + b_z and W_ss (r ⊙ s) + b_s."),
    (_gru_mistake(transposed=True),
     "You multiplied the state by the weight blocks untransposed, s @ W_sr: the rows"
     " of weight_hh are output units, as in nn.Linear, so the product is s @ W_sr.T"
     " (or F.linear(s, W_sr))."),
]


def _read_state(got, *case):
    if got is None:
        return None, Feedback.wrong(
            "Return the new state as a tensor of shape (B, Ds)."
        )
    return read_tensor(got, "new state (B, Ds)")


def _explain_gru(got, expected, *case):
    if got.shape != expected.shape:
        return (f"The new state must have shape (B, Ds) = {tuple(expected.shape)}, got"
                f" {tuple(got.shape)}.")
    return (f"For the first example (Ds={expected.shape[-1]}) expected"
            f" {expected[0].tolist()}, got {got[0].tolist()}.")


@checker
def check_gru_update(fn) -> Feedback:
    """Check ``fn(input_proj, state, weight_hh, bias_hh) -> new_state``: the GRU update
    as 3.1 writes it, s' = z ⊙ s + (1 − z) ⊙ s̃ with the reset before the product (Cho
    et al.'s EMNLP 2014 form).

    ``input_proj`` holds ``W_x x + b_x`` for the gates r, z, s̃ (in that order, Ds
    columns each); the reset gate scales the state *before* the candidate's matrix
    product. Two cases with different Ds (4 and 3), so an answer that slices at a fixed
    Ds is caught.

    Shapes:
        input_proj: (B, 3*Ds); state: (B, Ds); weight_hh: (3*Ds, Ds); bias_hh: (3*Ds,);
            returns: (B, Ds)
    """
    generator = torch.Generator().manual_seed(3)
    cases = []
    for batch_size, ds in ((3, 4), (2, 3)):
        shapes = ((batch_size, 3 * ds), (batch_size, ds), (3 * ds, ds), (3 * ds,))
        cases.append(tuple(torch.randn(*shape, generator=generator)
                           for shape in shapes))
    return diagnose(
        fn, cases, _gru_mistake(), _GRU_MISTAKES, what="new state (B, Ds)",
        read=_read_state, explain=_explain_gru,
        correct="Correct: s̃ = tanh(W_x x + W_ss (r ⊙ s) + b), the reset gate before"
        " the product.",
    )


# --------------------------------------------------------------------------- a stock
# GRU fed [y; c]


@checker
def check_stock_gru(fn) -> Feedback:
    """Check ``fn(cell) -> torch.nn.GRU``: a stock GRU that, fed ``[y; c]``, equals
    ``cell(y, s, c)``.

    ``cell`` is a :class:`~attention_lib.gru.GRUCell` with a context and
    ``reset_after=True``; two cells of different sizes, so an answer that builds a GRU
    of fixed sizes is caught.

    Shapes:
        the returned GRU: input size E + context_size, hidden size Ds, one layer,
            batch_first
    """
    if not callable(fn):
        return run_safely(fn)[1]
    cases = []
    for input_size, num_hiddens, context_size, seed in ((3, 5, 2, 4), (4, 6, 3, 6)):
        # the cell's weights are drawn from a seeded fork of the global random state:
        # the reader's own random state is left as it was
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            cell = GRUCell(
                input_size, num_hiddens, context_size=context_size, reset_after=True
            )
        generator = torch.Generator().manual_seed(seed + 1)
        cell.inputs = tuple(torch.randn(4, n, generator=generator)  # y, c, s
                            for n in (input_size, context_size, num_hiddens))
        cases.append((cell,))

    def build(cell):  # on a fork of the random state too
        with torch.random.fork_rng(devices=[]):
            return fn(cell)

    return diagnose(
        build, cases, lambda cell: _run_cell(cell, *cell.inputs), what="GRU",
        read=_run_gru, compare=lambda got, expected: close(got[0], expected),
        explain=_explain_gru_copy,
        correct="Correct: W_y y + W_c c = W [y; c], so a stock GRU fed the"
        " concatenation is the same cell (in PyTorch's reset-after variant).",
    )


@torch.no_grad()
def _run_cell(cell, y, c, s) -> Tensor:
    return cell(y, s, c)


@torch.no_grad()
def _run_gru(gru, cell, order=(0, 1)):
    """(the reader's GRU's new state for [y; c] (or ``order``), the GRU), or the
    feedback on how it was built."""
    input_size, context_size = (t.shape[-1] for t in cell.inputs[:2])
    num_hiddens = cell.inputs[2].shape[-1]
    if not isinstance(gru, nn.GRU):
        return None, Feedback.wrong(f"Return a torch.nn.GRU, got {describe(gru)}.")
    if (gru.input_size != input_size + context_size or gru.hidden_size != num_hiddens
            or gru.num_layers != 1):
        return None, Feedback.wrong(
            f"The GRU reads [y; c], so input_size = E + context_size = {input_size} +"
            f" {context_size} = {input_size + context_size}, with hidden_size"
            f" {num_hiddens} (the cell's) and one layer; got"
            f" input_size={gru.input_size}, hidden_size={gru.hidden_size},"
            f" num_layers={gru.num_layers}."
        )
    if not gru.batch_first:
        return None, Feedback.wrong(
            "Build it with batch_first=True (the check feeds (B, Lq, E +"
            " context_size))."
        )
    if not gru.bias:
        return None, Feedback.wrong(
            "The cell has biases: build the GRU with bias=True and copy them."
        )
    like = {"dtype": gru.weight_hh_l0.dtype, "device": gru.weight_hh_l0.device}
    y_c = torch.cat([cell.inputs[i] for i in order], dim=-1).unsqueeze(1)
    got, error = run_safely(gru, y_c.to(**like), cell.inputs[2].unsqueeze(0).to(**like))
    if error is not None:
        return None, Feedback.wrong(f"Running your GRU failed: {error.message}")
    return (got[0][:, 0].cpu(), gru), None


def _explain_gru_copy(got, expected, cell) -> str:
    gru = got[1]
    swapped, error = _run_gru(gru, cell, order=(1, 0))
    if error is None and close(swapped[0], expected):
        return ("Your weights expect [c; y] (as d2l concatenates), but the check feeds"
                " [y; c]: the first E columns of weight_ih act on y.")
    weight_ih, weight_hh, bias_ih, bias_hh = (t.detach().cpu() for t in (
        gru.weight_ih_l0, gru.weight_hh_l0, gru.bias_ih_l0, gru.bias_hh_l0))
    if close(weight_ih, cell.weight_ih.detach()) and close(
            weight_hh, cell.weight_hh.detach()):
        if close(bias_ih, cell.bias_hh.detach()) and close(
                bias_hh, cell.bias_ih.detach()):
            return (
                "bias_ih and bias_hh are swapped. They are not interchangeable: b_hn"
                " sits inside r ⊙ (W_hn s + b_hn). Copy bias_ih into bias_ih_l0 and"
                " bias_hh into bias_hh_l0."
            )
        return (
            "The weights are copied but the biases are not: copy bias_ih into"
            " bias_ih_l0 and bias_hh into bias_hh_l0 too."
        )
    if not close(weight_hh, cell.weight_hh.detach()):
        return "weight_hh_l0 differs from the cell's weight_hh: copy it."
    return (
        "The GRU fed [y; c] does not reproduce cell(y, s, c): copy weight_ih,"
        " weight_hh, bias_ih and bias_hh into weight_ih_l0, weight_hh_l0, bias_ih_l0"
        " and bias_hh_l0."
    )


# --------------------------------------------------------------------------- length
# normalisation


def _best(log_probs: list, lengths: list, alpha: float) -> int:
    return max(range(len(log_probs)), key=lambda i: log_probs[i] / lengths[i] ** alpha)


@checker
def check_best_hypothesis(fn) -> Feedback:
    """Check ``fn(log_probs, lengths, alpha) -> int``: the index of the best ``log_prob
    / length ** alpha``, with three alphas that each pick another hypothesis.

    Shapes:
        log_probs: list of N floats; lengths: list of N ints; alpha: float; returns: an
            int in [0, N)
        (a NumPy integer or a one-element integer tensor is fine)
    """
    cases = [  # each: normalised scores, and what the typical mistakes would pick
        # -1.19, -1.17, -1.17, -1.63 -> 1; raw -> 0; per token -> 2
        ([-2.0, -3.3, -4.5, -7.0], [2, 4, 6, 7], 0.75),
        ([-1.0, -2.6, -2.9], [2, 4, 3], 1.0),   # -0.50, -0.65, -0.97 -> 0
        ([-3.0, -3.2, -6.0], [3, 5, 8], 0.5),   # -1.73, -1.43, -2.12 -> 1; raw -> 0
        ([-2.0, -2.2, -5.0], [1, 3, 9], 0.75),  # -2.00, -0.97, -0.96 -> 2; raw -> 0
        # -1.00, -0.83, -0.75, -1.00 -> 2: alpha matters
        ([-2.0, -3.3, -4.5, -7.0], [2, 4, 6, 7], 1.0),
        # -1.41, -1.65, -1.84, -2.65 -> 0
        ([-2.0, -3.3, -4.5, -7.0], [2, 4, 6, 7], 0.5),
    ]
    return diagnose(
        fn, cases, _best, _hypothesis_mistakes, what="index", compare=int.__eq__,
        read=lambda got, *case: read_index(got, "index of the best hypothesis"),
        explain=lambda got, expected, log_probs, *case: _shown(
            got, expected, log_probs, *case) + (
            f" Return an index into the {len(log_probs)} hypotheses, from 0 to"
            f" {len(log_probs) - 1}." if not 0 <= got < len(log_probs) else
            " Scores are log_prob / length ** alpha."),
        correct="Correct: the best log_prob / length ** alpha, so longer outputs are"
        " not penalised for their length alone.",
    )


def _shown(got, expected, log_probs, lengths, alpha) -> str:
    return (f"log_probs={log_probs}, lengths={lengths}, alpha={alpha}: expected"
            f" {expected}, got {got}.")


def _hypothesis_mistakes(log_probs, lengths, alpha) -> list:
    """(the index a mistake picks, message)."""
    worst = min(range(len(log_probs)), key=lambda i: log_probs[i] / lengths[i] ** alpha)
    named = [
        (_best(log_probs, lengths, 0.0),
         "You picked the highest raw log-probability, which favours short outputs"
         " (every extra token costs probability): divide by length ** alpha first."),
        (None if alpha == 1.0 else _best(log_probs, lengths, 1.0),
         "You divided by the length, not by length ** alpha."),
        (worst, "That is the worst score: log-probabilities are negative, take the"
         " max."),
    ] + [(_best(log_probs, lengths, other),
          f"That would be the pick for alpha={other}, not {alpha}. Scores are"
          " log_prob / length ** alpha, with the `alpha` argument.")
         for other in (0.5, 0.6, 0.7, 0.75, 0.8, 0.9) if other != alpha]
    expected = _best(log_probs, lengths, alpha)
    return [(index, f"{_shown(index, expected, log_probs, lengths, alpha)} {message}")
            for index, message in named]


# --------------------------------------------------------------------------- weights at
# initialisation

_UNIFORM_CHOICES = {
    "a": (False,
          "The softmax normalises, it does not flatten: exp(e_t) / Σ_j exp(e_j) is "
          "1/n only when the n scores are equal. Scores 0 and 3 would give the "
          "weights 0.05 and 0.95, which also sum to 1."),
    "b": (False,
          "The states h_t differ: each has read different tokens, even through "
          "random weights. Were they equal, the weights would be exactly 1/n, not "
          "nearly."),
    "c": (True,
          "Right: each score is w_vᵀ tanh(...), a sum of Da terms, each a small "
          "random weight (PyTorch draws a Linear layer's weights from "
          "U(−1/√fan_in, 1/√fan_in)) times a number in (−1, 1). So the scores of "
          "different tokens differ by a few tenths, and exp of nearly equal numbers "
          "is nearly equal. Training makes the scores spread out; the cell below "
          "shows what a ten times larger w_v does."),
    "d": (False,
          "s_0 is the encoder's final state, not zero. And even a zero query would "
          "leave the keys' term W_k h_t, which differs from token to token: the "
          "query shifts the scores inside the tanh, it does not make them equal."),
}


def check_why_nearly_uniform(choice) -> Feedback:
    """Check the answer (a letter) to: why are an untrained decoder's attention weights
    nearly uniform over the valid tokens?

    Shapes:
        choice: one of "a", "b", "c", "d"
    """
    return check_choice(choice, _UNIFORM_CHOICES)

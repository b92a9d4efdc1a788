"""Each chapter-3 checker accepts the solution and rejects typical wrong answers with a
specific message."""
import pytest
import torch
from answer_forms import INDEX_FORMS, in_form
from torch import nn

from attention_lib import GRUCell, gru_update, masked_softmax
from attention_lib.exercises import (
    check_best_hypothesis,
    check_context,
    check_decoder_step,
    check_gru_update,
    check_stock_gru,
)


def _not_implemented(*args):
    raise NotImplementedError


# ------------------------------------------------------------------------ check_context


def context_solution(attn_scores, enc_outputs, src_valid_lens):
    positions = torch.arange(attn_scores.shape[-1])  # (Lk,)
    padding = positions[None, :] >= src_valid_lens[:, None]  # (B, Lk)
    attn_weights = torch.softmax(
        attn_scores.masked_fill(padding, float("-inf")), dim=-1
    )  # (B, Lk)
    context = torch.bmm(attn_weights.unsqueeze(1), enc_outputs).squeeze(1)  # (B, Ds)
    return context, attn_weights


def context_with(weights_fn, context_fn=None):
    def fn(attn_scores, enc_outputs, src_valid_lens):
        attn_weights = weights_fn(attn_scores, src_valid_lens)
        if context_fn is not None:
            return context_fn(attn_weights, enc_outputs), attn_weights
        return (attn_weights.unsqueeze(-1) * enc_outputs).sum(1), attn_weights
    return fn


def _mask(scores, lens):
    return scores.masked_fill(
        torch.arange(scores.shape[-1])[None] >= lens[:, None], -1e9
    )


def context_with_library(attn_scores, enc_outputs, src_valid_lens):
    # (B, 1, Lk)
    attn_weights = masked_softmax(attn_scores.unsqueeze(1), src_valid_lens)
    return torch.bmm(attn_weights, enc_outputs).squeeze(1), attn_weights.squeeze(1)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (context_with(lambda s, n: torch.softmax(s, dim=-1)), "forgot to mask"),
        (
            context_with(lambda s, n: torch.softmax(_mask(s, n), dim=0)),
            "softmax ran over the batch",
        ),
        (
            context_with(
                lambda s, n: torch.softmax(s, dim=-1)
                * (torch.arange(5)[None] < n[:, None])
            ),
            "before* the softmax",
        ),
        (
            context_with(
                lambda s, n: torch.softmax(_mask(s, n), dim=-1), lambda w, h: h.mean(1)
            ),
            "plain average",
        ),
        (
            context_with(
                lambda s, n: torch.softmax(_mask(s, n), dim=-1),
                lambda w, h: (w.unsqueeze(-1) * h).sum(2),
            ),
            "context must have shape",
        ),
        (
            context_with(
                lambda s, n: torch.softmax(_mask(s, n), dim=-1),
                lambda w, h: (w.unsqueeze(-1) * h).sum(1) * 2,
            ),
            "not Σ_t α_t h_t",
        ),
        (
            lambda s, h, n: (
                context_solution(s, h, n)[0],
                context_solution(s, h, n)[1].T,
            ),
            "must have shape (B, Lk)",
        ),
        (lambda s, h, n: context_solution(s, h, n)[0], "Return a pair"),
        (_not_implemented, "Your turn: replace the `raise NotImplementedError`"),
    ],
)
def test_check_context(wrong, message):
    assert check_context(context_solution)
    assert check_context(context_with_library)
    feedback = check_context(wrong)
    assert not feedback and message in feedback.message, feedback.message


# ------------------------------------------------------------------- check_decoder_step


def step_solution(attend, gru, y_prev, prev_state):
    context = attend(prev_state)  # the query is s_{t'-1}
    return gru(y_prev, context, prev_state), context


def step_luong(attend, gru, y_prev, prev_state):
    new_state = gru(y_prev, torch.zeros_like(prev_state), prev_state)
    return new_state, attend(new_state)


def step_twice(attend, gru, y_prev, prev_state):
    context = attend(prev_state)
    return gru(y_prev, context, gru(y_prev, context, prev_state)), context


@pytest.mark.parametrize(
    "wrong, message",
    [
        (step_luong, "attended with the new state s_t'"),
        (
            lambda a, g, y, s: (g(y, torch.zeros_like(s), s), a(s)),
            "did not read the context",
        ),
        (
            lambda a, g, y, s: (g(y, a(s), torch.zeros_like(s)), a(s)),
            "must update the previous state",
        ),
        (lambda a, g, y, s: (g(torch.zeros_like(y), a(s), s), a(s)), "must be y_prev"),
        (lambda a, g, y, s: (g(y, torch.zeros_like(s), s), s), "never called attend"),
        (lambda a, g, y, s: (s, a(s)), "never called gru"),
        (lambda a, g, y, s: (a(g(y, a(s), s) * 2), s), "not prev_state"),
        (step_twice, "one step is one GRU update"),
        (
            lambda a, g, y, s: (s, step_solution(a, g, y, s)[1]),
            "Return the state that gru computed",
        ),
        (lambda a, g, y, s: (step_solution(a, g, y, s)[0], s), "Return the context"),
        (lambda a, g, y, s: step_solution(a, g, y, s)[0], "Return a pair"),
    ],
)
def test_check_decoder_step(wrong, message):
    assert check_decoder_step(step_solution)
    feedback = check_decoder_step(wrong)
    assert not feedback and message in feedback.message, feedback.message


# --------------------------------------------------------------------- check_gru_update


def gru_solution(input_proj, state, weight_hh, bias_hh):
    dh = state.shape[-1]
    x_r, x_z, x_n = input_proj.split(dh, dim=-1)
    W_r, W_z, W_n = weight_hh.split(dh)
    b_r, b_z, b_n = bias_hh.split(dh)
    r = torch.sigmoid(x_r + state @ W_r.T + b_r)
    z = torch.sigmoid(x_z + state @ W_z.T + b_z)
    candidate = torch.tanh(x_n + (r * state) @ W_n.T + b_n)
    return z * state + (1 - z) * candidate


def torch_cell_update(input_proj, state, weight_hh, bias_hh):
    """PyTorch's variant: the reset gate after the product."""
    return gru_update(input_proj, state, weight_hh, bias_hh, reset_after=True)


def _gates(x, s, W, b):
    r = torch.sigmoid(x[:, :4] + s @ W[:4].T + b[:4])
    z = torch.sigmoid(x[:, 4:8] + s @ W[4:8].T + b[4:8])
    return r, z


def no_reset(x, s, W, b):
    _, z = _gates(x, s, W, b)
    return z * s + (1 - z) * torch.tanh(x[:, 8:] + s @ W[8:].T + b[8:])


def flipped_update(x, s, W, b):
    r, z = _gates(x, s, W, b)
    return (1 - z) * s + z * torch.tanh(x[:, 8:] + (r * s) @ W[8:].T + b[8:])


def swapped_gates(x, s, W, b):
    """Reads the first Ds rows as the update gate and the next as the reset gate."""
    z, r = _gates(x, s, W, b)
    return z * s + (1 - z) * torch.tanh(x[:, 8:] + (r * s) @ W[8:].T + b[8:])


def reset_after_bias_outside(x, s, W, b):
    ds = s.shape[-1]
    x_r, x_z, x_n = x.split(ds, dim=-1)
    W_r, W_z, W_n = W.split(ds)
    b_r, b_z, b_n = b.split(ds)
    r = torch.sigmoid(x_r + s @ W_r.T + b_r)
    z = torch.sigmoid(x_z + s @ W_z.T + b_z)
    return z * s + (1 - z) * torch.tanh(x_n + r * (s @ W_n.T) + b_n)


def no_state_bias(x, s, W, b):
    return gru_solution(x, s, W, torch.zeros_like(b))


def untransposed(x, s, W, b):
    """s @ W_block instead of s @ W_block.T."""
    blocks = torch.cat([block.T for block in W.split(s.shape[-1])])
    return gru_solution(x, s, blocks, b)


def gru_with_linear(input_proj, state, weight_hh, bias_hh):
    """Another correct form: F.linear on the first two blocks at once."""
    ds = state.shape[-1]
    x_r, x_z, x_s = input_proj.chunk(3, dim=-1)
    r, z = torch.sigmoid(
        torch.cat([x_r, x_z], -1)
        + nn.functional.linear(state, weight_hh[: 2 * ds], bias_hh[: 2 * ds])
    ).chunk(2, dim=-1)
    candidate = torch.tanh(
        x_s + nn.functional.linear(r * state, weight_hh[2 * ds :], bias_hh[2 * ds :])
    )
    return candidate + z * (state - candidate)


def gru_with_library(input_proj, state, weight_hh, bias_hh):
    """Another correct form: the library's update, reset before the product."""
    return gru_update(input_proj, state, weight_hh, bias_hh, reset_after=False)


@pytest.mark.parametrize("answer", [gru_solution, gru_with_linear, gru_with_library])
def test_check_gru_update_accepts_correct_forms(answer):
    feedback = check_gru_update(answer)
    assert feedback, feedback


@pytest.mark.parametrize("wrong, message", [
    (torch_cell_update, "reset gate after the matrix product"),
    (torch_cell_update, "first arXiv versions of Cho et al.'s paper"),
    (no_reset, "reset gate r is missing"),
    (flipped_update, "the convention of Bahdanau et al.'s appendix"),
    (flipped_update, "this page's convention"),
    (swapped_gates, "first Ds rows belong to the reset gate"),
    (no_state_bias, "You left out bias_hh"),
    (reset_after_bias_outside, "r ⊙ (W_ss s), with the bias outside it"),
    (untransposed, "the product is s @ W_sr.T"),
    (lambda x, s, W, b: gru_solution(x, s, W, b) + 0.1, "For the first example"),
    (lambda x, s, W, b: gru_solution(x, s, W, b)[:, :2], "must have shape (B, Ds)"),
    (lambda x, s, W, b: None, "Return the new state"),
    (_not_implemented, "Your turn: replace the `raise NotImplementedError`"),
])
def test_check_gru_update(wrong, message):
    assert check_gru_update(gru_solution)
    feedback = check_gru_update(wrong)
    assert not feedback and message in feedback.message, feedback.message


# ---------------------------------------------------------------------- check_stock_gru


def stock_gru_solution(cell):
    gru = nn.GRU(
        cell.input_size + cell.context_size, cell.num_hiddens, batch_first=True
    )
    with torch.no_grad():
        gru.weight_ih_l0.copy_(cell.weight_ih)
        gru.weight_hh_l0.copy_(cell.weight_hh)
        gru.bias_ih_l0.copy_(cell.bias_ih)
        gru.bias_hh_l0.copy_(cell.bias_hh)
    return gru


def stock_gru_d2l_order(cell):
    gru = stock_gru_solution(cell)
    with torch.no_grad():  # columns arranged for [c; y]
        gru.weight_ih_l0.copy_(
            torch.cat(
                [
                    cell.weight_ih[:, cell.input_size :],
                    cell.weight_ih[:, : cell.input_size],
                ],
                1,
            )
        )
    return gru


def stock_gru_no_bias_copy(cell):
    gru = nn.GRU(
        cell.input_size + cell.context_size, cell.num_hiddens, batch_first=True
    )
    with torch.no_grad():
        gru.weight_ih_l0.copy_(cell.weight_ih)
        gru.weight_hh_l0.copy_(cell.weight_hh)
    return gru


def stock_gru_biases_swapped(cell):
    gru = stock_gru_solution(cell)
    with torch.no_grad():
        gru.bias_ih_l0.copy_(cell.bias_hh)
        gru.bias_hh_l0.copy_(cell.bias_ih)
    return gru


def stock_gru_no_bias_hh_copy(cell):
    gru = stock_gru_solution(cell)
    with torch.no_grad():
        gru.bias_hh_l0.zero_()
    return gru


def stock_gru_load_state_dict(cell):
    """Another correct form: the cell's parameters under nn.GRU's names."""
    gru = nn.GRU(
        cell.input_size + cell.context_size, cell.num_hiddens, batch_first=True
    )
    names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
    gru.load_state_dict({f"{name}_l0": getattr(cell, name) for name in names})
    return gru


def test_check_stock_gru_accepts_load_state_dict():
    assert check_stock_gru(stock_gru_load_state_dict)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (stock_gru_d2l_order, "expect [c; y]"),
        (stock_gru_no_bias_copy, "biases are not"),
        (stock_gru_biases_swapped, "bias_ih and bias_hh are swapped"),
        (stock_gru_no_bias_hh_copy, "biases are not"),
        (
            lambda cell: nn.GRU(cell.input_size, cell.num_hiddens, batch_first=True),
            "input_size = E + context_size",
        ),
        (lambda cell: nn.GRU(5, 5), "batch_first=True"),
        (lambda cell: nn.GRU(5, 5, bias=False, batch_first=True), "bias=True"),
        (lambda cell: nn.GRU(5, 5, batch_first=True), "weight_hh_l0 differs"),
        (lambda cell: cell, "Return a torch.nn.GRU"),
        (_not_implemented, "Your turn: replace the `raise NotImplementedError`"),
    ],
)
def test_check_stock_gru(wrong, message):
    assert check_stock_gru(stock_gru_solution)
    feedback = check_stock_gru(wrong)
    assert not feedback and message in feedback.message, feedback.message


def test_the_checked_cell_is_the_library_cell():
    cell = GRUCell(3, 5, context_size=2, reset_after=True)
    gru = stock_gru_solution(cell)
    y, c, s = torch.randn(2, 3), torch.randn(2, 2), torch.randn(2, 5)
    torch.testing.assert_close(
        gru(torch.cat([y, c], -1)[:, None], s[None])[0][:, 0], cell(y, s, c)
    )



@pytest.mark.parametrize("answer", [stock_gru_solution, stock_gru_d2l_order])
def test_check_stock_gru_leaves_the_global_random_state_alone(answer):
    torch.manual_seed(123)
    state = torch.get_rng_state()
    check_stock_gru(answer)
    assert torch.equal(torch.get_rng_state(), state)

# ---------------------------------------------------------------- check_best_hypothesis


def best_solution(log_probs, lengths, alpha):
    scores = [lp / n ** alpha for lp, n in zip(log_probs, lengths)]
    return max(range(len(scores)), key=scores.__getitem__)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (
            lambda lp, n, a: max(range(len(lp)), key=lp.__getitem__),
            "highest raw log-probability",
        ),
        (
            lambda lp, n, a: max(range(len(lp)), key=lambda i: lp[i] / n[i]),
            "not by length ** alpha",
        ),
        (
            lambda lp, n, a: min(range(len(lp)), key=lambda i: lp[i] / n[i] ** a),
            "worst score",
        ),
        (lambda lp, n, a: float(best_solution(lp, n, a)), "as an int"),
        (
            lambda lp, n, a: 1 if n == [1, 3, 9] else best_solution(lp, n, a),
            "Scores are log_prob / length ** alpha",
        ),
        (_not_implemented, "Your turn: replace the `raise NotImplementedError`"),
    ],
)
def test_check_best_hypothesis(wrong, message):
    assert check_best_hypothesis(best_solution)
    assert check_best_hypothesis(
        lambda lp, n, a: torch.tensor(lp).div(torch.tensor(n).float().pow(a)).argmax()
    )
    feedback = check_best_hypothesis(wrong)
    assert not feedback and message in feedback.message, feedback.message


# --------------------------------------------------------------------------- forms,
# fixed parameters, odd answers


@pytest.mark.parametrize("form", ["list", "numpy", "float64", "float32", "float16"])
@pytest.mark.parametrize(
    "check, solution",
    [
        (check_context, context_solution),
        (check_decoder_step, step_solution),
        (check_gru_update, gru_solution),
    ],
    ids=["context", "step", "gru"],
)
def test_checkers_accept_the_solution_in_any_form(check, solution, form):
    feedback = check(in_form(solution, form))
    assert feedback, feedback


def test_check_context_accepts_a_list_pair():
    assert check_context(lambda s, h, n: list(context_solution(s, h, n)))


def test_check_context_rejects_fixed_valid_lens():
    feedback = check_context(
        lambda s, h, n: context_solution(s, h, torch.tensor([5, 3, 1]))
    )
    assert not feedback and "raised RuntimeError" in feedback.message, feedback.message


def test_check_context_rejects_a_fixed_shape():
    feedback = check_context(
        lambda s, h, n: (
            context_solution(s, h, n)[0].reshape(3, 4),
            context_solution(s, h, n)[1],
        )
    )
    assert not feedback and "raised RuntimeError" in feedback.message, feedback.message


def test_check_decoder_step_rejects_fixed_sizes():
    def fixed(attend, gru, y_prev, prev_state):
        context = attend(prev_state.reshape(2, 4))
        return gru(y_prev, context, prev_state), context
    feedback = check_decoder_step(fixed)
    assert not feedback and "raised RuntimeError" in feedback.message, feedback.message


def gru_fixed_state_size(x, s, W, b):
    """Right for Ds = 4 only: slices at 4 and 8."""
    r, z = _gates(x, s, W, b)
    return z * s + (1 - z) * torch.tanh(x[:, 8:] + (r * s) @ W[8:].T + b[8:])


def test_check_gru_update_rejects_a_fixed_state_size():
    feedback = check_gru_update(gru_fixed_state_size)
    assert not feedback and "raised RuntimeError" in feedback.message, feedback.message


def stock_gru_fixed_sizes(cell):
    gru = nn.GRU(5, 5, batch_first=True)
    with torch.no_grad():
        for ours, theirs in (
            (gru.weight_ih_l0, cell.weight_ih),
            (gru.weight_hh_l0, cell.weight_hh),
            (gru.bias_ih_l0, cell.bias_ih),
            (gru.bias_hh_l0, cell.bias_hh),
        ):
            ours.copy_(theirs)
    return gru


def test_check_stock_gru_rejects_fixed_sizes_and_accepts_float64():
    feedback = check_stock_gru(stock_gru_fixed_sizes)
    assert not feedback and "raised RuntimeError" in feedback.message, feedback.message
    assert check_stock_gru(lambda cell: stock_gru_solution(cell).double())


class BrokenGRU(nn.GRU):
    def forward(self, *args):
        raise RuntimeError("broken")


def test_check_stock_gru_reports_a_gru_that_fails_to_run():
    feedback = check_stock_gru(lambda cell: BrokenGRU(5, 5, batch_first=True))
    assert (
        not feedback
        and feedback.message
        == "Running your GRU failed: Your function raised RuntimeError: broken"
    )


@pytest.mark.parametrize("form", INDEX_FORMS)
def test_check_best_hypothesis_accepts_any_integer_form(form):
    feedback = check_best_hypothesis(in_form(best_solution, form))
    assert feedback, feedback


@pytest.mark.parametrize("fixed", [0.5, 0.75, 1.0])
def test_check_best_hypothesis_rejects_a_fixed_alpha(fixed):
    feedback = check_best_hypothesis(lambda lp, n, a: best_solution(lp, n, fixed))
    assert not feedback and "alpha" in feedback.message, feedback.message


def test_check_best_hypothesis_rejects_an_index_out_of_range():
    feedback = check_best_hypothesis(lambda lp, n, a: len(lp))
    assert not feedback and "Return an index into the 4 hypotheses" in feedback.message


ODD_ANSWERS = [None, "a string", torch.zeros(2, 7, 9), {"a": 1}, 3.5]


@pytest.mark.parametrize("answer", ODD_ANSWERS, ids=lambda a: type(a).__name__)
@pytest.mark.parametrize(
    "check",
    [
        check_context,
        check_decoder_step,
        check_gru_update,
        check_stock_gru,
        check_best_hypothesis,
    ],
)
def test_odd_answers_get_feedback_not_a_traceback(check, answer):
    feedback = check(lambda *args: answer)
    assert not feedback and str(feedback).startswith("✗")
    assert not feedback.message.startswith(
        "Your answer could not be checked"
    ), feedback.message


@pytest.mark.parametrize(
    "check",
    [
        check_context,
        check_decoder_step,
        check_gru_update,
        check_stock_gru,
        check_best_hypothesis,
    ],
)
def test_an_exception_in_the_answer_becomes_feedback(check):
    feedback = check(lambda *args: 1 / 0)
    assert not feedback and "Your function raised ZeroDivisionError" in feedback.message


@pytest.mark.parametrize(
    "check, answer",
    [
        (
            check_context,
            lambda s, h, n: (torch.zeros(3, 4), torch.zeros(3, 5), torch.zeros(1)),
        ),
        (check_decoder_step, lambda a, g, y, s: (g(y, a(s), s), "context")),
        (check_gru_update, lambda x, s, W, b: torch.zeros(3, 4, dtype=torch.complex64)),
    ],
)
def test_half_right_answers_get_feedback(check, answer):
    feedback = check(answer)
    assert not feedback and not feedback.message.startswith(
        "Your answer could not be checked"
    ), feedback.message


# --- why the weights start nearly uniform ---------------------------------------------

from attention_lib.exercises import check_why_nearly_uniform  # noqa: E402


def test_why_nearly_uniform_accepts_c_in_any_spelling():
    for answer in ("c", "C", " (c) "):
        feedback = check_why_nearly_uniform(answer)
        assert feedback and "small random weight" in feedback.message


@pytest.mark.parametrize("answer, phrase", [
    ("a", "normalises, it does not flatten"),
    ("b", "The states h_t differ"),
    ("d", "not zero"),
    (None, "Your turn: set answer"),
    ("e", "not one of the choices"),
])
def test_why_nearly_uniform_rejects(answer, phrase):
    feedback = check_why_nearly_uniform(answer)
    assert not feedback and phrase in feedback.message

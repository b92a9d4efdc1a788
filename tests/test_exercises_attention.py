"""Chapter 2's checkers accept the solutions and reject each typical mistake with the right message."""
import math

import pytest
import torch
from answer_forms import TENSOR_FORMS, in_form

from attention_lib.exercises import (Feedback, check_additive_scores, check_masked_softmax, check_nadaraya_watson,
                                     check_scaled_dot_product_attention, check_why_not_stack)


def assert_rejects(feedback, *phrases):
    assert isinstance(feedback, Feedback)
    assert not feedback, f"checker accepted a wrong answer: {feedback}"
    for phrase in phrases:
        assert phrase in feedback.message, f"{phrase!r} not in {feedback.message!r}"


def not_implemented(*args):
    raise NotImplementedError


def returns_none(*args):
    return None


# --- Nadaraya–Watson ---------------------------------------------------------------------------------

def nw(dim=1, sign=-1.0, normalise=True, bandwidth_power=2, ignore_bandwidth=False):
    def fn(x_query, x_train, y_train, bandwidth):
        bw = 1.0 if ignore_bandwidth else bandwidth
        attn_scores = sign * (x_query[:, None] - x_train[None, :]) ** 2 / (2 * bw ** bandwidth_power)
        attn_weights = torch.softmax(attn_scores, dim=dim) if normalise else torch.exp(attn_scores)
        return attn_weights @ y_train
    return fn


def test_nadaraya_watson_accepts_solution():
    assert check_nadaraya_watson(nw())


@pytest.mark.parametrize("wrong, phrase", [
    (nw(dim=0), "Wrong axis for the softmax"),
    (nw(sign=1.0), "*minus* the squared distance"),
    (nw(normalise=False), "do not sum to 1"),
    (nw(ignore_bandwidth=True), "divide the squared distance by 2σ²"),
    (nw(bandwidth_power=1), "divide the squared distance by 2σ²"),
    (not_implemented, "Not implemented yet"),
    (returns_none, "returned None"),
    (lambda xq, xt, yt, bw: (xq[:, None] * yt).sum(1), "expected"),
])
def test_nadaraya_watson_rejects(wrong, phrase):
    assert_rejects(check_nadaraya_watson(wrong), phrase)


# --- masked softmax ----------------------------------------------------------------------------------

def masked_softmax_solution(attn_scores, valid_lens):
    num_kv = attn_scores.shape[-1]
    allowed = torch.arange(num_kv)[None, None, :] < valid_lens[:, None, None]  # (B, 1, Lk)
    filled = attn_scores.masked_fill(~allowed, torch.finfo(attn_scores.dtype).min)
    return torch.softmax(filled, dim=-1) * allowed


def allowed_of(attn_scores, valid_lens):
    return torch.arange(attn_scores.shape[-1])[None, None, :] < valid_lens[:, None, None]


def mask_after_softmax(attn_scores, valid_lens):
    return torch.softmax(attn_scores, dim=-1) * allowed_of(attn_scores, valid_lens)


def wrong_axis(attn_scores, valid_lens):
    allowed = allowed_of(attn_scores, valid_lens)
    return torch.softmax(attn_scores.masked_fill(~allowed, -1e9), dim=1) * allowed


def no_mask(attn_scores, valid_lens):
    return torch.softmax(attn_scores, dim=-1)


def minus_inf_fill(attn_scores, valid_lens):
    return torch.softmax(attn_scores.masked_fill(~allowed_of(attn_scores, valid_lens), float("-inf")), dim=-1)


def d2l_style_fill(attn_scores, valid_lens):  # -1e6: fine except for rows with no valid key
    return torch.softmax(attn_scores.masked_fill(~allowed_of(attn_scores, valid_lens), -1e6), dim=-1)


def float16_overflow(attn_scores, valid_lens):  # -1e9 becomes -inf in float16
    allowed = allowed_of(attn_scores, valid_lens)
    weights = torch.softmax(attn_scores.masked_fill(~allowed, -1e9), dim=-1)
    return weights * allowed if attn_scores.dtype != torch.float16 else weights


def test_masked_softmax_accepts_solution():
    feedback = check_masked_softmax(masked_softmax_solution)
    assert feedback, feedback


@pytest.mark.parametrize("wrong, phrase", [
    (mask_after_softmax, "mask is applied after the softmax"),
    (wrong_axis, "wrong axis for the softmax"),
    (no_mask, "padding positions are given weight"),
    (minus_inf_fill, "NaN for a query with no valid key"),
    (d2l_style_fill, "uniform weights 1/Lk"),
    (float16_overflow, "float16"),
    (not_implemented, "Not implemented yet"),
    (returns_none, "returned None"),
    (lambda s, vl: s[..., :2], "should have shape (2, 3, 5)"),
    (lambda s, vl: "weights", "return the attention weights"),
])
def test_masked_softmax_rejects(wrong, phrase):
    assert_rejects(check_masked_softmax(wrong), phrase)


# --- scaled dot-product attention --------------------------------------------------------------------

def sdpa(scale="sqrt", dim=-1, return_weights=False):
    def fn(queries, keys, values):
        size = queries.shape[-1]
        factor = {"sqrt": 1 / math.sqrt(size), "none": 1.0, "d": 1 / size, "times": math.sqrt(size)}[scale]
        attn_weights = torch.softmax(queries @ keys.transpose(1, 2) * factor, dim=dim)  # (B, Lq, Lk)
        return attn_weights if return_weights else attn_weights @ values
    return fn


def test_scaled_dot_product_accepts_solution():
    assert check_scaled_dot_product_attention(sdpa())


@pytest.mark.parametrize("wrong, phrase", [
    (sdpa(scale="none"), "Missing scale"),
    (sdpa(scale="d"), "You divided by E"),
    (sdpa(scale="times"), "You multiplied by √E"),
    (sdpa(dim=1), "Wrong axis for the softmax"),
    (sdpa(scale="none", dim=1), "Wrong axis for the softmax (dim=1, the queries; use dim=-1) and the 1/√E"),
    (sdpa(return_weights=True), "those are the weights"),
    (lambda q, k, v: q @ k.transpose(1, 2) @ v, "differs from softmax"),
    (not_implemented, "Not implemented yet"),
    (lambda q, k, v: 1 / 0, "ZeroDivisionError"),
])
def test_scaled_dot_product_rejects(wrong, phrase):
    assert_rejects(check_scaled_dot_product_attention(wrong), phrase)


# --- additive scores ---------------------------------------------------------------------------------

def additive_solution(queries, keys, W_q, W_k, w_v):
    features = (queries @ W_q.T).unsqueeze(2) + (keys @ W_k.T).unsqueeze(1)  # (B, Lq, Lk, Hd)
    return torch.tanh(features) @ w_v  # (B, Lq, Lk)


def test_additive_scores_accepts_solution():
    assert check_additive_scores(additive_solution)


@pytest.mark.parametrize("wrong, phrase", [
    (lambda q, k, Wq, Wk, wv: ((q @ Wq.T).unsqueeze(2) + (k @ Wk.T).unsqueeze(1)) @ wv, "tanh is missing"),
    (lambda q, k, Wq, Wk, wv: torch.tanh(((q @ Wq.T).unsqueeze(2) + (k @ Wk.T).unsqueeze(1)) @ wv),
     "The tanh goes inside"),
    (lambda q, k, Wq, Wk, wv: torch.tanh((q @ Wq.T).unsqueeze(1) + (k @ Wk.T).unsqueeze(2)) @ wv,
     "queries and keys are swapped"),
    (lambda q, k, Wq, Wk, wv: torch.tanh((q @ Wq.T).unsqueeze(2) + (k @ Wk.T).unsqueeze(1)),
     "apply w_v to the last axis"),
    (lambda q, k, Wq, Wk, wv: torch.softmax(additive_solution(q, k, Wq, Wk, wv), dim=-1), "You returned weights"),
    (lambda q, k, Wq, Wk, wv: torch.tanh((q @ Wk.T).unsqueeze(2) + (k @ Wq.T).unsqueeze(1)) @ wv, "raised"),
    (lambda q, k, Wq, Wk, wv: additive_solution(q, k, Wq, Wk, wv) + 1, "Your scores differ"),
    (not_implemented, "Not implemented yet"),
])
def test_additive_scores_rejects(wrong, phrase):
    assert_rejects(check_additive_scores(wrong), phrase)


# --- the multiple-choice question --------------------------------------------------------------------

def test_why_not_stack_accepts_b_in_any_spelling():
    for answer in ("b", "B", " (b) "):
        assert check_why_not_stack(answer)


@pytest.mark.parametrize("answer, phrase", [
    ("a", "Memory is not the obstacle"), ("c", "row by row"), ("d", "fixed for the whole sentence"),
    (None, "Not answered yet"), ("e", "not one of the choices"),
])
def test_why_not_stack_rejects(answer, phrase):
    assert_rejects(check_why_not_stack(answer), phrase)


# --- any form of a right answer; fixed parameters; odd answers ---------------------------------------

SOLUTIONS = {
    "nadaraya_watson": (check_nadaraya_watson, nw()),
    "masked_softmax": (check_masked_softmax, masked_softmax_solution),
    "scaled_dot_product_attention": (check_scaled_dot_product_attention, sdpa()),
    "additive_scores": (check_additive_scores, additive_solution),
}


@pytest.mark.parametrize("form", TENSOR_FORMS)
@pytest.mark.parametrize("name", SOLUTIONS)
def test_checkers_accept_the_solution_in_any_form(name, form):
    check, solution = SOLUTIONS[name]
    feedback = check(in_form(solution, form))
    assert feedback, feedback


@pytest.mark.parametrize("fixed, phrase", [(1.0, "divide the squared distance by 2σ²"),
                                           (0.5, "that of another σ: use the `bandwidth` argument"),
                                           (2.0, "that of another σ")])
def test_nadaraya_watson_rejects_a_fixed_bandwidth(fixed, phrase):
    assert_rejects(check_nadaraya_watson(lambda xq, xt, yt, bw: nw()(xq, xt, yt, fixed)), phrase)


def test_masked_softmax_rejects_fixed_valid_lens():
    fixed = lambda s, vl: masked_softmax_solution(s, torch.tensor([2, 4]))  # noqa: E731
    assert_rejects(check_masked_softmax(fixed), "a sentence with no valid key")


def test_scaled_dot_product_rejects_a_fixed_scale():
    def divides_by_four(queries, keys, values):  # √16, right for the first case only
        return torch.softmax(queries @ keys.transpose(1, 2) / 4, dim=-1) @ values
    assert_rejects(check_scaled_dot_product_attention(divides_by_four), "scale is that of E = 16", "here E = 9")


def test_additive_scores_rejects_fixed_sizes():
    fixed = lambda q, k, Wq, Wk, wv: additive_solution(q, k, Wq, Wk, wv).reshape(2, 3, 4)  # noqa: E731
    assert_rejects(check_additive_scores(fixed), "raised RuntimeError")


ODD_ANSWERS = [None, "weights", torch.zeros(7, 1), {"weights": 1}, [[1, 2], [3]], object()]


@pytest.mark.parametrize("answer", ODD_ANSWERS, ids=lambda a: type(a).__name__)
@pytest.mark.parametrize("name", SOLUTIONS)
def test_odd_answers_get_feedback_not_a_traceback(name, answer):
    check, _ = SOLUTIONS[name]
    feedback = check(lambda *args: answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert any(phrase in feedback.message for phrase in ("returned None", "should have shape (", "returned the str",
                                                         "returned a dict", "returned a list", "returned a object")), \
        feedback.message


@pytest.mark.parametrize("name", SOLUTIONS)
def test_an_exception_in_the_answer_becomes_feedback(name):
    check, _ = SOLUTIONS[name]
    assert_rejects(check(lambda *args: [][1]), "Your function raised IndexError")


@pytest.mark.parametrize("answer", ["b.", "b)", "B "])
def test_why_not_stack_accepts_punctuation(answer):
    assert check_why_not_stack(answer)


@pytest.mark.parametrize("answer", [2, ["b"], 1.5, torch.tensor(1)])
def test_why_not_stack_odd_answers(answer):
    assert_rejects(check_why_not_stack(answer), "not one of the choices")

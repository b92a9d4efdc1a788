"""Chapter 2's checkers accept the solutions and reject each typical mistake with the
right message."""
import math

import pytest
import torch
from answer_forms import NUMBER_FORMS, TENSOR_FORMS, in_form

from attention_lib.exercises import (
    Feedback,
    check_additive_scores,
    check_dot_product_variance,
    check_kernel_as_dot_product,
    check_masked_softmax,
    check_nadaraya_watson,
    check_scaled_dot_product_attention,
    check_temperature_limits,
    check_why_not_stack,
)


def assert_rejects(feedback, *phrases):
    assert isinstance(feedback, Feedback)
    assert not feedback, f"checker accepted a wrong answer: {feedback}"
    for phrase in phrases:
        assert phrase in feedback.message, f"{phrase!r} not in {feedback.message!r}"


def not_implemented(*args):
    raise NotImplementedError


def returns_none(*args):
    return None


# --- Nadaraya–Watson ------------------------------------------------------------------

def nw(dim=1, sign=-1.0, normalise=True, bandwidth_power=2, ignore_bandwidth=False):
    def fn(x_query, x_train, y_train, bandwidth):
        bw = 1.0 if ignore_bandwidth else bandwidth
        attn_scores = (
            sign
            * (x_query[:, None] - x_train[None, :]) ** 2
            / (2 * bw**bandwidth_power)
        )
        attn_weights = (
            torch.softmax(attn_scores, dim=dim) if normalise else torch.exp(attn_scores)
        )
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
    (not_implemented, "Your turn: replace the `raise NotImplementedError`"),
    (returns_none, "returned None"),
    (lambda xq, xt, yt, bw: (xq[:, None] * yt).sum(1), "expected"),
])
def test_nadaraya_watson_rejects(wrong, phrase):
    assert_rejects(check_nadaraya_watson(wrong), phrase)


# --- masked softmax -------------------------------------------------------------------

def masked_softmax_solution(attn_scores, valid_lens):
    num_kv = attn_scores.shape[-1]
    # (B, 1, Lk)
    allowed = torch.arange(num_kv)[None, None, :] < valid_lens[:, None, None]
    filled = attn_scores.masked_fill(~allowed, torch.finfo(attn_scores.dtype).min)
    return torch.softmax(filled, dim=-1) * allowed


def allowed_of(attn_scores, valid_lens):
    return (
        torch.arange(attn_scores.shape[-1])[None, None, :] < valid_lens[:, None, None]
    )


def mask_after_softmax(attn_scores, valid_lens):
    return torch.softmax(attn_scores, dim=-1) * allowed_of(attn_scores, valid_lens)


def wrong_axis(attn_scores, valid_lens):
    allowed = allowed_of(attn_scores, valid_lens)
    return torch.softmax(attn_scores.masked_fill(~allowed, -1e9), dim=1) * allowed


def no_mask(attn_scores, valid_lens):
    return torch.softmax(attn_scores, dim=-1)


def minus_inf_fill(attn_scores, valid_lens):
    return torch.softmax(
        attn_scores.masked_fill(~allowed_of(attn_scores, valid_lens), float("-inf")),
        dim=-1,
    )


# -1e6: fine except for rows with no valid key
def d2l_style_fill(attn_scores, valid_lens):
    return torch.softmax(
        attn_scores.masked_fill(~allowed_of(attn_scores, valid_lens), -1e6), dim=-1
    )


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
    (not_implemented, "Your turn: replace the `raise NotImplementedError`"),
    (returns_none, "returned None"),
    (lambda s, vl: s[..., :2], "should have shape (2, 3, 5)"),
    (lambda s, vl: "weights", "return the attention weights"),
])
def test_masked_softmax_rejects(wrong, phrase):
    assert_rejects(check_masked_softmax(wrong), phrase)


# --- scaled dot-product attention -----------------------------------------------------

def sdpa(scale="sqrt", dim=-1, return_weights=False):
    def fn(queries, keys, values):
        size = queries.shape[-1]
        factor = {
            "sqrt": 1 / math.sqrt(size),
            "none": 1.0,
            "d": 1 / size,
            "times": math.sqrt(size),
        }[scale]
        # (B, Lq, Lk)
        attn_weights = torch.softmax(queries @ keys.transpose(1, 2) * factor, dim=dim)
        return attn_weights if return_weights else attn_weights @ values
    return fn


def test_scaled_dot_product_accepts_solution():
    assert check_scaled_dot_product_attention(sdpa())


@pytest.mark.parametrize(
    "wrong, phrase",
    [
        (sdpa(scale="none"), "Missing scale"),
        (sdpa(scale="d"), "You divided by D"),
        (sdpa(scale="times"), "You multiplied by √D"),
        (sdpa(dim=1), "Wrong axis for the softmax"),
        (
            sdpa(scale="none", dim=1),
            "Wrong axis for the softmax (dim=1, the queries; use dim=-1) and the 1/√D",
        ),
        (sdpa(return_weights=True), "those are the weights"),
        (lambda q, k, v: q @ k.transpose(1, 2) @ v, "differs from softmax"),
        (not_implemented, "Your turn: replace the `raise NotImplementedError`"),
        (lambda q, k, v: 1 / 0, "ZeroDivisionError"),
    ],
)
def test_scaled_dot_product_rejects(wrong, phrase):
    assert_rejects(check_scaled_dot_product_attention(wrong), phrase)


# --- Var(qᵀk) -------------------------------------------------------------------------

def test_dot_product_variance_accepts_the_derivation():
    feedback = check_dot_product_variance(lambda size, sigma: size * sigma ** 4)
    assert feedback, feedback


# the checker's answer is the true variance
def test_dot_product_variance_agrees_with_sampling():
    gen = torch.Generator().manual_seed(0)
    for size, sigma in [(16, 1.0), (64, 0.5), (3, 2.0)]:
        q = sigma * torch.randn(200_000, size, generator=gen, dtype=torch.float64)
        k = sigma * torch.randn(200_000, size, generator=gen, dtype=torch.float64)
        assert (q * k).sum(-1).var().item() == pytest.approx(size * sigma**4, rel=0.03)


@pytest.mark.parametrize("wrong, phrase", [
    (lambda d, s: d * s ** 2, "D·σ²: right only for σ = 1"),
    (lambda d, s: d ** 2 * s ** 4, "D²·σ⁴"),
    (lambda d, s: s ** 4, "variance of one product"),
    (lambda d, s: math.sqrt(d) * s ** 2, "standard deviation"),
    (lambda d, s: d, "D alone"),
    (lambda d, s: d * s, "grows like σ"),
    (lambda d, s: 2 * d * s ** 4, "Twice too large"),
    (lambda d, s: d * s ** 3, "do not follow one formula"),
    (not_implemented, "Your turn: replace the `raise NotImplementedError`"),
    (returns_none, "returned None"),
    (lambda d, s: [d, s], "as one number"),
    (lambda d, s: "Dσ⁴", "as one number"),
])
def test_dot_product_variance_rejects(wrong, phrase):
    assert_rejects(check_dot_product_variance(wrong), phrase)


@pytest.mark.parametrize("form", NUMBER_FORMS)
def test_dot_product_variance_accepts_any_number_form(form):
    feedback = check_dot_product_variance(
        in_form(lambda size, sigma: float(size * sigma**4), form)
    )
    assert feedback, feedback


# --- Gaussian-kernel regression as dot-product attention ------------------------------

def kernel_as_dot(
    scale_of=lambda bandwidth, size: 1 / bandwidth**2, dim=-1, return_weights=False
):
    def fn(queries, keys, values, bandwidth):
        scale = scale_of(bandwidth, queries.shape[-1])
        # (B, Lq, Lk)
        attn_weights = torch.softmax(queries @ keys.transpose(1, 2) * scale, dim=dim)
        return attn_weights if return_weights else attn_weights @ values
    return fn


def gaussian_kernel(queries, keys, values, bandwidth):
    # (B, Lq, Lk)
    squared_distances = ((queries[:, :, None, :] - keys[:, None, :, :]) ** 2).sum(-1)
    return torch.softmax(-squared_distances / (2 * bandwidth ** 2), dim=-1) @ values


def kernel_with_norm(weight=0.5):
    """softmax((qᵀk - weight·kᵀk)/σ²)V: dot products only; weight ½ is the kernel."""
    def fn(queries, keys, values, bandwidth):
        norms = (keys * keys).sum(-1)[:, None, :]  # (B, 1, Lk): kᵀk
        attn_scores = (queries @ keys.transpose(1, 2) - weight * norms) / bandwidth**2
        return torch.softmax(attn_scores, dim=-1) @ values
    return fn


def test_kernel_as_dot_product_accepts_solution():
    feedback = check_kernel_as_dot_product(kernel_as_dot())
    assert feedback, feedback
    assert "no longer the kernel" in feedback.message


@pytest.mark.parametrize("answer", [
    kernel_with_norm(),  # the exact kernel, in dot products
    gaussian_kernel,  # the same output from distances: the checker sees outputs only
    lambda q, k, v, bw: torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=-(k * k).sum(-1)[:, None, :] / (2 * bw**2), scale=bw**-2),
])
def test_kernel_as_dot_product_accepts_the_exact_kernel(answer):
    feedback = check_kernel_as_dot_product(answer)
    assert feedback, feedback
    assert "exact for keys of any norm" in feedback.message
    assert "computed from distances" not in feedback.message


def test_kernel_as_dot_product_accepts_sdpa_with_the_temperature():
    feedback = check_kernel_as_dot_product(
        lambda q, k, v, bw: torch.nn.functional.scaled_dot_product_attention(
            q, k, v, scale=bw**-2))
    assert feedback, feedback


# the identity the exercise derives
def test_kernel_equals_dot_product_on_unit_norm_keys():
    gen = torch.Generator().manual_seed(1)
    queries = 3 * torch.randn(2, 4, 5, generator=gen, dtype=torch.float64)
    keys = torch.nn.functional.normalize(
        torch.randn(2, 7, 5, generator=gen, dtype=torch.float64), dim=-1
    )
    values = torch.randn(2, 7, 3, generator=gen, dtype=torch.float64)
    for bandwidth in (0.3, 1.0, 4.0):
        torch.testing.assert_close(gaussian_kernel(queries, keys, values, bandwidth),
                                   kernel_as_dot()(queries, keys, values, bandwidth))
    # keys of different norms
    longer = keys * torch.linspace(0.5, 2, 7, dtype=torch.float64)[:, None]
    assert not torch.allclose(
        gaussian_kernel(queries, longer, values, 1.0),
        kernel_as_dot()(queries, longer, values, 1.0),
    )


@pytest.mark.parametrize(
    "wrong, phrase",
    [
        (kernel_as_dot(lambda bw, d: 1 / (2 * bw**2)), "You kept the kernel's 1/2"),
        (kernel_as_dot(lambda bw, d: 1 / bw), "enters squared"),
        (kernel_as_dot(lambda bw, d: 1.0), "bandwidth is missing"),
        (
            kernel_as_dot(lambda bw, d: 1 / math.sqrt(d)),
            "1/√D is the scaled dot product's",
        ),
        (kernel_as_dot(lambda bw, d: bw**2), "do not multiply"),
        (kernel_as_dot(lambda bw, d: -1 / bw**2), "Mind the sign"),
        (kernel_as_dot(dim=1), "Wrong axis for the softmax"),
        (kernel_as_dot(return_weights=True), "those are the weights"),
        (kernel_with_norm(1.0), "but in full"),
        (kernel_with_norm(-0.5), "with the wrong sign"),
        (
            lambda q, k, v, bw: kernel_as_dot()(q, k, v, bw) + 1,
            "differs from softmax(QKᵀ/σ²)V",
        ),
        (not_implemented, "Your turn: replace the `raise NotImplementedError`"),
    ],
)
def test_kernel_as_dot_product_rejects(wrong, phrase):
    assert_rejects(check_kernel_as_dot_product(wrong), phrase)


def test_kernel_as_dot_product_rejects_a_fixed_bandwidth():
    assert_rejects(
        check_kernel_as_dot_product(lambda q, k, v, bw: kernel_as_dot()(q, k, v, 0.8)),
        "σ = 1.5",
    )


# --- the limits of a temperature ------------------------------------------------------

def limits(cold="max", hot="uniform"):
    def fn(scores):
        n = scores.shape[0]
        on_max = (scores == scores.max()).double()
        weights = {
            "max": on_max / on_max.sum(),
            "argmax": torch.nn.functional.one_hot(scores.argmax(), n).double(),
            "min": (scores == scores.min()).double() / (scores == scores.min()).sum(),
            "uniform": torch.full((n,), 1 / n, dtype=torch.float64),
            "softmax": torch.softmax(scores, dim=0),
            "zeros": torch.zeros(n, dtype=torch.float64),
            "unnormalised": on_max,
            "other": torch.linspace(0, 1, n, dtype=torch.float64),
        }
        return weights[cold], weights[hot]
    return fn


def test_temperature_limits_accepts_solution():
    feedback = check_temperature_limits(limits())
    assert feedback, feedback


# a tiny and a huge τ are fine answers too
def test_temperature_limits_accepts_a_numerical_limit():
    feedback = check_temperature_limits(
        lambda s: (torch.softmax(s / 1e-6, 0), torch.softmax(s / 1e9, 0))
    )
    assert feedback, feedback


@pytest.mark.parametrize("wrong, phrase", [
    (limits(cold="uniform", hot="max"), "swapped the limits"),
    (limits(cold="min"), "*largest* score, not the smallest"),
    (limits(cold="softmax"), "softmax at τ = 1, not its limit as τ → 0"),
    (limits(cold="uniform"), "not uniform"),
    (limits(cold="argmax"), "tie for the largest score"),
    (limits(cold="other"), "do not sum to 1"),
    (limits(hot="softmax"), "softmax at τ = 1, not its limit as τ → ∞"),
    (limits(hot="zeros"), "do not vanish"),
    (limits(hot="max"), "flattens the weights"),
    (limits(hot="other"), "expected [0.25, 0.25, 0.25, 0.25] as τ → ∞"),
    (lambda s: (s, s, s), "Return a pair"),
    (lambda s: (s[:2], s[:2]), "shape (4,)"),
    (not_implemented, "Your turn: replace the `raise NotImplementedError`"),
])
def test_temperature_limits_rejects(wrong, phrase):
    assert_rejects(check_temperature_limits(wrong), phrase)


@pytest.mark.parametrize("form", TENSOR_FORMS)
def test_temperature_limits_accepts_any_form(form):
    feedback = check_temperature_limits(in_form(limits(), form))
    assert feedback, feedback


# --- additive scores ------------------------------------------------------------------

def additive_solution(queries, keys, W_q, W_k, w_v):
    # (B, Lq, Lk, Da)
    features = (queries @ W_q.T).unsqueeze(2) + (keys @ W_k.T).unsqueeze(1)
    return torch.tanh(features) @ w_v  # (B, Lq, Lk)


def test_additive_scores_accepts_solution():
    assert check_additive_scores(additive_solution)


@pytest.mark.parametrize(
    "wrong, phrase",
    [
        (
            lambda q, k, Wq, Wk, wv: ((q @ Wq.T).unsqueeze(2) + (k @ Wk.T).unsqueeze(1))
            @ wv,
            "tanh is missing",
        ),
        (
            lambda q, k, Wq, Wk, wv: torch.tanh(
                ((q @ Wq.T).unsqueeze(2) + (k @ Wk.T).unsqueeze(1)) @ wv
            ),
            "The tanh goes inside",
        ),
        (
            lambda q, k, Wq, Wk, wv: torch.tanh(
                (q @ Wq.T).unsqueeze(1) + (k @ Wk.T).unsqueeze(2)
            )
            @ wv,
            "queries and keys are swapped",
        ),
        (
            lambda q, k, Wq, Wk, wv: torch.tanh(
                (q @ Wq.T).unsqueeze(2) + (k @ Wk.T).unsqueeze(1)
            ),
            "apply w_v to the last axis",
        ),
        (
            lambda q, k, Wq, Wk, wv: torch.softmax(
                additive_solution(q, k, Wq, Wk, wv), dim=-1
            ),
            "You returned weights",
        ),
        (
            lambda q, k, Wq, Wk, wv: torch.tanh(
                (q @ Wk.T).unsqueeze(2) + (k @ Wq.T).unsqueeze(1)
            )
            @ wv,
            "raised",
        ),
        (
            lambda q, k, Wq, Wk, wv: additive_solution(q, k, Wq, Wk, wv) + 1,
            "Your scores differ",
        ),
        (not_implemented, "Your turn: replace the `raise NotImplementedError`"),
    ],
)
def test_additive_scores_rejects(wrong, phrase):
    assert_rejects(check_additive_scores(wrong), phrase)


# --- the multiple-choice question -----------------------------------------------------

def test_why_not_stack_accepts_b_in_any_spelling():
    for answer in ("b", "B", " (b) "):
        assert check_why_not_stack(answer)


@pytest.mark.parametrize(
    "answer, phrase",
    [
        ("a", "Memory is not the obstacle"),
        ("c", "row by row"),
        ("d", "fixed for the whole sentence"),
        (None, "Your turn: set answer"),
        ("e", "not one of the choices"),
    ],
)
def test_why_not_stack_rejects(answer, phrase):
    assert_rejects(check_why_not_stack(answer), phrase)


# --- any form of a right answer; fixed parameters; odd answers ------------------------

SOLUTIONS = {
    "nadaraya_watson": (check_nadaraya_watson, nw()),
    "masked_softmax": (check_masked_softmax, masked_softmax_solution),
    "scaled_dot_product_attention": (check_scaled_dot_product_attention, sdpa()),
    "additive_scores": (check_additive_scores, additive_solution),
    "kernel_as_dot_product": (check_kernel_as_dot_product, kernel_as_dot()),
}


@pytest.mark.parametrize("form", TENSOR_FORMS)
@pytest.mark.parametrize("name", SOLUTIONS)
def test_checkers_accept_the_solution_in_any_form(name, form):
    check, solution = SOLUTIONS[name]
    feedback = check(in_form(solution, form))
    assert feedback, feedback


@pytest.mark.parametrize(
    "fixed, phrase",
    [
        (1.0, "divide the squared distance by 2σ²"),
        (0.5, "that of another σ: use the `bandwidth` argument"),
        (2.0, "that of another σ"),
    ],
)
def test_nadaraya_watson_rejects_a_fixed_bandwidth(fixed, phrase):
    assert_rejects(
        check_nadaraya_watson(lambda xq, xt, yt, bw: nw()(xq, xt, yt, fixed)), phrase
    )


def test_masked_softmax_rejects_fixed_valid_lens():
    fixed = lambda s, vl: masked_softmax_solution(s, torch.tensor([2, 4]))  # noqa: E731
    assert_rejects(check_masked_softmax(fixed), "a sentence with no valid key")


def test_scaled_dot_product_rejects_a_fixed_scale():
    def divides_by_four(queries, keys, values):  # √16, right for the first case only
        return torch.softmax(queries @ keys.transpose(1, 2) / 4, dim=-1) @ values
    assert_rejects(
        check_scaled_dot_product_attention(divides_by_four),
        "scale is that of D = 16",
        "here D = 9",
    )


def test_additive_scores_rejects_fixed_sizes():
    fixed = lambda q, k, Wq, Wk, wv: additive_solution(q, k, Wq, Wk, wv).reshape(
        2, 3, 4
    )  # noqa: E731
    assert_rejects(check_additive_scores(fixed), "raised RuntimeError")


ODD_ANSWERS = [
    None,
    "weights",
    torch.zeros(7, 1),
    {"weights": 1},
    [[1, 2], [3]],
    object(),
]


@pytest.mark.parametrize("answer", ODD_ANSWERS, ids=lambda a: type(a).__name__)
@pytest.mark.parametrize("name", SOLUTIONS)
def test_odd_answers_get_feedback_not_a_traceback(name, answer):
    check, _ = SOLUTIONS[name]
    feedback = check(lambda *args: answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert any(
        phrase in feedback.message
        for phrase in (
            "returned None",
            "should have shape (",
            "returned the str",
            "returned a dict",
            "returned a list",
            "returned a object",
        )
    ), feedback.message


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

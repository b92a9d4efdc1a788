"""The shared machinery of the checkers: reading answers in any form, dtype tolerances,
no tracebacks."""
import numpy as np
import pytest
import torch

from attention_lib.exercises import Feedback, check_bleu, check_preprocess
from attention_lib.exercises._feedback import (
    checker,
    close,
    close_where_defined,
    diagnose,
    diagnose_numbers,
    read_index,
    read_number,
    read_tensor,
    read_tensors,
    read_text,
    read_tokens,
    run_safely,
    tolerance,
)

EXPECTED = torch.tensor([[0.25, 0.75], [1.0, 0.0]])


@pytest.mark.parametrize(
    "answer",
    [
        EXPECTED,
        EXPECTED.double(),
        EXPECTED.half(),
        EXPECTED.numpy(),
        EXPECTED.tolist(),
        tuple(EXPECTED.tolist()),
        list(EXPECTED.unbind(0)),
        EXPECTED.clone().requires_grad_(),
        np.float16(EXPECTED.numpy()),
    ],
)
def test_read_tensor_reads_every_form_of_numbers(answer):
    tensor, error = read_tensor(answer, "weights", (2, 2))
    assert error is None and close(tensor, EXPECTED)


@pytest.mark.parametrize(
    "answer, phrase",
    [
        (None, "returned None: return the weights"),
        ("0.25 0.75", "returned the str '0.25 0.75'"),
        ({"w": 1}, "returned a dict of length 1"),
        ([[1, 2], [3]], "returned a list of length 2"),
        (["a", "b"], "returned a list of length 2"),
        (object(), "returned a object"),
        (torch.zeros(2, 3), "should have shape (2, 2), yours has shape (2, 3)"),
        (torch.zeros(2, 2, dtype=torch.complex64), "complex numbers"),
    ],
)
def test_read_tensor_names_what_it_got(answer, phrase):
    tensor, error = read_tensor(answer, "weights", (2, 2))
    assert (
        tensor is None
        and isinstance(error, Feedback)
        and not error
        and phrase in error.message
    )


@pytest.mark.parametrize(
    "dtype, accepted_error, rejected_error",
    [
        (torch.float64, 5e-8, 1e-5),
        (torch.float32, 5e-6, 1e-3),
        (torch.float16, 5e-3, 5e-2),
    ],
)
def test_close_allows_each_dtype_its_rounding_and_no_more(
    dtype, accepted_error, rejected_error
):
    expected = torch.tensor([0.5, 0.25], dtype=torch.float64)
    assert close((expected + accepted_error).to(dtype), expected)
    assert not close((expected + rejected_error).to(dtype), expected)


def test_tolerance_is_that_of_the_least_precise_dtype_and_exact_for_integers():
    assert tolerance(torch.zeros(1, dtype=torch.float16), torch.zeros(1)) == tolerance(
        torch.zeros(1).half()
    )
    assert tolerance(torch.zeros(1, dtype=torch.long)) == (0.0, 0.0)
    assert not close(torch.tensor([1, 2]), torch.tensor([1, 3]))


@pytest.mark.parametrize(
    "answer",
    [
        0.5,
        np.float64(0.5),
        np.float32(0.5),
        torch.tensor(0.5),
        torch.tensor([0.5]),
        torch.tensor(0.5, dtype=torch.float16),
        [0.5],
        np.array([[0.5]]),
    ],
)
def test_read_number(answer):
    number, error = read_number(answer, "score")
    assert error is None and number.shape == () and float(number) == 0.5


@pytest.mark.parametrize(
    "answer, phrase",
    [
        (None, "returned None"),
        ("0.5", "as one number, got the str"),
        (True, "got the bool True"),
        ([0.5, 0.5], "a list of length 2"),
        (torch.zeros(2), "shape (2,)"),
    ],
)
def test_read_number_names_what_it_got(answer, phrase):
    number, error = read_number(answer, "score")
    assert number is None and phrase in error.message


@pytest.mark.parametrize(
    "answer",
    [2, np.int64(2), np.int32(2), torch.tensor(2), torch.tensor([2]), np.array([2])],
)
def test_read_index(answer):
    assert read_index(answer, "index") == (2, None)


@pytest.mark.parametrize(
    "answer", [2.0, np.float64(2.0), torch.tensor(2.0), True, None, "2", [2]]
)
def test_read_index_refuses_what_cannot_index_a_list(answer):
    index, error = read_index(answer, "index")
    assert index is None and "Return the index as an int" in error.message


def test_read_tokens_reads_whole_floats_and_names_fractions():
    tokens, error = read_tokens([5.0, 6.0], "indices", dim=1)
    assert error is None and tokens.dtype == torch.long and tokens.tolist() == [5, 6]
    _, error = read_tokens([5.5, 6.0], "indices", dim=1)
    assert "whole numbers" in error.message and "5.5" in error.message
    _, error = read_tokens([[5, 6]], "indices", dim=1)
    assert "with 1 dimension" in error.message


def test_read_text_and_read_tensors():
    assert read_text("va !", "text") == ("va !", None)
    assert "as a str" in read_text(["va", "!"], "text")[1].message
    _, error = read_tensors(torch.zeros(2), ("context", "attn_weights"))
    assert "Return a pair (context, attn_weights)" in error.message
    _, error = read_tensors((torch.zeros(2), None), ("context", "attn_weights"))
    assert (
        error.message
        == "attn_weights: Your function returned None: return the attn_weights."
    )


def test_run_safely_and_a_checker_given_something_that_is_not_a_function():
    assert run_safely(len, [1, 2]) == (2, None)
    assert "Pass your function itself" in check_preprocess("go .").message
    assert "Pass your function itself" in check_bleu(None).message


def test_checker_turns_any_failure_while_checking_into_feedback():
    @checker
    def check_something(fn):
        return Feedback.ok() if fn()[0] == 1 else Feedback.wrong("no")

    assert check_something(lambda: [1])
    # int is not subscriptable: the checker itself fails
    feedback = check_something(lambda: 5)
    assert not feedback and feedback.message.startswith(
        "Your answer could not be checked (TypeError:"
    )


# ------------------------------------------------------------------- how feedback looks


def test_feedback_shows_a_mark_that_ordinary_fonts_draw_in_text_and_html():
    """✓ / ✗ (Dingbats, in DejaVu and the system fonts), not emoji (an emoji font)."""
    right, wrong = Feedback.ok("Correct: yes."), Feedback.wrong("No: the softmax axis.")
    assert str(right) == "✓ Correct: yes." and str(wrong) == "✗ No: the softmax axis."
    assert "✓" in right._repr_html_() and "✗" in wrong._repr_html_()
    for feedback in (right, wrong):
        shown = str(feedback) + feedback._repr_html_()
        # No emoji (pictographs, dingbats drawn as emoji) or variation selectors.
        assert not any(ord(c) >= 0x1F000 or c in "\u2705\u274c\ufe0f" for c in shown)


def test_the_placeholder_is_a_neutral_note_not_an_error():
    def starter(*args):
        raise NotImplementedError

    _, feedback = run_safely(starter, 1)
    assert not feedback and feedback.todo and feedback.state == "todo"
    assert str(feedback).startswith(
        "Your turn: replace the `raise NotImplementedError`"
    )
    assert "✗" not in str(feedback) and "✗" not in feedback._repr_html_()
    assert "feedback-todo" in feedback._repr_html_()
    assert "#cf222e" not in feedback._repr_html_()  # not the red of a wrong answer
    assert Feedback.wrong("x").state == "wrong" and Feedback.ok().state == "passed"


def test_code_in_a_message_shows_as_code_not_as_backticks():
    shown = Feedback.wrong("Use `x <= 1` in `f`.")._repr_html_()
    assert "`" not in shown
    assert "<code>x &lt;= 1</code> in <code>f</code>." in shown
    # an unpaired backtick is left as it is, escaped text and all
    assert "a ` b &amp; c" in Feedback.wrong("a ` b & c")._repr_html_()


def test_pytorchs_own_not_implemented_error_is_an_error_not_the_placeholder():
    """`-mask` on a bool tensor raises NotImplementedError with a message: the reader
    has written code, so they must see the error, not "Your turn"."""
    import torch

    _, feedback = run_safely(lambda mask: -mask, torch.tensor([True, False]))
    assert not feedback and not feedback.todo and "NotImplementedError" in str(feedback)


def test_an_error_in_the_readers_code_is_still_an_error():
    _, feedback = run_safely(lambda: 1 / 0)
    assert not feedback and not feedback.todo and str(feedback).startswith("✗ ")
    assert (
        "ZeroDivisionError" in feedback.message and "#cf222e" in feedback._repr_html_()
    )


# --- diagnose: cases, a reference and named mistakes as data --------------------------

CASES = [(torch.tensor([1.0, 2.0, 3.0]),), (torch.tensor([[0.5, -1.0], [2.0, 4.0]]),)]
MISTAKES = [
    (lambda x: 2 * x, "you doubled it."),
    (lambda x: (x * x).T if x.dim() == 2 else None,
     lambda x: f"transposed, {x.dim()}-d."),
]


def check_square(fn):
    return diagnose(fn, CASES, lambda x: x * x, MISTAKES, what="squares",
                    where=lambda x: f"For shape {tuple(x.shape)}", correct="Right.")


@pytest.mark.parametrize(
    "answer, message",
    [
        (lambda x: x**2, "Right."),
        (lambda x: (x * x).tolist(), "Right."),
        (lambda x: 2 * x, "For shape (3,): you doubled it."),
        (lambda x: (x * x).T if x.dim() == 2 else x * x, "For shape (2, 2): transposed,"
         " 2-d."),
        (lambda x: x**3, "For shape (3,): your squares differ from the expected ones:"
         " the first values should be [1.0, 4.0, 9.0], yours are [1.0, 8.0, 27.0]."),
        (lambda x: (x * x)[:2], "For shape (3,): The squares should have shape (3,),"
         " yours has shape (2,)."),
        (lambda x: None, "Your function returned None: return the squares."),
    ],
)
def test_diagnose_names_the_first_matching_mistake_else_what_differs(answer, message):
    assert check_square(answer).message == message


def test_diagnose_passes_copies_and_keeps_the_starter_and_errors_as_feedback():
    def mutating(x):
        x.zero_()
        return x

    assert not check_square(mutating) and CASES[0][0].tolist() == [1.0, 2.0, 3.0]

    def starter(x):
        raise NotImplementedError

    assert check_square(starter).todo
    feedback = diagnose(lambda x: 1 / 0, CASES, lambda x: x, what="x", correct="",
                        hint=[("division", "(Divide by something else.)")])
    assert feedback.message.endswith("division by zero (Divide by something else.)")


def test_close_where_defined_ignores_what_the_mistake_leaves_undefined():
    expected = torch.tensor([[0.5, 0.5], [float("nan"), float("nan")]])
    assert close_where_defined(torch.tensor([[0.5, 0.5], [0.0, 1.0]]), expected)
    assert not close_where_defined(torch.tensor([[0.5, 0.4], [0.0, 1.0]]), expected)
    assert not close_where_defined(torch.full((2, 2), float("nan")), expected)


def test_diagnose_numbers_judges_every_case_together():
    def check(fn):
        return diagnose_numbers(
            fn, [(2,), (3,)], lambda n: n * n, [(lambda n: 2 * n, "2n, not n².")],
            what="count", correct=lambda expected: f"Right: {expected}.",
        )

    assert check(lambda n: n * n).message == "Right: [4.0, 9.0]."
    assert check(lambda n: 2 * n).message == "Not yet: 2n, not n²."
    assert check(lambda n: 4).message == "For (3,) you give 4; expected 9."
    assert "Your function raised" in check(lambda n: [][0]).message



def test_diagnose_numbers_words_a_case_hints_at_an_error_and_allows_rounding():
    from attention_lib.exercises._feedback import close

    def check(fn, **options):
        return diagnose_numbers(fn, [(2,), (3,)], lambda n: n / 3, what="third",
                                correct="Right.", **options)

    def explain_case(answer, expected, n):
        return f"n = {n}: {answer:g}, not {expected:.3g}."

    feedback = check(lambda n: 1.0, explain_case=explain_case)
    assert feedback.message == "n = 2: 1, not 0.667."
    assert check(lambda n: n / 3, explain=lambda answers, expected: None)
    assert not check(lambda n: np.float16(n / 3))  # exact by default
    assert check(lambda n: np.float16(n / 3), equal=close)  # float16's rounding
    feedback = check(lambda n: 1 / (n - 2), hint=lambda error, n: Feedback.wrong(
        f"At n = {n}: {error.message}"))
    assert feedback.message.startswith("At n = 2: Your function raised ZeroDivision")


def test_diagnose_labels_cases_from_a_list_and_close_each_skips_none():
    from attention_lib.exercises._feedback import all_of, close_each

    feedback = diagnose(lambda x: x + 1, [(torch.zeros(2),), (torch.ones(2),)],
                        lambda x: x, what="x", correct="", where=["first", "second"])
    assert feedback.message.startswith("first: ")
    pair = (torch.ones(2), torch.zeros(3))
    assert close_each(pair, (torch.ones(2), None))
    assert not close_each(pair, (None, torch.ones(3)))
    made = []  # the feedbacks are made one at a time, up to the first failure
    feedback = all_of((made.append(i) or Feedback(i < 1, str(i)) for i in range(3)),
                      "ok")
    assert feedback.message == "1" and made == [0, 1]
    assert all_of([], "ok").message == "ok"

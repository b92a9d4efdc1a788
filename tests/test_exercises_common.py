"""What every checker of the function-taking exercise modules promises, tested once for
all of them: an untouched starter is reported as not done, odd answers and exceptions
become feedback rather than tracebacks, a non-function is named, and each checker is
exported and documented with the notebook that uses it.

Each module's own test file tests its mistakes; a module joins here by being listed in
``MODULES``."""
import importlib
import re
from pathlib import Path

import pytest
from answer_forms import not_implemented

import attention_lib.exercises as exercises
from attention_lib.exercises._feedback import Feedback

ROOT = Path(__file__).resolve().parents[1]
MODULES = ["ch04_self_attention", "ch05_bug_hunt", "ch05_transformer", "ch06_efficient",
           "ch07_visual", "ch08_pretraining"]
CHECKERS = {
    f"{name}.{check}": getattr(importlib.import_module(f"{exercises.__name__}.{name}"),
                               check)
    for name in MODULES
    for check in importlib.import_module(f"{exercises.__name__}.{name}").__all__
}
ODD_ANSWER_MESSAGE = (
    r"returned (None|the str|a dict|a list|a object)|one number|Return a pair"
    r"|should have shape"
)


@pytest.mark.parametrize("name", CHECKERS)
def test_an_untouched_starter_is_reported_as_not_done(name):
    feedback = CHECKERS[name](not_implemented)
    assert isinstance(feedback, Feedback) and not feedback and feedback.todo
    assert str(feedback) == (
        "Your turn: replace the `raise NotImplementedError` with your code, then run"
        " this cell again."
    )


@pytest.mark.parametrize("answer", [None, "mask", {"a": 1}, [[1, 2], [3]], object()],
                         ids=lambda a: type(a).__name__)
@pytest.mark.parametrize("name", CHECKERS)
def test_odd_answers_get_feedback_not_a_traceback(name, answer):
    feedback = CHECKERS[name](lambda *args: answer)
    assert isinstance(feedback, Feedback) and not feedback and not feedback.todo
    assert re.search(ODD_ANSWER_MESSAGE, feedback.message), feedback.message


@pytest.mark.parametrize("name", CHECKERS)
def test_an_exception_in_the_answer_becomes_feedback(name):
    feedback = CHECKERS[name](lambda *args: [][1])
    assert not feedback and "Your function raised IndexError" in feedback.message


@pytest.mark.parametrize("name", CHECKERS)
def test_passing_something_other_than_a_function_is_named(name):
    feedback = CHECKERS[name](67_108_864)
    assert not feedback and "Pass your function itself" in feedback.message


@pytest.mark.parametrize("name", CHECKERS)
def test_every_checker_is_exported_and_documented_with_an_existing_notebook(name):
    check = CHECKERS[name]
    assert getattr(exercises, check.__name__, None) is check, name
    assert check.__doc__ and "Shapes:" in check.__doc__, name
    match = re.search(r"Taught in ``(chapters/[^`]+\.ipynb)``", check.__doc__)
    assert match, name
    assert (ROOT / match.group(1)).exists(), match.group(1)


def test_an_integer_mask_is_named_as_refused_not_added():
    import torch

    from attention_lib.exercises._common import mask_dtype_feedback

    expected = torch.tensor([[True, False], [True, True]])
    integer = mask_dtype_feedback(expected.long(), expected, "mask")
    floating = mask_dtype_feedback(expected.float(), expected, "mask")
    assert "refuses an integer mask" in integer.message
    assert "added" not in integer.message
    assert "*added*" in floating.message

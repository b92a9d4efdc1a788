"""Correct answers in the other forms readers return them in: lists, tuples, NumPy,
other dtypes.

``in_form(solution, form)`` is the solution with its result converted; a pair of tensors
(such as ``(context, attn_weights)``) has each element converted.
"""
import numpy as np
import torch

from attention_lib.exercises import Feedback

TENSOR_FORMS = [
    "list",
    "tuple",
    "numpy",
    "float64",
    "float32",
    "float16",
    "list_of_rows",
]
NUMBER_FORMS = ["numpy", "numpy32", "tensor", "tensor64", "float16", "one_element"]
INDEX_FORMS = ["numpy", "tensor", "one_element", "numpy_array"]


def as_form(value, form):
    if isinstance(value, tuple) and all(isinstance(v, torch.Tensor) for v in value):
        return tuple(as_form(v, form) for v in value)
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        value = torch.tensor(value)
    if isinstance(value, torch.Tensor):
        return {
            "list": lambda: value.tolist(),
            "tuple": lambda: tuple(value.tolist()),
            "numpy": lambda: value.numpy(),
            "float64": lambda: value.double(),
            "float32": lambda: value.float(),
            "float16": lambda: value.half(),
            "list_of_rows": lambda: list(value.unbind(0)),  # a list of tensors
        }[form]()
    if isinstance(value, int):
        return {
            "numpy": np.int64,
            "tensor": torch.tensor,
            "one_element": lambda v: torch.tensor([v]),
            "numpy_array": lambda v: np.array([v]),
        }[form](value)
    if isinstance(value, float):
        return {
            "numpy": np.float64,
            "numpy32": np.float32,
            "tensor": torch.tensor,
            "tensor64": lambda v: torch.tensor(v, dtype=torch.float64),
            "float16": lambda v: torch.tensor(v, dtype=torch.float16),
            "one_element": lambda v: [v],
        }[form](value)
    raise TypeError(f"no form {form!r} for {type(value).__name__}")


def in_form(fn, form):
    def converted(*args):
        return as_form(fn(*args), form)
    return converted


def assert_rejects(feedback, *phrases):
    """The checker refused a wrong answer (not as "your turn") and named the
    mistake: every phrase is in its message."""
    assert isinstance(feedback, Feedback)
    assert not feedback, f"checker accepted a wrong answer: {feedback}"
    assert not feedback.todo, f"a wrong answer reported as not done: {feedback}"
    for phrase in phrases:
        assert phrase in feedback.message, f"{phrase!r} not in {feedback.message!r}"


def not_implemented(*args):
    """An untouched exercise: the starter's ``raise NotImplementedError``."""
    raise NotImplementedError

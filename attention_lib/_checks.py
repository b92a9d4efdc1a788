"""Argument checks shared by the whole library, so every error says "got X, expected Y"
the same way.

Not taught: the book's listings call these helpers in one line and show the mathematics
around them.
"""
from __future__ import annotations

import math
import numbers
import operator

import numpy as np
from torch import Tensor


def describe(value) -> str:
    """What a value is, for an error message: its type, and its shape and dtype where it
    has them.

    Shapes:
        value: anything; returns: str, e.g. "a list of length 3", "a torch.Tensor of
            shape (2,) and dtype torch.int64"
    """
    if value is None:
        return "None"
    if isinstance(value, Tensor):
        return f"a torch.Tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
    if isinstance(value, np.ndarray):
        return f"a NumPy array of shape {value.shape} and dtype {value.dtype}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the str {shown!r}"
    if isinstance(value, (bool, int, float, complex, np.generic)):
        return f"the {type(value).__name__} {value!r}"
    if isinstance(value, (list, tuple, dict, set)):
        return f"a {type(value).__name__} of length {len(value)}"
    return f"a {type(value).__name__}"


def check_int(name: str, value, minimum: int) -> int:
    """``value`` as a Python int, or a TypeError/ValueError naming ``name``, what it got
    and the minimum.

    Accepts Python and NumPy integers and 0-d integer tensors (anything with
    ``__index__``), never a bool or a float (a float step count or index is a mistake
    worth naming, not rounding).

    Shapes:
        value: a scalar; returns: int
    """
    if not isinstance(value, bool):
        try:
            number = operator.index(value)
        except TypeError:
            pass
        else:
            if number < minimum:
                raise ValueError(f"{name} must be at least {minimum}, got {number}")
            return number
    raise TypeError(
        f"{name} must be an integer (at least {minimum}), got {describe(value)}"
    )


def check_real(name: str, value, meaning: str = "") -> float:
    """``value`` as a finite Python float (Python/NumPy numbers, not bools), or a
    TypeError naming ``name``.

    Shapes:
        value: a scalar; returns: float
    """
    if (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(value)
    ):
        return float(value)
    raise TypeError(f"{name} must be a finite number{meaning}, got {describe(value)}")


def check_probability(name: str, value) -> float:
    """``value`` as a float in [0, 1) (a dropout rate, say), or an error naming
    ``name``.

    Shapes:
        value: a scalar; returns: float
    """
    value = check_real(name, value, " (a probability)")
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must lie in [0, 1), got {value}")
    return value


def check_str_list(name: str, values) -> list[str]:
    """``values`` as a list of strings, or a TypeError naming ``name`` (a single str is
    refused, not split into characters).

    Shapes:
        values: N strings; returns: a list of N strings
    """
    if (
        isinstance(values, (str, bytes))
        or not hasattr(values, "__iter__")
        or isinstance(values, (dict, Tensor))
    ):
        raise TypeError(
            f"{name} must be a list of strings (e.g. [{'Go.'!r}]), got"
            f" {describe(values)}"
        )
    values = list(values)
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise TypeError(
                f"{name} must be a list of strings, but {name}[{i}] is"
                f" {describe(value)}"
            )
    return values

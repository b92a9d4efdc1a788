"""The result every checker returns."""
from __future__ import annotations

import html
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class Feedback:
    """A checker's verdict: ``passed`` plus a message saying what is right or what is wrong.

    Truthy when passed; shows as text in a terminal and as a coloured box in Jupyter.

    Shapes:
        none
    """

    passed: bool
    message: str

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        return ("✅ " if self.passed else "❌ ") + self.message

    __repr__ = __str__

    def _repr_html_(self) -> str:
        colour = "#1a7f37" if self.passed else "#cf222e"
        return (f'<div style="border-left:4px solid {colour};padding:4px 10px">'
                f"{html.escape(str(self))}</div>")

    @classmethod
    def ok(cls, message: str = "Correct!") -> "Feedback":
        return cls(True, message)

    @classmethod
    def wrong(cls, message: str) -> "Feedback":
        return cls(False, message)


def run_safely(fn, *args):
    """Call the reader's function; turn an exception into a Feedback instead of a traceback.

    Returns ``(result, None)`` or ``(None, feedback)``. Test ``error is not None``, not ``if error``:
    a failed :class:`Feedback` is falsy.
    """
    try:
        return fn(*args), None
    except NotImplementedError:
        return None, Feedback.wrong("Not implemented yet: replace the `raise NotImplementedError` with your code.")
    except Exception as exc:  # noqa: BLE001 - any error in the reader's code becomes feedback
        return None, Feedback.wrong(f"Your function raised {type(exc).__name__}: {exc}")


def close(got, expected: Tensor, atol: float = 1e-5) -> bool:
    """True if ``got`` is a tensor of ``expected``'s shape and the same values up to rounding.

    Compared in float64, so a reader's float32 or float16 answer is judged on its values alone.
    """
    return isinstance(got, Tensor) and got.shape == expected.shape and bool(
        torch.allclose(got.double(), expected.double(), atol=atol, rtol=1e-4))

"""What a page says about a trained, sampled or timed result, checked every time the
page runs.

Training gives different digits on another machine, another thread count or a GPU: a
loss of 2.889 here is 2.882 there, and six epochs later the translations differ. So the
book never compares those digits. It states **claims** that hold on any machine
("held-out BLEU between 11 and 17", "attention copies at least 90% of long inputs
right"), with ranges taken from the spread measured over several runs (two thread
counts, other seeds, a GPU), and checks each one with :func:`claim` when the notebook
runs. The same call **glues** the value into the page's prose (myst-nb's ``{glue:text}``
role), so every number the prose quotes is the one the code printed.

Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
"""
from __future__ import annotations

import math
import numbers

__all__ = ["ClaimError", "claim", "glue"]


class ClaimError(AssertionError):
    """A result fell outside the range the page's prose relies on."""


def glue(name: str, value) -> None:
    """Store ``value`` under ``name`` for the book's prose (``{glue:text}`name```),
    showing nothing.

    The site is built with myst-nb, which reads the stored value; where myst-nb is not
    installed (Colab) there is no site to build, and this does nothing.

    Shapes:
        value: a number, a string or anything IPython can display

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        # a 0-d tensor or NumPy scalar: the number, so the prose can format it
        value = value.item()
    try:
        from myst_nb import glue as myst_glue
    except ImportError:
        return
    myst_glue(name, value, display=False)


def claim(
    name: str,
    value,
    *,
    low: float | None = None,
    high: float | None = None,
    about: str = "",
    backs: str = "",
    checked: bool = True,
):
    """Check that ``value`` lies in ``[low, high]``, glue it under ``name``, and return
    it.

    ``low`` and ``high`` are the range the page's prose relies on, chosen from the
    spread of the value measured over several runs (say which in ``about`` or in a
    comment beside the call). ``value`` may be a bool (a claim that simply holds or
    not): then neither bound is given.

    ``backs`` quotes the sentence of the page that the claim backs; the book's page
    "How the numbers are checked" shows it beside the range, so a reader can see that
    the range fails when the sentence becomes false.

    ``checked=False`` is for a claim the prose makes about one kind of machine only,
    say a timing slope on a CPU, where the same quantity on a GPU measures kernel
    launches: there the value is glued, not checked. Pass it as
    ``checked=by_device(device, cpu=True, gpu=False)``, so that the page holds no
    branch of its own.

    Raises:
        ClaimError: naming the claim, the value and the range, if the value is outside
            it.

    Shapes:
        value: a Python number, a 0-d tensor or NumPy scalar, or a bool

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """
    if hasattr(value, "item"):  # a 0-d tensor or a NumPy scalar
        value = value.item()
    what = f"claim {name!r}" + (f" ({about})" if about else "")
    if not checked:
        glue(name, value)
        return value
    if isinstance(value, bool):
        if low is not None or high is not None:
            raise TypeError(
                f"{what}: a bool claim takes no low/high, got low={low}, high={high}"
            )
        if not value:
            raise ClaimError(f"{what} does not hold in this run.")
        glue(name, value)
        return value
    if not isinstance(value, numbers.Real) or math.isnan(value):
        raise TypeError(f"{what}: value must be a real number or a bool, got {value!r}")
    if low is None and high is None:
        raise TypeError(f"{what}: give low, high or both")
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = (
            f"[{'-inf' if low is None else low}, {'inf' if high is None else high}]"
        )
        raise ClaimError(
            f"{what}: got {value:.4g}, outside {bounds}, the range the page's prose"
            " relies on (measured over several runs). Another machine or seed moves"
            " the digits, but not this far: something about the run differs from the"
            " book's."
        )
    glue(name, value)
    return value

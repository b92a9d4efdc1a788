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

A claim that fails on a reader's machine (busy with other work, or different hardware)
does not stop the page: it shows a note with the sentence, the value measured and the
book's range, and the page goes on. Where the environment variable
``ATTENTION_LIB_STRICT_CLAIMS`` is 1 (``make test``, the release checks, CI) it raises
:class:`ClaimError` instead, so a claim the book's own run breaks is caught.

Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
"""
from __future__ import annotations

import html
import math
import numbers
import os

__all__ = ["ClaimError", "claim", "glue", "strict_claims"]

STRICT_ENV = "ATTENTION_LIB_STRICT_CLAIMS"


class ClaimError(AssertionError):
    """A result fell outside the range the page's prose relies on."""


def strict_claims() -> bool:
    """Whether a failing claim raises :class:`ClaimError` (the environment variable
    ``ATTENTION_LIB_STRICT_CLAIMS`` is set and not 0: the book's own checks) rather
    than showing a note and letting the page go on (a reader's run).

    Shapes:
        returns: bool

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """
    return os.environ.get(STRICT_ENV, "") not in ("", "0")


def _show_note(backs: str, measured: str, expected: str) -> None:
    """Show a failed claim to the reader: HTML in a notebook, text elsewhere."""
    sentence = f'The sentence "{backs}" may not hold on this run. ' if backs else ""
    text = (
        f"{sentence}Your machine gave {measured}; the book's runs gave {expected}."
        " A machine busy with other work, or other hardware, can do this: the page"
        " goes on, but its prose may not describe your run."
    )
    try:
        from IPython.display import display
    except ImportError:
        print(f"Note: {text}")
        return
    style = ("border-left: 4px solid #c77c00; background: #fff6e5; color: #222;"
             " padding: 0.5em 0.8em; margin: 0.5em 0")
    display({"text/html": f'<div class="claim-note" style="{style}"><b>Note:</b>'
             f" {html.escape(text)}</div>", "text/plain": f"Note: {text}"}, raw=True)


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

    A value outside the range shows a note (the sentence ``backs``, the value, the
    range) and is glued all the same, so the page goes on; under
    :func:`strict_claims` it raises instead.

    Raises:
        ClaimError: naming the claim, the value and the range, if the value is outside
            it and :func:`strict_claims` holds.

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
            if strict_claims():
                raise ClaimError(f"{what} does not hold in this run.")
            _show_note(backs, f"{about or name}: false", "true")
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
        if strict_claims():
            raise ClaimError(
                f"{what}: got {value:.4g}, outside {bounds}, the range the page's"
                " prose relies on (measured over several runs). Another machine or"
                " seed moves the digits, but not this far: something about the run"
                " differs from the book's."
            )
        expected = (f"a value in {bounds}" if low is not None and high is not None
                    else f"at least {low}" if low is not None else f"at most {high}")
        _show_note(backs, f"{about or name} = {value:.4g}", expected)
    glue(name, value)
    return value

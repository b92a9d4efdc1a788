"""The result every checker returns, and the one place where a reader's answer is run
and read.

Every checker follows the same pattern: :func:`run_safely` calls the reader's function
(an exception becomes feedback), a ``read_*`` helper turns whatever came back into the
kind of value the exercise asks for (a tensor, a number, an index, a string; lists,
tuples, NumPy arrays and tensors of any float dtype are all fine) or into feedback
naming what came back instead, and :func:`close` compares with a tolerance that suits
the dtype. The :func:`checker` decorator is the last guard: if checking still fails on
an answer nobody foresaw, the reader gets feedback, not a traceback.
"""
from __future__ import annotations

import functools
import html
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from .._checks import describe


# The markers: check mark and ballot X from Dingbats, which ordinary text fonts (DejaVu,
# Segoe UI Symbol, Apple's system fonts) draw; emoji such as ✅ need an emoji font, and
# show as empty boxes without one.
PASS_MARK, FAIL_MARK = "\u2713", "\u2717"  # ✓, ✗
# (colour of the box's left border, background) per state: passed, wrong, not tried yet
_STYLES = {
    "passed": ("#1a7f37", "rgba(26, 127, 55, 0.08)"),
    "wrong": ("#cf222e", "rgba(207, 34, 46, 0.08)"),
    "todo": ("#6e7781", "rgba(110, 119, 129, 0.08)"),
}


def _inline_code(message: str) -> str:
    """The message as HTML, its `code` spans (Markdown's backticks) set as code."""
    parts = html.escape(message).split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: leave the text as it is
        return "`".join(parts)
    return "".join(
        f"<code>{part}</code>" if i % 2 else part for i, part in enumerate(parts)
    )


@dataclass(frozen=True)
class Feedback:
    """A checker's verdict: ``passed`` plus a message saying what is right or what is
    wrong.

    Truthy when passed; shows as text in a terminal and as a coloured box in Jupyter.
    ``todo`` marks the state before the reader has tried (the starter code still
    raises ``NotImplementedError``): not passed, but shown as a neutral note, "Your
    turn: ...", not as an error.

    Shapes:
        none
    """

    passed: bool
    message: str
    todo: bool = False

    def __bool__(self) -> bool:
        return self.passed

    @property
    def state(self) -> str:
        return "passed" if self.passed else "todo" if self.todo else "wrong"

    def __str__(self) -> str:
        marker = {"passed": PASS_MARK + " ", "wrong": FAIL_MARK + " ", "todo": ""}
        return marker[self.state] + self.message

    __repr__ = __str__

    def _repr_html_(self) -> str:
        border, background = _STYLES[self.state]
        marker = {"passed": PASS_MARK, "wrong": FAIL_MARK, "todo": ""}[self.state]
        shown = (
            f'<span style="color:{border};font-weight:bold">{marker}</span> '
            if marker
            else ""
        )
        return (
            f'<div class="feedback feedback-{self.state}" style="border-left:4px solid'
            f' {border};background:{background};padding:4px 10px">'
            f"{shown}{_inline_code(self.message)}</div>"
        )


    @classmethod
    def ok(cls, message: str = "Correct!") -> "Feedback":
        return cls(True, message)

    @classmethod
    def wrong(cls, message: str) -> "Feedback":
        return cls(False, message)

    @classmethod
    def your_turn(cls, message: str) -> "Feedback":
        """Nothing to check yet: the reader has not written an answer."""
        return cls(False, "Your turn: " + message, todo=True)


def checker(check):
    """Decorate every ``check_*`` with this: an exception while checking becomes
    feedback, never a traceback.

    The ``read_*`` helpers catch the answers one can foresee (None, a string, a wrong
    shape); this catches the rest, e.g. an object that breaks halfway through a
    comparison.
    """
    @functools.wraps(check)
    def guarded(*args, **kwargs) -> Feedback:
        try:
            return check(*args, **kwargs)
        # noqa: BLE001 - any failure on an odd answer becomes feedback
        except Exception as exc:
            return Feedback.wrong(
                f"Your answer could not be checked ({type(exc).__name__}: {exc}). Make"
                " sure your function returns what the exercise asks for, in the shape"
                " it gives."
            )
    return guarded


def run_safely(fn, *args):
    """Call the reader's function; turn an exception into a Feedback instead of a
    traceback.

    Returns ``(result, None)`` or ``(None, feedback)``. Test ``error is not None``, not
    ``if error``: a failed :class:`Feedback` is falsy.
    """
    if not callable(fn):
        return None, Feedback.wrong(
            f"Pass your function itself (e.g. check(my_function)), got {describe(fn)}."
        )
    try:
        return fn(*args), None
    except NotImplementedError as exc:
        if exc.args:  # PyTorch's own, e.g. `-mask` on a bool tensor: a real error
            return None, Feedback.wrong(
                f"Your function raised NotImplementedError: {exc}"
            )
        return None, Feedback.your_turn(
            "replace the `raise NotImplementedError` with your code, then run this"
            " cell again."
        )
    # noqa: BLE001 - any error in the reader's code becomes feedback
    except Exception as exc:
        return None, Feedback.wrong(f"Your function raised {type(exc).__name__}: {exc}")


# --------------------------------------------------------------------------- reading
# the answer


def read_tensor(got, what: str, shape=None) -> tuple[Tensor | None, Feedback | None]:
    """The reader's answer as a CPU tensor, or the feedback saying why it is not one.

    Tensors of any device and dtype, NumPy arrays and scalars, (nested) lists and tuples
    of numbers or of tensors are all read; None, strings and other objects are named.
    With ``shape``, a tensor of another shape is named too.

    Shapes:
        got: anything; returns: a tensor (of ``shape`` when given) or None, and None or
            a Feedback
    """
    if got is None:
        return None, Feedback.wrong(f"Your function returned None: return the {what}.")
    if isinstance(got, Tensor):
        tensor = got.detach().cpu()
    else:
        tensor = _numbers_to_tensor(got)
        if tensor is None:
            return None, Feedback.wrong(
                f"Your function returned {describe(got)}: return the {what} as a "
                "torch.Tensor (a NumPy array or a list of numbers is fine too)."
            )
    if tensor.is_complex():
        return None, Feedback.wrong(
            f"Your {what} are complex numbers ({tensor.dtype}): return real numbers."
        )
    if shape is not None and tensor.shape != tuple(shape):
        return None, Feedback.wrong(
            f"The {what} should have shape {tuple(shape)}, yours has shape "
            f"{tuple(tensor.shape)}."
        )
    return tensor, None


def _numbers_to_tensor(value) -> Tensor | None:
    """NumPy arrays and scalars, Python numbers and (nested) sequences of them or of
    tensors; else None."""
    if isinstance(value, (str, bytes, dict, set)):
        return None
    try:
        if (
            isinstance(value, (list, tuple))
            and value
            and all(isinstance(v, Tensor) for v in value)
        ):
            return torch.stack([v.detach().cpu() for v in value])
        array = np.asarray(value)
    except (TypeError, ValueError, RuntimeError):
        return None
    if array.dtype.kind not in "biuf":
        return None  # strings, objects, ragged lists
    if array.dtype.kind == "u" or (
        array.dtype.kind == "f" and array.dtype.itemsize > 8
    ):
        # types torch lacks
        array = array.astype(np.int64 if array.dtype.kind == "u" else np.float64)
    return torch.from_numpy(np.array(array))  # a copy: contiguous, writable, our own


def read_number(got, what: str) -> tuple[Tensor | None, Feedback | None]:
    """One real number (Python or NumPy scalar, or a one-element tensor/array/list) as a
    0-d tensor.

    The tensor keeps the answer's dtype, so :func:`close` allows float16 its rounding.

    Shapes:
        returns: a 0-d tensor or None, and None or a Feedback
    """
    if got is None:
        return None, Feedback.wrong(f"Your function returned None: return the {what}.")
    if isinstance(got, (bool, np.bool_)):
        tensor = None
    else:
        tensor = (
            got.detach().cpu() if isinstance(got, Tensor) else _numbers_to_tensor(got)
        )
    if (
        tensor is None
        or tensor.numel() != 1
        or tensor.dtype == torch.bool
        or tensor.is_complex()
    ):
        return None, Feedback.wrong(
            f"Return the {what} as one number, got {describe(got)}."
        )
    return tensor.reshape(()), None


def read_index(got, what: str) -> tuple[int | None, Feedback | None]:
    """An index: a Python or NumPy integer, or a one-element integer tensor/array, as an
    int.

    A float (even 2.0) or a bool is not an index (``hypotheses[2.0]`` fails), and is
    named.

    Shapes:
        returns: an int or None, and None or a Feedback
    """
    value = got
    if (isinstance(value, np.ndarray) and value.size == 1) or (
        isinstance(value, Tensor) and value.numel() == 1
    ):
        value = value.reshape(()).tolist()  # a Python int, float or bool
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return int(value), None
    return None, Feedback.wrong(f"Return the {what} as an int, got {describe(got)}.")


def read_tokens(got, what: str, dim: int) -> tuple[Tensor | None, Feedback | None]:
    """Token indices with ``dim`` dimensions (a list, tuple, NumPy array or tensor) as a
    long tensor.

    Whole numbers stored as floats (``[5.0, 6.0]``) are read as the indices they are;
    5.5 is named.

    Shapes:
        returns: a long tensor with ``dim`` dimensions or None, and None or a Feedback
    """
    tensor, error = read_tensor(got, what)
    if error is not None:
        return None, error
    if tensor.dim() != dim:
        return None, Feedback.wrong(
            f"Return the {what} with {dim} dimension{'s' * (dim > 1)}, got "
            f"{describe(got)}."
        )
    if tensor.dtype.is_floating_point and not bool((tensor == tensor.round()).all()):
        return None, Feedback.wrong(
            f"Token indices are whole numbers; your {what} hold "
            f"{tensor[tensor != tensor.round()][:3].tolist()}."
        )
    return tensor.long(), None


def read_text(got, what: str) -> tuple[str | None, Feedback | None]:
    """A string, or the feedback naming what came back instead.

    Shapes:
        returns: a str or None, and None or a Feedback
    """
    if isinstance(got, str):
        return str(got), None
    if got is None:
        return None, Feedback.wrong(f"Your function returned None: return the {what}.")
    return None, Feedback.wrong(
        f"Your function returned {describe(got)}: return the {what} as a str."
    )


def read_tensors(
    got, names: tuple[str, ...], shapes=None
) -> tuple[list[Tensor] | None, Feedback | None]:
    """A tuple (or list) of tensors, such as ``(context, attn_weights)``, each read by
    :func:`read_tensor`.

    Shapes:
        returns: a list of len(names) tensors or None, and None or a Feedback
    """
    pair = ", ".join(names)
    if not (isinstance(got, (tuple, list)) and len(got) == len(names)):
        return None, Feedback.wrong(f"Return a pair ({pair}); got {describe(got)}.")
    tensors = []
    for name, value, shape in zip(names, got, shapes or [None] * len(names)):
        tensor, error = read_tensor(value, name, shape)
        if error is not None:
            return None, Feedback.wrong(f"{name}: {error.message}")
        tensors.append(tensor)
    return tensors, None


# --------------------------------------------------------------------------- comparing


# (atol, rtol) by dtype: float16 keeps about 3 decimal digits, bfloat16 about 2
_TOLERANCES = {
    torch.float64: (1e-7, 1e-6), torch.float32: (1e-5, 1e-4),
    torch.float16: (1e-2, 1e-2), torch.bfloat16: (5e-2, 5e-2),
}


def tolerance(*tensors: Tensor) -> tuple[float, float]:
    """``(atol, rtol)`` for comparing these tensors: that of the least precise floating
    dtype among them.

    Shapes:
        tensors: any; returns: two floats
    """
    floats = [
        _TOLERANCES.get(t.dtype, _TOLERANCES[torch.float32])
        for t in tensors
        if t.dtype.is_floating_point
    ]
    if not floats:
        return 0.0, 0.0  # integers are compared exactly
    return max(f[0] for f in floats), max(f[1] for f in floats)


def close(got, expected: Tensor) -> bool:
    """True if ``got`` is a tensor of ``expected``'s shape and the same values up to the
    dtype's rounding.

    Compared in float64, with the tolerance of the less precise of the two dtypes
    (:func:`tolerance`), so a reader's float64, float32 or float16 answer is judged on
    its values alone.

    Shapes:
        got, expected: the same shape; returns: bool
    """
    if not isinstance(got, Tensor) or got.shape != expected.shape or got.is_complex():
        return False
    atol, rtol = tolerance(got, expected)
    return bool(
        torch.allclose(
            got.detach().cpu().double(),
            expected.detach().cpu().double(),
            atol=atol,
            rtol=rtol,
        )
    )


# --------------------------------------------------------------------------- diagnosing


def close_each(got, expected) -> bool:
    """:func:`close` on each item of two sequences (a pair such as ``(out, lse)``); an
    expected None matches anything: how a mistake in one item alone is named.

    Shapes:
        got, expected: sequences of the same length; returns: bool
    """
    return all(e is None or close(g, e) for g, e in zip(got, expected))


def sizes(sep: str = "=", **named) -> str:
    """``"B=2, H=3"``: the sizes of a case, for the start of a message.

    Shapes:
        named: ints; returns: a str
    """
    return ", ".join(f"{name}{sep}{size}" for name, size in named.items())


def close_where_defined(got, expected: Tensor) -> bool:
    """:func:`close` on the entries that ``expected`` defines (not NaN), whatever
    ``got`` holds elsewhere: how a mistake that leaves a query without keys is matched
    (such a row is NaN, 1/Lk or 0, depending on the fill).

    Shapes:
        got, expected: the same shape; returns: bool
    """
    if not isinstance(got, Tensor) or got.shape != expected.shape:
        return False
    defined = ~expected.isnan()
    return bool(defined.any()) and close(got[defined], expected[defined])


def with_hint(error: Feedback, hint) -> Feedback:
    """The reader's error followed by what usually causes it (not for the starter):
    ``hint`` is one text, or ``(phrase, text)`` pairs, the text of the first phrase
    found in the error's message.

    Shapes:
        none
    """
    if error.todo or not hint:
        return error
    if not isinstance(hint, str):
        hint = next((text for phrase, text in hint if phrase in error.message), None)
        if hint is None:
            return error
    return Feedback.wrong(f"{error.message} {hint}")


def _own_copy(value):
    if isinstance(value, list):
        return list(value)
    return value.clone() if isinstance(value, Tensor) else value


def diagnose(answer, cases, reference, mistakes=(), *, what: str, correct: str,
             where=None, hint=None, compare=close, explain=None, read=None,
             shape=False) -> Feedback:
    """Run ``answer`` on every case and say what is wrong: the one loop every checker
    shares.

    For each case (a tuple of the answer's arguments; tensors and lists are passed as
    copies): run the answer (:func:`run_safely`; ``hint`` joins an exception's message,
    see :func:`with_hint`, or words the feedback, ``hint(error, *case)``); read what it
    returned (``read(got, *case)``, by default :func:`read_tensor`, with the
    reference's shape when ``shape``; with ``shape``, a reading error starts with
    ``where`` too); compare it with ``reference(*case)`` (``compare``, :func:`close` by
    default). If it differs, apply
    each mistake ``(fn, message)`` to the same case: ``fn(*case)``, built from the
    library's primitives, is what that mistake returns (None where it does not apply),
    and the first that compares equal is named. ``mistakes`` may also be a function of
    the case that returns ``(wrong answer, message)`` pairs. Then
    ``explain(got, expected, *case)`` may word what matches no mistake; else a generic
    message shows what was expected and what came back. ``where(*case)`` (or
    ``where[i]`` for the i-th case) starts each message; a ``message`` may be a
    function of the case.

    Shapes:
        cases: argument tuples; reference and each mistake: (*case) -> what the answer
            should return (for :func:`close`, a tensor)
    """
    for index, case in enumerate(cases):
        got, error = run_safely(answer, *(_own_copy(arg) for arg in case))
        if error is not None:
            return hint(error, *case) if callable(hint) else with_hint(error, hint)
        expected = reference(*case)
        if read is not None:
            got, error = read(got, *case)
        else:
            got, error = read_tensor(got, what, expected.shape if shape else None)
        label = where(*case) if callable(where) else where and where[index]
        prefix = f"{label}: " if label else ""
        if error is not None:
            return Feedback.wrong(prefix + error.message) if shape else error
        if compare(got, expected):
            continue
        pairs = (mistakes(*case) if callable(mistakes)
                 else ((mistake(*case), message) for mistake, message in mistakes))
        for variant, message in pairs:
            if variant is not None and compare(got, variant):
                text = message(*case) if callable(message) else message
                return Feedback.wrong(prefix + text)
        text = explain(got, expected, *case) if explain is not None else None
        if text is None and isinstance(expected, Tensor):
            if got.shape != expected.shape:
                text = read_tensor(got, what, expected.shape)[1].message
            else:
                text = (f"your {what} differ from the expected ones: the first values"
                        f" should be {expected.flatten()[:4].tolist()}, yours are"
                        f" {got.flatten()[:4].tolist()}.")
        return Feedback.wrong(prefix + (text or f"expected {expected!r}, got {got!r}."))
    return Feedback.ok(correct)


def all_of(feedbacks, correct: str) -> Feedback:
    """The first failed Feedback of ``feedbacks`` (an iterable, run lazily, in order),
    else ``Feedback.ok(correct)``: checks in groups, e.g. one per mode.

    Shapes:
        none
    """
    return next((feedback for feedback in feedbacks if not feedback),
                Feedback.ok(correct))


def diagnose_numbers(answer, cases, formula, mistakes=(), *, what: str, correct: str,
                     prefix: str = "Not yet: ", explain=None, explain_case=None,
                     equal=None, hint=None) -> Feedback:
    """:func:`diagnose` for answers that are one number per case, judged together:
    the answers must equal ``formula(*case)`` for every case; each mistake is another
    formula ``(fn, message)``; ``explain(answers, expected)`` words what matches none
    (None: not known), else ``explain_case(answer, expected, *case)`` the first case
    that is wrong; ``hint`` as in :func:`diagnose`. ``equal(answer, value)``
    compares two floats (exactly by default); ``equal=close`` allows the rounding of
    the answer's dtype.

    Shapes:
        cases: argument tuples; formula, each mistake: (*case) -> a number
    """
    tensors = []
    for case in cases:
        got, error = run_safely(answer, *case)
        if error is None:
            got, error = read_number(got, what)
        if error is not None:
            return hint(error, *case) if callable(hint) else with_hint(error, hint)
        tensors.append(got)
    answers = [float(a) for a in tensors]

    def agree(i, value) -> bool:
        if equal is close:
            return close(tensors[i], torch.tensor(value, dtype=torch.float64))
        return (equal or float.__eq__)(answers[i], value)

    def same(fn):
        return all(agree(i, float(fn(*case))) for i, case in enumerate(cases))

    expected = [float(formula(*case)) for case in cases]
    if same(formula):
        return Feedback.ok(correct(expected) if callable(correct) else correct)
    for mistake, message in mistakes:
        if same(mistake):
            return Feedback.wrong(prefix + message)
    # a message, or the Feedback itself
    text = explain(answers, expected) if explain else None
    if text is None:
        bad = next(i for i, e in enumerate(expected) if not agree(i, e))
        text = (
            explain_case(answers[bad], expected[bad], *cases[bad]) if explain_case else
            f"For {cases[bad]} you give {answers[bad]:,.6g}; expected"
            f" {expected[bad]:,.6g}."
        )
    return text if isinstance(text, Feedback) else Feedback.wrong(text)

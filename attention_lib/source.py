"""The code of a library function as the book prints it: what the function does, without
the parts that serve the library rather than the idea.

Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
"""
from __future__ import annotations

import ast
import inspect
import textwrap

__all__ = ["source_of", "show_source"]


def source_of(obj, *, start: str | None = None) -> str:
    """The source of a function, method or class, dedented, without its decorators
    (such as the argument checks of ``@checked_by``) and without its docstring.

    ``start`` keeps the code from the first line containing it onwards (a loop at the
    end of a long function, say).

    Shapes:
        none

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.

    Raises:
        ValueError: if ``start`` is not in the code.
    """
    lines = textwrap.dedent(inspect.getsource(obj)).splitlines()
    node = ast.parse("\n".join(lines)).body[0]
    drop = set()
    if node.decorator_list:  # the decorators sit above the `def` line
        drop |= set(range(node.decorator_list[0].lineno - 1, node.lineno - 1))
    body = node.body
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        drop |= set(range(body[0].lineno - 1, body[0].end_lineno))
    kept = [line for i, line in enumerate(lines) if i not in drop]
    if start is not None:
        first = next((i for i, line in enumerate(kept) if start in line), None)
        if first is None:
            raise ValueError(f"{start!r} is not in the code of {obj.__qualname__}")
        kept = textwrap.dedent("\n".join(kept[first:])).splitlines()
    return "\n".join(kept) + "\n"


def show_source(*objs, start: str | None = None) -> None:
    """Print :func:`source_of` each object, a blank line between them.

    Shapes:
        none

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """
    print("\n".join(source_of(obj, start=start) for obj in objs), end="")

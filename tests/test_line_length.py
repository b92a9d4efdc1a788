"""Code is at most 88 characters wide: the library, the tools, the tests, the reference
models and every notebook's code cells (the website shows 88 characters of code without
scrolling; book/_static/book.css).

A small check rather than a linter, so that it needs nothing beyond the test
environment.
"""
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 88
SOURCES = sorted(
    path
    for folder in ("attention_lib", "tools", "tests", "references", "book/_ext")
    for path in (ROOT / folder).rglob("*.py")
)
NOTEBOOKS = sorted(
    p
    for p in (ROOT / "chapters").rglob("*.ipynb")
    if ".ipynb_checkpoints" not in p.parts
)


def long_lines(text: str, where: str) -> list[str]:
    return [
        f"{where}, line {number}: {len(line)} characters"
        for number, line in enumerate(text.split("\n"), 1)
        if len(line) > LIMIT
    ]


def test_long_lines_are_found():
    assert long_lines("x = 1\n" + "y" * (LIMIT + 1), "t") == [
        "t, line 2: 89 characters"
    ]
    assert long_lines("z" * LIMIT, "t") == []


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_source_lines_fit_in_88_characters(path):
    found = long_lines(path.read_text(encoding="utf-8"), path.name)
    assert not found, "reflow these lines by hand:\n" + "\n".join(found)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_notebook_code_cells_fit_in_88_characters(path):
    nb = nbformat.read(path, as_version=4)
    found = [
        problem
        for index, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        for problem in long_lines(cell.source, f"{path.name}, cell {index}")
    ]
    assert not found, "reflow these lines by hand:\n" + "\n".join(found)

"""Structure of the committed notebooks (nbval re-runs their code; these check the
rest)."""
import ast
import inspect
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(
    p
    for p in (ROOT / "chapters").rglob("*.ipynb")
    if ".ipynb_checkpoints" not in p.parts
)
IDS = [str(p.relative_to(ROOT / "chapters")) for p in NOTEBOOKS]


def _toc_files(node):
    if isinstance(node, dict):
        if "file" in node:
            yield node["file"]
        for value in node.values():
            yield from _toc_files(value)
    elif isinstance(node, list):
        for item in node:
            yield from _toc_files(item)


def test_there_are_notebooks():
    assert NOTEBOOKS


def test_every_notebook_is_in_the_table_of_contents():
    toc = set(_toc_files(yaml.safe_load((ROOT / "_toc.yml").read_text())))
    missing = [str(p.relative_to(ROOT).with_suffix("")) for p in NOTEBOOKS
               if str(p.relative_to(ROOT).with_suffix("")) not in toc]
    assert not missing, f"notebooks not in _toc.yml: {missing}"


def test_setup_cells_install_from_the_configured_repository():
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools/colab_setup.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_starts_with_a_title_and_what_you_will_learn(path):
    nb = nbformat.read(path, as_version=4)
    first = nb.cells[0]
    assert first.cell_type == "markdown" and first.source.startswith(
        "# "
    ), "first cell must be the H1 title"
    assert "what you will learn" in first.source.lower()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_is_committed_executed_in_order_without_errors(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    assert all(
        c.execution_count is not None for c in code
    ), "run `make execute` before committing"
    counts = [c.execution_count for c in code]
    assert (
        counts == sorted(counts) and counts[0] == 1
    ), "cells were not executed top to bottom in a fresh kernel"
    for cell in code:
        errors = [o for o in cell.outputs if o.output_type == "error"]
        if errors:
            assert "raises-exception" in cell.metadata.get(
                "tags", []
            ), f"unexpected error in: {cell.source[:80]}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_cell_relies_on_a_trailing_semicolon(path):
    """nbval runs cells without IPython's history, and IPython then ignores a trailing
    ';': the expression's repr (e.g. ``<Axes: ...>``) appears under nbval but not in
    Jupyter, and the comparison fails. End a plotting cell with ``plt.show()``
    instead."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        lines = [
            line
            for line in cell.source.splitlines()
            if line.strip() and not line.lstrip().startswith("#")
        ]
        assert not (
            lines and lines[-1].rstrip().endswith(";")
        ), f"ends with ';': {lines[-1]!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_ignored_outputs_say_why(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if "nbval-ignore-output" in cell.metadata.get("tags", []):
            comments = [
                line
                for line in cell.source.splitlines()
                if line.lstrip().startswith("#")
            ]
            assert comments, (
                "a cell whose output nbval ignores must say why in a comment:"
                f" {cell.source[:80]}"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_local_paths_in_notebooks(path):
    text = path.read_text(encoding="utf-8")
    for needle in ["/work/", "/home/", "../shared", "/tmp/"]:
        assert (
            needle not in text
        ), f"{needle!r} in {path.name}: notebooks must run anywhere (Colab)"


def test_solutions_are_hidden_in_colab_and_collapsed_on_the_site():
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "markdown" and cell.source.startswith(
                "```{solution-start}"
            ):
                assert (
                    ":class: dropdown" in cell.source
                ), f"{path.name}: solution not collapsed"
                solution = nb.cells[i + 1]
                assert (
                    solution.metadata.get("cellView") == "form"
                ), f"{path.name}: solution visible in Colab"
                assert solution.source.startswith(
                    "#@title"
                ), f"{path.name}: Colab form needs a #@title"


# How a page may look at the hardware: only through attention_lib.measure (hardware,
# by_device, synchronize, ...), whose every branch tests/test_measure.py runs on
# simulated machines, so that no page holds a branch that has never run.
HARDWARE_BRANCHES = ["device.type ==", "device.type !=", "device.type in",
                     "torch.cuda.", "torch.mps.", "is_bf16_supported", "if native"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_pages_decide_from_the_hardware_only_through_the_library(path):
    nb = nbformat.read(path, as_version=4)
    found = [
        f"cell {i}: {line.strip()}"
        for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
        for line in cell.source.splitlines()
        if any(needle in line for needle in HARDWARE_BRANCHES)
    ]
    assert not found, "use attention_lib.measure (by_device, ...):\n" + "\n".join(found)


def test_the_hardware_rule_catches_a_page_branch(tmp_path):
    source = 'if device.type == "cpu":\n    claim("x", 1, low=0)'
    cell = nbformat.v4.new_code_cell(source)
    bad = tmp_path / "bad.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), bad)
    with pytest.raises(AssertionError, match="by_device"):
        test_pages_decide_from_the_hardware_only_through_the_library(bad)


# The reader never sees the test machinery: outside a removed cell no code mentions the
# tools that check the page, and glue(...) lines live in removed cells (Colab forms).
PLUMBING = [
    re.compile(r"nbval", re.I), re.compile(r"#\s*noqa"), re.compile(r"^\s*glue\(", re.M)
]


# Names only the page's checks and static figures use: imported where the website shows
# no code (a removed cell, or the folded code of a figure).
PLUMBING_NAMES = {"claim", "glue", "static_explorer"}


def _imported(source):
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a cell with IPython magics
        return set()
    return {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
            for alias in node.names}


# What printed library code or a checker's box must not show: the library's argument
# checks, reST markup from docstrings, Markdown backticks in HTML.
PLUMBING_OUTPUT = [
    re.compile(r"^\s*@checked_by", re.M), re.compile(r"``"), re.compile(r"Taught in "),
    re.compile(r'class="feedback[^"]*"[^>]*>[^<]*(<(?!/div)[^>]*>[^<]*)*`'),
]


def _shown_text(output):
    if output.get("output_type") == "stream":
        return output.get("text", "")
    data = output.get("data", {})
    return data.get("text/html", "") or data.get("text/plain", "")


def plumbing_in(nb):
    visible = [(i, cell) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
               if "remove-cell" not in cell.metadata.get("tags", [])]
    shown = [(i, _shown_text(output)) for i, cell in visible
             if not {"remove-output"} & set(cell.metadata.get("tags", []))
             for output in cell.get("outputs", [])]
    return [
        f"cell {i}: output shows {pattern.pattern!r}"
        for i, text in shown for pattern in PLUMBING_OUTPUT if pattern.search(text)
    ] + [
        f"cell {i}: {pattern.pattern} in {cell.source[:60]!r}"
        for i, cell in visible
        for pattern in PLUMBING if pattern.search(cell.source)
    ] + [
        f"cell {i}: imports {sorted(_imported(cell.source) & PLUMBING_NAMES)}"
        for i, cell in visible if _imported(cell.source) & PLUMBING_NAMES
        if not {"hide-input", "remove-input"} & set(cell.metadata.get("tags", []))
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_test_plumbing_in_visible_code(path):
    found = plumbing_in(nbformat.read(path, as_version=4))
    assert not found, "move it to a remove-cell cell or reword:\n" + "\n".join(found)


def test_the_plumbing_rule_catches_a_visible_glue():
    cell = nbformat.v4.new_code_cell('x = 1\nglue("x", x)  # nbval ignores it')
    assert len(plumbing_in(nbformat.v4.new_notebook(cells=[cell]))) == 2
    imports = nbformat.v4.new_code_cell(
        "from attention_lib import (\n    claim,\n    tokenize,\n)")
    assert len(plumbing_in(nbformat.v4.new_notebook(cells=[imports]))) == 1
    cell.metadata["tags"] = ["remove-cell"]
    assert not plumbing_in(nbformat.v4.new_notebook(cells=[cell]))


def test_the_plumbing_rule_catches_printed_checks_docstrings_and_backticks():
    from attention_lib import masked_softmax
    from attention_lib.exercises._feedback import Feedback
    from attention_lib.source import source_of

    printed = nbformat.v4.new_output(
        "stream", name="stdout", text=inspect.getsource(masked_softmax))
    todo = Feedback(False, "Your turn: replace the `raise NotImplementedError`.", True)
    boxed = nbformat.v4.new_output("display_data", data={
        "text/html": todo._repr_html_().replace("<code>", "`").replace("</code>", "`")})
    for output, found in ((printed, 3), (boxed, 1)):
        cell = nbformat.v4.new_code_cell("x", outputs=[output])
        assert len(plumbing_in(nbformat.v4.new_notebook(cells=[cell]))) == found
    clean = [nbformat.v4.new_output("stream", name="stdout",
                                    text=source_of(masked_softmax)),
             nbformat.v4.new_output("display_data",
                                    data={"text/html": todo._repr_html_()})]
    cell = nbformat.v4.new_code_cell("x", outputs=clean)
    assert not plumbing_in(nbformat.v4.new_notebook(cells=[cell]))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_figure_has_a_numbered_caption_and_alt_text(path):
    """A cell that draws a figure names it (myst-nb numbers it), says in a caption what
    to look at, and describes it in words for a reader who cannot see it."""
    nb = nbformat.read(path, as_version=4)
    bare = []
    for i, cell in enumerate(nb.cells):
        drawn = any("image/png" in o.get("data", {}) for o in cell.get("outputs", []))
        if not drawn or "remove-cell" in cell.metadata.get("tags", []):
            continue
        meta = cell.metadata.get("mystnb", {})
        figure, image = meta.get("figure", {}), meta.get("image", {})
        if not (figure.get("caption") and figure.get("name") and image.get("alt")):
            bare.append(f"cell {i}: {cell.source[:60]!r}")
    assert not bare, "add metadata mystnb.figure {caption, name} and image.alt:\n" + (
        "\n".join(bare)
    )

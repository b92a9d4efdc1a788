"""Colab form titles, read on the website: the ``#@title`` line is left out of code
cells.

A solution's code cell is a Colab form (``cellView: form``) whose first line is
``#@title Solution``: in Colab the cell shows the title "Solution" and hides its code
until the reader asks for it. On the website the cell already sits in a collapsed
dropdown headed "Solution to Exercise ...", where a ``#@title`` comment would be noise,
so this extension removes that first line (and a blank line after it) from the listing.
The notebook keeps it.
"""
from __future__ import annotations

import re

from docutils import nodes
from sphinx.application import Sphinx

TITLE = re.compile(r"\A# ?@title\b[^\n]*\n(?:[ \t]*\n)?")  # formatters add a space


def strip_title(text: str) -> str:
    """The code without a leading ``#@title`` line (and one blank line after it)."""
    return TITLE.sub("", text, count=1)


def _strip_form_titles(app: Sphinx, doctree: nodes.document) -> None:
    for block in doctree.findall(nodes.literal_block):
        parent = block.parent
        if parent is None or parent.get("nb_element") != "cell_code_source":
            continue
        text = block.astext()
        stripped = strip_title(text)
        if stripped != text:
            block.children = []
            block += nodes.Text(stripped)
            block.rawsource = stripped


def setup(app: Sphinx) -> dict:
    app.connect("doctree-read", _strip_form_titles)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

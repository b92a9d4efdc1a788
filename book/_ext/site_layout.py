"""The front page's figure, the footer's author line and one search box.

``notebook-figure``
    A directive that shows a figure a notebook drew, on another page (the front page
    shows chapter 3's alignment heat maps). The figure is found by the name its cell
    gives it (``mystnb: figure: name:`` in the cell's metadata); the directive reads the
    committed notebook's PNG output at build time, so the picture is always the one the
    code produced and changes when the notebook is re-executed. The content is the
    caption; the alt text is the cell's own unless ``:alt:`` is given::

        :::{notebook-figure} /chapters/03_bahdanau/02_training_and_results.ipynb
        :name: fig-ch3-alignments
        The caption.
        :::

    A missing notebook, name or image is an error (the strict build stops).

The author line
    ``author`` in ``_config.yml`` may say "this book's repository"; on the website those
    words link to the repository of ``_config.yml`` (the URL the repository button uses,
    which ``make set-repo`` changes).

One search box
    pydata-sphinx-theme 0.17 puts a search field in the page header unless
    ``navbar_persistent`` is set, and sphinx-book-theme has one in the sidebar: two
    boxes side by side on a laptop. The header's is left out (the sidebar's stays, and
    narrow screens keep the magnifier of the article header); ``book.css`` hides the
    header, which holds nothing else.
"""
from __future__ import annotations

import base64
import html
import json
import os
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

REPOSITORY_WORDS = "this book's repository"


def figure_png(notebook: dict, name: str) -> tuple[bytes, str]:
    """The PNG of the cell whose figure is called ``name``, and the cell's alt text."""
    for cell in notebook.get("cells", []):
        meta = cell.get("metadata", {}).get("mystnb", {})
        if meta.get("figure", {}).get("name") != name:
            continue
        for output in cell.get("outputs", []):
            data = output.get("data", {}).get("image/png")
            if data:
                text = "".join(data) if isinstance(data, list) else data
                png = base64.b64decode(text)
                return png, meta.get("image", {}).get("alt", "")
        raise LookupError(f"the cell of figure {name!r} has no PNG output")
    raise LookupError(f"no cell names its figure {name!r}")


class notebook_figure(nodes.figure):  # noqa: N801 - docutils names nodes in lower case
    """A figure shown again away from its page: drawn like a figure, never numbered (its
    number belongs to the page that made it, which the caption can cite with numref)."""


def _visit_figure(self, node):
    self.visit_figure(node)


def _depart_figure(self, node):
    self.depart_figure(node)


class NotebookFigure(SphinxDirective):
    required_arguments = 1
    has_content = True
    option_spec = {
        "name": directives.unchanged_required,
        "alt": directives.unchanged,
        "class": directives.class_option,
    }

    def run(self) -> list[nodes.Node]:
        rel, path = self.env.relfn2path(self.arguments[0], self.env.docname)
        name = self.options.get("name")
        if not name:
            raise self.error("notebook-figure needs :name:, the name its cell gives it")
        try:
            notebook = json.loads(Path(path).read_text(encoding="utf-8"))
            png, alt = figure_png(notebook, name)
        except (OSError, ValueError, LookupError) as error:
            raise self.error(f"notebook-figure {self.arguments[0]}: {error}") from error
        self.env.note_dependency(rel)
        # Written beside the build, as myst-nb writes notebook outputs; Sphinx copies it
        # into _images/ like any figure.
        target = Path(self.env.app.outdir).parent / "notebook_figures" / f"{name}.png"
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_file() or target.read_bytes() != png:
            target.write_bytes(png)
        uri = "/" + os.path.relpath(target, self.env.srcdir).replace(os.sep, "/")

        classes = ["notebook-figure", *self.options.get("class", [])]
        figure = notebook_figure(classes=classes)
        figure += nodes.image(uri=uri, alt=self.options.get("alt", alt))
        if self.content:
            body = nodes.Element()
            self.state.nested_parse(self.content, self.content_offset, body)
            first = body[0] if len(body) else None
            if isinstance(first, nodes.paragraph):
                figure += nodes.caption(first.rawsource, "", *first.children)
                rest = body.children[1:]
            else:
                rest = body.children
            if rest:
                figure += nodes.legend("", *rest)
        self.set_source_info(figure)
        return [figure]


def _one_search_box(app: Sphinx, config) -> None:
    options = config.html_theme_options
    if isinstance(options, dict):
        options.setdefault("navbar_persistent", [])


def _link_author(app: Sphinx, pagename, templatename, context, doctree) -> None:
    author = context.get("author")
    url = app.config.html_theme_options.get("repository_url")
    if not author or not url or REPOSITORY_WORDS not in author:
        return
    before, _, after = author.partition(REPOSITORY_WORDS)
    context["author"] = (
        f'{html.escape(before)}<a href="{html.escape(url)}">{REPOSITORY_WORDS}</a>'
        f"{html.escape(after)}"
    )


def setup(app: Sphinx) -> dict:
    app.add_node(notebook_figure, html=(_visit_figure, _depart_figure))
    app.add_directive("notebook-figure", NotebookFigure)
    app.connect("config-inited", _one_search_box)
    app.connect("html-page-context", _link_author)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

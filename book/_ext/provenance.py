""""About this run" on every executed notebook page: when its notebook was executed,
how long that took, on what device and with how many threads, with which Python and
PyTorch.

tools/execute_notebooks.py records each run in the notebook's metadata
(``attention_book.executed``, read inside the kernel). This extension reads the page's
source notebook when the page is written and adds a collapsed ``<details>`` block at
the end of the page. A page whose notebook has no record (or a page that is not a
notebook) gets no block.

The block is added to the page's HTML, not to its document tree, so it is left out of
the search index (a search for "Python" should not find every page) and out of other
builders' output.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from html import escape
from pathlib import Path

from sphinx.application import Sphinx

KEY = "attention_book"


def run_record(path: str | Path) -> dict | None:
    """The run recorded in the notebook at ``path``, or None (no record, or not a
    notebook)."""
    path = Path(path)
    if path.suffix != ".ipynb" or not path.is_file():
        return None
    metadata = json.loads(path.read_text(encoding="utf-8")).get("metadata", {})
    record = metadata.get(KEY, {}).get("executed")
    return record if isinstance(record, dict) and record else None


def _when(record: dict) -> str:
    text = ""
    if record.get("date"):
        try:
            date = datetime.strptime(record["date"], "%Y-%m-%dT%H:%M:%SZ")
        except ValueError:
            text = escape(str(record["date"]))
        else:
            date = date.replace(tzinfo=timezone.utc)
            shown = f"{date.day} {date:%B %Y}, {date:%H:%M} UTC"
            text = f'<time datetime="{escape(record["date"])}">{shown}</time>'
    seconds = record.get("seconds")
    if isinstance(seconds, (int, float)):
        if seconds < 90:
            took = f"{seconds:.0f} s"
        else:
            minutes, rest = divmod(round(seconds), 60)
            took = f"{minutes} min {rest} s"
        text += f" (took {took})" if text else f"took {took}"
    return text


def _device(record: dict) -> str:
    if record.get("device") in ("cuda", "mps"):
        gpu = escape(str(record.get("gpu") or "unnamed"))
        api = "CUDA" if record["device"] == "cuda" else "MPS"
        return f"GPU: {gpu}" + (f" ({api})" if api not in gpu else "")
    if record.get("device") == "cpu":
        return "CPU (no GPU)"
    return ""


def _cpu(record: dict) -> str:
    parts = []
    if record.get("cpu"):
        parts.append(escape(str(record["cpu"])))
    if record.get("threads"):
        threads = record["threads"]
        text = f"PyTorch used {threads} thread{'s' if threads != 1 else ''}"
        if record.get("cores"):
            cores = record["cores"]
            text += f" ({cores} logical CPU{'s' if cores != 1 else ''} available)"
        parts.append(text)
    return "; ".join(parts)


def _software(record: dict) -> str:
    parts = []
    if record.get("python"):
        parts.append(f"Python {escape(str(record['python']))}")
    if record.get("torch"):
        parts.append(f"PyTorch {escape(str(record['torch']))}")
    return ", ".join(parts)


def render(record: dict | None) -> str:
    """The HTML of the "About this run" block for ``record`` ("" for None)."""
    if not record:
        return ""
    rows = [
        ("Executed", _when(record)),
        ("Device", _device(record)),
        ("CPU", _cpu(record)),
        ("Software", _software(record)),
    ]
    items = "".join(
        f'<dt>{name}</dt><dd data-field="{name.lower()}">{value}</dd>'
        for name, value in rows
        if value
    )
    return (
        '<details class="provenance">'
        "<summary>About this run</summary>"
        "<p>The outputs on this page come from one run of its notebook, top to bottom."
        " Timings and trained results differ from machine to machine.</p>"
        f"<dl>{items}</dl>"
        "</details>\n"
    )


def _add_block(
    app: Sphinx, pagename: str, templatename, context: dict, doctree
) -> None:
    if doctree is None or pagename not in app.env.all_docs or "body" not in context:
        return
    block = render(run_record(app.env.doc2path(pagename)))
    if block:
        context["body"] += block


def setup(app: Sphinx) -> dict:
    app.connect("html-page-context", _add_block)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

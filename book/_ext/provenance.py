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


def _when(record: dict, zh: bool = False) -> str:
    text = ""
    if record.get("date"):
        try:
            date = datetime.strptime(record["date"], "%Y-%m-%dT%H:%M:%SZ")
        except ValueError:
            text = escape(str(record["date"]))
        else:
            date = date.replace(tzinfo=timezone.utc)
            shown = (f"{date.year}年{date.month}月{date.day}日 {date:%H:%M} UTC" if zh
                     else f"{date.day} {date:%B %Y}, {date:%H:%M} UTC")
            text = f'<time datetime="{escape(record["date"])}">{shown}</time>'
    seconds = record.get("seconds")
    if isinstance(seconds, (int, float)):
        if seconds < 90:
            took = f"{seconds:.0f} 秒" if zh else f"{seconds:.0f} s"
        else:
            minutes, rest = divmod(round(seconds), 60)
            took = f"{minutes} 分 {rest} 秒" if zh else f"{minutes} min {rest} s"
        if zh:
            text += f"（用时 {took}）" if text else f"用时 {took}"
        else:
            text += f" (took {took})" if text else f"took {took}"
    return text


def _device(record: dict, zh: bool = False) -> str:
    if record.get("device") in ("cuda", "mps"):
        gpu = escape(str(record.get("gpu") or "unnamed"))
        api = "CUDA" if record["device"] == "cuda" else "MPS"
        return f"GPU: {gpu}" + (f" ({api})" if api not in gpu else "")
    if record.get("device") == "cpu":
        return "CPU（无 GPU）" if zh else "CPU (no GPU)"
    return ""


def _cpu(record: dict, zh: bool = False) -> str:
    parts = []
    if record.get("cpu"):
        parts.append(escape(str(record["cpu"])))
    if record.get("threads"):
        threads = record["threads"]
        text = f"PyTorch used {threads} thread{'s' if threads != 1 else ''}"
        if zh:
            text = f"PyTorch 使用 {threads} 个线程"
        if record.get("cores"):
            cores = record["cores"]
            text += (f"（可用逻辑 CPU {cores} 个）" if zh else
                     f" ({cores} logical CPU{'s' if cores != 1 else ''} available)")
        parts.append(text)
    return "; ".join(parts)


def _software(record: dict) -> str:
    parts = []
    if record.get("python"):
        parts.append(f"Python {escape(str(record['python']))}")
    if record.get("torch"):
        parts.append(f"PyTorch {escape(str(record['torch']))}")
    return ", ".join(parts)


# The block's words in the Chinese book (book_language "zh", book/_ext/languages.py).
ZH = {
    "Executed": "执行时间",
    "Device": "设备",
    "CPU": "CPU",
    "Software": "软件",
    "About this run": "关于本次运行",
    "intro": "本页的输出来自其笔记本从头到尾的一次运行。计时和训练结果因机器而异。",
}


def render(record: dict | None, language: str = "en") -> str:
    """The HTML of the "About this run" block for ``record`` ("" for None), in
    ``language`` ("en" or "zh")."""
    if not record:
        return ""
    zh = language == "zh"
    rows = [
        ("Executed", _when(record, zh)),
        ("Device", _device(record, zh)),
        ("CPU", _cpu(record, zh)),
        ("Software", _software(record)),
    ]
    items = "".join(
        f'<dt>{ZH[name] if zh else name}</dt>'
        f'<dd data-field="{name.lower()}">{value}</dd>'
        for name, value in rows
        if value
    )
    summary = ZH["About this run"] if zh else "About this run"
    intro = ZH["intro"] if zh else (
        "The outputs on this page come from one run of its notebook, top to bottom."
        " Timings and trained results differ from machine to machine.")
    return (
        f'<details class="provenance"><summary>{summary}</summary><p>{intro}</p>'
        f"<dl>{items}</dl>"
        "</details>\n"
    )


def _add_block(
    app: Sphinx, pagename: str, templatename, context: dict, doctree
) -> None:
    if doctree is None or pagename not in app.env.all_docs or "body" not in context:
        return
    language = getattr(app.config, "book_language", "en")
    block = render(run_record(app.env.doc2path(pagename)), language)
    if block:
        context["body"] += block


def setup(app: Sphinx) -> dict:
    app.connect("html-page-context", _add_block)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

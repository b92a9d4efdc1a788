"""Each executed notebook records how it was run, and its page says so.

tools/execute_notebooks.py keeps a record of each run in the notebook's metadata
(``attention_book.executed``): when, how long, and what the kernel ran on, read inside
the kernel. book/_ext/provenance.py turns it into the page's collapsed "About this run"
block (tests/site/test_provenance.py checks the built pages).

The last test asks every committed notebook for its record: it fails for a notebook that
was executed before the record existed, until that notebook is executed again with
tools/execute_notebooks.py (`make execute`).
"""
from __future__ import annotations

import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import nbformat
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "execute_notebooks.py"
NOTEBOOKS = sorted(
    p.relative_to(ROOT).as_posix() for p in (ROOT / "chapters").rglob("*.ipynb")
    if ".ipynb_checkpoints" not in p.parts
)
FIELDS = {"date", "seconds", "python", "torch", "threads", "cores", "cpu", "device",
          "gpu"}


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


provenance = _load("provenance", ROOT / "book" / "_ext" / "provenance.py")

RECORD = {
    "date": "2026-11-28T14:03:12Z", "seconds": 1503.4, "python": "3.12.1",
    "torch": "2.11.0+cu126", "threads": 1, "cores": 2,
    "cpu": "Intel(R) Xeon(R) CPU @ 2.20GHz", "device": "cuda", "gpu": "Tesla T4",
}


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """A two-cell notebook executed by the tool, 2 threads asked by the environment and
    1 set by the notebook: the record must show the kernel's 1."""
    folder = tmp_path_factory.mktemp("executed")
    path = folder / "tiny.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Tiny"),
        nbformat.v4.new_code_cell(
            "import torch\ntorch.set_num_threads(1)\nprint(torch.ones(3).sum().item())"
        ),
    ]
    nbformat.write(nb, path)
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    started = datetime.now(timezone.utc).replace(microsecond=0)
    start = time.perf_counter()
    subprocess.run([sys.executable, str(TOOL), str(path)], check=True, env=env,
                   capture_output=True, timeout=300)
    wall = time.perf_counter() - start
    return nbformat.read(path, as_version=4), started, wall


def test_tool_records_the_run(executed):
    nb, started, wall = executed
    record = nb.metadata["attention_book"]["executed"]
    assert set(record) == FIELDS
    when = datetime.strptime(record["date"], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=timezone.utc)
    assert started <= when <= datetime.now(timezone.utc)
    assert 0 < record["seconds"] <= wall
    assert record["python"] == platform.python_version()
    assert record["torch"] == torch.__version__
    assert record["threads"] == 1  # what the kernel used, not OMP_NUM_THREADS's 2
    assert record["cores"] >= 1
    assert record["cpu"]
    if torch.cuda.is_available():
        assert record["device"] == "cuda"
        assert record["gpu"] == torch.cuda.get_device_name()
    elif record["device"] == "cpu":
        assert record["gpu"] is None


def test_tool_leaves_the_notebook_as_executed(executed):
    nb, _, _ = executed
    assert [cell.cell_type for cell in nb.cells] == ["markdown", "code"]  # probe gone
    assert nb.cells[1].execution_count == 1
    assert [out.get("text") for out in nb.cells[1].outputs] == ["3.0\n"]


def test_page_block_shows_the_record():
    html = provenance.render(RECORD)
    assert html.startswith('<details class="provenance">')  # collapsed: no `open`
    assert "<summary>About this run</summary>" in html
    assert (
        '<time datetime="2026-11-28T14:03:12Z">28 November 2026, 14:03 UTC</time>'
        in html
    )
    assert "took 25 min 3 s" in html
    assert "GPU: Tesla T4 (CUDA)" in html
    assert "Xeon(R) CPU @ 2.20GHz; PyTorch used 1 thread (2 logical CPUs" in html
    assert "Python 3.12.1, PyTorch 2.11.0+cu126" in html
    cpu_only = provenance.render(
        {**RECORD, "device": "cpu", "gpu": None, "seconds": 21.2, "threads": 2}
    )
    assert "CPU (no GPU)" in cpu_only and "took 21 s" in cpu_only
    assert "2 threads" in cpu_only


def test_page_block_escapes_what_it_shows():
    html = provenance.render({**RECORD, "cpu": "<b>&</b>"})
    assert "&lt;b&gt;&amp;&lt;/b&gt;" in html and "<b>" not in html


def test_no_record_no_block(tmp_path):
    assert provenance.render(None) == ""
    nb = nbformat.v4.new_notebook()
    nbformat.write(nb, tmp_path / "plain.ipynb")
    assert provenance.run_record(tmp_path / "plain.ipynb") is None
    (tmp_path / "page.md").write_text("# A page\n")
    assert provenance.run_record(tmp_path / "page.md") is None
    nb.metadata["attention_book"] = {"executed": RECORD}
    nbformat.write(nb, tmp_path / "run.ipynb")
    assert provenance.run_record(tmp_path / "run.ipynb") == RECORD


def test_extension_is_registered():
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    assert config["sphinx"]["local_extensions"]["provenance"] == "book/_ext"


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_committed_notebook_records_its_run(notebook):
    metadata = json.loads((ROOT / notebook).read_text(encoding="utf-8"))["metadata"]
    record = metadata.get("attention_book", {}).get("executed")
    assert record, (
        f"{notebook} has no run record: execute it with tools/execute_notebooks.py"
    )
    assert set(record) >= FIELDS

"""The notebooks' exact comparison (nbval, tests/nbval_sanitize.cfg) ignores what the
CPU's vector unit changes, the last bits of a float printed at full precision, and still
catches a changed number.

A tiny notebook is committed with one output and re-run by nbval, as `make test` does.
"""
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]


def nbval(tmp_path, code: str, committed: str, as_display: bool) -> int:
    cell = nbformat.v4.new_code_cell(code, execution_count=1)
    if as_display:  # a glued or displayed value: text/plain in a display_data output
        cell.outputs = [nbformat.v4.new_output(
            "display_data", data={"text/plain": committed})]
    else:
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout",
                                               text=committed + "\n")]
    notebook = nbformat.v4.new_notebook(cells=[cell])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    path = tmp_path / "floats.ipynb"
    nbformat.write(notebook, path)
    return subprocess.run(
        [sys.executable, "-m", "pytest", str(path), "--nbval", "-q",
         "-p", "no:cacheprovider",
         "--nbval-sanitize-with", str(ROOT / "tests" / "nbval_sanitize.cfg")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    ).returncode


@pytest.mark.parametrize("as_display", [False, True], ids=["printed", "displayed"])
def test_last_bits_of_a_float_are_not_compared(tmp_path, as_display):
    fresh = "0.1760925563951071"  # what this run computes
    code = (f"from IPython.display import display; display({fresh})" if as_display
            else f"print({fresh})")
    # committed on another CPU: the same number, one bit apart
    assert nbval(tmp_path, code, "0.17609255639510712", as_display) == 0
    # a different number is still caught
    assert nbval(tmp_path, code, "0.17619255639510712", as_display) != 0

"""tools/gpu_check.py on small synthetic notebooks, on the CPU (--allow-cpu): what it
reports, its exit status, and that it never writes to the notebooks it runs."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "gpu_check.py"
spec = importlib.util.spec_from_file_location("gpu_check", TOOL)
gpu_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_check)

NOTEBOOKS = {
    "passes": [
        "import os, pathlib\n"
        "assert pathlib.Path('passes.ipynb').is_file()  # run in its own folder\n"
        f"assert os.environ['PYTHONPATH'].split(os.pathsep)[0] == {str(ROOT)!r}",
        "print(1 + 1)",
    ],
    "claim": [
        "import attention_lib",
        'attention_lib.claim("x", 5, high=1)',
        "print('the run goes on')",
        'attention_lib.claim("second_claim", 7, low=10)',
    ],
    "error": ["1 / 0", "print('the run goes on')", "undefined_name"],
    "on_purpose": [
        ("raise ValueError('shown to the reader on purpose')", ["raises-exception"]),
        "print('fine')",
    ],
}


def write_notebook(folder: Path, name: str, cells) -> Path:
    nb = new_notebook(
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}}
    )
    for cell in cells:
        source, tags = cell if isinstance(cell, tuple) else (cell, [])
        nb.cells.append(new_code_cell(source, metadata={"tags": tags}))
    path = folder / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


def run_tool(*args, env=None):
    return subprocess.run(
        [sys.executable, str(TOOL), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("notebooks")
    paths = {name: write_notebook(folder, name, c) for name, c in NOTEBOOKS.items()}
    before = {name: path.read_bytes() for name, path in paths.items()}
    out = tmp_path_factory.mktemp("out")
    done = run_tool(folder, "--allow-cpu", "--jobs", "2", "--out", out)
    report = json.loads((out / "report.json").read_text())
    by_name = {Path(r["notebook"]).stem: r for r in report["notebooks"]}
    return {"done": done, "report": report, "by_name": by_name, "paths": paths,
            "before": before, "out": out, "folder": folder}


def test_statuses_and_exit_code(run):
    assert run["done"].returncode == 1, run["done"].stdout + run["done"].stderr
    statuses = {name: r["status"] for name, r in run["by_name"].items()}
    assert statuses == {
        "passes": "OK", "claim": "CLAIM", "error": "ERROR", "on_purpose": "OK"
    }
    assert run["report"]["ok"] == 2 and run["report"]["failed"] == 2


def test_every_failed_claim_is_reported_by_name(run):
    claim = run["by_name"]["claim"]
    assert claim["first_error"].startswith("ClaimError: claim 'x': got 5")
    assert [e["cell"] for e in claim["failed_claims"]] == [1, 3]
    assert "second_claim" in claim["failed_claims"][1]["evalue"]
    assert "claim 'x'" in run["done"].stdout  # in the table


def test_the_first_error_and_the_others(run):
    error = run["by_name"]["error"]
    assert error["first_error"].startswith("ZeroDivisionError")
    assert [e["ename"] for e in error["errors"]] == ["ZeroDivisionError", "NameError"]
    assert "(+1 more)" in run["done"].stdout


def test_an_error_on_purpose_is_not_counted(run):
    on_purpose = run["by_name"]["on_purpose"]
    assert on_purpose["errors"] == [] and on_purpose["errors_on_purpose"] == 1
    assert run["by_name"]["passes"]["errors_on_purpose"] == 0


def test_memory_and_device_on_the_cpu(run):
    report = run["report"]
    assert report["cuda"] is False and report["device"] == "cpu"
    claim = run["by_name"]["claim"]  # imported torch: its version is reported
    assert claim["torch"] and claim["peak_allocated_mib"] is None
    assert all(r["seconds"] > 0 for r in report["notebooks"])


def test_the_notebooks_are_not_written_to(run):
    for name, path in run["paths"].items():
        assert path.read_bytes() == run["before"][name], name
    assert sorted(p.name for p in run["folder"].iterdir()) == sorted(
        f"{name}.ipynb" for name in NOTEBOOKS
    )


def test_executed_copies_for_the_checks_page(run):
    copies = sorted(p.name for p in run["out"].glob("*.ipynb"))
    assert copies == sorted(f"{name}__cpu_t2_s0.ipynb" for name in NOTEBOOKS)
    copy = nbformat.read(run["out"] / "claim__cpu_t2_s0.ipynb", as_version=4)
    assert len(copy.cells) == len(NOTEBOOKS["claim"])  # the probe cell is not kept
    assert copy.cells[2].outputs[0]["text"] == "the run goes on\n"
    assert copy.metadata["papermill"]["duration"] > 0  # what measure_spread reads


def test_names_of_copies():
    a, b = Path("ch1/05_exercises.ipynb"), Path("ch2/05_exercises.ipynb")
    c = Path("ch2/02_training.ipynb")
    names = gpu_check.copy_names([a, b, c], "cuda_t2", {a: 0, b: 0, c: 3})
    assert names == {
        a: "ch1-05_exercises__cuda_t2_s0.ipynb",
        b: "ch2-05_exercises__cuda_t2_s0.ipynb",
        c: "02_training__cuda_t2_s3.ipynb",
    }


def test_all_passing_exits_zero(run, tmp_path):
    done = run_tool(
        run["paths"]["passes"], run["paths"]["on_purpose"], "--allow-cpu",
        "--jobs", "2", "--out", tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 of 2 notebooks OK" in done.stdout


def test_refuses_without_cuda(run, tmp_path):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    done = run_tool(run["paths"]["passes"], "--out", tmp_path / "out", env=env)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "--allow-cpu" in done.stderr and done.stdout == ""
    assert not (tmp_path / "out").exists()

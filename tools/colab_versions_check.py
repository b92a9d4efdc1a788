"""Check the Colab path: the setup cell on Colab's own package versions, then the
notebooks on top.

Every notebook starts with the setup cell of ``tools/colab_setup.py``. On Colab it
pip-installs attention_lib from the book's repository and d2l (``--no-deps``); it must
leave Colab's torch, numpy and ipywidgets alone. This script checks that, and that the
notebooks then run:

1. It builds ``.venv-colab/`` with the versions Colab ships (2026-08: torch 2.11.0,
   numpy 2.1.3,
   ipywidgets 7.7.1, ...; see ``COLAB`` below). Colab runs Python 3.13; this venv uses
       the Python
   that runs this script (3.11 on the project's machines), as no 3.13 is at hand. torch
       2.11.0 from
   PyPI is the CUDA build: about 2.7 GB of wheels (torch, triton, nvidia-*), under a
       minute to
   download on a fast link. A stamp file in the venv records the pins and the package
       list it had
   when built; a later run reuses the venv, after removing what the previous run's setup
       cell
   added, so every run starts from a fresh "Colab runtime".
2. It records the installed versions (importlib.metadata) BEFORE the setup cell.
3. It runs the setup cell exactly as Colab would: the source comes from
   ``colab_setup.setup_cell_source()``, with ``REPO_URL`` replaced by ``file://<this
       checkout>``, and
   runs under the Colab venv's python with a stub module registered as
       ``sys.modules["google.colab"]``.
   So ``git+file://<checkout>@main`` installs the COMMITTED ``main`` of this checkout,
       not the
   working tree: commit (to main) before checking a change to the library.
4. It fails if pip changed or removed any package the venv had before (torch, numpy,
   ipywidgets and
   the other pins first of all: Colab's preinstalled packages must survive), or if the
       setup cell's
   Colab branch ran no command or did not install attention_lib.
5. It executes notebooks (copies in memory; nothing is written back) in a kernel of the
   Colab venv,
   driven by nbclient from the running interpreter (the book's .venv), so the Colab venv
       gets no
   package Colab lacks: every notebook in ``FULL`` completely; every other one up to,
       not including,
   its first code cell tagged ``training`` (or, in a notebook with no such tag, its
       first code cell
   that calls ``train_seq2seq(``). Cells tagged ``raises-exception`` may raise. The
       environment
   is passed through; ``ATTENTION_LIB_DATA`` defaults to ``../shared/data/fra-eng``, as
       in the
   Makefile, when that corpus exists, and ``OMP_NUM_THREADS`` to 1 (timing claims are
       stable on
   one thread of a busy 2-core machine, not on two).
6. It prints a summary (versions before/after, notebooks and cells run, time of each
   phase) and exits
   non-zero on any failure.

Run it with the book's environment (it needs nbclient, nbformat and PyYAML):

    make colab-check
    .venv/bin/python tools/colab_versions_check.py [--rebuild] [--working-tree]
        [NOTEBOOK ...]

``--rebuild`` deletes and rebuilds ``.venv-colab/``; naming notebooks runs only those.
``--working-tree`` installs the working tree's attention_lib instead of the committed
main (copied into a throwaway git repository under /tmp, whose main the setup cell
installs), to check a library change before committing it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import colab_setup  # noqa: E402  (tools/ is not a package)

VENV = ROOT / ".venv-colab"
PYTHON = VENV / "bin" / "python"
STAMP = VENV / "colab-baseline.json"
KERNEL_NAME = "colab-python3"
KERNEL_DIRS = [str(VENV / "share" / "jupyter" / "kernels")]

# What Colab's runtime ships (2026-08). The setup cell must change none of these.
COLAB = {
    "torch": "2.11.0",
    "numpy": "2.1.3",
    "ipywidgets": "7.7.1",
    "matplotlib": "3.10.0",
    "pandas": "2.2.3",
    "scikit-learn": "1.6.1",
    "ipykernel": "6.17.1",
    "tqdm": "4.67.1",
    # Also on Colab, and imported by `from d2l import torch as d2l` (chapter 2.3):
    # torchvision (the release built for torch 2.11) and requests (Colab's 2025 version;
    # any recent one would do). scipy, which d2l imports too, comes with scikit-learn.
    "torchvision": "0.26.0",
    "requests": "2.32.4",
}
# Colab builds these for its own CUDA and front end: the setup cell must never install
# them.
NEVER_INSTALLED = ["torch", "torchvision", "numpy", "ipywidgets"]

# Notebooks run to the end. The others stop before their first training cell.
FULL = sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "chapters/02_attention").glob("*.ipynb")
) + [
    "chapters/01_seq2seq/01_data.ipynb",
    "chapters/03_bahdanau/01_attention_decoder.ipynb",
]
CELL_TIMEOUT = 900  # seconds; the 2-core machines are slow, and may be busy


# The Colab venv's python runs outside the checkout (cwd=/tmp): from here it would see
# the checkout's attention_lib (and its .egg-info) instead of what pip installed.
OUTSIDE = "/tmp"


def quiet(stderr: str) -> str:
    """pip's stderr, without the warnings about local mirror directories this machine's
    pip config names."""
    return "".join(line for line in stderr.splitlines(keepends=True)
                   if not re.match(r"WARNING: Location 'file://.*' is ignored", line))


def run(cmd):
    print("  $", " ".join(map(str, cmd)), flush=True)
    result = subprocess.run(
        list(map(str, cmd)),
        cwd=OUTSIDE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    print(quiet(result.stderr), end="", flush=True)
    result.check_returncode()


def installed_versions() -> dict[str, str]:
    """Every distribution in the Colab venv, by normalised name."""
    code = (
        "import importlib.metadata as m, json, re\nprint(json.dumps({re.sub(r'[-_.]+',"
        " '-', d.metadata['Name']).lower(): d.version for d in m.distributions()}))"
    )
    out = subprocess.run(
        [str(PYTHON), "-c", code],
        check=True,
        capture_output=True,
        text=True,
        cwd=OUTSIDE,
    )
    return json.loads(out.stdout)


def du(path: Path) -> float:
    """Size on disk in GB."""
    return (
        sum(
            f.stat().st_size
            for f in path.rglob("*")
            if f.is_file() and not f.is_symlink()
        )
        / 1e9
    )


# -- 1. the Colab venv -----------------------------------------------------------------

def ensure_venv(rebuild: bool) -> str:
    """Build .venv-colab with Colab's versions, or reuse it and take it back to its
    baseline."""
    wanted = {"python": sys.version.split()[0], "pins": COLAB}
    if not rebuild and STAMP.exists() and PYTHON.exists():
        stamp = json.loads(STAMP.read_text())
        if {k: stamp.get(k) for k in wanted} == wanted:
            baseline, now = stamp["baseline"], installed_versions()
            drifted = {
                n: (v, now.get(n)) for n, v in baseline.items() if now.get(n) != v
            }
            if not drifted:
                added = sorted(set(now) - set(baseline))
                # what the last run's setup cell installed: a fresh Colab runtime lacks
                # it
                if added:
                    run([PYTHON, "-m", "pip", "uninstall", "-q", "-y", *added])
                return f"reused ({len(added)} packages from the last run removed)"
            print(
                f"  the venv drifted from its baseline ({drifted}): rebuilding",
                flush=True,
            )
    if VENV.exists():
        shutil.rmtree(VENV)
    run([sys.executable, "-m", "venv", VENV])
    run([PYTHON, "-m", "pip", "install", "-q", "--upgrade", "pip"])
    run(
        [
            PYTHON,
            "-m",
            "pip",
            "install",
            "-q",
            *(f"{name}=={v}" for name, v in COLAB.items()),
        ]
    )
    # The kernelspec lives inside the venv, so nothing is installed into the book's
    # environment.
    run([PYTHON, "-m", "ipykernel", "install", "--prefix", VENV, "--name", KERNEL_NAME,
         "--display-name", "Python 3 (Colab versions)"])
    STAMP.write_text(json.dumps({**wanted, "baseline": installed_versions()}, indent=1))
    return f"built, {du(VENV):.1f} GB on disk"


# -- 3. the setup cell, as Colab runs it -----------------------------------------------

def working_tree_repository() -> Path:
    """A throwaway git repository whose main holds the working tree's library (for
    --working-tree)."""
    repo = Path(tempfile.mkdtemp(prefix="colab-check-"))
    shutil.copytree(
        ROOT / "attention_lib",
        repo / "attention_lib",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for name in ["pyproject.toml", "README.md"]:
        shutil.copy(ROOT / name, repo / name)
    git = [
        "git",
        "-C",
        str(repo),
        "-c",
        "user.name=colab-check",
        "-c",
        "user.email=colab-check@localhost",
    ]
    for cmd in (
        ["init", "-q", "-b", "main"],
        ["add", "."],
        ["commit", "-q", "-m", "working tree"],
    ):
        subprocess.run(git + cmd, check=True)
    return repo


def uncommitted_library_changes() -> bool:
    """Whether the library in the working tree differs from the committed main
    (read-only git diff)."""
    diff = subprocess.run(
        [
            "git",
            "-C",
            str(ROOT),
            "diff",
            "--quiet",
            "main",
            "--",
            "attention_lib",
            "pyproject.toml",
        ]
    )
    return diff.returncode == 1  # 0: the same; 1: different; 128: no branch main


def local_setup_cell(repo: Path) -> str:
    """The setup cell, with the repository URL replaced by the file:// URL of a local
    repository."""
    source = colab_setup.setup_cell_source()
    source, n = re.subn(r'REPO_URL = "[^"]*"', f'REPO_URL = "file://{repo}"', source)
    if n != 1:
        raise SystemExit(
            "FAIL: expected one REPO_URL = \"...\" line in the setup cell, found"
            f" {n}:\n{source}"
        )
    return source


# Runs in the Colab venv: the stub makes `"google.colab" in sys.modules` true, and every
# command the cell runs is logged (then run unchanged), so the check can tell that the
# Colab branch did something.
RUNNER = '''\
import json, subprocess, sys, types

sys.modules["google"] = types.ModuleType("google")
sys.modules["google.colab"] = types.ModuleType("google.colab")
commands, _run = [], subprocess.run


def logged_run(args, *rest, **kwargs):
    commands.append(args if isinstance(args, str) else [str(a) for a in args])
    shown = args if isinstance(args, str) else " ".join(map(str, args))
    print("  setup cell runs:", shown, flush=True)
    return _run(args, *rest, **kwargs)


subprocess.run = logged_run
exec(compile(sys.stdin.read(), "<setup cell>", "exec"), {"__name__": "__main__"})
print("COMMANDS=" + json.dumps(commands))
'''


def run_setup_cell(repo: Path) -> list:
    cell = local_setup_cell(repo)
    result = subprocess.run(
        [str(PYTHON), "-c", RUNNER],
        input=cell,
        text=True,
        capture_output=True,
        cwd=OUTSIDE,
    )
    print(
        result.stdout.replace("COMMANDS=", "  commands: "),
        quiet(result.stderr),
        sep="",
        end="",
        flush=True,
    )
    if result.returncode != 0:
        raise SystemExit(
            f"FAIL: the setup cell raised (exit status {result.returncode}); see above"
        )
    line = [l for l in result.stdout.splitlines() if l.startswith("COMMANDS=")]
    commands = json.loads(line[-1][len("COMMANDS="):])
    if not commands:
        raise SystemExit(
            "FAIL: the setup cell's Colab branch ran no command: with google.colab "
            "imported it must pip-install attention_lib (tools/colab_setup.py)"
        )
    return commands


# -- 5. the notebooks ------------------------------------------------------------------

def stop_index(nb, path: str) -> tuple[int, str]:
    """How many cells of the notebook to run, and why."""
    if path in FULL:
        return len(nb.cells), "run to the end"
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and "training" in cell.metadata.get("tags", []):
            return i, "stopped before the first cell tagged training"
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and "train_seq2seq(" in cell.source:
            return (
                i,
                "no cell tagged training: stopped before the first train_seq2seq( call",
            )
    return len(nb.cells), "no training cell: run to the end"


def execute(path: str) -> str:
    """Execute a copy of the notebook in the Colab venv's kernel; say how much of it
    ran."""
    nb = nbformat.read(ROOT / path, as_version=4)
    total = sum(c.cell_type == "code" for c in nb.cells)
    stop, why = stop_index(nb, path)
    nb.cells = nb.cells[:stop]
    km = KernelManager(
        kernel_name=KERNEL_NAME,
        kernel_spec_manager=KernelSpecManager(kernel_dirs=KERNEL_DIRS),
    )
    client = NotebookClient(nb, km=km, timeout=CELL_TIMEOUT,
                            # the kernel's cwd
                            resources={"metadata": {"path": str((ROOT / path).parent)}})
    try:
        # raises CellExecutionError, except in cells tagged raises-exception
        client.execute()
    finally:
        if km.has_kernel:  # nbclient leaves a kernel manager it did not create running
            km.shutdown_kernel(now=True)
    return (
        f"{sum(c.cell_type == 'code' for c in nb.cells)} of {total} code cells, {why}"
    )


def notebooks(selected) -> list[str]:
    if selected:
        return [str(Path(p).resolve().relative_to(ROOT)) for p in selected]
    return [str(p.relative_to(ROOT)) for p in colab_setup.chapter_notebooks()]


# -- main ------------------------------------------------------------------------------

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--rebuild", action="store_true", help="delete and rebuild .venv-colab"
    )
    parser.add_argument(
        "--working-tree",
        action="store_true",
        help=(
            "install the working tree's attention_lib (committed to a throwaway"
            " repository) instead of the checkout's committed main"
        ),
    )
    parser.add_argument(
        "notebooks",
        nargs="*",
        help="notebooks to run (default: every chapter notebook)",
    )
    args = parser.parse_args(argv)
    shared_data = ROOT.parent / "shared" / "data" / "fra-eng"
    if "ATTENTION_LIB_DATA" not in os.environ and (shared_data / "fra.txt").exists():
        os.environ["ATTENTION_LIB_DATA"] = str(shared_data)  # as the Makefile does
    # the kernel must import attention_lib as installed, not from here
    os.environ.pop("PYTHONPATH", None)
    # as the Makefile does: no debugger warning
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    # One thread unless told otherwise: the pages' timing claims (loop vs vectorised,
    # ...) hold on one thread, but a 2-thread timing on a 2-core machine that is also
    # doing other work swings 100-fold.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    times, failures = {}, []

    print("== 1. Colab venv", flush=True)
    start = time.time()
    venv_state = ensure_venv(args.rebuild)
    times["venv"] = time.time() - start
    print(f"  {VENV.name}: {venv_state} in {times['venv']:.0f} s", flush=True)

    print("== 2. versions before the setup cell", flush=True)
    before = installed_versions()

    if args.working_tree:
        repo = working_tree_repository()
        print(
            f"== 3. the setup cell, with REPO_URL = file://{repo} (the working tree's"
            " library)",
            flush=True,
        )
    else:
        repo = ROOT
        print(
            f"== 3. the setup cell, with REPO_URL = file://{ROOT} (installs the"
            " committed main)",
            flush=True,
        )
        if uncommitted_library_changes():
            print(
                "  NOTE: attention_lib in the working tree differs from main, and"
                " notebooks that use the changes fail here until they are committed (or"
                " run with --working-tree)",
                flush=True,
            )
    start = time.time()
    try:
        commands = run_setup_cell(repo)
    finally:
        if args.working_tree:
            shutil.rmtree(repo)
    times["setup cell"] = time.time() - start
    after = installed_versions()

    print("== 4. what pip changed", flush=True)
    for name, version in COLAB.items():
        if before.get(name) != version:
            failures.append(
                f"the Colab venv has {name} {before.get(name)}, Colab has {version}:"
                " run with --rebuild"
            )
        if after.get(name) != before.get(name):
            never = (
                f" (it must never install {', '.join(NEVER_INSTALLED)})"
                if name in NEVER_INSTALLED
                else ""
            )
            failures.append(
                f"the setup cell changed {name}: {before.get(name)} ->"
                f" {after.get(name)}{never}"
            )
    for name in sorted(set(before) - set(COLAB)):
        if after.get(name) != before[name]:
            failures.append(
                f"the setup cell changed Colab's {name}: {before[name]} ->"
                f" {after.get(name)}"
            )
    added = {name: v for name, v in after.items() if name not in before}
    print(
        "  added:",
        ", ".join(f"{n} {v}" for n, v in sorted(added.items())) or "nothing",
        flush=True,
    )
    if "attention-lib" not in added:
        failures.append("the setup cell did not install attention_lib")
    probe = "import attention_lib, d2l; print(attention_lib.__file__)"
    where = subprocess.run(
        [str(PYTHON), "-c", probe], capture_output=True, text=True, cwd=OUTSIDE
    )
    if where.returncode != 0 or str(VENV) not in where.stdout:
        failures.append(
            "attention_lib and d2l do not import from the Colab venv:"
            f" {where.stdout}{where.stderr}"
        )

    print("== 5. notebooks in the Colab venv's kernel", flush=True)
    start, ran = time.time(), []
    if failures:
        print("  skipped: the setup cell failed", flush=True)
    else:
        for path in notebooks(args.notebooks):
            t0 = time.time()
            print(f"  {path} ...", flush=True)
            try:
                what = execute(path)
            # noqa: BLE001 -- report every notebook, then fail
            except Exception as error:
                # the traceback, without its colours
                message = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
                failures.append(f"{path}: {type(error).__name__}: {message[-3000:]}")
                print(f"    FAILED after {time.time() - t0:.0f} s", flush=True)
                continue
            ran.append((path, what, time.time() - t0))
            print(f"    {what}: {time.time() - t0:.0f} s", flush=True)
    times["notebooks"] = time.time() - start

    print("\n== Summary")
    print(
        f"  Python {sys.version.split()[0]} here (Colab: 3.13);"
        f" OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}; "
        "ATTENTION_LIB_DATA="
        f"{os.environ.get('ATTENTION_LIB_DATA', '(unset: downloads)')}"
    )
    print(f"  {'package':<14} {'Colab':<9} {'before':<9} after")
    for name, v in COLAB.items():
        changed = "  CHANGED" if after.get(name) != before.get(name) else ""
        print(
            f"  {name:<14} {v:<9} {before.get(name, '-'):<9}"
            f" {after.get(name, '-')}{changed}"
        )
    print(f"  setup cell ran {len(commands)} commands and added {len(added)} packages")
    for path, what, seconds in ran:
        print(f"  {path}: {what}, {seconds:.0f} s")
    print(
        "  time: "
        + ", ".join(f"{phase} {seconds:.0f} s" for phase, seconds in times.items())
    )
    for failure in failures:
        print("FAIL:", failure)
    print("colab-check:", "FAILED" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

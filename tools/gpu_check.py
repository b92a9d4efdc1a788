"""Run every notebook on CUDA the way Colab does, and report what broke.

Each notebook runs top to bottom in a fresh kernel, in its own folder (as Colab's
"Run all"), with the torch the machine has; the committed notebook is never written
to. Unlike "Run all", a failing cell does not stop the run: every error and every
failed ``claim(...)`` (``attention_lib.claims.ClaimError``) is reported, the first
prominently (later ones are often its consequences). Cells tagged
``raises-exception`` fail on purpose and are not counted. After the last cell one
extra cell, run in the same kernel and not saved, reads the device name, torch's
version and ``torch.cuda.max_memory_allocated()`` / ``max_memory_reserved()``.

    python tools/gpu_check.py                                   # chapters/, 1 job
    python tools/gpu_check.py chapters --jobs 4 --out gpu-check/  # make gpu-check
    python tools/gpu_check.py chapters/02_attention --allow-cpu --out /tmp/run

Options: ``--jobs N`` notebooks at once (each in its own process and kernel; on one
GPU they share it, so their times are a little longer than alone); ``--timeout S``
seconds a notebook may take (default 1800); ``--threads T`` CPU threads per kernel
(``OMP_NUM_THREADS``; default 2, as on Colab); ``--allow-cpu`` runs where CUDA is
absent (the tests use it), which otherwise is refused.

What it writes to ``--out``: each executed copy as
``<stem>__cuda_t<threads>_s<seed>.ipynb`` (``__cpu_...`` without CUDA; ``<seed>`` is
the ``SEED`` of the notebook's ``parameters`` cell, 0 if none; a stem that two chosen
notebooks share is prefixed with its folder, ``<folder>-<stem>__...``), with the run's
``duration`` in ``metadata.papermill`` as papermill writes it, so that

    python tools/measure_spread.py report gpu-check/ --write book/checks.md

puts the CUDA runs' claims and times on the checks page (and keeps them in
``tools/spread_runs.json``); and ``report.json``, with
every notebook's seconds, peak memory, device, status and errors. It prints a line
as each notebook finishes and a table at the end; the exit status is 1 if any
notebook had an error, a failed claim or ran out of time, 2 if it refused to run.

The kernels' environment is this process's, plus: the repository root at the front
of ``PYTHONPATH`` (the notebooks' setup cell installs ``attention_lib`` only on
Colab, so here it is imported from the checkout, uninstalled), ``OMP_NUM_THREADS`` /
``MKL_NUM_THREADS``, and ``ATTENTION_LIB_DATA`` set to ``../shared/data/fra-eng``
beside the repository when that holds ``fra.txt`` and the variable is unset (as the
Makefile does); set ``ATTENTION_LIB_DATA`` yourself to point at another copy of the
corpus, or leave it unset to let the notebooks download it.

On a GPU machine without Jupyter (only Python and torch, say): it needs nbclient,
nbformat and a kernel, ipykernel. Carry their wheels, fetched on a machine with the
index by ``pip download -d wheels/ nbclient nbformat ipykernel`` for that machine's
Python (add ``--python-version``, ``--platform manylinux2014_x86_64
--only-binary=:all:`` when fetching elsewhere), and install them there with ``pip
install --no-index --find-links wheels/ nbclient nbformat ipykernel``. With the
versions of this project's environment they are: nbclient 0.11, nbformat 5.11,
ipykernel 6.29, jupyter_client 8.10, jupyter_core 5.9, ipython 9.18,
ipython-pygments-lexers, traitlets, comm, matplotlib-inline, nest-asyncio, packaging,
platformdirs, python-dateutil, tzdata, typing-extensions, fastjsonschema, jsonschema,
jsonschema-specifications, referencing, attrs, jedi, parso, pexpect, ptyprocess,
prompt-toolkit, wcwidth, pygments, stack-data, executing, asttokens, pure-eval, and
five with compiled parts, whose wheels depend on the Python version and platform:
pyzmq, tornado, psutil, debugpy, rpds-py. Add what the notebooks import beyond torch
(numpy, matplotlib, pandas, tqdm, ipywidgets, sacrebleu, ...; see requirements.txt).
The kernel is ``python3``: where no kernelspec is installed, jupyter_client falls
back to ipykernel in this same interpreter (so it sees the machine's torch). Then,
from the repository root:

    python tools/gpu_check.py chapters --jobs 4 --out gpu-check/
"""
from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import multiprocessing
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data" / "fra-eng"
ON_PURPOSE = "raises-exception"
PROBE_MARK = "GPU_CHECK_PROBE "
# Run after the notebook's cells, in its kernel; it leaves no name behind.
PROBE = f"""\
def _gpu_check_probe():
    import json, sys
    torch = sys.modules.get("torch")
    found = {{"torch": getattr(torch, "__version__", None), "cuda": False,
             "python": sys.executable}}
    if torch is not None and torch.cuda.is_available():
        found.update(
            cuda=True,
            device=torch.cuda.get_device_name(),
            peak_allocated=torch.cuda.max_memory_allocated(),
            peak_reserved=torch.cuda.max_memory_reserved(),
        )
    print({PROBE_MARK!r} + json.dumps(found))
_gpu_check_probe()
del _gpu_check_probe
"""
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
MIB = 2**20


def find_notebooks(paths: list[Path], out: Path) -> list[Path]:
    """The notebooks named, and those under the folders named, leaving out
    checkpoints and anything under ``out``."""
    found = []
    for path in paths:
        if path.is_dir():
            found += sorted(path.rglob("*.ipynb"))
        elif path.suffix == ".ipynb" and path.is_file():
            found.append(path)
        else:
            raise SystemExit(f"gpu_check: no notebook or folder {path}")
    out = out.resolve()
    keep = []
    for path in found:
        path = path.resolve()
        if ".ipynb_checkpoints" in path.parts or out in path.parents:
            continue
        if path not in keep:
            keep.append(path)
    return keep


def seed_of(nb) -> int:
    """The ``SEED`` the notebook's ``parameters`` cell sets (0 if none)."""
    for cell in nb.cells:
        if "parameters" in cell.metadata.get("tags", []):
            match = re.search(r"^SEED\s*=\s*(\d+)", cell.source, re.MULTILINE)
            if match:
                return int(match.group(1))
    return 0


def committed_seconds(nb) -> float:
    """How long the committed run took, from nbclient's cell timestamps (0 if none):
    used only to start the longest notebooks first."""
    stamps = []
    for cell in nb.cells:
        for value in cell.metadata.get("execution", {}).values():
            try:
                stamps.append(datetime.datetime.fromisoformat(value.replace("Z", "")))
            except (TypeError, ValueError):
                pass
    return (max(stamps) - min(stamps)).total_seconds() if stamps else 0.0


def copy_names(notebooks: list[Path], label: str, seeds: dict) -> dict[Path, str]:
    """Each notebook's executed copy's file name, in measure_spread's format."""
    stems = [p.stem for p in notebooks]
    names = {}
    for path in notebooks:
        stem = path.stem
        if stems.count(stem) > 1:
            stem = f"{path.parent.name}-{stem}"
        names[path] = f"{stem}__{label}_s{seeds[path]}.ipynb"
    return names


def one_line(text: str, width: int | None = None) -> str:
    line = ANSI.sub("", str(text)).strip().split("\n", 1)[0]
    if width and len(line) > width:
        line = line[: width - 1] + "…"
    return line


def errors_in(nb) -> tuple[list[dict], int, list[int]]:
    """The unexpected errors (cell, name, message), the number of errors in cells
    tagged raises-exception, and those tagged cells that raised nothing."""
    errors, on_purpose, silent = [], 0, []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        tagged = ON_PURPOSE in cell.metadata.get("tags", [])
        found = [o for o in cell.get("outputs", []) if o.output_type == "error"]
        if tagged:
            on_purpose += len(found)
            if not found:
                silent.append(index)
            continue
        for output in found:
            errors.append(
                {
                    "cell": index,
                    "ename": output.get("ename", ""),
                    "evalue": ANSI.sub("", output.get("evalue", "")),
                    "source": one_line(cell.source, 80),
                }
            )
    return errors, on_purpose, silent


def run_notebook(
    path: str, target: str, timeout: float, threads: int
) -> dict:
    """Execute one notebook in a fresh kernel (in this worker process) and return
    its report; the executed copy goes to ``target``."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    path, target = Path(path), Path(target)
    env = os.environ
    paths = env.get("PYTHONPATH", "").split(os.pathsep)
    if str(ROOT) not in paths:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT)] + paths))
    env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    if "ATTENTION_LIB_DATA" not in env and (SHARED_DATA / "fra.txt").is_file():
        env["ATTENTION_LIB_DATA"] = str(SHARED_DATA)

    nb = nbformat.read(path, as_version=4)
    probe = nbformat.v4.new_code_cell(PROBE)
    nb.cells.append(probe)
    start = time.monotonic()
    deadline = start + timeout
    client = NotebookClient(
        nb,
        kernel_name="python3",
        allow_errors=True,
        timeout_func=lambda cell: max(1, int(deadline - time.monotonic())),
        resources={"metadata": {"path": str(path.parent)}},
    )
    crash = None
    began = datetime.datetime.now(datetime.timezone.utc)
    try:
        client.execute()
    except CellTimeoutError:
        crash = ("TIMEOUT", f"TimeoutError: over {timeout:.0f} s")
    except DeadKernelError as error:
        crash = ("ERROR", f"DeadKernelError: {one_line(error)}")
    except Exception as error:  # the kernel would not start, ...
        crash = ("ERROR", f"{type(error).__name__}: {one_line(error)}")
    seconds = time.monotonic() - start
    nb.cells = [cell for cell in nb.cells if cell is not probe]

    found = {}
    for output in probe.get("outputs", []):
        for line in output.get("text", "").splitlines():
            if line.startswith(PROBE_MARK):
                found = json.loads(line[len(PROBE_MARK):])
    errors, on_purpose, silent = errors_in(nb)
    if crash and crash[0] == "TIMEOUT":
        while errors and errors[-1]["ename"] == "KeyboardInterrupt":
            errors.pop()  # nbclient interrupting the cell that ran out of time
    if errors:
        status = "CLAIM" if errors[0]["ename"] == "ClaimError" else "ERROR"
        first = ": ".join(
            filter(None, [errors[0]["ename"], one_line(errors[0]["evalue"])])
        )
    elif crash:
        status, first = crash
    else:
        status, first = "OK", ""
    if crash:  # after the cells' own errors: it stopped the run there
        name, _, message = crash[1].partition(": ")
        errors.append({"cell": None, "ename": name, "evalue": message, "source": ""})
    nb.metadata["papermill"] = {
        "duration": seconds,
        "start_time": began.isoformat(),
        "end_time": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "exception": status != "OK",
        "input_path": str(path),
        "output_path": str(target),
        "parameters": {},
    }
    nb.metadata["gpu_check"] = dict(found, status=status)
    nbformat.write(nb, target)

    def mib(key):
        return None if found.get(key) is None else found[key] / MIB

    return {
        "notebook": str(path.relative_to(ROOT)) if ROOT in path.parents else str(path),
        "executed": str(target),
        "seconds": round(seconds, 2),
        "status": status,
        "first_error": first,
        "errors": errors,
        "failed_claims": [e for e in errors if e["ename"] == "ClaimError"],
        "errors_on_purpose": on_purpose,
        "on_purpose_cells_that_raised_nothing": silent,
        "peak_allocated_mib": mib("peak_allocated"),
        "peak_reserved_mib": mib("peak_reserved"),
        "cuda": found.get("cuda", False),
        "device": found.get("device"),
        "torch": found.get("torch"),
        "python": found.get("python"),
    }


def cuda_here() -> tuple[bool, str]:
    """Whether this interpreter's torch sees CUDA (asked in a child process, so this
    one never imports torch), and the device or the reason."""
    code = (
        "import torch\n"
        "ok = torch.cuda.is_available()\n"
        "print(ok, torch.cuda.get_device_name() if ok else torch.__version__)\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
        )
    except subprocess.TimeoutExpired:
        return False, "importing torch took over 300 s"
    if done.returncode:
        last = done.stderr.strip().splitlines()[-1:] or ["torch would not import"]
        return False, one_line(last[0])
    answer, _, what = done.stdout.strip().partition(" ")
    return answer == "True", what


def table(results: list[dict]) -> str:
    def num(value, digits=0):
        return "–" if value is None else f"{value:.{digits}f}"

    width = max([len("notebook")] + [len(r["notebook"]) for r in results])
    rows = [
        f"{'notebook':<{width}}  {'s':>6}  {'peak MiB':>8}  {'resv MiB':>8}  "
        "status   first error",
    ]
    for r in results:
        more = len(r["errors"]) - 1
        first = one_line(r["first_error"], 100) + (
            f" (+{more} more)" if more > 0 else ""
        )
        rows.append(
            f"{r['notebook']:<{width}}  {num(r['seconds'], 1):>6}  "
            f"{num(r['peak_allocated_mib']):>8}  {num(r['peak_reserved_mib']):>8}  "
            f"{r['status']:<7}  {first}".rstrip()
        )
    return "\n".join(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("paths", nargs="*", type=Path, default=[ROOT / "chapters"])
    parser.add_argument("--jobs", type=int, default=1, help="notebooks at once")
    parser.add_argument("--out", type=Path, default=Path("gpu-check"))
    parser.add_argument(
        "--timeout", type=float, default=1800, help="seconds per notebook"
    )
    parser.add_argument("--threads", type=int, default=2, help="threads per kernel")
    parser.add_argument(
        "--allow-cpu", action="store_true", help="run even where CUDA is absent"
    )
    args = parser.parse_args(argv)

    cuda, what = cuda_here()
    if not cuda and not args.allow_cpu:
        print(
            f"gpu_check: no CUDA device here ({what}); refusing to run "
            "(pass --allow-cpu to run on the CPU)",
            file=sys.stderr,
        )
        return 2
    import nbformat

    notebooks = find_notebooks(args.paths, args.out)
    if not notebooks:
        print("gpu_check: no notebooks found", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    read = {p: nbformat.read(p, as_version=4) for p in notebooks}
    label = f"{'cuda' if cuda else 'cpu'}_t{args.threads}"
    names = copy_names(notebooks, label, {p: seed_of(nb) for p, nb in read.items()})
    # The longest first (by the committed run's timestamps), so the jobs end together.
    order = sorted(notebooks, key=lambda p: -committed_seconds(read[p]))
    print(
        f"gpu_check: {len(notebooks)} notebooks, {args.jobs} at a time, on "
        f"{what if cuda else 'the CPU'}; copies in {args.out}/",
        flush=True,
    )
    start = time.monotonic()
    results = {}
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(args.jobs, mp_context=spawn) as pool:
        futures = {
            pool.submit(
                run_notebook,
                str(p),
                str((args.out / names[p]).resolve()),
                args.timeout,
                args.threads,
            ): p
            for p in order
        }
        for done in concurrent.futures.as_completed(futures):
            path = futures[done]
            try:
                result = done.result()
            except Exception as error:  # the worker itself died
                result = {
                    "notebook": str(path), "executed": None, "seconds": None,
                    "status": "ERROR", "errors": [], "failed_claims": [],
                    "first_error": f"{type(error).__name__}: {one_line(error)}",
                    "peak_allocated_mib": None, "peak_reserved_mib": None,
                }
            results[path] = result
            seconds = "–" if result["seconds"] is None else f"{result['seconds']:.0f}"
            print(
                f"[{len(results)}/{len(notebooks)}] {result['status']:<7} "
                f"{seconds:>5} s  {result['notebook']}"
                + (f"  {one_line(result['first_error'], 100)}"
                   if result["first_error"] else ""),
                flush=True,
            )
    wall = time.monotonic() - start
    ordered = [results[p] for p in notebooks]
    failed = [r for r in ordered if r["status"] != "OK"]
    devices = sorted({r.get("device") or "" for r in ordered} - {""})
    torches = sorted({r.get("torch") or "" for r in ordered} - {""})
    summary = {
        "wall_seconds": round(wall, 1),
        "jobs": args.jobs,
        "threads": args.threads,
        "cuda": cuda,
        "device": what if cuda else "cpu",
        "devices_seen": devices,
        "torch": torches,
        "ok": len(ordered) - len(failed),
        "failed": len(failed),
        "notebooks": ordered,
    }
    (args.out / "report.json").write_text(
        json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    print()
    print(table(ordered))
    for r in failed:
        print(f"\n{r['notebook']}: {r['status']}")
        for e in r["errors"]:
            where = "run" if e["cell"] is None else f"cell {e['cell']}"
            what = ": ".join(filter(None, [e["ename"], one_line(e["evalue"], 200)]))
            print(f"  {where}: {what}")
        if not r["errors"]:
            print(f"  {r['first_error']}")
    print(
        f"\n{len(ordered) - len(failed)} of {len(ordered)} notebooks OK in {wall:.0f} s"
        f" ({args.jobs} jobs; torch {', '.join(torches) or '–'}; "
        f"{', '.join(devices) or 'no CUDA device'}); report in {args.out}/report.json"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

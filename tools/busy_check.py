"""``make busy-check``: the pages that time or train, re-run while another process keeps
one core busy.

A reader's machine is rarely idle. This check starts a process that keeps one core busy
(a pure-Python loop), re-runs each page that times or trains with nbval, claims strict,
and fails if a page fails or takes more than ``--factor`` times its quiet time (the
seconds ``tools/execute_notebooks.py`` recorded in the notebook's metadata,
``attention_book.executed.seconds``), plus ``--slack`` seconds for starting pytest and
the kernel. A page with no recorded time is checked for failures only. The busy process
is stopped at the end, whatever happened.

The pages are chosen by a rule, not by hand: a notebook whose code calls one of the
library's timers or training functions (``TIMES_OR_TRAINS``) or runs ``backward()``.

    python tools/busy_check.py chapters -- --nbval --nbval-sanitize-with ...
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMES_OR_TRAINS = re.compile(
    r"\b(seconds_per_call|best_seconds|matmul_rate|train_seq2seq|train_classifier"
    r"|train_lm)\(|\.backward\(\)"
)
SPIN = "while True:\n    pass"


def times_or_trains(notebook: Path) -> bool:
    """Whether the notebook's code times or trains (see TIMES_OR_TRAINS)."""
    cells = json.loads(notebook.read_text())["cells"]
    return any(
        cell["cell_type"] == "code" and TIMES_OR_TRAINS.search("".join(cell["source"]))
        for cell in cells
    )


def quiet_seconds(notebook: Path) -> float | None:
    """The seconds the notebook took when it was last executed, if recorded."""
    metadata = json.loads(notebook.read_text()).get("metadata", {})
    return metadata.get("attention_book", {}).get("executed", {}).get("seconds")


def verdict(passed: bool, busy: float, quiet: float | None, factor: float,
            slack: float) -> str:
    """'ok', or why the page fails the check."""
    if not passed:
        return "FAILED (see the output above)"
    if quiet is not None and busy > factor * quiet + slack:
        return f"TOO SLOW: {busy:.0f} s > {factor} x {quiet:.0f} s + {slack:.0f} s"
    return "ok" if quiet is not None else "ok (no quiet time recorded: not timed)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path,
                        help="notebooks, or folders searched for them")
    parser.add_argument("--factor", type=float, default=2.5)
    parser.add_argument("--slack", type=float, default=20.0,
                        help="seconds for starting pytest and the kernel")
    argv = sys.argv[1:] if argv is None else argv
    # after "--": pytest's options for nbval (the Makefile's NBVAL)
    split = argv.index("--") if "--" in argv else len(argv)
    args, pytest_args = parser.parse_args(argv[:split]), argv[split + 1:]
    notebooks = sorted(
        notebook
        for path in args.paths
        for notebook in ([path] if path.suffix == ".ipynb" else path.rglob("*.ipynb"))
        if ".ipynb_checkpoints" not in notebook.parts and times_or_trains(notebook)
    )
    env = dict(os.environ, ATTENTION_LIB_STRICT_CLAIMS="1")
    spinner = subprocess.Popen([sys.executable, "-c", SPIN])
    print(f"busy process {spinner.pid} keeps one core busy;"
          f" {len(notebooks)} pages time or train", flush=True)
    rows = []
    try:
        for notebook in notebooks:
            print(f"--- {notebook}", flush=True)
            started = time.perf_counter()
            run = subprocess.run([sys.executable, "-m", "pytest", str(notebook),
                                  *pytest_args], cwd=ROOT, env=env)
            busy = time.perf_counter() - started
            quiet = quiet_seconds(notebook)
            rows.append((notebook, quiet, busy, verdict(run.returncode == 0, busy,
                                                        quiet, args.factor,
                                                        args.slack)))
    finally:
        spinner.kill()
        spinner.wait()
    print(f"\n{'page':<58} {'quiet s':>8} {'busy s':>8}  result")
    for notebook, quiet, busy, result in rows:
        quiet_text = "-" if quiet is None else f"{quiet:.0f}"
        print(f"{str(notebook):<58} {quiet_text:>8} {busy:>8.0f}  {result}")
    failed = [row for row in rows if not row[3].startswith("ok")]
    passed = len(rows) - len(failed)
    print(f"\n{passed} of {len(rows)} pages passed with one core busy.")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

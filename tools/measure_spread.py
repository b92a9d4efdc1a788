"""Measure how much a page's trained and timed numbers move between runs, and write the
page that says so.

Every number a chapter quotes from training or timing is glued into its prose and
checked by a ``claim(name, value, low=..., high=...)`` call (see
``attention_lib/claims.py``). The ranges must cover what another machine would see. This
tool measures that:

    # run each training notebook several ways (threads and seeds), in parallel where
        cores allow
    python tools/measure_spread.py run chapters/01_seq2seq/02_encoder_decoder.ipynb \\
        --variant threads=1,seed=0 --variant threads=2,seed=1 --out spread/ --jobs 2

    # a table of every claim: its range, and the value in the committed notebook and in
        each run
    python tools/measure_spread.py report spread/ [more folders] --write book/checks.md

    # the same, keeping the runs the current page shows whose copies are gone
    python tools/measure_spread.py report spread/ --keep book/checks.md \\
        --write book/checks.md

``run`` executes copies (never the committed notebooks) with papermill, which sets
``SEED`` in the cell tagged ``parameters``; ``OMP_NUM_THREADS`` sets the thread count.
``report`` reads the glued values from the executed copies and the committed notebooks,
the claims' ranges from the notebooks' source, and the per-notebook counts of outputs
that nbval compares exactly, outputs it ignores, and claims asserted.
``tests/test_checks_page.py`` keeps the written page in step with the notebooks.
"""
from __future__ import annotations

import argparse
import ast
import concurrent.futures
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
IGNORE = "nbval-ignore-output"


def parse_variant(text: str) -> dict[str, int]:
    """'threads=1,seed=2' -> {'threads': 1, 'seed': 2}."""
    variant = {"threads": 2, "seed": 0}
    for part in filter(None, text.split(",")):
        key, _, value = part.partition("=")
        if key not in variant:
            raise SystemExit(f"--variant takes threads=N,seed=N; got {text!r}")
        variant[key] = int(value)
    return variant


def run_one(notebook: Path, variant: dict[str, int], out: Path, device: str) -> str:
    name = f"{notebook.stem}__{device}_t{variant['threads']}_s{variant['seed']}.ipynb"
    target = out / name
    env = dict(
        os.environ,
        OMP_NUM_THREADS=str(variant["threads"]),
        MKL_NUM_THREADS=str(variant["threads"]),
    )
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    command = [
        sys.executable,
        "-m",
        "papermill",
        str(notebook),
        str(target),
        "-p",
        "SEED",
        str(variant["seed"]),
        "--cwd",
        str(notebook.parent),
        "--kernel",
        "python3",
        "--no-progress-bar",
    ]
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    status = "ok" if result.returncode == 0 else "FAILED:\n" + result.stderr[-3000:]
    return f"{name}: {status}"


def glued_values(nb) -> dict[str, object]:
    """The values myst-nb's glue stored in a notebook's outputs, by name."""
    values = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            if not name:
                continue
            text = next(
                (
                    v
                    for k, v in output.get("data", {}).items()
                    if k.endswith("text/plain")
                ),
                None,
            )
            try:
                values[name] = ast.literal_eval(text)
            except (ValueError, SyntaxError, TypeError):
                values[name] = text
    return values


def _literal(node, names=None):
    """A literal argument, or ``by_device(device, cpu=..., gpu=...)`` read as
    ``{"cpu": ..., "gpu": ...}``, or a name the cell assigned one of those to."""
    if isinstance(node, ast.Name) and names and node.id in names:
        node = names[node.id]
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "by_device":
        return {k.arg: ast.literal_eval(k.value) for k in node.keywords}
    return ast.literal_eval(node)


def bounds_text(low, high, checked=True) -> str:
    """A claim's range as the page prints it: 'holds', '2.5 … 8.0', per device where
    ``by_device`` chooses it ('CPU 2.5 … ; GPU 0.6 …'), and 'on a CPU only' where
    ``checked=by_device(device, cpu=True, gpu=False)``."""
    def one(lo, hi):
        if lo is None and hi is None:
            return "holds"
        return f"{'' if lo is None else lo} … {'' if hi is None else hi}"

    if isinstance(low, dict) or isinstance(high, dict):
        pick = {
            kind: [b.get(kind) if isinstance(b, dict) else b for b in (low, high)]
            for kind in ("cpu", "gpu")
        }
        text = f"CPU {one(*pick['cpu'])}; GPU {one(*pick['gpu'])}"
    else:
        text = one(low, high)
    if isinstance(checked, dict) and checked.get("cpu") and not checked.get("gpu"):
        text += " (checked on a CPU only)"
    return text


def claims_in(nb) -> list[tuple[str, object, object, object]]:
    """(name, low, high, checked) of every ``claim("name", value, low=..., high=...)``
    call with literal arguments (or ``by_device(...)`` of literals)."""
    found = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        names = {  # on_cpu = by_device(device, cpu=True, gpu=False)
            node.targets[0].id: node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "claim"
                and node.args
            ):
                first = node.args[0]
                # f"ch3_{key}_..." : keep the pattern readable
                if isinstance(first, ast.JoinedStr):
                    name = "".join(
                        v.value if isinstance(v, ast.Constant) else "{…}"
                        for v in first.values
                    )
                else:
                    name = ast.literal_eval(first)
                kw = {
                    k.arg: _literal(k.value, names)
                    for k in node.keywords
                    if k.arg in ("low", "high", "checked")
                }
                found.append(
                    (name, kw.get("low"), kw.get("high"), kw.get("checked", True))
                )
    return found


def output_counts(nb) -> dict[str, int]:
    code = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    with_outputs = [c for c in code if c.outputs]
    ignored = [c for c in with_outputs if IGNORE in c.metadata.get("tags", [])]
    return {
        "code cells": len(code),
        "with outputs": len(with_outputs),
        "compared exactly": len(with_outputs) - len(ignored),
        "ignored": len(ignored),
        "claims": len(claims_in(nb)),
    }


def fmt(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def _cell_value(text: str):
    """A value as the page prints it, read back: 'yes'/'no', '–' (not measured), a
    number, or the text itself."""
    if text in ("yes", "no"):
        return text == "yes"
    if text in ("–", ""):
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def kept_runs(page: Path) -> tuple[dict, dict]:
    """The measured runs an earlier version of the page shows: per notebook section,
    {run column: {claim: value}}, and {run: seconds}. ``report --keep`` carries them
    over, so that runs measured once (on a GPU, say) stay on the page after their
    executed copies are gone."""
    claims, times, section, columns = {}, {}, None, []
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            section, columns = line[3:].strip(), []
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or cells[0].startswith("---"):
            continue
        if section == "Execution time of each measured run":
            if cells[0] != "run":
                times[cells[0]] = cells[1]
        elif section and cells[0] == "claim":
            columns = cells[3:-2]  # after claim, range, committed; before min, max
        elif section and columns and cells[0].startswith("`"):
            name = cells[0].strip("`")
            for column, text in zip(columns, cells[3:-2]):
                claims.setdefault(section, {}).setdefault(column, {})[name] = (
                    _cell_value(text)
                )
    return claims, times


def report(folders: list[Path], keep: Path | None = None) -> str:
    notebooks = sorted(
        p
        for p in (ROOT / "chapters").rglob("*.ipynb")
        if ".ipynb_checkpoints" not in p.parts
    )
    runs = sorted(p for folder in folders for p in folder.glob("*.ipynb"))
    kept_claims, kept_times = kept_runs(keep) if keep else ({}, {})
    lines = [
        "# How the numbers are checked",
        "",
        "Generated by `python tools/measure_spread.py report`; do not edit by hand.",
        "",
        (
            "Outputs that the code alone determines (data statistics, worked examples,"
            " shapes, printed"
        ),
        (
            "source, error messages) are compared exactly by nbval when the tests"
            " re-run a notebook."
        ),
        (
            "Outputs of training and timing differ in their digits from machine to"
            " machine, so nbval"
        ),
        (
            "ignores them; instead, every claim the page makes about them is checked by"
            " a `claim(...)`"
        ),
        (
            "call in the notebook, against a range that covers the spread measured"
            " below. A few timing"
        ),
        (
            "claims are checked only on a CPU (the notebook's comment says why); their"
            " `cuda` columns"
        ),
        "are shown for information and may lie outside the range. Where a GPU"
        " shows another regime",
        (
            "(every step bound by kernel launches), a claim has a range for each"
            " (`CPU …; GPU …`)."
        ),
        "",
        "## Outputs per notebook",
        "",
        (
            "| notebook | code cells | with outputs | compared exactly | ignored |"
            " claims asserted |"
        ),
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for path in notebooks:
        counts = output_counts(nbformat.read(path, as_version=4))
        lines.append(
            f"| {path.relative_to(ROOT / 'chapters')} | "
            + " | ".join(
                str(counts[k])
                for k in (
                    "code cells",
                    "with outputs",
                    "compared exactly",
                    "ignored",
                    "claims",
                )
            )
            + " |"
        )
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        claims = claims_in(nb)
        if not claims:
            continue
        mine = [r for r in runs if r.name.startswith(path.stem + "__")]
        columns = ["committed"] + [r.stem.split("__", 1)[1] for r in mine]
        values = [glued_values(nb)] + [
            glued_values(nbformat.read(r, as_version=4)) for r in mine
        ]
        section = str(path.relative_to(ROOT / "chapters"))
        for column, old in sorted(kept_claims.get(section, {}).items()):
            if column not in columns:  # a fresh run of the same name wins
                columns.append(column)
                values.append(old)
        lines += [
            "",
            f"## {path.relative_to(ROOT / 'chapters')}",
            "",
            (
                "Runs: `committed` is the run whose outputs the site shows; the others"
                " are named device, threads (`t`) and seed (`s`)."
            ),
            "",
            "| claim | range | " + " | ".join(columns) + " | min | max |",
            "| --- | --- | " + " | ".join("---:" for _ in columns) + " | ---: | ---: |",
        ]
        for name, low, high, checked in claims:
            seen = [v.get(name) for v in values]
            numeric = [
                v
                for v in seen
                if isinstance(v, (int, float)) and not isinstance(v, bool)
            ]
            bounds = bounds_text(low, high, checked)
            lines.append(
                f"| `{name}` | {bounds} | "
                + " | ".join("–" if v is None else fmt(v) for v in seen)
                + f" | {fmt(min(numeric)) if numeric else ''} |"
                f" {fmt(max(numeric)) if numeric else ''} |"
            )
    timed = {
        r.stem: nbformat.read(r, as_version=4)
        .metadata.get("papermill", {})
        .get("duration")
        for r in runs
    }
    for run, seconds in kept_times.items():
        timed.setdefault(run, seconds)
    if timed:
        lines += [
            "",
            "## Execution time of each measured run",
            "",
            (
                "Whole notebook, as papermill timed it (`cuda`: a GPU, as on Colab;"
                " `cpu`: threads `t`)."
            ),
            "",
            "| run | seconds |",
            "| --- | ---: |",
        ]
        for run, seconds in sorted(timed.items()):
            if not isinstance(seconds, str):  # kept from the page: already printed
                seconds = "–" if seconds is None else f"{seconds:.0f}"
            lines.append(f"| {run} | {seconds} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run", help="execute copies of notebooks under several thread counts and seeds"
    )
    run.add_argument("notebooks", nargs="+", type=Path)
    run.add_argument(
        "--variant", action="append", default=[], help="threads=N,seed=N (repeatable)"
    )
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--jobs", type=int, default=1)
    run.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    rep = sub.add_parser("report", help="tabulate claims and their measured values")
    rep.add_argument("folders", nargs="*", type=Path)
    rep.add_argument("--write", type=Path)
    rep.add_argument(
        "--keep",
        type=Path,
        help="an earlier page whose measured runs to carry over (e.g. book/checks.md)",
    )
    args = parser.parse_args(argv)
    if args.command == "run":
        args.out.mkdir(parents=True, exist_ok=True)
        jobs = [
            (nb.resolve(), parse_variant(v))
            for nb in args.notebooks
            for v in args.variant or ["threads=2"]
        ]
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            results = list(
                pool.map(
                    lambda job: run_one(
                        job[0], job[1], args.out.resolve(), args.device
                    ),
                    jobs,
                )
            )
        print("\n".join(results))
        return 0 if all(r.endswith(": ok") for r in results) else 1
    text = report(args.folders, args.keep)
    if args.write:
        args.write.write_text(text, encoding="utf-8")
        print(f"wrote {args.write}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

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

    # the checks page: every claim in words, its range, and the spread of the committed
    # notebook and every run; the runs are kept in tools/spread_runs.json, so that runs
    # measured once (on a GPU, say) stay after their executed copies are gone
    python tools/measure_spread.py report spread/ [more folders] --write book/checks.md

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
import re
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
IGNORE = "nbval-ignore-output"
DASH = "\u00a0–\u00a0"  # a range "1.3 – 2.3" that a narrow table column does not break


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
    """A claim's range as the page prints it: 'holds', '2.5 – 8.0', '≥ 3', per device
    where ``by_device`` chooses it ('CPU ≥ 2.5; GPU ≥ 0.6'), and 'CPU only' where
    ``checked=by_device(device, cpu=True, gpu=False)``."""
    def one(lo, hi):
        if lo is None and hi is None:
            return "holds"
        if hi is None:
            return f"≥\u00a0{lo}"
        if lo is None:
            return f"≤\u00a0{hi}"
        return f"= {lo}" if lo == hi else f"{lo}{DASH}{hi}"

    if isinstance(low, dict) or isinstance(high, dict):
        pick = {
            kind: [b.get(kind) if isinstance(b, dict) else b for b in (low, high)]
            for kind in ("cpu", "gpu")
        }
        text = f"CPU {one(*pick['cpu'])}; GPU {one(*pick['gpu'])}"
    else:
        text = one(low, high)
    if isinstance(checked, dict) and checked.get("cpu") and not checked.get("gpu"):
        text += " (CPU only)"
    return text


def _text(node) -> str:
    """A string literal, or an f-string with "{…}" for each hole: f"ch3_{key}_ratio"
    reads "ch3_{…}_ratio", a pattern the glued names of a loop match."""
    if isinstance(node, ast.JoinedStr):
        return "".join(
            v.value if isinstance(v, ast.Constant) else "{…}" for v in node.values
        )
    return ast.literal_eval(node)


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
                name = _text(node.args[0])
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


def abouts_in(nb, keyword: str = "about") -> dict[str, str]:
    """{claim name: its ``about="..."`` text} for the claims that say what they are
    (``keyword="backs"``: the sentence of the page each claim backs)."""
    found = {}
    for cell in nb.cells:
        if cell.cell_type != "code" or "claim(" not in cell.source:
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "claim":
                about = next((k.value for k in node.keywords if k.arg == keyword),
                             None)
                if isinstance(about, (ast.Constant, ast.JoinedStr)) and node.args:
                    found[_text(node.args[0])] = _text(about)
    return found


def load_runs(path: Path | None) -> tuple[dict, dict]:
    """The measured runs kept in ``tools/spread_runs.json``: per notebook,
    {run: {claim: value}}, and {run: seconds}. Runs measured once (on a GPU, say)
    stay there after their executed copies are gone."""
    if path is None or not path.exists():
        return {}, {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return data.get("claims", {}), data.get("seconds", {})


def _pattern(name: str) -> re.Pattern:
    """'ch2_speedup_{…}' (a claim named in a loop) -> a regex for the glued names."""
    return re.compile("^" + "(.+)".join(map(re.escape, name.split("{…}"))) + "$")


def _page_number(path: Path) -> str:
    chapter, page = path.parent.name[:2], path.name[:2]
    return f"{int(chapter)}.{int(page)}"


def _doc(path: Path) -> str:
    target = path.relative_to(ROOT).with_suffix("").as_posix()
    return f"{{doc}}`{_page_number(path)} </{target}>`"


def _words(name: str, about: str | None, sentence: str = "") -> str:
    """The claim cell: what is measured, the sentence it backs, and its name."""
    words = about or re.sub(r"^ch\d+_", "", name).replace("_", " ")
    backs = f": backs “{sentence}”" if sentence else ""
    return f"{words}{backs} (`{name}`)"


def _spread(values: list) -> str:
    numeric = sorted(
        v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)
    )
    flags = [v for v in values if isinstance(v, bool)]
    if numeric:
        low, high = numeric[0], numeric[-1]
        text = fmt(low) if fmt(low) == fmt(high) else f"{fmt(low)}{DASH}{fmt(high)}"
        return f"{text} ({len(numeric)})"
    if flags:
        held = sum(flags)
        return f"held in {held} of {len(flags)}"
    return "–"


READERS = """\
Every page of this book is a notebook, and the tests run every notebook again from the
first cell to the last. What the code alone decides (the data's statistics, a worked
example, a shape, an error message) must come out exactly as the page shows it. What
training or timing produces cannot: the last digits of a loss change with the thread
count, the order of additions and the processor, a few epochs later a translation
reads differently, and a time depends on the machine and on what else it is doing. So
the book never relies on those digits. Each sentence that quotes such a number is a
**claim** with a range, checked every time the page runs, on whatever machine runs it:
if a result falls outside its range, the page stops with an error that names the
claim. The number in the sentence is the one the code printed on the run the site
shows.

The ranges come from measurement, not from hope: each training or timing page was run
several times (one and two threads, other random seeds, and for some pages a GPU), and
the range covers what those runs gave, with a margin for other machines. Where a GPU
works in another regime (a small step there is bound by kernel launches, not
arithmetic), a claim has one range for a CPU and one for a GPU, and a few claims about
a CPU's behaviour are checked on a CPU only.

Each claim is shown with the sentence of its page that it backs: its range is chosen
so that a value outside it would make that sentence false. In the tables, a range
*a – b* means the value must lie between a and b, *≥ a* at
least a, *≤ b* at most b, and *holds* a statement that is simply true or false.
*Measured* gives the smallest and largest value over the runs, with the number of runs
in brackets. The name in code font is the one a failing check reports.
"""


def report(
    folders: list[Path], runs_file: Path | None = None
) -> tuple[str, dict]:
    """The checks page (Markdown) and the runs data to keep in ``runs_file``."""
    notebooks = sorted(
        p
        for p in (ROOT / "chapters").rglob("*.ipynb")
        if ".ipynb_checkpoints" not in p.parts
    )
    runs = sorted(p for folder in folders for p in folder.glob("*.ipynb"))
    kept_claims, kept_times = load_runs(runs_file)
    lines = ["# How the numbers are checked", "", READERS]
    chapters: dict[Path, list[Path]] = {}
    for path in notebooks:
        chapters.setdefault(path.parent, []).append(path)
    for folder, paths in chapters.items():
        rows = []
        for path in paths:
            nb = nbformat.read(path, as_version=4)
            claims = claims_in(nb)
            if not claims:
                continue
            section = str(path.relative_to(ROOT / "chapters"))
            values = {"committed": glued_values(nb)}
            for run in runs:
                if run.name.startswith(path.stem + "__"):
                    values[run.stem.split("__", 1)[1]] = glued_values(
                        nbformat.read(run, as_version=4)
                    )
            for column, old in kept_claims.get(section, {}).items():
                values.setdefault(column, old)  # a fresh run of the same name wins
            kept_claims[section] = {k: v for k, v in values.items() if k != "committed"}
            abouts, backs = abouts_in(nb), abouts_in(nb, "backs")
            for name, low, high, checked in claims:
                pattern = _pattern(name)  # one name, or a loop's names
                names = sorted(
                    {n for v in values.values() for n in v
                     if pattern.match(n) and "{…}" not in n}
                ) or [name]
                for one in names:
                    seen = [v.get(one) for v in values.values()]
                    about = abouts.get(name)
                    match = pattern.match(one)
                    if about and match:  # a loop's words: its holes filled in
                        for part in match.groups():
                            about = about.replace("{…}", part, 1)
                    sentence = backs.get(name, "").replace("|", "\\|")
                    rows.append(
                        f"| {_doc(path)} | {_words(one, about, sentence)} |"
                        f" {bounds_text(low, high, checked)} | {_spread(seen)} |"
                    )
        if not rows:
            continue
        title = (folder / "index.md").read_text(encoding="utf-8").splitlines()[0]
        lines += [
            "",
            f"## Chapter {int(folder.name[:2])}: {title.lstrip('# ').strip()}",
            "",
            "| page | claim | range | measured |",
            "| --- | --- | --- | --- |",
            *rows,
        ]
    lines += [
        "",
        "## What each page compares exactly",
        "",
        "Code cells, those with outputs, outputs compared exactly, outputs that vary",
        "from machine to machine (not compared; their claims are checked instead),",
        "and claims.",
        "",
        "| page | code cells | with outputs | compared exactly | vary | claims |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for path in notebooks:
        lines.append(output_row(path))
    for run in runs:
        seconds = nbformat.read(run, as_version=4).metadata.get("papermill", {}).get(
            "duration"
        )
        if seconds is not None:
            kept_times[run.stem] = f"{seconds:.0f}"
    per_page: dict[str, dict[str, list[float]]] = {}
    for run, seconds in kept_times.items():
        stem, _, variant = run.partition("__")
        device = "GPU" if variant.startswith("cuda") else "CPU"
        if seconds not in ("–", None, ""):
            page_times = per_page.setdefault(stem, {})
            page_times.setdefault(device, []).append(float(seconds))
    if per_page:
        lines += [
            "",
            "## How long each page takes",
            "",
            "Seconds to run the whole notebook, fastest and slowest of the measured",
            "runs",
            "(CPU: a 2-core machine at one or two threads; GPU: as on Colab).",
            "",
            "| page | CPU | GPU |",
            "| --- | ---: | ---: |",
        ]
        for path in notebooks:
            times = per_page.get(path.stem)
            if not times:
                continue
            cells = [_seconds(times.get(device, [])) for device in ("CPU", "GPU")]
            lines.append(f"| {_doc(path)} | {cells[0]} | {cells[1]} |")
    data = {"claims": kept_claims, "seconds": kept_times}
    return "\n".join(lines) + "\n", data


def _seconds(times: list[float]) -> str:
    if not times:
        return "–"
    low, high = min(times), max(times)
    return f"{low:.0f}" if low == high else f"{low:.0f}{DASH}{high:.0f}"


def output_row(path: Path) -> str:
    """The row of "What each page compares exactly" for one notebook."""
    counts = output_counts(nbformat.read(path, as_version=4))
    keys = ("code cells", "with outputs", "compared exactly", "ignored", "claims")
    return f"| {_doc(path)} | " + " | ".join(str(counts[k]) for k in keys) + " |"


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
        "--runs",
        type=Path,
        default=ROOT / "tools" / "spread_runs.json",
        help="the measured runs kept between reports (updated with --write)",
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
    text, data = report(args.folders, args.runs)
    if args.write:
        args.write.write_text(text, encoding="utf-8")
        args.runs.write_text(
            json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n",
            encoding="utf-8",
        )
        print(f"wrote {args.write} and {args.runs}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

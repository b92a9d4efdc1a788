"""The page "How the numbers are checked" lists every claim with the range the notebook
checks."""
import importlib.util
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "book" / "checks.md"
RUNS = ROOT / "tools" / "spread_runs.json"
spec = importlib.util.spec_from_file_location(
    "measure_spread", ROOT / "tools" / "measure_spread.py"
)
measure_spread = importlib.util.module_from_spec(spec)
spec.loader.exec_module(measure_spread)
NOTEBOOKS = sorted(
    p
    for p in (ROOT / "chapters").rglob("*.ipynb")
    if ".ipynb_checkpoints" not in p.parts
)


def test_the_page_is_in_the_table_of_contents():
    assert "book/checks" in (ROOT / "_toc.yml").read_text()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_claim_and_its_range_is_on_the_page(path):
    """Change a range, and the page (with the measurements behind it) must be
    regenerated."""
    page = PAGE.read_text(encoding="utf-8")
    claims = measure_spread.claims_in(nbformat.read(path, as_version=4))
    for name, low, high, checked in claims:
        bounds = measure_spread.bounds_text(low, high, checked)
        if "{…}" in name:  # named in a loop: one row per name the loop glued
            pattern = measure_spread._pattern(name)
            rows = re.findall(r"\(`([^`]+)`\) \| " + re.escape(bounds) + r" \|", page)
            assert any(pattern.match(n) for n in rows), f"{name} not on {PAGE.name}"
            continue
        assert (
            f"(`{name}`) | {bounds} |" in page
        ), f"{name} ({bounds}) not on {PAGE.name}: regenerate it"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_output_counts_on_the_page_match_the_notebook(path):
    assert measure_spread.output_row(path) in PAGE.read_text(encoding="utf-8")


def test_the_page_is_written_for_readers():
    page = PAGE.read_text(encoding="utf-8")
    assert "do not edit" not in page.lower() and "nbval" not in page.lower()
    assert "| page | claim | range | measured |" in page, "a compact table a chapter"


def test_trained_cells_are_ignored_and_their_claims_checked():
    """A cell that trains is not compared digit by digit, and a notebook that trains
    asserts claims."""
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        training = [c for c in nb.cells if "training" in c.metadata.get("tags", [])]
        for cell in training:
            assert "nbval-ignore-output" in cell.metadata["tags"], cell.source[:80]
        if training:
            assert measure_spread.claims_in(
                nb
            ), f"{path.name} trains but asserts no claim"
            params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
            assert (
                params and "SEED" in params[0].source
            ), f"{path.name}: no parameters cell with SEED"


def test_a_report_without_new_runs_loses_no_kept_run():
    """Rewriting the page with no spread folders keeps every run in the runs file."""
    kept_claims, kept_times = measure_spread.load_runs(RUNS)
    assert kept_claims and kept_times  # measured runs are kept
    _, data = measure_spread.report([], RUNS)
    assert data["seconds"] == kept_times
    for section, columns in kept_claims.items():
        for column, values in columns.items():
            assert data["claims"][section][column] == values, (section, column)


def test_the_page_is_what_the_report_writes():
    text, _ = measure_spread.report([], RUNS)
    assert PAGE.read_text(encoding="utf-8") == text, "regenerate: measure_spread report"


def test_ranges_per_device_are_printed_per_device():
    text = measure_spread.bounds_text({"cpu": 2.5, "gpu": 0.6}, 8.0)
    text = text.replace("\u00a0", " ")  # no-break spaces keep a range on one line
    assert text == "CPU 2.5 – 8.0; GPU 0.6 – 8.0"
    only_cpu = measure_spread.bounds_text(1.3, 2.3, {"cpu": True, "gpu": False})
    assert only_cpu.replace("\u00a0", " ") == "1.3 – 2.3 (CPU only)"
    assert measure_spread.bounds_text(3, None) == "≥\u00a03"
    assert measure_spread.bounds_text(None, 0.65) == "≤\u00a00.65"
    assert measure_spread.bounds_text(None, None) == "holds"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_claim_names_the_sentence_it_backs(path):
    """A claim backs a sentence of its page; the checks page shows which."""
    nb = nbformat.read(path, as_version=4)
    backs = measure_spread.abouts_in(nb, "backs")
    missing = [name for name, *_ in measure_spread.claims_in(nb) if not backs.get(name)]
    assert not missing, f"claims without backs=: {missing}"
    page = PAGE.read_text(encoding="utf-8")
    for name, sentence in backs.items():
        shown = f"backs “{sentence.replace('|', chr(92) + '|')}”"
        assert shown in page, f"{name}: its sentence is not on {PAGE.name}"

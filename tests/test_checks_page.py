"""The page "How the numbers are checked" lists every claim with the range the notebook
checks."""
import importlib.util
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "book" / "checks.md"
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
        assert (
            f"| `{name}` | {bounds} |" in page
        ), f"{name} ({bounds}) not on {PAGE.name}: regenerate it"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_output_counts_on_the_page_match_the_notebook(path):
    counts = measure_spread.output_counts(nbformat.read(path, as_version=4))
    row = (
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
    assert row in PAGE.read_text(encoding="utf-8")


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


def test_report_keep_carries_the_pages_runs_over(tmp_path):
    """Rewriting the page with no spread folders but --keep loses no measured run."""
    kept_claims, kept_times = measure_spread.kept_runs(PAGE)
    assert kept_claims and kept_times  # the page does list measured runs
    page = tmp_path / "checks.md"
    page.write_text(measure_spread.report([], keep=PAGE), encoding="utf-8")
    again_claims, again_times = measure_spread.kept_runs(page)
    assert again_times == kept_times
    for section, columns in kept_claims.items():
        for column, values in columns.items():
            assert again_claims[section][column] == values, (section, column)


def test_ranges_per_device_are_printed_per_device():
    text = measure_spread.bounds_text({"cpu": 2.5, "gpu": 0.6}, 8.0)
    assert text == "CPU 2.5 … 8.0; GPU 0.6 … 8.0"
    only_cpu = measure_spread.bounds_text(1.3, 2.3, {"cpu": True, "gpu": False})
    assert only_cpu == "1.3 … 2.3 (checked on a CPU only)"
    assert measure_spread.bounds_text(None, None) == "holds"

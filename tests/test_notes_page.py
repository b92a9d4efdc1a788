"""The page on the notes the book checks (book/notes.md) agrees with its own lists.

The defects of the notes' Transformer code are listed one per row; the summary table
and page 5.4's prose quote their counts, which must be the counts of the rows.
"""
import re
from collections import Counter
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "book" / "notes.md").read_text(encoding="utf-8")
KINDS = ("fails to run", "silently wrong", "minor")


def defect_rows() -> list[tuple[str, str]]:
    """(listing heading, kind) of every row of the defect tables."""
    rows, listing = [], None
    for line in PAGE.splitlines():
        if line.startswith("### Listing"):
            listing = line
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if listing and len(cells) == 4 and cells[0].isdigit() and cells[1] in KINDS:
            rows.append((listing, cells[1]))
    return rows


def test_defects_are_numbered_once_each():
    numbers = [
        int(line.split("|")[1]) for line in PAGE.splitlines()
        if re.match(r"\| \d+ \| (fails to run|silently wrong|minor) \|", line)
    ]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) > 20


def test_the_summary_table_counts_the_rows():
    counts = Counter(kind for _, kind in defect_rows())
    total = sum(counts.values())
    row = f"| all | {total} | " + " | ".join(str(counts[k]) for k in KINDS) + " |"
    assert row in PAGE, f"summary should read {row}"


def test_page_5_4_quotes_the_counts():
    counts = Counter(kind for _, kind in defect_rows())
    nb = nbformat.read(ROOT / "chapters/05_transformer/04_bug_hunt.ipynb", as_version=4)
    text = " ".join(nb.cells[0].source.split())
    expected = (
        f"counted {sum(counts.values())} defects:"
        f" {counts['fails to run']} that stop the"
        f" code, {counts['silently wrong']} that run and compute something else, and"
        f" {counts['minor']} smaller ones"
    )
    assert expected in text

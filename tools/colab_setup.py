"""The first cell of every notebook: on Colab, install attention_lib from the book's
repository.

The repository URL lives in one place, ``_config.yml`` (``repository.url``), which the
site's launch buttons use too. This script renders the setup cell from it:

    python tools/colab_setup.py --write    # (re)write the first cell of every chapter
        notebook
    python tools/colab_setup.py --check    # exit 1 if any notebook's first cell differs

The cell carries the tag ``remove-cell``: jupyter-book leaves it out of the website,
while the notebook (and so Colab, which opens the notebook) keeps it as its first code
cell.

``tests/test_notebooks.py`` runs the check, so a changed URL cannot leave a stale
notebook behind.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]

# The tag that hides the cell on the website (jupyter-book's remove-cell).
TAG = "remove-cell"

TEMPLATE = '''\
# Setup: on Colab, install attention_lib from the book's repository, and d2l without
# its version pins (Colab's own torch, numpy and ipywidgets stay). Locally it does
# nothing.
import sys

if "google.colab" in sys.modules:
    import subprocess

    REPO_URL = "{url}"
    pip = [sys.executable, "-m", "pip", "install"]
    subprocess.run([*pip, "-q", f"git+{{REPO_URL}}@{branch}"], check=True)
    subprocess.run([*pip, "-q", "--no-deps", "d2l==1.0.3"], check=True)'''


def repository() -> tuple[str, str]:
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    repo = config["repository"]
    return repo["url"].rstrip("/"), repo.get("branch", "main")


def setup_cell_source() -> str:
    url, branch = repository()
    return TEMPLATE.format(url=url, branch=branch)


def chapter_notebooks() -> list[Path]:
    return sorted(
        p for p in (ROOT / "chapters").rglob("*.ipynb")
        if ".ipynb_checkpoints" not in p.parts
    )


def first_code_cell(nb: dict) -> dict:
    return next(c for c in nb["cells"] if c["cell_type"] == "code")


def is_current(cell: dict, source: str) -> bool:
    """The cell has the current source and is hidden on the website."""
    tags = cell.get("metadata", {}).get("tags", [])
    return "".join(cell["source"]) == source and TAG in tags


def update(cell: dict, source: str) -> None:
    cell["source"] = source.splitlines(keepends=True)
    tags = cell.setdefault("metadata", {}).setdefault("tags", [])
    if TAG not in tags:
        tags.append(TAG)


def main(argv) -> int:
    source = setup_cell_source()
    stale = []
    for path in chapter_notebooks():
        # Plain JSON, written back as nbformat writes it (indent 1, sorted keys): only
        # the setup cell changes, every other cell's bytes stay as they were.
        nb = json.loads(path.read_text(encoding="utf-8"))
        cell = first_code_cell(nb)
        if not is_current(cell, source):
            stale.append(path)
            if "--write" in argv:
                update(cell, source)
                text = json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True)
                path.write_text(text + "\n", encoding="utf-8")
    verb = "rewrote " if "--write" in argv else "stale setup cell: "
    for path in stale:
        print(verb + str(path.relative_to(ROOT)))
    return 1 if stale and "--check" in argv else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

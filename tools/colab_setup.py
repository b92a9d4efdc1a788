"""The first cell of every notebook: on Colab, install attention_lib from the book's repository.

The repository URL lives in one place, ``_config.yml`` (``repository.url``), which the site's
launch buttons use too. This script renders the setup cell from it:

    python tools/colab_setup.py --write    # (re)write the first cell of every chapter notebook
    python tools/colab_setup.py --check    # exit 1 if any notebook's first cell differs

``tests/test_notebooks.py`` runs the check, so a changed URL cannot leave a stale notebook behind.
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]

TEMPLATE = '''\
# Setup: on Colab, install attention_lib from the book's repository, and d2l without its
# version pins (Colab's own torch, numpy and ipywidgets stay). Locally it does nothing.
import sys

if "google.colab" in sys.modules:
    import subprocess

    REPO_URL = "{url}"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", f"git+{{REPO_URL}}@{branch}"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "d2l==1.0.3"], check=True)'''


def repository() -> tuple[str, str]:
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    repo = config["repository"]
    return repo["url"].rstrip("/"), repo.get("branch", "main")


def setup_cell_source() -> str:
    url, branch = repository()
    return TEMPLATE.format(url=url, branch=branch)


def chapter_notebooks() -> list[Path]:
    return sorted(p for p in (ROOT / "chapters").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def first_code_cell(nb):
    return next(c for c in nb.cells if c.cell_type == "code")


def main(argv) -> int:
    source = setup_cell_source()
    stale = []
    for path in chapter_notebooks():
        nb = nbformat.read(path, as_version=4)
        cell = first_code_cell(nb)
        if cell.source != source:
            stale.append(path)
            if "--write" in argv:
                cell.source = source
                nbformat.write(nb, path)
    for path in stale:
        print(("rewrote " if "--write" in argv else "stale setup cell: ") + str(path.relative_to(ROOT)))
    return 1 if stale and "--check" in argv else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

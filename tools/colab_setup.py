"""The first cell of every notebook: on Colab, install attention_lib from the book's
repository.

The repository URL lives in one place, ``_config.yml`` (``repository.url`` and
``branch``), which the site's launch buttons (Colab, Binder) and repository buttons use
too. This script renders the setup cell from it:

    python tools/colab_setup.py --write    # (re)write the first cell of every chapter
        notebook
    python tools/colab_setup.py --check    # exit 1 if any notebook's first cell differs

and points the whole book at another repository (a fork) in one command:

    python tools/colab_setup.py --url https://github.com/OWNER/REPO [--branch main] \\
        --write                            # or: make set-repo URL=... [BRANCH=...]

which edits ``repository.url`` (and ``branch``) in ``_config.yml`` in place, comments
kept, then rewrites every notebook's setup cell; ``--branch`` also sets the branch whose
pushes .github/workflows/pages.yml publishes.

The cell carries the tag ``remove-cell``: jupyter-book leaves it out of the website,
while the notebook (and so Colab, which opens the notebook) keeps it as its first code
cell.

``tests/test_notebooks.py`` runs the check, so a changed URL cannot leave a stale
notebook behind.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIG = "_config.yml"
PAGES_WORKFLOW = ".github/workflows/pages.yml"

# The tag that hides the cell on the website (jupyter-book's remove-cell).
TAG = "remove-cell"

# On a failed install the cell raises IPython's UsageError, which IPython shows as one
# line, "UsageError: <message>", with no traceback (SystemExit adds a framing line and
# a warning about exiting); "Run all" stops there.
TEMPLATE = '''\
# Setup: on Colab, install attention_lib from the book's repository, and d2l without
# its version pins (Colab's own torch, numpy and ipywidgets stay). Locally it does
# nothing.
import sys

if "google.colab" in sys.modules:
    import subprocess

    REPO_URL = "{url}"
    BRANCH = "{branch}"
    pip = [sys.executable, "-m", "pip", "install"]
    library = f"git+{{REPO_URL}}@{{BRANCH}}"
    if subprocess.run([*pip, "-q", library], capture_output=True).returncode:
        from IPython.core.error import UsageError  # shown as one line

        raise UsageError(
            f"Could not install attention_lib from {{REPO_URL}}@{{BRANCH}}: the"
            " repository is missing or private. If you forked the book, run `make"
            " set-repo URL=https://github.com/OWNER/REPO` in your fork and push;"
            " otherwise open this notebook from the book's website."
        )
    subprocess.run([*pip, "-q", "--no-deps", "d2l==1.0.3"], check=True)'''

# Colab's launch button opens notebooks from GitHub (colab.research.google.com/github/),
# and Binder's from gh/: the repository must be on GitHub.
URL_PATTERN = re.compile(r"https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
BRANCH_PATTERN = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_./-]*")


def repository(root: Path = ROOT) -> tuple[str, str]:
    config = yaml.safe_load((root / CONFIG).read_text(encoding="utf-8"))
    repo = config["repository"]
    return repo["url"].rstrip("/"), repo.get("branch", "main")


def setup_cell_source(root: Path = ROOT) -> str:
    url, branch = repository(root)
    return TEMPLATE.format(url=url, branch=branch)


def chapter_notebooks(root: Path = ROOT) -> list[Path]:
    return sorted(
        p for p in (root / "chapters").rglob("*.ipynb")
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


def normalise_url(url: str) -> str:
    """``https://github.com/OWNER/REPO``, without a trailing slash or ``.git``."""
    url = url.strip().rstrip("/").removesuffix(".git")
    if not URL_PATTERN.fullmatch(url):
        raise ValueError(
            f"--url got {url!r}; expected https://github.com/OWNER/REPO (Colab and"
            " Binder launch notebooks from GitHub)"
        )
    return url


def set_repository(config_text: str, url: str, branch: str | None = None) -> str:
    """``_config.yml``'s text with ``repository.url`` (and ``branch``) replaced.

    Only those values change, in place: indentation, trailing comments and every other
    line stay as they were (no YAML round trip, which would drop the comments).
    """
    wanted = {"url": url} if branch is None else {"url": url, "branch": branch}
    lines = config_text.splitlines(keepends=True)
    found, inside = set(), False
    for i, line in enumerate(lines):
        if re.match(r"repository:\s*(#.*)?$", line):
            inside = True
        elif inside and line.strip() and not line.startswith((" ", "#")):
            break  # the next top-level key
        elif inside:
            # "  url: VALUE  # comment": keep everything but VALUE
            value = r"(\"[^\"]*\"|'[^']*'|[^\s#]*)"
            key = re.match(rf"( +)(url|branch):( *){value}(.*)", line)
            if key and key.group(2) in wanted:
                indent, name, space, _, rest = key.groups()
                newline = "\n" if line.endswith("\n") else ""
                lines[i] = f"{indent}{name}:{space or ' '}{wanted[name]}{rest}{newline}"
                found.add(name)
    missing = sorted(set(wanted) - found)
    if missing:
        raise ValueError(
            f"{CONFIG} has no repository.{' or '.join(missing)} line to rewrite"
        )
    return "".join(lines)


def set_pages_branch(workflow_text: str, branch: str) -> str:
    """The Pages workflow's text, publishing pushes to ``branch``."""
    text, n = re.subn(
        r"^(\s+branches:\s*)\[[^\]\n]*\]", rf"\g<1>[{branch}]", workflow_text,
        flags=re.M,
    )
    if n != 1:
        raise ValueError(f"{PAGES_WORKFLOW}: expected one `branches: [...]` line")
    return text


def point_at(root: Path, url: str, branch: str | None) -> None:
    """Point the book in ``root`` at ``url`` (and ``branch``): _config.yml, and the
    branch the Pages workflow publishes; both edited before either is written."""
    edits = {root / CONFIG: lambda text: set_repository(text, url, branch)}
    if branch is not None and (root / PAGES_WORKFLOW).is_file():
        edits[root / PAGES_WORKFLOW] = lambda text: set_pages_branch(text, branch)
    texts = {
        path: edit(path.read_text(encoding="utf-8")) for path, edit in edits.items()
    }
    for path, text in texts.items():
        path.write_text(text, encoding="utf-8")
    what = f"repository.url = {url}" + (f", branch = {branch}" if branch else "")
    print(f"{CONFIG}: {what}")
    if len(texts) > 1:
        print(f"{PAGES_WORKFLOW}: publishes pushes to {branch}")


def main(argv=None, root: Path = ROOT) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--write", action="store_true", help="rewrite stale setup cells"
    )
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if a setup cell is stale"
    )
    parser.add_argument(
        "--url", help="point the book at https://github.com/OWNER/REPO (needs --write)"
    )
    parser.add_argument("--branch", help="and at this branch (needs --write)")
    args = parser.parse_args(argv)
    if (args.url or args.branch) and not args.write:
        parser.error("--url and --branch rewrite _config.yml: add --write")
    if args.url or args.branch:
        if args.branch is not None and not BRANCH_PATTERN.fullmatch(args.branch):
            parser.error(f"--branch got {args.branch!r}; expected a branch name")
        try:
            url = normalise_url(args.url) if args.url else repository(root)[0]
            point_at(root, url, args.branch)
        except ValueError as error:
            parser.error(str(error))
    source = setup_cell_source(root)
    stale = []
    for path in chapter_notebooks(root):
        # Plain JSON, written back as nbformat writes it (indent 1, sorted keys): only
        # the setup cell changes, every other cell's bytes stay as they were.
        nb = json.loads(path.read_text(encoding="utf-8"))
        cell = first_code_cell(nb)
        if not is_current(cell, source):
            stale.append(path)
            if args.write:
                update(cell, source)
                text = json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True)
                path.write_text(text + "\n", encoding="utf-8")
    verb = "rewrote " if args.write else "stale setup cell: "
    for path in stale:
        print(verb + str(path.relative_to(root)))
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The notebooks' setup cell (tools/colab_setup.py) keeps Colab's own packages, without
running pip.

The cell runs here with a stub ``google.colab`` module and ``subprocess`` replaced by a
recorder, so the tests see the exact commands it would run on Colab. ``make
colab-check`` runs it for real, on Colab's versions. Each rule is also fed a bad cell,
to show that it can fail.
"""
import importlib.util
import json
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "colab_setup", ROOT / "tools" / "colab_setup.py"
)
colab_setup = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(colab_setup)

# Colab ships these, built for its CUDA and front end: reinstalling any of them breaks
# the runtime.
KEEP = {"torch", "torchvision", "numpy", "ipywidgets"}


def commands_run(source: str, monkeypatch, on_colab: bool = True) -> list:
    """The commands the cell runs (recorded, not run), on Colab or locally."""
    commands = []

    def record(args, *rest, **kwargs):
        commands.append(args)
        return subprocess.CompletedProcess(args, 0)

    with monkeypatch.context() as m:
        if on_colab:
            m.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
        else:
            m.delitem(sys.modules, "google.colab", raising=False)
        for name in ["run", "call", "check_call", "check_output", "Popen"]:
            m.setattr(subprocess, name, record)
        m.setattr("os.system", record)
        exec(compile(source, "<setup cell>", "exec"), {"__name__": "__main__"})
    return commands


def problems(source: str, monkeypatch) -> list[str]:
    """What is wrong with a setup cell: an empty Colab branch, a shell command, apt, a
    kept package."""
    found = []
    if re.search(r"\bapt(-get)?\b|\bfonts-", source):
        found.append("mentions apt or a font package")
    commands = commands_run(source, monkeypatch)
    if not commands:
        found.append("its Colab branch runs no command")
    for args in commands:
        if isinstance(args, str) or list(args[1:4]) != ["-m", "pip", "install"]:
            found.append(f"runs something other than `python -m pip install`: {args}")
            continue
        for arg in args[4:]:
            # options, and the git+https URL of the book
            if arg.startswith("-") or "://" in arg:
                continue
            name = re.match(r"[A-Za-z0-9._-]+", arg).group(0).lower().replace("_", "-")
            if name in KEEP:
                found.append(f"pip-installs {arg}, which Colab ships and must keep")
    return found


def test_the_setup_cell_keeps_colabs_packages_and_installs_no_apt_package(monkeypatch):
    assert problems(colab_setup.setup_cell_source(), monkeypatch) == []


def test_on_colab_the_setup_cell_installs_the_library_and_d2l_without_deps(
    monkeypatch,
):
    commands = commands_run(colab_setup.setup_cell_source(), monkeypatch)
    url, branch = colab_setup.repository()
    assert [c[4:] for c in commands] == [
        ["-q", f"git+{url}@{branch}"],
        ["-q", "--no-deps", "d2l==1.0.3"],
    ]
    assert all(
        c[0] == sys.executable for c in commands
    ), "pip must be the kernel's own (sys.executable -m pip)"


def test_locally_the_setup_cell_runs_nothing(monkeypatch):
    assert (
        commands_run(colab_setup.setup_cell_source(), monkeypatch, on_colab=False) == []
    )


@pytest.mark.parametrize(
    "fault", ["torch", "numpy", "ipywidgets", "apt", "shell", "empty"]
)
def test_the_rules_catch_a_bad_setup_cell(fault, monkeypatch):
    good = colab_setup.setup_cell_source()
    d2l_line = '"-q", "--no-deps", "d2l==1.0.3"]'
    assert d2l_line in good
    bad = {
        "torch": good.replace(
            d2l_line, '"-q", "--no-deps", "d2l==1.0.3", "torch>=2.4"]'
        ),
        "numpy": good.replace(d2l_line, '"-q", "d2l==1.0.3", "numpy==1.23.5"]'),
        "ipywidgets": good.replace(
            d2l_line, '"-q", "--no-deps", "d2l==1.0.3", "ipywidgets>=8"]'
        ),
        "apt": (
            good
            + '\n    subprocess.run(["apt-get", "-qq", "install", "-y",'
            ' "fonts-noto-cjk"], check=False)'
        ),
        "shell": (
            good
            + '\n    subprocess.run("pip install -q sacrebleu", shell=True, check=True)'
        ),
        "empty": good.replace(
            'if "google.colab" in sys.modules:',
            'if "google.colab" in sys.modules and False:',
        ),
    }[fault]
    assert bad != good
    assert problems(bad, monkeypatch), f"a setup cell with this fault passed: {fault}"


def test_every_notebook_starts_with_the_setup_cell_hidden_on_the_website():
    """First code cell in Colab (which opens the .ipynb), tagged remove-cell for the
    website."""
    source = colab_setup.setup_cell_source()
    for path in colab_setup.chapter_notebooks():
        nb = json.loads(path.read_text(encoding="utf-8"))
        cell = colab_setup.first_code_cell(nb)
        assert (
            "".join(cell["source"]) == source
        ), f"{path.name}: first code cell is not the setup cell"
        tags = cell["metadata"].get("tags", [])
        assert (
            "remove-cell" in tags
        ), f"{path.name}: setup cell shown on the website (no remove-cell tag)"


def test_write_tags_a_setup_cell_that_lacks_the_tag():
    cell = {
        "cell_type": "code",
        "metadata": {},
        "source": ["print('old')\n"],
        "outputs": [],
    }
    assert not colab_setup.is_current(cell, colab_setup.setup_cell_source())
    colab_setup.update(cell, colab_setup.setup_cell_source())
    assert cell["metadata"]["tags"] == ["remove-cell"]
    assert colab_setup.is_current(cell, colab_setup.setup_cell_source())
    cell["metadata"]["tags"] = []  # right source, but visible on the website: stale
    assert not colab_setup.is_current(cell, colab_setup.setup_cell_source())

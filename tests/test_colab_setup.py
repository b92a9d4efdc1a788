"""The notebooks' setup cell (tools/colab_setup.py) keeps Colab's own packages, without
running pip; and one command points the book at a fork.

The cell runs here with a stub ``google.colab`` module and ``subprocess`` replaced by a
recorder, so the tests see the exact commands it would run on Colab. ``make
colab-check`` runs it for real, on Colab's versions. Each rule is also fed a bad cell,
to show that it can fail.
"""
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml
from IPython.core.error import UsageError

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "colab_setup", ROOT / "tools" / "colab_setup.py"
)
colab_setup = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(colab_setup)

# Colab ships these, built for its CUDA and front end: reinstalling any of them breaks
# the runtime.
KEEP = {"torch", "torchvision", "numpy", "ipywidgets"}

# What pip prints when git cannot clone the repository (as on Colab, for a missing or
# private one): the reader must not get this.
PIP_ERROR = b"""\
  error: subprocess-exited-with-error

  x git clone --filter=blob:none --quiet https://github.com/OWNER/REPO
  | /tmp/pip-req-build-1 did not run successfully.
  | exit code: 128
  > [1 lines of output]
      fatal: could not read Username for 'https://github.com': No such device or address
      [end of output]
Traceback (most recent call last):
"""


def commands_run(
    source: str, monkeypatch, on_colab: bool = True, returncode: int = 0, commands=None
) -> list:
    """The commands the cell runs (recorded, not run, into ``commands`` if given), on
    Colab or locally; each "returns" ``returncode``, with pip's error output when that
    is not 0."""
    commands = [] if commands is None else commands

    def record(args, *rest, **kwargs):
        commands.append(args)
        if returncode == 0:
            return subprocess.CompletedProcess(args, 0)
        return subprocess.CompletedProcess(args, returncode, b"", PIP_ERROR)

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


# -- a failed install: one line that names the repository and what to do ------------


def test_a_failed_install_says_so_in_one_line_naming_the_repository(monkeypatch):
    url, branch = colab_setup.repository()
    commands = []
    with pytest.raises(UsageError) as raised:
        commands_run(
            colab_setup.setup_cell_source(), monkeypatch, returncode=1,
            commands=commands,
        )
    # IPython shows a UsageError as the one line "UsageError: <message>", no traceback
    message = str(raised.value)
    assert "\n" not in message, message
    assert f"{url}@{branch}" in message
    assert "missing or private" in message and "make set-repo URL=" in message
    assert not re.search(r"Traceback|exit code|git clone|subprocess", message), message
    assert [c[4:] for c in commands] == [["-q", f"git+{url}@{branch}"]], (
        "after a failed install the cell must stop, not go on to install d2l"
    )


def test_a_successful_install_raises_nothing(monkeypatch):
    assert len(commands_run(colab_setup.setup_cell_source(), monkeypatch)) == 2


# -- pointing the book at a fork -------------------------------------------------------

FORK = "https://github.com/someone/attention-fork"


def test_the_url_rewrite_changes_url_and_branch_and_nothing_else(tmp_path):
    config = tmp_path / "_config.yml"
    shutil.copy(ROOT / "_config.yml", config)
    before = config.read_text(encoding="utf-8")
    colab_setup.point_at(tmp_path, FORK, "dev")
    after = config.read_text(encoding="utf-8")

    old, new = yaml.safe_load(before), yaml.safe_load(after)
    assert new["repository"]["url"] == FORK and new["repository"]["branch"] == "dev"
    for settings in (old, new):
        del settings["repository"]["url"], settings["repository"]["branch"]
    assert new == old, "only repository.url and repository.branch may change"
    # edited in place: comments and layout kept, exactly two lines differ
    changed = [
        (a, b)
        for a, b in zip(before.splitlines(), after.splitlines(), strict=True)
        if a != b
    ]
    assert changed == [
        (f"  url: {colab_setup.repository()[0]}", f"  url: {FORK}"),
        (f"  branch: {colab_setup.repository()[1]}", "  branch: dev"),
    ]
    assert [l for l in before.splitlines() if "#" in l] == [
        l for l in after.splitlines() if "#" in l
    ]


def test_the_url_rewrite_keeps_a_trailing_comment_and_may_leave_the_branch():
    text = "title: x\nrepository:\n  url: 'https://a/b'  # one place\n  branch: m\n"
    assert colab_setup.set_repository(text, FORK) == (
        f"title: x\nrepository:\n  url: {FORK}  # one place\n  branch: m\n"
    )
    with pytest.raises(ValueError, match="repository.branch"):
        colab_setup.set_repository("repository:\n  url: x\n", FORK, "dev")


@pytest.mark.parametrize(
    "given, expected",
    [(FORK, FORK), (FORK + ".git", FORK), (FORK + "/", FORK)],
)
def test_urls_are_normalised(given, expected):
    assert colab_setup.normalise_url(given) == expected


@pytest.mark.parametrize(
    "bad", ["github.com/a/b", "https://gitlab.com/a/b", "https://github.com/a", "x"]
)
def test_a_url_that_launch_buttons_cannot_use_is_refused(bad):
    with pytest.raises(ValueError, match="https://github.com/OWNER/REPO"):
        colab_setup.normalise_url(bad)


def test_url_without_write_is_refused(tmp_path, capsys):
    shutil.copy(ROOT / "_config.yml", tmp_path / "_config.yml")
    with pytest.raises(SystemExit) as exited:
        colab_setup.main(["--url", FORK], root=tmp_path)
    assert exited.value.code == 2 and "add --write" in capsys.readouterr().err
    assert (tmp_path / "_config.yml").read_text() == (ROOT / "_config.yml").read_text()


def test_one_command_points_config_setup_cells_and_pages_at_a_fork(tmp_path):
    """``--url ... --branch ... --write`` on a copy of the book: _config.yml, the setup
    cell of a notebook, and the branch the Pages workflow publishes."""
    notebook = colab_setup.chapter_notebooks()[0]
    copy = tmp_path / notebook.relative_to(ROOT)
    copy.parent.mkdir(parents=True)
    shutil.copy(notebook, copy)
    for name in ["_config.yml", ".github/workflows/pages.yml"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)

    command = ["--url", FORK, "--branch", "dev", "--write"]
    assert colab_setup.main(command, root=tmp_path) == 0
    assert colab_setup.repository(tmp_path) == (FORK, "dev")
    assert colab_setup.main(["--check"], root=tmp_path) == 0
    cell = colab_setup.first_code_cell(json.loads(copy.read_text(encoding="utf-8")))
    source = "".join(cell["source"])
    assert f'REPO_URL = "{FORK}"' in source and 'BRANCH = "dev"' in source
    pages = yaml.safe_load((tmp_path / ".github/workflows/pages.yml").read_text())
    assert pages[True]["push"]["branches"] == ["dev"]  # YAML 1.1 reads `on` as True

    # the check can fail: the repository moves on, the cell does not
    colab_setup.point_at(tmp_path, FORK + "-2", None)
    assert colab_setup.main(["--check"], root=tmp_path) == 1

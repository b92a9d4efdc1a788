"""The GitHub workflows (.github/workflows): actionlint finds nothing wrong with them,
and they do what the README says (CI runs .ci/run; Pages deploys _build/html).

actionlint is the one installed in the venv next to the interpreter running the tests
(requirements.txt). Its optional shellcheck and pyflakes passes are switched off, so
every machine checks the same things whatever else is on its PATH.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
ACTIONLINT = Path(sys.executable).parent / "actionlint"


def actionlint(*paths: Path) -> subprocess.CompletedProcess:
    assert ACTIONLINT.is_file(), (
        f"{ACTIONLINT} is missing: install the pinned requirements"
        " (`make env`, or `.venv/bin/pip install -r requirements.txt`)"
    )
    return subprocess.run(
        [str(ACTIONLINT), "-oneline", "-no-color", "-shellcheck=", "-pyflakes="]
        + [str(p) for p in paths],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def load(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))


def triggers(workflow: dict) -> dict:
    on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as True
    return {name: {} for name in on} if isinstance(on, list) else on


def steps(job: dict) -> list[dict]:
    return job.get("steps", [])


def test_actionlint_reports_nothing_on_the_workflows():
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert [f.name for f in files] == ["ci.yml", "pages.yml"]
    result = actionlint(*files)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", ""), (
        result.stdout + result.stderr
    )


# Each fault is made by one replacement in a real workflow, so the check is shown to
# fail on the very files it passes.
FAULTS = {
    "a timeout that is not a number": (
        "ci.yml", "timeout-minutes: 90", "timeout-minutes: ninety"
    ),
    "an input the action does not have": (
        "pages.yml", "path: _build/html", "directory: _build/html"
    ),
    "an output of a step that does not exist": (
        "pages.yml", "steps.deployment.outputs", "steps.deploy.outputs"
    ),
    "a job that needs a job that does not exist": (
        "pages.yml", "needs: build", "needs: built"
    ),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_actionlint_reports_a_broken_workflow(fault, tmp_path):
    name, good, bad = FAULTS[fault]
    text = (WORKFLOWS / name).read_text(encoding="utf-8")
    assert good in text, f"{name} no longer has {good!r}: update this test"
    broken = tmp_path / name
    broken.write_text(text.replace(good, bad), encoding="utf-8")
    result = actionlint(broken)
    assert result.returncode == 1, f"{fault}: not reported\n{result.stdout}"
    # one line a problem: "<path relative to the working directory>:line:col: ..."
    assert result.stdout.startswith(os.path.relpath(broken, ROOT) + ":"), result.stdout


def test_ci_runs_ci_run_in_debian_bookworm_on_push_and_pull_request():
    workflow = load("ci.yml")
    assert {"push", "pull_request"} <= set(triggers(workflow))
    (job,) = workflow["jobs"].values()
    assert job["container"] == "debian:bookworm"  # python3 3.11, apt-get as root
    assert 0 < job["timeout-minutes"] <= 90  # CI's budget
    runs = [step.get("run", "").strip() for step in steps(job)]
    assert "bash .ci/run" in runs
    checkout = next(
        i for i, s in enumerate(steps(job))
        if s.get("uses", "").startswith("actions/checkout@")
    )
    # git must be there before the checkout, or it is a tarball without history; and
    # pip cannot clone a shallow checkout with --filter (colab-check installs from it)
    assert "git" in runs[checkout - 1].split() and checkout < runs.index("bash .ci/run")
    assert steps(job)[checkout]["with"]["fetch-depth"] == 0


def test_pages_builds_the_book_and_deploys_build_html():
    workflow = load("pages.yml")
    on = triggers(workflow)
    assert "workflow_dispatch" in on and on["push"]["branches"] == ["main"]
    assert workflow["permissions"]["pages"] == "write"
    assert workflow["permissions"]["id-token"] == "write"
    assert workflow["concurrency"]["group"]
    jobs = workflow["jobs"]
    build = steps(jobs["build"])
    uses = [step.get("uses", "").split("@")[0] for step in build]
    assert "actions/configure-pages" in uses
    upload = build[uses.index("actions/upload-pages-artifact")]
    assert upload["with"]["path"].rstrip("/") == "_build/html"
    runs = [step.get("run", "").strip() for step in build]
    assert runs.index("make book") < uses.index("actions/upload-pages-artifact")
    (deploy,) = [job for job in jobs.values() if job.get("needs") == "build"]
    assert [s["uses"].split("@")[0] for s in steps(deploy)] == ["actions/deploy-pages"]
    assert deploy["environment"]["name"] == "github-pages"


def test_pages_publishes_the_branch_of_config_yml():
    """tools/colab_setup.py --branch sets both; a hand edit of one alone shows here."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    branch = config["repository"].get("branch", "main")
    assert triggers(load("pages.yml"))["push"]["branches"] == [branch]

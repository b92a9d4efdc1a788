"""Every benchmark still runs: each ``bench/bench_*.py`` in smoke mode (tiny sizes, one
round, nothing judged; ``bench/__init__.py``) exits cleanly in a fresh process.

The benchmarks start together, one thread each, so that the file takes about as long
as the slowest of them rather than their sum; those that train on the corpus read one
line in 20 of it (reading the whole would take them longer than their smoke run).
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import SMOKE_ENV_VAR, SMOKE_NOTE

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = sorted(path.stem for path in (ROOT / "bench").glob("bench_*.py"))
TIMEOUT_S = 300
SAMPLE_EVERY = 20


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The smoke run of every benchmark, started at once: name -> (process, log)."""
    from attention_lib.data import DATA_ENV_VAR, locate_fra_eng

    logs = tmp_path_factory.mktemp("bench")
    corpus = locate_fra_eng().read_text(encoding="utf-8").splitlines(keepends=True)
    sample = tmp_path_factory.mktemp("fra-eng")
    (sample / "fra.txt").write_text("".join(corpus[::SAMPLE_EVERY]), encoding="utf-8")
    env = {**os.environ, SMOKE_ENV_VAR: "1", "OMP_NUM_THREADS": "1",
           DATA_ENV_VAR: str(sample)}
    started = {}
    for name in BENCHMARKS:
        log = open(logs / f"{name}.log", "w+")
        process = subprocess.Popen(
            [sys.executable, "-m", f"bench.{name}"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
        started[name] = (process, log)
    yield started
    for process, log in started.values():
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()


def test_every_benchmark_is_found():
    assert {"bench_attention", "bench_bahdanau", "bench_multihead"} <= set(BENCHMARKS)


@pytest.mark.parametrize("name", BENCHMARKS)
def test_benchmark_runs_in_smoke_mode(runs, name):
    process, log = runs[name]
    returncode = process.wait(timeout=TIMEOUT_S)
    log.seek(0)
    output = log.read()
    assert returncode == 0, f"bench/{name}.py failed:\n{output[-4000:]}"
    assert SMOKE_NOTE in output, f"bench/{name}.py did not run in smoke mode"

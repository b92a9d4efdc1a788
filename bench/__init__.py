"""Benchmarks: each ``bench_*.py`` measures the library side by side with a peer, in one
run, and prints the ratios. Run them from the repository's root as modules:

    python -m bench.bench_attention         # one benchmark
    python -m bench.run_all                 # all of them (``make bench``)
    python -m bench.run_all --smoke         # all of them in smoke mode

Smoke mode (``--smoke``, or the environment variable ``BENCH_SMOKE=1``): tiny sizes, one
round, no goal judged, seconds instead of minutes. It shows that a benchmark still runs
(``tests/test_bench.py``); its numbers mean nothing.
"""
import os

SMOKE_ENV_VAR = "BENCH_SMOKE"


def smoke_mode(argv) -> bool:
    """Whether to run in smoke mode: ``--smoke`` in ``argv`` or ``BENCH_SMOKE`` set (to
    anything but ``""`` or ``"0"``)."""
    return "--smoke" in argv or os.environ.get(SMOKE_ENV_VAR, "") not in ("", "0")


SMOKE_NOTE = "smoke run: tiny sizes, one round; the numbers below mean nothing"

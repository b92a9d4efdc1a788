"""Shared test setup: the real corpus from ../shared when it is there (CI and these
machines)."""
import os
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "fra-eng"
if "ATTENTION_LIB_DATA" not in os.environ and (SHARED / "fra.txt").is_file():
    os.environ["ATTENTION_LIB_DATA"] = str(SHARED)
# The book's own checks: a failing claim raises (a reader's run shows a note instead),
# here and in the kernels the tests start (nbval, tools/gpu_check.py).
os.environ.setdefault("ATTENTION_LIB_STRICT_CLAIMS", "1")


@pytest.fixture(scope="session")
def small_data():
    """The real corpus with a small training subset, for fast tests."""
    from attention_lib import load_fra_eng

    return load_fra_eng(num_steps=10, max_train=3000)

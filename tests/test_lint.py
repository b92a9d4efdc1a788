"""The code passes ruff: syntax errors and pyflakes' findings (undefined names, unused
imports and variables). The rules and the files they cover are in pyproject.toml's
``[tool.ruff]``."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format",
         "concise"],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert "No module named ruff" not in result.stderr, (
        "ruff is not installed: `make env` installs requirements.txt")
    assert result.returncode == 0, result.stdout + result.stderr

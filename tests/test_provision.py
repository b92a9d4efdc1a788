"""`make book` / `make test` provision system packages as root, and otherwise stop at
once, saying how."""
import os
import shutil
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_without_root_a_missing_package_stops_at_once_naming_the_command(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ["bash", "python3", "grep", "fc-list"]:
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    fake_id = bin_dir / "id"
    fake_id.write_text("#!/bin/sh\necho 1000\n")  # not root
    fake_id.chmod(0o755)
    started = time.monotonic()
    result = subprocess.run(
        [str(bin_dir / "bash"), str(ROOT / "tools/provision.sh"), "book"],
        env={"PATH": str(bin_dir)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert time.monotonic() - started < 10
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "sudo apt-get install npm" in lines[0], result.stderr


def test_with_everything_present_it_does_nothing():
    if not (shutil.which("npm") and os.access("/usr/bin/chromium", os.X_OK)):
        import pytest
        pytest.skip("this machine lacks the packages; the test above covers that path")
    result = subprocess.run(
        ["bash", str(ROOT / "tools/provision.sh"), "test"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0 and result.stdout == "" and result.stderr == ""

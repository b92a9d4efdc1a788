"""Run every benchmark under bench/ (files named bench_*.py), one after another, each in
a fresh process.

Each benchmark prints its own table of ratios against a peer measured side by side in
the same run; absolute times are not comparable between runs on shared machines.
`make bench` runs this.

    python -m bench.run_all            # every benchmark (many minutes)
    python -m bench.run_all --smoke    # every benchmark in smoke mode (bench/__init__.py)
"""
import subprocess
import sys
from pathlib import Path

from bench import smoke_mode

here = Path(__file__).resolve().parent


def main(argv):
    failed = []
    for script in sorted(here.glob("bench_*.py")):
        print(f"\n=== {script.name} ===", flush=True)
        command = [sys.executable, "-m", f"bench.{script.stem}"]
        if smoke_mode(argv):
            command.append("--smoke")
        if subprocess.run(command, cwd=here.parent).returncode != 0:
            failed.append(script.name)
    if failed:
        sys.exit(f"benchmarks failed: {', '.join(failed)}")


if __name__ == "__main__":
    main(sys.argv[1:])

"""Run every benchmark under bench/ (files named bench_*.py), one after another, in fresh processes.

Each benchmark prints its own table of ratios against a peer measured side by side in the same
run; absolute times are not comparable between runs on shared machines. `make bench` runs this.
"""
import subprocess
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
failed = []
for script in sorted(here.glob("bench_*.py")):
    print(f"\n=== {script.name} ===", flush=True)
    if subprocess.run([sys.executable, str(script)], cwd=here.parent).returncode != 0:
        failed.append(script.name)
if failed:
    sys.exit(f"benchmarks failed: {', '.join(failed)}")

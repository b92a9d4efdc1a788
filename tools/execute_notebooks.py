"""Execute notebooks in place, top to bottom, in a fresh kernel each, writing the
outputs back.

    python tools/execute_notebooks.py chapters                 # every notebook under
        chapters/
    python tools/execute_notebooks.py chapters/01_seq2seq/02_encoder_decoder.ipynb

This is what `make execute` runs; the committed outputs are what nbval compares against
in CI. Widget state is stored in every notebook, so that the site can draw what the
widgets showed when the notebook ran: an explorer's first state, a training run's
finished progress bar.

Each run is recorded in the notebook's metadata, under ``attention_book.executed``:
when it started (UTC), how many seconds it took (kernel start to last cell), and what
the kernel ran on: Python and PyTorch versions, PyTorch's thread count, the CPU model
and the cores the kernel may use, the device the book's pages choose (CUDA, then MPS,
then the CPU) and the GPU's name. These are read inside the kernel, after the last
cell, by a short probe cell that is removed again before the notebook is written. The
website shows them on each page ("About this run", book/_ext/provenance.py).
"""
from __future__ import annotations

import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import nbformat
from nbclient import NotebookClient

KEY = "attention_book"  # nb.metadata[KEY]["executed"] = {...}
MARKER = "attention-book-provenance:"

# Runs in the notebook's kernel after its last cell; prints MARKER + JSON and leaves no
# names behind.
PROBE = f'''\
def _attention_book_probe():
    import json, os, platform
    info = {{"python": platform.python_version(), "torch": None, "threads": None,
            "device": "cpu", "gpu": None}}
    try:
        info["cores"] = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        info["cores"] = os.cpu_count()
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.partition(":")[2].strip()
                    break
    except OSError:
        pass
    info["cpu"] = cpu
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        info["torch"] = torch.__version__
        info["threads"] = torch.get_num_threads()
        mps = getattr(torch.backends, "mps", None)
        if torch.cuda.is_available():
            info["device"] = "cuda"
            info["gpu"] = torch.cuda.get_device_name()
        elif mps is not None and mps.is_available():
            info["device"] = "mps"
            info["gpu"] = "Apple GPU (MPS)"
    print({MARKER!r} + json.dumps(info))
_attention_book_probe()
del _attention_book_probe
'''


def notebooks(paths):
    for p in map(Path, paths):
        if p.is_dir():
            yield from sorted(
                q for q in p.rglob("*.ipynb") if ".ipynb_checkpoints" not in q.parts
            )
        else:
            yield p


def _probe_result(cell) -> dict:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            for line in output.get("text", "").splitlines():
                if line.startswith(MARKER):
                    return json.loads(line[len(MARKER):])
    raise RuntimeError(f"the provenance probe printed nothing usable: {cell.outputs}")


def execute(path: Path) -> dict:
    """Execute the notebook at ``path`` in place and record the run in its metadata.

    Returns the record, ``nb.metadata["attention_book"]["executed"]``.
    """
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    probe = nbformat.v4.new_code_cell(PROBE)
    nb.cells.append(probe)
    client = NotebookClient(
        nb,
        timeout=1800,
        kernel_name="python3",
        store_widget_state=True,
        resources={"metadata": {"path": str(path.parent)}},
    )
    started = datetime.now(timezone.utc)
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    assert nb.cells[-1] is probe
    nb.cells.pop()
    record = {
        "date": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "seconds": round(seconds, 1),
        **_probe_result(probe),
    }
    nb.metadata.setdefault(KEY, {})["executed"] = record
    nbformat.write(nb, path)
    return record


def main(argv):
    # The committed outputs come from a run whose claims all held: a claim that fails
    # stops the run here (a reader's run shows a note instead; attention_lib.claims).
    os.environ.setdefault("ATTENTION_LIB_STRICT_CLAIMS", "1")
    for path in notebooks(argv or ["chapters"]):
        print(f"executing {path} ...", flush=True)
        record = execute(path)
        print(f"  done in {record['seconds']:.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

"""Execute notebooks in place, top to bottom, in a fresh kernel each, writing the
outputs back.

    python tools/execute_notebooks.py chapters                 # every notebook under
        chapters/
    python tools/execute_notebooks.py chapters/01_seq2seq/02_encoder_decoder.ipynb

This is what `make execute` runs; the committed outputs are what nbval compares against
in CI. Widget state is stored in every notebook, so that the site can draw what the
widgets showed when the notebook ran: an explorer's first state, a training run's
finished progress bar.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def notebooks(paths):
    for p in map(Path, paths):
        if p.is_dir():
            yield from sorted(
                q for q in p.rglob("*.ipynb") if ".ipynb_checkpoints" not in q.parts
            )
        else:
            yield p


def main(argv):
    for path in notebooks(argv or ["chapters"]):
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(
            nb,
            timeout=1800,
            kernel_name="python3",
            store_widget_state=True,
            resources={"metadata": {"path": str(path.parent)}},
        )
        start = time.time()
        print(f"executing {path} ...", flush=True)
        client.execute()
        nbformat.write(nb, path)
        print(f"  done in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

"""Execute notebooks in place, top to bottom, in a fresh kernel each, writing the outputs back.

    python tools/execute_notebooks.py chapters                 # every notebook under chapters/
    python tools/execute_notebooks.py chapters/01_seq2seq/02_encoder_decoder.ipynb

This is what `make execute` runs; the committed outputs are what nbval compares against in CI.
Widget state is stored only for notebooks whose metadata says ``"store_widget_state": true``
(notebooks with interactive explorers), so a progress bar does not embed widget state in the site.
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
            yield from sorted(q for q in p.rglob("*.ipynb") if ".ipynb_checkpoints" not in q.parts)
        else:
            yield p


def main(argv):
    for path in notebooks(argv or ["chapters"]):
        nb = nbformat.read(path, as_version=4)
        store = bool(nb.metadata.get("attention_book", {}).get("store_widget_state", False))
        client = NotebookClient(nb, timeout=1800, kernel_name="python3", store_widget_state=store,
                                resources={"metadata": {"path": str(path.parent)}})
        start = time.time()
        print(f"executing {path} ...", flush=True)
        client.execute()
        nbformat.write(nb, path)
        print(f"  done in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

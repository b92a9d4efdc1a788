"""Train chapter 5's translation Transformer and export it for the page "Translate in
your browser".

    python tools/export_translator.py            # about 5 minutes on 2 CPU cores

It trains the model the way chapters/05_transformer/02_training.ipynb does (the same
settings, `CHAPTER5_TRANSFORMER`, seed, data and `train_seq2seq` call), for a fixed
number of epochs instead of the chapter's race against the clock, so that a rerun on
the same machine gives the same weights. It then writes, into book/_static/translator/:

    encoder.onnx, decoder_step.onnx   the two programs (attention_lib.export), weights
                                      stored in float16
    translator.json                   vocabularies, special tokens, lengths, names
    provenance.json                   commit, settings, test BLEU, file checksums

The files are committed; tests/test_translator_export.py checks them against this
record and against the library. `--untrained` skips training (random weights, for
working on the page).
"""
from __future__ import annotations

import argparse
import dataclasses
import gzip
import hashlib
import importlib.metadata
import json
import platform
import subprocess
import time
from pathlib import Path

import torch

from attention_lib import corpus_bleu, load_fra_eng, set_seed, train_seq2seq, translate
from attention_lib.config import CHAPTER5_TRANSFORMER
from attention_lib.export import export_translator

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "book" / "_static" / "translator"
FILES = ("encoder.onnx", "decoder_step.onnx", "translator.json")


def commit() -> str:
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True,
                              text=True).stdout.strip()

    head = git("rev-parse", "HEAD")
    return head + ("+changes" if git("status", "--porcelain", "--untracked-files=no")
                   else "")


def file_record(path: Path) -> dict:
    raw = path.read_bytes()
    return {"sha256": hashlib.sha256(raw).hexdigest(), "bytes": len(raw),
            "gzip_bytes": len(gzip.compress(raw, 9))}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--untrained", action="store_true",
                        help="random weights: for working on the page only")
    args = parser.parse_args(argv)
    source = commit()  # the code that trains, read before it runs
    device = torch.device("cpu")  # the programs are traced on the CPU
    config = CHAPTER5_TRANSFORMER
    data = load_fra_eng(config.num_steps, config.min_freq, config.max_train, seed=0)
    set_seed(args.seed)
    model = config.build(len(data.src_vocab), len(data.tgt_vocab), max_len=64)
    history = None
    if not args.untrained:
        set_seed(args.seed)  # the chapter's minibatches
        loader = data.loader("train", batch_size=config.batch_size, seed=args.seed)
        history = train_seq2seq(
            model, loader, args.epochs, pad=data.tgt_vocab.pad,
            optimizer=config.optimizer, schedule=config.schedule,
            label_smoothing=config.label_smoothing, device=device)
    model.eval()
    test_english = [e for e, _ in data.raw["test"]]
    test_french = [" ".join(f) for _, f in data.pairs["test"]]
    trained, _ = translate(model, data, test_english)
    export_translator(model, data, args.out)  # rounds the model to float16
    shipped, _ = translate(model, data, test_english)
    record = {
        "what": "chapter 5's translation Transformer, exported by"
                " tools/export_translator.py",
        "commit": source,
        "created": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "device": f"cpu, {torch.get_num_threads()} threads",
        "versions": {name: importlib.metadata.version(name) for name in
                     ("torch", "onnx", "onnxscript", "onnxruntime")},
        "python": platform.python_version(),
        "settings": dataclasses.asdict(config),
        "seed": args.seed,
        "epochs": 0 if args.untrained else args.epochs,
        "batches": 0 if history is None else history.batches,
        "training_seconds": 0 if history is None else round(history.seconds, 1),
        "num_test": len(test_english),
        "test_bleu_float32": round(corpus_bleu(trained, test_french), 2),
        # computed by the library in PyTorch on the float16-rounded weights, which
        # tests/test_translator_export.py shows onnxruntime reproduces
        "test_bleu_shipped": round(corpus_bleu(shipped, test_french), 2),
        "test_same_translation_float16": sum(
            a == b for a, b in zip(trained, shipped)) / len(trained),
        "weights": "float16 in the files, computed in float32",
        "files": {name: file_record(args.out / name) for name in FILES},
    }
    (args.out / "provenance.json").write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({k: v for k, v in record.items() if k != "settings"}, indent=1))


if __name__ == "__main__":
    main()

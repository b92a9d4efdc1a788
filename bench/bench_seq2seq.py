"""Chapter 1 benchmark: training throughput of the library's GRU encoder–decoder against d2l's
``Seq2Seq`` (same data, sizes, batches and optimiser, measured alternately in one run), then the
book's own costs: install, site build and full notebook execution times.

    python -m bench.bench_seq2seq            # everything (about 10-15 minutes on 2 CPU cores)
    python -m bench.bench_seq2seq --quick    # throughput only
    python -m bench.bench_seq2seq --smoke    # throughput of tiny models on two batches: seconds

Absolute times are not comparable between runs on shared machines; the ratio is what to read.
"""
from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
if "ATTENTION_LIB_DATA" not in os.environ and (ROOT.parent / "shared/data/fra-eng/fra.txt").is_file():
    os.environ["ATTENTION_LIB_DATA"] = str(ROOT.parent / "shared/data/fra-eng")

from attention_lib import EncoderDecoder, Seq2SeqDecoder, Seq2SeqEncoder, load_fra_eng, sequence_loss, set_seed  # noqa: E402
from attention_lib.config import CHAPTER1_SEQ2SEQ as CONFIG  # noqa: E402  (chapter 1's settings)
from bench import SMOKE_NOTE, smoke_mode  # noqa: E402

# Smoke mode: tiny models, a small training subset.
SMOKE_CONFIG = CONFIG.with_(max_train=500, embed_size=16, num_hiddens=16, num_layers=1, dropout=0.0,
                            batch_size=16)


def library_model(data, c):
    return EncoderDecoder(Seq2SeqEncoder(len(data.src_vocab), c.embed_size, c.num_hiddens, c.num_layers, c.dropout),
                          Seq2SeqDecoder(len(data.tgt_vocab), c.embed_size, c.num_hiddens, c.num_layers, c.dropout))


def d2l_model(data, c):
    """d2l's ``Seq2Seq`` with the package's ``Seq2SeqEncoder``; the package has no ``Seq2SeqDecoder``
    (the book defines it on its page), so it is assembled here from the package's parts exactly as
    the d2l book's section on sequence-to-sequence learning writes it."""
    from d2l import torch as d2l

    class D2LSeq2SeqDecoder(d2l.Decoder):
        def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0):
            super().__init__()
            self.embedding = nn.Embedding(vocab_size, embed_size)
            self.rnn = d2l.GRU(embed_size + num_hiddens, num_hiddens, num_layers, dropout)
            self.dense = nn.LazyLinear(vocab_size)
            self.apply(d2l.init_seq2seq)

        def init_state(self, enc_all_outputs, *args):
            return enc_all_outputs

        def forward(self, X, state):
            embs = self.embedding(X.t().type(torch.int32))  # (Lq, B, E): d2l is time-major
            enc_output, hidden_state = state
            context = enc_output[-1].repeat(embs.shape[0], 1, 1)  # (Lq, B, Dh)
            outputs, hidden_state = self.rnn(torch.cat((embs, context), -1), hidden_state)
            return self.dense(outputs).swapaxes(0, 1), [enc_output, hidden_state]  # (B, Lq, V)

    sizes = (c.embed_size, c.num_hiddens, c.num_layers, c.dropout)
    return d2l.Seq2Seq(d2l.Seq2SeqEncoder(len(data.src_vocab), *sizes),
                       D2LSeq2SeqDecoder(len(data.tgt_vocab), *sizes),
                       tgt_pad=data.tgt_vocab.pad, lr=c.lr)


def make_step(model, kind, pad, lr):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def step(batch):
        if kind == "library":
            loss = sequence_loss(model(batch.src, batch.src_valid_lens, batch.tgt_input), batch.tgt_output, pad)
        else:  # d2l's Seq2Seq: forward(enc_X, dec_X, *args), loss(Y_hat, Y) masks padding itself
            loss = model.loss(model(batch.src, batch.tgt_input, batch.src_valid_lens), batch.tgt_output)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    return step


def throughput(c=CONFIG, rounds: int = 3, batches_per_round: int = 20, warmup: int = 3):
    data = load_fra_eng(c.num_steps, c.min_freq, c.max_train)
    batches = [b for _, b in zip(range(batches_per_round), data.loader("train", batch_size=c.batch_size))]
    steps = {}
    for kind, build in [("library", library_model), ("d2l", d2l_model)]:
        set_seed(0)
        model = build(data, c)
        model(batches[0].src, *( (batches[0].src_valid_lens, batches[0].tgt_input) if kind == "library"
                                   else (batches[0].tgt_input, batches[0].src_valid_lens)))  # materialise lazy layers
        model.train()
        steps[kind] = make_step(model, kind, data.tgt_vocab.pad, c.lr)
        for b in batches[:warmup]:  # warm-up
            steps[kind](b)
    rates = {kind: [] for kind in steps}
    for _ in range(rounds):  # alternate so both see the same machine load
        for kind, step in steps.items():
            start = time.perf_counter()
            for b in batches:
                step(b)
            rates[kind].append(len(batches) * c.batch_size / (time.perf_counter() - start))
    lib, ref = statistics.median(rates["library"]), statistics.median(rates["d2l"])
    print(f"training throughput, E={c.embed_size} Ds={c.num_hiddens} layers={c.num_layers} batch={c.batch_size} "
          f"num_steps={c.num_steps}, "
          f"{torch.get_num_threads()} threads, median of {rounds} alternating rounds of {batches_per_round} batches")
    print(f"  attention_lib Seq2Seq: {lib:8.0f} pairs/s")
    print(f"  d2l.Seq2Seq:           {ref:8.0f} pairs/s")
    print(f"  ratio library / d2l:   {lib / ref:8.2f}x")


def timed(cmd, **kwargs) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs)
    return time.perf_counter() - start


def book_costs():
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        pip = [str(venv / "bin/python"), "-m", "pip", "install", "-q"]
        install = timed([sys.executable, "-m", "venv", str(venv)])
        install += timed(pip + ["-r", str(ROOT / "requirements.txt")])
        install += timed(pip + ["--no-deps", "d2l==1.0.3", "-e", str(ROOT)])
        print(f"install into a fresh venv (pip's cache warm):  {install:7.1f} s")

        copy = Path(tmp) / "book"
        shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".venv", "_build", ".git"))
        jb = Path(sys.executable).parent / "jupyter-book"
        build = timed([str(jb), "build", str(copy), "--builder", "html", "-n", "-W", "--keep-going"])
        print(f"site build from committed outputs:            {build:7.1f} s")

        notebooks = sorted((copy / "chapters").rglob("*.ipynb"))
        execute = timed([sys.executable, str(ROOT / "tools/execute_notebooks.py"), *map(str, notebooks)])
        print(f"full execution of {len(notebooks)} notebooks (CPU):          {execute:7.1f} s")


def main(argv):
    if smoke_mode(argv):
        print(SMOKE_NOTE)
        throughput(SMOKE_CONFIG, rounds=1, batches_per_round=2, warmup=1)
        return
    throughput()
    if "--quick" not in argv:
        book_costs()


if __name__ == "__main__":
    main(sys.argv[1:])

"""The library's Bahdanau decoder against the d2l book's, side by side on the CPU.

Same data (20,000 English–French training pairs, num_steps 9), the d2l book's sizes (embedding 256,
hidden 256, 2 layers, dropout 0.2, batch 128), the same training loop (Adam, lr 0.005, gradient
clipping at 1), the same batches in the same order, and the same GRU variant (PyTorch's, so both
compute the same function; d2l also applies its dropout to the attention weights). Training alternates between the two models every few batches, so a
change in the machine's load hits both alike.

Reports training throughput (sentence pairs per second), greedy-decoding throughput on the test
split, held-out corpus BLEU of both after the same number of epochs, and how the throughput ratio
grows with the sequence length (random tokens): the library projects the keys once per sentence,
d2l's at every step, so the saving grows with L_q * L_k while the shared work grows with L_q. The d2l book's decoder is
assembled from the d2l package's classes in ``references/d2l_bahdanau.py``.

Next to each time ratio it prints the ratio of floating-point operations per training step
(forward and backward, counted by ``torch.utils.flop_counter``): the work d2l does and the library
does not (the per-step key projection; on real data also the source padding, which the library's
encoder skips). Matrix products dominate both, so the time ratio follows the FLOP ratio: the
encoder, the GRU steps and the output layer over the vocabulary are work both must do, and they
cap what skipping the key projection can gain at these sizes.

    python -m bench.bench_bahdanau            # about 5 minutes on 2 idle CPU cores
    python -m bench.bench_bahdanau --epochs 1 # quicker, BLEU still low
    python -m bench.bench_bahdanau --smoke    # tiny models, a few batches and sentences: seconds
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "fra-eng"
if "ATTENTION_LIB_DATA" not in os.environ and (SHARED / "fra.txt").is_file():
    os.environ["ATTENTION_LIB_DATA"] = str(SHARED)  # the offline copy beside the project, as in tests/conftest.py

from attention_lib import (BahdanauDecoder, EncoderDecoder, Seq2SeqEncoder, bleu_by_length,  # noqa: E402
                           load_fra_eng, sequence_loss, set_seed, translate)
from attention_lib.config import D2L_BAHDANAU as CONFIG  # noqa: E402  (the d2l book's sizes)
from bench import SMOKE_NOTE, smoke_mode  # noqa: E402
from references.d2l_bahdanau import D2LTranslator  # noqa: E402

# Smoke mode: tiny models on a small training subset.
SMOKE_CONFIG = CONFIG.with_(embed_size=16, num_hiddens=16, num_layers=1, dropout=0.0, batch_size=16)


def make_models(data, c):
    sizes = (c.embed_size, c.num_hiddens, c.num_layers, c.dropout)
    set_seed(0)
    library = EncoderDecoder(Seq2SeqEncoder(len(data.src_vocab), *sizes),
                             BahdanauDecoder(len(data.tgt_vocab), *sizes, reset_after=True))
    set_seed(0)
    d2l_model = D2LTranslator(len(data.src_vocab), len(data.tgt_vocab), *sizes)
    return {"library": library, "d2l book": d2l_model}


def train_step(model, optimizer, batch, pad):
    src, src_valid_lens, tgt_input, tgt_output, _ = batch
    loss = sequence_loss(model(src, src_valid_lens, tgt_input), tgt_output, pad)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss.item()


def training_flops(model, batch, pad):
    """Floating-point operations of one training step, forward and backward, as PyTorch counts them."""
    src, src_valid_lens, tgt_input, tgt_output, _ = batch
    with FlopCounterMode(display=False) as counter:
        sequence_loss(model(src, src_valid_lens, tgt_input), tgt_output, pad).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--max-train", type=int, default=20_000)
    parser.add_argument("--chunk", type=int, default=10, help="batches per turn before switching models")
    parser.add_argument("--lengths", type=int, nargs="*", default=[9, 18, 36],
                        help="num_steps for the throughput-against-length table (random tokens)")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny models, one epoch of a few batches, a few test sentences (also BENCH_SMOKE=1)")
    args = parser.parse_args(argv)
    smoke = args.smoke or smoke_mode([])
    c = SMOKE_CONFIG if smoke else CONFIG
    if smoke:
        print(SMOKE_NOTE)
        args.epochs, args.max_train, args.chunk, args.lengths = 1, 64, 2, [4]
    data = load_fra_eng(num_steps=c.num_steps, max_train=args.max_train)
    if smoke:  # a few test sentences to decode and score
        data.pairs["test"], data.raw["test"] = data.pairs["test"][:32], data.raw["test"][:32]
    pad = data.tgt_vocab.pad
    models = make_models(data, c)
    optimizers = {name: torch.optim.Adam(m.parameters(), lr=c.lr) for name, m in models.items()}
    loader = data.loader("train", batch_size=c.batch_size, seed=0)
    print(f"{data}\nsizes: embedding {c.embed_size}, hidden {c.num_hiddens}, {c.num_layers} layers, batch {c.batch_size}, "
          f"num_steps {c.num_steps}; {args.epochs} epochs of {len(loader)} batches; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    for name, model in models.items():
        print(f"  {name:>9}: {sum(p.numel() for p in model.parameters()):,} parameters")

    first = next(iter(loader))
    flops = {name: training_flops(model, first, pad) for name, model in models.items()}
    seconds = {name: 0.0 for name in models}
    losses = {name: [] for name in models}
    pairs = 0
    for epoch in range(args.epochs):
        batches = list(loader)  # the same batches, in the same order, for both models
        for m in models.values():
            m.train()
        for start in range(0, len(batches), args.chunk):
            chunk = batches[start:start + args.chunk]
            for name, model in models.items():
                began = time.perf_counter()
                for batch in chunk:
                    losses[name].append(train_step(model, optimizers[name], batch, pad))
                seconds[name] += time.perf_counter() - began
            pairs += sum(len(b.src) for b in chunk)
        print(f"epoch {epoch + 1}: " + ", ".join(
            f"{name} loss {statistics.fmean(losses[name][-len(batches):]):.3f}" for name in models), flush=True)

    # Greedy decoding of the whole test split, alternating the models sentence block by block.
    english = [e for e, _ in data.raw["test"]]
    decode_seconds = {name: 0.0 for name in models}
    for start in range(0, len(english), 256):
        for name, model in models.items():
            began = time.perf_counter()
            translate(model, data, english[start:start + 256])
            decode_seconds[name] += time.perf_counter() - began
    results = {name: bleu_by_length(model, data, split="test") for name, model in models.items()}

    train_rate = {name: pairs / seconds[name] for name in models}
    decode_rate = {name: len(english) / decode_seconds[name] for name in models}
    print(f"\n{'':>28} {'library':>10} {'d2l book':>10} {'ratio':>7}")
    print(f"{'training, pairs/s':>28} {train_rate['library']:>10.0f} {train_rate['d2l book']:>10.0f} "
          f"{train_rate['library'] / train_rate['d2l book']:>6.2f}x")
    print(f"{'greedy decoding, sentences/s':>28} {decode_rate['library']:>10.0f} {decode_rate['d2l book']:>10.0f} "
          f"{decode_rate['library'] / decode_rate['d2l book']:>6.2f}x")
    print(f"{'GFLOP per training step':>28} {flops['library'] / 1e9:>10.2f} {flops['d2l book'] / 1e9:>10.2f} "
          f"{flops['d2l book'] / flops['library']:>6.2f}x  (what the training ratio tracks)")
    print(f"{'test corpus BLEU':>28} {results['library']['bleu']:>10.1f} {results['d2l book']['bleu']:>10.1f}")
    print(f"\n{'':>28} {'library':>10} {'d2l book':>10}")
    print(f"{'training time, s':>28} {seconds['library']:>10.0f} {seconds['d2l book']:>10.0f}")
    print("\nBLEU by source length (test split):")
    print(f"{'length':>8} {'pairs':>6} {'library':>8} {'d2l book':>9}")
    for (label, count, ours), (_, _, theirs) in zip(results["library"]["by_length"], results["d2l book"]["by_length"]):
        print(f"{label:>8} {count:>6} {ours:>8.1f} {theirs:>9.1f}")

    print("\nTraining throughput against sequence length (random tokens, the same sizes otherwise):")
    print(f"{'num_steps':>10} {'library':>10} {'d2l book':>10} {'ratio':>7} {'FLOP ratio':>11}   (pairs/s)")
    for num_steps in args.lengths:
        rates, flops = length_scaling(data, c, num_steps, num_batches=1 if smoke else 5)
        print(f"{num_steps:>10} {rates['library']:>10.0f} {rates['d2l book']:>10.0f} "
              f"{rates['library'] / rates['d2l book']:>6.2f}x {flops['d2l book'] / flops['library']:>10.2f}x", flush=True)


def length_scaling(data, c, num_steps, num_batches):
    """Training throughput and FLOPs per step of fresh models on random sentences of ``num_steps`` tokens."""
    generator = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(num_batches + 1):
        src = torch.randint(4, len(data.src_vocab), (c.batch_size, num_steps), generator=generator)
        tgt = torch.randint(4, len(data.tgt_vocab), (c.batch_size, num_steps), generator=generator)
        lens = torch.full((c.batch_size,), num_steps)
        batches.append((src, lens, tgt, tgt, lens))
    models = make_models(data, c)
    flops = {name: training_flops(model, batches[0], data.tgt_vocab.pad) for name, model in models.items()}
    optimizers = {name: torch.optim.Adam(m.parameters(), lr=c.lr) for name, m in models.items()}
    seconds = {name: 0.0 for name in models}
    for i, batch in enumerate(batches):
        for name, model in models.items():
            began = time.perf_counter()
            train_step(model, optimizers[name], batch, data.tgt_vocab.pad)
            if i > 0:  # the first batch warms up
                seconds[name] += time.perf_counter() - began
    return {name: num_batches * c.batch_size / seconds[name] for name in models}, flops


if __name__ == "__main__":
    main()

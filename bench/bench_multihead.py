"""Chapter 4 benchmark: the library's MultiHeadAttention against PyTorch's
``torch.nn.MultiheadAttention`` with the same weights, self-attention over a padded
batch on the CPU, forward and forward + backward, at the sizes the issue names.

    python -m bench.bench_multihead              # three sizes (minutes on 2 CPU cores)
    python -m bench.bench_multihead --quick      # smallest size, few rounds
    python -m bench.bench_multihead --threads 1  # one intra-op thread (steadier)
    python -m bench.bench_multihead --smoke      # a tiny size, one round: seconds

Measured side by side in one run: every round times each candidate once, in turn, so
a machine that slows down slows all of them; the tables show medians over rounds and
ratios to PyTorch. Absolute times are not comparable between runs on shared machines;
the ratios are what to read.

Candidates (float32, dropout 0):
  PyTorch        nn.MultiheadAttention(batch_first=True), need_weights=False, with a
                 key_padding_mask. Forward runs in eval mode without gradients, where
                 PyTorch takes its fused native path for self-attention.
  lib fast       MultiHeadAttention, need_weights=False (the training path): the heads
                 go to torch.nn.functional.scaled_dot_product_attention
  lib weights    MultiHeadAttention, need_weights=True: explicit (B, H, L, L) weights,
                 kept for heat maps
"""
from __future__ import annotations

import statistics
import sys

import torch
from torch import nn

from attention_lib import valid_lens_to_mask
from attention_lib.measure import seconds_per_call
from attention_lib.multihead import MultiHeadAttention
from bench import SMOKE_NOTE, smoke_mode

SIZES = [(64, 32, 256, 4), (16, 256, 256, 4), (4, 1024, 256, 4)]  # (B, L, D, H)
SMOKE_SIZES = [(2, 8, 16, 2)]


def torch_copy(ours: MultiHeadAttention) -> nn.MultiheadAttention:
    """PyTorch's layer with our weights: its in_proj stacks [W_q; W_k; W_v]."""
    theirs = nn.MultiheadAttention(ours.embed_dim, ours.num_heads, batch_first=True)
    projections = [ours.W_q, ours.W_k, ours.W_v]
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([p.weight for p in projections]))
        theirs.in_proj_bias.copy_(torch.cat([p.bias for p in projections]))
        theirs.out_proj.weight.copy_(ours.W_o.weight)
        theirs.out_proj.bias.copy_(ours.W_o.bias)
    return theirs


def candidates(batch_size, length, embed_dim, num_heads):
    """Forward and forward + backward calls of every candidate, checked to agree, and
    the two layers (the caller sets eval or train mode)."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(batch_size, length, embed_dim, generator=gen)  # (B, L, D)
    # padding, as in a batch: at least half of every sequence is real
    valid_lens = torch.randint(length // 2, length + 1, (batch_size,), generator=gen)
    padding = ~valid_lens_to_mask(valid_lens, length)  # (B, L), True = ignored
    ours = MultiHeadAttention(embed_dim, num_heads)
    theirs = torch_copy(ours)
    grad_out = torch.randn(batch_size, length, embed_dim, generator=gen)

    def torch_call():
        return theirs(x, x, x, key_padding_mask=padding, need_weights=False)[0]

    calls = {
        "PyTorch": torch_call,
        "lib fast": lambda: ours(x, x, x, valid_lens),
        "lib weights": lambda: ours(x, x, x, valid_lens, need_weights=True),
    }

    def forward(call):
        def run():
            with torch.no_grad():
                return call()
        return run

    def forward_backward(call):
        def run():
            ours.zero_grad(set_to_none=True)
            theirs.zero_grad(set_to_none=True)
            call().backward(grad_out)
        return run

    # Same answer first: a benchmark of layers that disagree measures nothing.
    ours.eval()
    theirs.eval()
    reference = forward(torch_call)()
    for name, call in calls.items():
        torch.testing.assert_close(forward(call)(), reference, msg=name)
    ours.train()
    theirs.train()
    for name, call in calls.items():
        torch.testing.assert_close(call(), reference, msg=name)
    timed = {name: (forward(c), forward_backward(c)) for name, c in calls.items()}
    return timed, (ours, theirs)


def bench_size(shape, rounds, min_seconds):
    calls, layers = candidates(*shape)
    medians = {}
    for phase, mode in [(0, "eval"), (1, "train")]:
        for layer in layers:
            layer.train(mode == "train")
        times = {name: [] for name in calls}
        for fns in calls.values():  # warm-up
            fns[phase]()
        for _ in range(rounds):
            for name, fns in calls.items():
                times[name].append(seconds_per_call(fns[phase], min_seconds=min_seconds))
        medians[phase] = {name: statistics.median(t) for name, t in times.items()}
    return medians


def main(argv):
    quick, smoke = "--quick" in argv, smoke_mode(argv)
    sizes, rounds, min_seconds = (
        (SMOKE_SIZES, 1, 0.0) if smoke
        else (SIZES[:1], 3, 0.01) if quick
        else (SIZES, 9, 0.05)
    )
    if "--threads" in argv:
        torch.set_num_threads(int(argv[argv.index("--threads") + 1]))
    torch.manual_seed(0)
    if smoke:
        print(SMOKE_NOTE)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32, CPU,"
        f" self-attention with padding; median of {rounds} interleaved rounds"
    )
    header = (
        f"{'(B, L, D, H)':>18} | {'pass':>8} | {'PyTorch':>9} | {'lib fast':>9} |"
        f" {'lib weights':>11} | {'fast/PT':>7} | {'weights/PT':>10}"
    )
    print(header)
    print("-" * len(header))
    for shape in sizes:
        medians = bench_size(shape, rounds, min_seconds)
        for phase, label in [(0, "fwd"), (1, "fwd+bwd")]:
            t = medians[phase]
            ms = {name: 1e3 * v for name, v in t.items()}
            print(
                f"{str(shape):>18} | {label:>8} | {ms['PyTorch']:7.2f}ms |"
                f" {ms['lib fast']:7.2f}ms | {ms['lib weights']:9.2f}ms |"
                f" {t['lib fast'] / t['PyTorch']:6.2f}× |"
                f" {t['lib weights'] / t['PyTorch']:9.2f}×",
                flush=True,
            )
    print(
        "\nfast/PT: the library's training path (need_weights=False) against PyTorch's"
        " layer with the same weights.\nweights/PT: the path that builds and keeps the"
        " (B, H, L, L) weights for heat maps."
    )


if __name__ == "__main__":
    main(sys.argv[1:])

"""Chapter 2 benchmark: the library's scaled dot-product attention against PyTorch's fused
``torch.nn.functional.scaled_dot_product_attention`` (SDPA) and the explicit one-query-at-a-time loop,
forward pass on the CPU, at the sizes the issue names.

    python -m bench.bench_attention            # the three sizes (about a minute on 2 CPU cores)
    python -m bench.bench_attention --quick    # the smallest size only
    python -m bench.bench_attention --threads 1  # one intra-op thread (steadier on a busy machine)
    python -m bench.bench_attention --smoke    # a tiny size, one round: seconds (bench/__init__.py)

Measured side by side in one run: every round times each candidate once, in turn, so a machine
that slows down slows all of them; the table shows medians over rounds and ratios to SDPA.
Absolute times are not comparable between runs on shared machines; the ratios are what to read.

Candidates:
  library (weights)  dot_product_attention(..., need_weights=True), the default: explicit
                     scores -> masked softmax -> average, returning the (B, Lq, Lk) weights
  library (fast)     dot_product_attention(..., need_weights=False): hands the work to SDPA
  SDPA               torch.nn.functional.scaled_dot_product_attention
  loop               attention_loop: one query at a time (timed on fewer rounds: it is slow)
"""
from __future__ import annotations

import statistics
import sys

import torch
import torch.nn.functional as F

from attention_lib import attention_loop, dot_product_attention
from attention_lib.measure import seconds_per_call
from bench import SMOKE_NOTE, smoke_mode

SIZES = [(64, 32, 32, 64), (16, 256, 256, 64), (4, 1024, 1024, 64)]  # (B, Lq, Lk, E)
SMOKE_SIZES = [(2, 8, 8, 16)]


def bench_size(batch_size, num_queries, num_kv, size, rounds, min_seconds=0.05):
    gen = torch.Generator().manual_seed(0)
    queries = torch.randn(batch_size, num_queries, size, generator=gen)  # (B, Lq, E)
    keys = torch.randn(batch_size, num_kv, size, generator=gen)  # (B, Lk, E)
    values = torch.randn(batch_size, num_kv, size, generator=gen)  # (B, Lk, E)
    valid_lens = torch.randint(num_kv // 2, num_kv + 1, (batch_size,), generator=gen)  # padding, as in a batch
    attn_mask = (torch.arange(num_kv) < valid_lens[:, None])[:, None, :]  # (B, 1, Lk)
    candidates = {
        "library (weights)": lambda: dot_product_attention(queries, keys, values, valid_lens),
        "library (fast)": lambda: dot_product_attention(queries, keys, values, valid_lens, need_weights=False),
        "SDPA": lambda: F.scaled_dot_product_attention(queries, keys, values, attn_mask=attn_mask),
    }
    # Same answer first: a benchmark of functions that disagree measures nothing.
    reference = candidates["SDPA"]()
    for name, fn in candidates.items():
        out = fn()
        torch.testing.assert_close(out[0] if isinstance(out, tuple) else out, reference, msg=name)
    loop = lambda: attention_loop(queries, keys, values, valid_lens)  # noqa: E731
    torch.testing.assert_close(loop()[0], reference, msg="loop")

    times = {name: [] for name in [*candidates, "loop"]}
    with torch.inference_mode():
        for fn in candidates.values():  # warm-up
            fn()
        for r in range(rounds):
            for name, fn in candidates.items():
                times[name].append(seconds_per_call(fn, min_seconds=min_seconds))
            if r % max(1, rounds // 3) == 0:  # the loop takes seconds: three rounds are enough
                times["loop"].append(seconds_per_call(loop, min_seconds=0.0))
    return {name: statistics.median(t) for name, t in times.items()}


def main(argv):
    smoke = smoke_mode(argv)
    sizes = SMOKE_SIZES if smoke else SIZES[:1] if "--quick" in argv else SIZES
    rounds, min_seconds = (1, 0.0) if smoke else (15, 0.05)
    if "--threads" in argv:
        torch.set_num_threads(int(argv[argv.index("--threads") + 1]))
    torch.manual_seed(0)
    if smoke:
        print(SMOKE_NOTE)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32, forward only, CPU; "
          "median of interleaved rounds")
    header = (f"{'(B, Lq, Lk, E)':>20} | {'SDPA':>9} | {'lib fast':>9} | {'lib weights':>11} | {'loop':>9} | "
              f"{'fast/SDPA':>9} | {'weights/SDPA':>12} | {'loop/weights':>12}")
    print(header)
    print("-" * len(header))
    for shape in sizes:
        t = bench_size(*shape, rounds=rounds, min_seconds=min_seconds)
        ms = {name: 1e3 * v for name, v in t.items()}
        print(f"{str(shape):>20} | {ms['SDPA']:7.3f}ms | {ms['library (fast)']:7.3f}ms | "
              f"{ms['library (weights)']:9.3f}ms | {ms['loop']:7.1f}ms | "
              f"{t['library (fast)'] / t['SDPA']:8.2f}× | {t['library (weights)'] / t['SDPA']:11.2f}× | "
              f"{t['loop'] / t['library (weights)']:11.0f}×", flush=True)
    print("\nfast/SDPA: the library's fast path (need_weights=False) against SDPA itself; the gap is input checks "
          "and the valid_lens -> mask conversion.\nweights/SDPA: the default path, which builds and returns the "
          "(B, Lq, Lk) weights for heat maps; SDPA's fused CPU kernel never writes them out.")


if __name__ == "__main__":
    main(sys.argv[1:])

"""Chapter 6 benchmark: attention for long sequences against dense attention, measured
side by side in one run, and the decoder's cache against generation without it.

    python -m bench.bench_efficient              # the issue's sizes (about 2 minutes)
    python -m bench.bench_efficient --quick      # small sizes, few rounds
    python -m bench.bench_efficient --threads 1  # one intra-op thread (steadier)
    python -m bench.bench_efficient --smoke      # tiny sizes, one round, no goals: seconds

Candidates (float32, CPU, forward, B = 1, H = 4 heads of Dh = 64):
  dense      softmax(Q Kᵀ/√Dh) V written out (the library's dot_product_attention with
             its weights): builds the (H, n, n) scores
  SDPA       torch.nn.functional.scaled_dot_product_attention: PyTorch's fused kernel
  chunked    attention_lib.efficient.chunked_attention (online softmax, blocks of 256)
  window     attention_lib.efficient.local_attention, sliding window w = 256, blocked
  masked     dense with the window as a boolean mask: the same n × n work

Times: every round times each candidate once, in turn (so a machine that slows down
slows all of them); medians over rounds. Peak memory: attention_lib.efficient.peak_memory
(the kernel's peak resident size of this process, reset before each call), median of
three; the dense path's figure is cross-checked once in a fresh subprocess
(VmHWM). The goals are the issue's; each line says met or missed.
"""
from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

import torch

from attention_lib import dot_product_attention, set_seed
from attention_lib.config import CHAPTER5_TRANSFORMER
from attention_lib.efficient import (
    AttentionPattern,
    chunked_attention,
    generate,
    local_attention,
    peak_memory,
)
from bench import SMOKE_NOTE, smoke_mode
from attention_lib.measure import seconds_per_call

ROOT = Path(__file__).resolve().parents[1]

HEADS, HEAD_DIM, WINDOW = 4, 64, 256
MiB = 2**20


def inputs(n):
    gen = torch.Generator().manual_seed(n)
    return [torch.randn(1, HEADS, n, HEAD_DIM, generator=gen) for _ in range(3)]


def candidates(n):
    q, k, v = inputs(n)
    pattern = AttentionPattern(window=WINDOW)
    band = pattern.mask(n)
    calls = {
        "dense": lambda: dot_product_attention(q, k, v)[0],
        "SDPA": lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v),
        "chunked": lambda: chunked_attention(q, k, v),
        "window": lambda: local_attention(q, k, v, pattern),
        "masked": lambda: dot_product_attention(q, k, v, mask=band)[0],
    }
    # Same answers first: a benchmark of functions that disagree measures nothing.
    with torch.no_grad():
        torch.testing.assert_close(calls["chunked"](), calls["SDPA"](), atol=1e-5,
                                   rtol=1e-4)
        torch.testing.assert_close(calls["window"](), calls["masked"](), atol=1e-5,
                                   rtol=1e-4)
    return calls


def measure(n, rounds, min_seconds):
    calls = candidates(n)
    times = {name: [] for name in calls}
    with torch.no_grad():
        for fn in calls.values():
            fn()  # warm-up
        for _ in range(rounds):
            for name, fn in calls.items():
                times[name].append(seconds_per_call(fn, min_seconds=min_seconds))
        memory = {
            name: statistics.median(peak_memory(fn) for _ in range(3))
            for name, fn in calls.items()
        }
    return {name: statistics.median(t) for name, t in times.items()}, memory


def dense_in_subprocess(n):
    """The dense path's peak in a fresh process: the high-water resident size (VmHWM)
    with the call minus without it, both after importing torch and building the inputs.
    Not ru_maxrss: a child inherits its parent's ru_maxrss across exec on Linux, so a
    child of this (already large) process would report the parent's peak."""
    hwm = "int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0])"
    code = (
        "import torch; from bench.bench_efficient import inputs; from attention_lib"
        " import dot_product_attention; q, k, v = inputs({n}); base = {hwm};"
        " {call} print({hwm} - base)"
    )
    peaks = []
    for call in ["", "dot_product_attention(q, k, v);"]:
        src = code.format(n=n, call=call, hwm=hwm)
        # run from the repository's root, where ``bench`` is importable
        out = subprocess.run([sys.executable, "-c", src], capture_output=True,
                             text=True, check=True, cwd=ROOT)
        peaks.append(int(out.stdout.split()[-1]) * 1024)  # kB in /proc
    return peaks[1] - peaks[0]


def goal(text, value, limit, below=True):
    met = value <= limit if below else value >= limit
    print(f"  {'met   ' if met else 'MISSED'}  {text}: {value:.3f}"
          f" ({'≤' if below else '≥'} {limit})")
    return met


def bench_attention(sizes, rounds, min_seconds):
    print(f"\nAttention, forward, B=1, H={HEADS}, Dh={HEAD_DIM}, window w={WINDOW};"
          f" median of {rounds} interleaved rounds; peak memory median of 3")
    names = ["dense", "SDPA", "chunked", "window", "masked"]
    print(f"{'n':>6} | " + " | ".join(f"{name:>17}" for name in names))
    results = {}
    for n in sizes:
        t, m = measure(n, rounds, min_seconds)
        results[n] = (t, m)
        cells = [f"{1e3 * t[name]:7.1f}ms {m[name] / MiB:6.1f}MiB" for name in names]
        print(f"{n:>6} | " + " | ".join(cells), flush=True)
    return results


def bench_cache(lengths, batch_size, rounds, min_seconds=0.0):
    set_seed(0)
    vocab, c = 3000, CHAPTER5_TRANSFORMER  # chapter 5's model, random weights
    width, heads, hidden, layers = c.embed_dim, c.num_heads, c.ffn_hidden, c.num_layers
    model = c.build(vocab, vocab).eval()
    encoder, decoder = model.encoder, model.decoder
    src = torch.randint(3, vocab, (batch_size, 10))
    with torch.no_grad():
        state = decoder.init_state(encoder(src), None)
    start = torch.ones(batch_size, 1, dtype=torch.long)
    print(f"\nGeneration, chapter 5's Transformer size (D={width}, H={heads},"
          f" F={hidden}, N={layers}, random weights), batch {batch_size}; tokens/s,"
          f" median of {rounds} interleaved rounds")
    print(f"{'T':>5} | {'cache':>10} | {'no cache':>10} | {'speed-up':>8} | same tokens")
    speedups = {}
    for length in lengths:
        same = torch.equal(generate(decoder, state, start, length, True),
                           generate(decoder, state, start, length, False))
        times = {True: [], False: []}
        for _ in range(rounds):
            for use_cache in (True, False):
                times[use_cache].append(seconds_per_call(
                    lambda: generate(decoder, state, start, length, use_cache),
                    min_seconds=min_seconds))
        t = {c: statistics.median(v) for c, v in times.items()}
        speedups[length] = (t[False] / t[True], same)
        print(f"{length:>5} | {batch_size * length / t[True]:10.0f} |"
              f" {batch_size * length / t[False]:10.0f} | {t[False] / t[True]:7.2f}× |"
              f" {same}", flush=True)
    return speedups


def main(argv):
    quick, smoke = "--quick" in argv, smoke_mode(argv)
    if "--threads" in argv:
        torch.set_num_threads(int(argv[argv.index("--threads") + 1]))
    if smoke:
        print(SMOKE_NOTE)
        # below and above one block of the window and of chunked attention
        sizes, rounds, min_seconds = [64, 320], 1, 0.0
    elif quick:
        sizes, rounds, min_seconds = [512, 1024], 2, 0.01
    else:
        sizes, rounds, min_seconds = [1024, 2048, 4096], 5, 0.2
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32, CPU")
    results = bench_attention(sizes, rounds, min_seconds)
    if smoke:  # no goals judged, no cross-check in a fresh process (as --quick)
        bench_cache([4], 2, 1)
        return
    speedups = bench_cache([16, 64] if quick else [16, 64, 128], 16, 3)
    top, below = sizes[-1], sizes[-2]
    t, m = results[top]
    print(f"\nGoals (n = {top}; the issue's are at n = 4096):")
    checks = [
        goal("chunked / dense, peak memory", m["chunked"] / m["dense"], 1 / 8),
        goal(f"chunked peak memory, n={top} over n={below}",
             m["chunked"] / results[below][1]["chunked"], 2.2),
        goal("window / dense, time", t["window"] / t["dense"], 0.25),
        goal("window / dense, peak memory", m["window"] / m["dense"], 0.25),
    ]
    at_64 = {length: s for length, s in speedups.items() if length >= 64}
    for length, (speedup, same) in at_64.items():
        checks.append(goal(f"cache speed-up at T={length} (same tokens: {same})",
                           speedup if same else 0.0, 3.0, below=False))
    print("\nAlso: window / SDPA time"
          f" {t['window'] / t['SDPA']:.2f}; masked / dense time"
          f" {t['masked'] / t['dense']:.2f}, memory {m['masked'] / m['dense']:.2f}"
          " (a mask saves nothing); chunked / SDPA time"
          f" {t['chunked'] / t['SDPA']:.2f}")
    if not quick:
        sub = dense_in_subprocess(top)
        print(f"Cross-check, dense peak at n={top}: {m['dense'] / MiB:.1f} MiB here,"
              f" {sub / MiB:.1f} MiB in a fresh process (VmHWM)")
    print(f"\n{sum(checks)} of {len(checks)} goals met", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

"""Checkers for chapter 6's exercises: what long sequences cost, and the exact tricks
that make them affordable, against :mod:`attention_lib.efficient`.

Taught in ``chapters/06_efficient/05_exercises.ipynb``.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from ..efficient import AttentionPattern, attend, generate, merge_partials
from ._common import read_mask
from ._feedback import (
    Feedback,
    all_of,
    checker,
    close,
    close_each,
    describe,
    diagnose,
    diagnose_numbers,
    read_number,
    read_tensors,
    sizes,
)

__all__ = [
    "check_scores_bytes",
    "check_window_pairs",
    "check_window_mask",
    "check_online_softmax",
    "check_merge_partials",
    "check_positions_processed",
    "check_sparse_mask",
]

_PAGE = "chapters/06_efficient/05_exercises.ipynb"


def _same(answer: float, expected: float) -> bool:
    """Counts compared exactly, up to the rounding of a float that holds them."""
    return math.isclose(answer, expected, rel_tol=1e-9, abs_tol=0)


# --- 1. the memory of the scores ------------------------------------------------------

# (n, B, H, bytes): the page's case first, then cases in which every size differs, with
# 2- and 8-byte numbers, so that each factor is told apart.
_BYTES_CASES = ((4096, 1, 1, 4), (100, 3, 5, 4), (64, 2, 7, 2), (10, 6, 4, 8))
_DTYPES = {2: torch.float16, 4: torch.float32, 8: torch.float64}


def _scores_bytes(length: int, batch_size: int, num_heads: int, nbytes: int) -> int:
    """The bytes of the scores Q Kᵀ of one layer, measured on the ``meta`` device:
    shapes only, no memory."""
    q = torch.empty(batch_size, num_heads, length, 8, dtype=_DTYPES[nbytes],
                    device="meta")  # (B, H, n, Dh)
    scores = q @ q.transpose(-1, -2)  # (B, H, n, n)
    return scores.numel() * scores.element_size()


@checker
def check_scores_bytes(fn) -> Feedback:
    """Check ``fn(n, batch_size, num_heads, bytes_per_number) -> int``: the bytes of one
    layer's scores Q Kᵀ, (B, H, n, n), B·H·n²·bytes, measured on PyTorch's ``meta``
    device. Names n for n², the heads or the batch forgotten, bits, numbers, a fixed
    number size, a causal half, and MiB, MB or GiB.

    Shapes:
        fn: (int n, int B, int H, int bytes) -> one number

    Taught in ``chapters/06_efficient/05_exercises.ipynb``.
    """
    full = lambda n, b, h, x: b * h * n * n * x  # noqa: E731
    mistakes = [
        (lambda n, b, h, x: b * h * n * x,
         "you counted n numbers per head and sequence. Every query has a score for"
         " every key: the scores are an n × n matrix, n² numbers."),
        (lambda n, b, h, x: b * n * n * x,
         "you forgot the heads: each of the H heads computes its own n × n scores."),
        (lambda n, b, h, x: h * n * n * x,
         "you forgot the batch: each of the B sequences has its own scores."),
        (lambda n, b, h, x: n * n * x,
         "you counted one head of one sequence: multiply by the heads H and the"
         " batch B."),
        (lambda n, b, h, x: 8 * full(n, b, h, x),
         "you counted bits: a number of bytes_per_number bytes is"
         " 8 × bytes_per_number bits. Count bytes."),
        (lambda n, b, h, x: full(n, b, h, 8),
         "you counted 8 bytes per number (float64) whatever bytes_per_number says:"
         " float32 takes 4, float16 and bfloat16 take 2."),
        (lambda n, b, h, x: full(n, b, h, 4),
         "you counted 4 bytes per number (float32) whatever bytes_per_number says."),
        (lambda n, b, h, x: full(n, b, h, 1),
         "you counted numbers, not bytes: multiply by bytes_per_number."),
        (lambda n, b, h, x: b * h * n * (n + 1) // 2 * x,
         "you counted the lower triangle only. A causal mask hides half the scores,"
         " but dense attention still computes and stores the whole n × n matrix."),
        (lambda n, b, h, x: full(n, b, h, x) / 2**20,
         "that is the size in MiB (2²⁰ bytes): return bytes."),
        (lambda n, b, h, x: full(n, b, h, x) / 2**30,
         "that is the size in GiB (2³⁰ bytes): return bytes."),
        (lambda n, b, h, x: full(n, b, h, x) / 1e6,
         "that is the size in MB (10⁶ bytes): return bytes."),
    ]

    def explain_case(answer, expected, length, batch_size, num_heads, nbytes):
        return (f"For {sizes(' = ', n=length, B=batch_size, H=num_heads, bytes=nbytes)}"
                f" you count {answer:,.0f} bytes; the scores, a ({batch_size},"
                f" {num_heads}, {length}, {length}) tensor, take {expected:,.0f}"
                " bytes.")

    return diagnose_numbers(
        fn, _BYTES_CASES, _scores_bytes, mistakes, what="number of bytes",
        equal=_same, explain_case=explain_case,
        correct=lambda expected: f"Correct: B·H·n²·bytes. For n = 4096 in float32 that"
        f" is {expected[0] / 2**20:.0f} MiB for one head and one sequence; a layer with"
        f" 16 heads over a batch of 8 holds {_scores_bytes(4096, 8, 16, 4) / 2**30:.0f}"
        " GiB of scores.",
    )


# --- 2. how many pairs a sliding window allows ---------------------------------------

# (n, w): odd and even windows, a sequence shorter than the window, one as long as it
_PAIRS_CASES = {
    False: ((16, 4), (15, 5), (3, 8), (9, 6)),
    True: ((16, 4), (15, 5), (3, 8), (8, 8)),
}


def _pairs(length: int, window: int, causal: bool) -> int:
    """The library's count (0 for a window of no key)."""
    if window < 1:
        return 0
    return AttentionPattern(window=window, causal=causal).pairs(length)


def _pairs_variants(causal: bool) -> list:
    if causal:
        return [
            (lambda n, w: n * w,
             "you counted w keys for every query, ignoring the edge: the first"
             " w − 1 queries have fewer than w keys before them (query i sees"
             " min(i + 1, w)), so subtract 1 + 2 + ... + (w − 1) = w(w − 1)/2."),
            (lambda n, w: n * min(w, n),
             "you ignored the edge: query i sees only min(i + 1, w) keys, fewer than"
             " w for the first w − 1 queries."),
            (lambda n, w: _pairs(n, w + 1, True),
             "off by one: your window holds w + 1 keys (i − w ≤ j ≤ i). The causal"
             " window of w holds the query itself and the w − 1 keys before it,"
             " i − w < j ≤ i."),
            (lambda n, w: _pairs(n, w - 1, True),
             "off by one: your window holds w − 1 keys. It holds w: the query itself"
             " and the w − 1 keys before it."),
            (lambda n, w: _pairs(n, w, True) - n,
             "you left out the query itself: the causal window of w is the query and"
             " the w − 1 keys before it."),
            (lambda n, w: _pairs(n, w, False),
             "that is the bidirectional window's count (|i − j| ≤ w // 2). With"
             " causal=True a query sees no key after it: i − w < j ≤ i."),
            (lambda n, w: n * (n + 1) // 2,
             "that is causal attention without a window, n(n + 1)/2: each query sees"
             " at most w keys."),
            (lambda n, w: n * n, "that is dense attention, n²: count only the window."),
        ]
    return [
        (lambda n, w: n * (2 * (w // 2) + 1),
         "you counted 2·(w // 2) + 1 keys for every query, ignoring the edges: the"
         " first and the last w // 2 queries have fewer keys on one side, w // 2"
         " · (w // 2 + 1) pairs fewer in all (for n > w // 2)."),
        (lambda n, w: n * w,
         "n · w ignores the edges, where the window is cut off (and a full row holds"
         " 2·(w // 2) + 1 keys: w + 1 for an even w)."),
        (lambda n, w: n * (w + 1),
         "n · (w + 1) ignores the edges, where the window is cut off (and a full row"
         " holds 2·(w // 2) + 1 keys: w for an odd w)."),
        (lambda n, w: _pairs(n, w - 2, False),
         "off by one at the window's edge: you counted keys with |i − j| < w // 2;"
         " the window reaches |i − j| ≤ w // 2."),
        (lambda n, w: _pairs(n, w + 2, False),
         "off by one at the window's edge: you counted keys with"
         " |i − j| ≤ w // 2 + 1; the window reaches |i − j| ≤ w // 2."),
        (lambda n, w: _pairs(n, 2 * w, False),
         "you put w keys on each side; the window of w has w // 2 on each side"
         " (and the query itself)."),
        (lambda n, w: _pairs(n, w, False) - n,
         "you left out the query itself: each query also attends to its own key."),
        (lambda n, w: _pairs(n, w, True),
         "that is the causal window's count (i − w < j ≤ i). With causal=False the"
         " window reaches w // 2 keys on each side: |i − j| ≤ w // 2."),
        (lambda n, w: n * n, "that is dense attention, n²: count only the window."),
    ]


@checker
def check_window_pairs(fn) -> Feedback:
    """Check ``fn(n, window, causal) -> int``: the (query, key) pairs a sliding window
    allows over n positions, as ``AttentionPattern(window=w, causal=causal).pairs(n)``
    (|i − j| ≤ w // 2, or i − w < j ≤ i). Names edges ignored, an off-by-one, the query
    left out, the other mode and dense counts.

    Shapes:
        fn: (int n, int w, bool causal) -> one number

    Taught in ``chapters/06_efficient/05_exercises.ipynb``.
    """
    def explain_case(answer, expected, length, window, causal):
        rule = ("query i sees keys max(0, i − w + 1) to i" if causal else
                "query i sees keys max(0, i − w // 2) to min(n − 1, i + w // 2)")
        short = (" Here n < w: the window is cut off in every row."
                 if length < window else "")
        return (f"For n = {length}, w = {window}, causal={causal} you count"
                f" {answer:,.0f}; the window allows {expected:,.0f} pairs. Count row by"
                f" row: {rule}.{short}")

    return all_of((diagnose_numbers(
        fn, [(n, w, causal) for n, w in _PAIRS_CASES[causal]], _pairs,
        [(lambda n, w, c, formula=formula: formula(n, w), message)
         for formula, message in _pairs_variants(causal)],
        what="number of pairs", equal=_same, prefix=f"With causal={causal}: ",
        explain_case=explain_case, correct="") for causal in (False, True)),
        "Correct: causal, n·w − w(w − 1)/2 (for n ≥ w); bidirectional with h = w // 2,"
        " n·(2h + 1) − h(h + 1) (for n > h). For n ≫ w that is about n·w pairs, a"
        " fraction w/n (or (2h + 1)/n) of dense attention's n².")


# --- 3. the sliding-window mask -------------------------------------------------------

# (n, w, causal): even and odd windows, both modes, and n < w last
_MASK_CASES = ((8, 4, False), (8, 4, True), (9, 5, False), (9, 3, True),
               (3, 6, False), (3, 6, True))


def _window(length: int, window: int | None, causal: bool) -> Tensor:
    """The library's mask, (n, n) bool; a window under 1 allows nothing."""
    if window is not None and window < 1:
        return torch.zeros(length, length, dtype=torch.bool)
    return AttentionPattern(window=window, causal=causal).mask(length)


def _window_variants(length: int, window: int, causal: bool) -> list:
    expected = _window(length, window, causal)
    eye = torch.eye(length, dtype=torch.bool)
    variants = [
        (~expected,
         "your mask is inverted: True where a query may NOT attend. In the library"
         " and in F.scaled_dot_product_attention True means 'may attend'."),
        (expected & ~eye,
         "the diagonal is missing: a query may attend to its own position (with a"
         " window, the diagonal is always inside it)."),
    ]
    if causal:
        variants += [
            (expected.T,
             "transposed: your window looks into the future (keys i ≤ j < i + w)."
             " Row i is query i; a causal window sees i − w < j ≤ i."),
            (_window(length, window + 1, True),
             "off by one at the window's edge: your window holds w + 1 keys"
             " (j ≥ i − w). Use i − j < w (or j > i − w): the query and the w − 1"
             " keys before it."),
            (_window(length, window - 1, True),
             "off by one at the window's edge: your window holds w − 1 keys. Use"
             " i − j < w together with j ≤ i: w keys, the query included."),
            (_window(length, window + 1, True) & ~eye,
             "you took the w keys before the query and left out the query itself:"
             " the window is i − w < j ≤ i."),
            (_window(length, window, False),
             "that is the bidirectional window (|i − j| ≤ w // 2): with causal=True"
             " no query may see a key after it."),
            (_window(length, None, True),
             "that is the causal mask without the window: each query sees only its"
             " last w positions."),
        ]
    else:
        variants += [
            (_window(length, window - 2, False),
             "off by one at the window's edge: you used |i − j| < w // 2; the window"
             " reaches |i − j| ≤ w // 2."),
            (_window(length, window + 2, False),
             "off by one at the window's edge: your window reaches w // 2 + 1 keys on"
             " each side; it reaches |i − j| ≤ w // 2."),
            (_window(length, 2 * window, False),
             "your window reaches w keys on each side; it reaches w // 2 on each"
             " side: |i − j| ≤ w // 2."),
            (_window(length, window, True),
             "that is the causal window: with causal=False a query sees w // 2 keys"
             " on each side, after it too."),
        ]
    variants.append((
        torch.ones(length, length, dtype=torch.bool),
        "every entry is True: that is dense attention. Keep only the window.",
    ))
    return variants


def _check_mask(fn, cases, reference, variants, where, correct: str) -> Feedback:
    """:func:`diagnose` for an (n, n) bool mask: leading sizes of 1 are fine; a wrong
    shape or a mask of numbers is named; a wrong mask, by its first wrong row."""
    def read(got, length, *rest):
        return read_mask(got, reference(length, *rest), where(length, *rest),
                         lambda got: Feedback.wrong(
            f"{where(length, *rest)}: your mask has shape {tuple(got.shape)}, expected"
            f" (n, n) = {(length, length)}: one row per query, one column per key."))

    def explain(got, expected, *case):
        i = next(i for i in range(len(expected))
                 if not torch.equal(got[i], expected[i]))
        return (f"row {i} (query {i}) should be {expected[i].int().tolist()}, yours is"
                f" {got[i].int().tolist()} (1 = may attend).")

    return diagnose(fn, cases, reference, variants, what="mask", where=where,
                    read=read, compare=torch.equal, explain=explain, correct=correct)


@checker
def check_window_mask(fn) -> Feedback:
    """Check ``fn(n, window, causal) -> mask``: the (n, n) bool mask of a sliding
    window, as ``AttentionPattern(window=w, causal=causal).mask(n)``. Names an inverted
    or transposed mask, an off-by-one, the diagonal missing, the other mode, no window,
    a mask of numbers and a wrong shape.

    Shapes:
        fn: (int n, int w, bool causal) -> (n, n) bool (leading sizes of 1 are fine)

    Taught in ``chapters/06_efficient/05_exercises.ipynb``.
    """
    return _check_mask(
        fn, _MASK_CASES, _window, _window_variants,
        lambda length, window, causal: f"For n = {length}, w = {window},"
        f" causal={causal}",
        "Correct: (i - j).abs() <= w // 2 for the bidirectional window, and"
        " (j <= i) & (i - j < w) for the causal one, with i = arange(n)[:, None] and"
        " j = arange(n)[None, :], as AttentionPattern(window=w, causal=...).mask(n).",
    )


# --- 4. the online softmax's running statistics ---------------------------------------

_INF = math.inf
# In blocks of 3 the maximum stays in the second block, grows in the third, and the
# last block's maximum is not the largest score.
_GROWING = [0.5, -1.0, 2.0, 0.0, 1.0, -0.5, 3.0, 4.0, 5.0, 2.5]
# (scores, block): those; blocks of one; scores of 1000; a first block of −∞ only; one
# block for all.
_STATS_CASES = ((_GROWING, 3),
                (_GROWING, 1),
                ([1000.0 + s for s in _GROWING], 4),
                ([-_INF, -_INF, -_INF, 1.0, 2.0, -0.5, 0.25], 3),
                (_GROWING, 16))


def _stats_variant(x: Tensor, block: int, mistake: str) -> tuple[float, float]:
    """The (maximum, sum) of a typical wrong loop, started from the first block."""
    parts = x.double().split(block)
    maximum = parts[0].max().item()
    total = torch.exp(parts[0] - maximum).sum().item()
    for part in parts[1:]:
        new = max(maximum, part.max().item())
        if mistake == "not rescaled":
            total = total + torch.exp(part - new).sum().item()
        elif mistake == "wrong sign":
            grow = torch.tensor(new - maximum, dtype=torch.float64).exp().item()
            total = total * grow + torch.exp(part - new).sum().item()
        elif mistake == "own maximum":
            total = total + torch.exp(part - part.max()).sum().item()
        maximum = new
    return maximum, total


def _read_pair(got, names: tuple[str, str]):
    """Two numbers, as a list of two 0-d tensors, or the feedback."""
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        return None, Feedback.wrong(
            f"Return a pair ({names[0]}, {names[1]}); got {describe(got)}.")
    values = []
    for name, value in zip(names, got):
        value, error = read_number(value, name)
        if error is not None:
            return None, Feedback.wrong(f"{name}: {error.message}")
        values.append(value)  # its own dtype: close() allows for its rounding
    return values, None


@checker
def check_online_softmax(fn) -> Feedback:
    """Check ``fn(x, block) -> (maximum, total)``: the online softmax's running
    statistics of a 1-D score vector read ``block`` scores at a time, the maximum m of
    all scores and total = Σ exp(x − m), against ``torch.logsumexp``. Cases with a
    maximum that grows in every block, scores of 1000 and a first block of −∞ name an
    old total not rescaled or rescaled the wrong way, one maximum per block, an
    overflow, a NaN from exp(−∞ − (−∞)) and a maximum that is not the running one.

    Shapes:
        fn: (x (n,) float32, int block) -> (maximum, total), two numbers

    Taught in ``chapters/06_efficient/05_exercises.ipynb``.
    """
    def reference(x, block):
        top = x.double().max()
        return top, torch.exp(torch.logsumexp(x.double(), dim=0) - top)

    def mistakes(x, block):
        top = x.double().max()
        named = [
            (torch.exp(x.double()).sum(),
             "no maximum subtracted: your total is Σ exp(x), which overflows for"
             " scores of 1000. Return Σ exp(x − m)."),
            (torch.tensor(_stats_variant(x, block, "not rescaled")[1]),
             "the old total is not rescaled when the maximum grows. It was a sum of"
             " exp(x − m_old); before adding the block's exp(x − m_new), multiply it"
             " by exp(m_old − m_new)."),
            (torch.tensor(_stats_variant(x, block, "wrong sign")[1]),
             "the rescaling has the wrong sign: multiply the old total by"
             " exp(m_old − m_new) (≤ 1, the old terms shrink), not by"
             " exp(m_new − m_old)."),
            (torch.tensor(_stats_variant(x, block, "own maximum")[1]),
             "each block's exp is taken with its own maximum and the sums are added"
             " as they are: bring every block to one maximum, multiplying the old"
             " total by exp(m_old − m_new)."),
            (torch.exp(x.double().split(block)[-1] - top).sum(),
             "your total holds only the last block: add each block's sum to the"
             " rescaled old total."),
        ]
        return [((top, v), m) for v, m in named if torch.isfinite(v)]

    return diagnose(
        fn, [(torch.tensor(scores), block) for scores, block in _STATS_CASES],
        reference, mistakes, what="pair",
        read=lambda got, *case: _read_pair(got, ("maximum", "total")),
        compare=_close_stats, explain=_explain_stats,
        where=lambda x, block: f"For x = {[round(s, 2) for s in x[:4].tolist()]}...,"
        f" n = {len(x)}, block = {block}",
        correct="Correct: m_new = max(m, max(block)); total = total · exp(m − m_new) +"
        " Σ exp(block − m_new), and a block of −∞ only changes nothing. Then"
        " m + log(total) = logsumexp(x), without ever holding all of x.",
    )


def _close_stats(got, expected) -> bool:
    """:func:`close_each`, or the same maximum and a total within 1e-4 of the expected
    one: a running log-sum-exp kept in float32 (``torch.logaddexp``), then
    ``total = exp(lse - m)``, is a correct online softmax that loses a few digits at
    scores near 1000; the named mistakes are off by far more."""
    if close_each(got, expected):
        return True
    (maximum, total), (top, expected_total) = got, expected
    return (isinstance(total, Tensor) and close(maximum, top)
            and bool(torch.isfinite(total.double()).all())
            and torch.allclose(total.double(), expected_total.double(), rtol=1e-4,
                               atol=0.0))


def _explain_stats(got, expected, x, block) -> str:
    (maximum, total), (top, expected) = got, expected
    if torch.isnan(total) or torch.isnan(maximum):
        if bool(torch.isneginf(x).any()):
            return (
                "your result is NaN. The first block holds only −∞ (a block of keys"
                " that the mask hides entirely): its maximum is −∞, and exp(x − m) ="
                " exp(−∞ − (−∞)) is NaN. Skip a block whose maximum is −∞ (it adds"
                " nothing), or subtract 0 where the maximum is not finite."
            )
        return ("your total is NaN although every score is finite. Starting from m = −∞"
                " and total = 0, a rescaling factor exp(m_new − m_old) is exp(+∞) and"
                " 0 · ∞ is NaN: the factor is exp(m_old − m_new), old minus new, at"
                " most 1.")
    if torch.isinf(total):
        return (
            "your total overflows to inf. exp(1000) does not fit in a float (float32"
            " stops near exp(88), float64 near exp(709)): subtract the running"
            " maximum before exp, so that every exp(x − m) is at most 1."
        )
    if not close(maximum, top):
        if close(maximum, x.double().split(block)[-1].max()):
            return (f"your maximum is {maximum.item():g}, the last block's; the running"
                    f" maximum is the largest score so far, {top.item():g}: m_new ="
                    " max(m_old, max of the block).")
        if close(maximum.double() + torch.log(total.double()),
                 top + torch.log(expected)):
            return (
                f"your pair gives the right log-sum-exp, but your maximum,"
                f" {maximum.item():g}, is not the largest score, {top.item():g}. Keep"
                " the running maximum, so that no exp(x − m) can overflow."
            )
        return (f"your maximum is {maximum.item():g}; the largest score is"
                f" {top.item():g}.")
    return (f"your total is {total.item():.6g}; Σ exp(x − m) is {expected.item():.6g}"
            f" (m = {top.item():g}).")


# --- 5. merging two partial results ---------------------------------------------------

def _merge_cases() -> list[tuple[str, tuple[Tensor, ...]]]:
    """(description, (out1, lse1, out2, lse2)): partial results of the library's
    ``attend`` over two blocks of keys."""
    gen = torch.Generator().manual_seed(6)
    q = torch.randn(4, 8, generator=gen)  # (Lq, D)
    k = torch.randn(10, 8, generator=gen)  # (Lk, D)
    v = torch.randn(10, 3, generator=gen)  # (Lk, Dv)
    plain = (*attend(q, k[:6], v[:6]), *attend(q, k[6:], v[6:]))
    # Scores near 1000: one more feature, √1000 in every query and key, scale 1.
    big = math.sqrt(1000.0)
    q_big = torch.cat([q, torch.full((4, 1), big)], dim=-1)  # (Lq, D + 1)
    k_big = torch.cat([k, torch.full((10, 1), big)], dim=-1)  # (Lk, D + 1)
    large = (*attend(q_big, k_big[:6], v[:6], scale=1.0),
             *attend(q_big, k_big[6:], v[6:], scale=1.0))
    # Query 0 has no key in the first block, query 1 no key in either.
    allowed1 = torch.ones(4, 6, dtype=torch.bool)
    allowed1[:2] = False
    allowed2 = torch.ones(4, 4, dtype=torch.bool)
    allowed2[1] = False
    empty = (*attend(q, k[:6], v[:6], allowed1), *attend(q, k[6:], v[6:], allowed2))
    return [
        ("two blocks of keys", plain),
        ("scores near 1000 (lse ≈ 1000)", large),
        ("a query with no key in the first block and one with no key at all", empty),
    ]


def _merge_out_variants(out1, lse1, out2, lse2) -> list:
    top = torch.maximum(lse1, lse2)
    w1, w2 = torch.exp(lse1 - top), torch.exp(lse2 - top)
    u1, u2 = torch.exp(top - lse1), torch.exp(top - lse2)
    return [
        ((out1 + out2) / 2,
         "you averaged the two outputs with equal weights. Each part's weight is its"
         " share of the softmax's denominator: e^lse₁ / (e^lse₁ + e^lse₂) and"
         " e^lse₂ / (e^lse₁ + e^lse₂)."),
        (out1 + out2,
         "you added the two outputs. Each is a weighted mean over its own keys;"
         " weigh them by e^lse₁ and e^lse₂ and divide by the sum."),
        ((u1 * out1 + u2 * out2) / (u1 + u2),
         "the weights have the wrong sign: weigh part i by exp(lse_i − max), not"
         " exp(max − lse_i); the part with the larger lse must weigh more."),
        (w1 * out1 + w2 * out2,
         "the weights are not normalised: divide w₁·out₁ + w₂·out₂ by w₁ + w₂, with"
         " w_i = exp(lse_i − max)."),
        ((lse1 * out1 + lse2 * out2) / (lse1 + lse2),
         "you weighed the parts by lse itself; the weights are e^lse (lse is a log),"
         " normalised: exp(lse_i − lse)."),
        (torch.where(lse1 >= lse2, out1, out2),
         "you kept the part with the larger lse and dropped the other; both"
         " contribute, in proportion to e^lse."),
    ]


def _merge_lse_variants(out1, lse1, out2, lse2) -> list:
    top = torch.maximum(lse1, lse2)
    finite = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    return [
        (top,
         "your lse is the larger of the two, max(lse₁, lse₂). It is"
         " log(e^lse₁ + e^lse₂) = max + log(1 + e^(min − max)): add the second"
         " term."),
        (lse1 + lse2,
         "your lse is lse₁ + lse₂: the log of a sum is not the sum of the logs."
         " lse = log(e^lse₁ + e^lse₂)."),
        ((lse1 + lse2) / 2,
         "your lse is the mean of the two; lse = log(e^lse₁ + e^lse₂)."),
        (torch.log(torch.exp(lse1 - finite) + torch.exp(lse2 - finite)),
         "you forgot to add the maximum back: lse = max + log(e^(lse₁ − max) +"
         " e^(lse₂ − max))."),
    ]


@checker
def check_merge_partials(fn) -> Feedback:
    """Check ``fn(out1, lse1, out2, lse2) -> (out, lse)``: two softmax-attention
    results over disjoint blocks of keys (from the library's ``attend``) merged into
    the result over both, against :func:`~attention_lib.efficient.merge_partials`;
    with scores near 1000 and queries with no key (lse = −∞). Names equal weights,
    outputs added, weights of the wrong sign or not normalised, lse as the weight, the
    larger part alone, an lse that is the max or the sum, and the overflow.

    Shapes:
        fn: (out1 (Lq, Dv), lse1 (Lq, 1), out2 (Lq, Dv), lse2 (Lq, 1))
            -> (out (Lq, Dv), lse (Lq, 1))

    Taught in ``chapters/06_efficient/05_exercises.ipynb``.
    """
    labels, cases = zip(*_merge_cases())

    def read(got, *parts):  # errors start with where: shape=True
        shapes = [t.shape for t in merge_partials(*parts)]
        return read_tensors(got, ("out", "lse"), shapes)

    def mistakes(*parts):
        out, lse = merge_partials(*parts)
        return [((v, None), m) for v, m in _merge_out_variants(*parts)
                if torch.isfinite(v).all()] + [
            ((out, v), m) for v, m in _merge_lse_variants(*parts)]

    return diagnose(
        fn, cases, merge_partials, mistakes, what="pair", read=read, shape=True,
        compare=close_each, explain=_explain_merge,
        where=[f"With {label}" for label in labels],
        correct="Correct: with m = max(lse₁, lse₂) (0 where it is −∞), w_i ="
        " exp(lse_i − m), out = (w₁·out₁ + w₂·out₂) / (w₁ + w₂) and lse = m + log(w₁ +"
        " w₂): the result over all keys, exactly, and the step chunked attention"
        " repeats.",
    )


def _explain_merge(got, expected, out1, lse1, out2, lse2) -> str:
    (out, lse), (expected_out, expected_lse) = got, expected
    if not (torch.isfinite(out).all() and not torch.isnan(lse).any()
            and not torch.isposinf(lse).any()):
        if bool((lse1 > 500).any()):
            return ("your result holds inf or NaN. e^1000 overflows (float32 stops near"
                    " e^88, float64 near e^709): subtract the larger lse first, w_i ="
                    " exp(lse_i − max), and lse = max + log(w₁ + w₂).")
        if bool(torch.isneginf(torch.cat([lse1, lse2])).any()):
            return (
                "your result holds NaN or inf. A query with no key at all has lse₁ ="
                " lse₂ = −∞, so lse_i − max is −∞ − (−∞) = NaN. Where the maximum is"
                " −∞ use 0 instead (the weights are then e^−∞ = 0), and never divide"
                " by a total of 0: such a query's output is 0 and its lse −∞."
            )
        return "your result holds NaN or inf."
    if not close(out, expected_out):
        return ("your out differs from the merged result: for query 0 it is"
                f" {[round(x, 4) for x in out[0].tolist()]}, expected"
                f" {[round(x, 4) for x in expected_out[0].tolist()]}.")
    return (f"your out is right, but your lse differs: for query 0 it is"
            f" {lse[0, 0].item():.6g}, expected {expected_lse[0, 0].item():.6g}"
            " = log(e^lse₁ + e^lse₂).")


# --- 6. positions processed while generating -----------------------------------------

_POSITION_CASES = (1, 2, 5, 10, 64)


class _CountingDecoder:
    """A decoder of the library's protocol that only counts the positions it is fed;
    its logits always pick token 0."""

    def __init__(self):
        self.positions = 0

    def __call__(self, tokens: Tensor, state):
        self.positions += tokens.shape[1]
        return torch.zeros(tokens.shape[0], tokens.shape[1], 3), state  # (B, L, V)


def _positions(num_tokens: int, use_cache: bool) -> int:
    """The positions :func:`~attention_lib.efficient.generate` feeds its decoder."""
    decoder = _CountingDecoder()
    start = torch.zeros(1, 1, dtype=torch.long)  # (B, 1)
    generate(decoder, None, start, num_tokens, use_cache=use_cache)
    return decoder.positions


_POSITION_VARIANTS = {
    False: [
        (lambda t: t * t,
         "T²: that would be T steps that each feed all T positions. Step t feeds"
         " only the t positions known so far: 1 + 2 + ... + T."),
        (lambda t: t * (t - 1) // 2,
         "T(T − 1)/2 is one step short per sum: the first step feeds the start"
         " token, 1 position, and step t feeds t positions: 1 + 2 + ... + T ="
         " T(T + 1)/2."),
        (lambda t: (t + 1) * (t + 2) // 2,
         "off by one: T tokens take T steps, feeding 1, 2, ..., T positions."),
        (lambda t: (t + 1) * (t + 2) // 2 - 1,
         "off by one: step t feeds t positions (the start token and the t − 1"
         " tokens so far), not t + 1."),
        (lambda t: t * (t + 1),
         "you forgot to halve: 1 + 2 + ... + T = T(T + 1)/2."),
        (lambda t: t,
         "that is the count with the cache. Without it, every step feeds the whole"
         " prefix again."),
    ],
    True: [
        (lambda t: t * (t + 1) // 2,
         "that is the count without the cache. With it, every step feeds only the"
         " newest token: one position a step."),
        (lambda t: t + 1,
         "off by one: T tokens take T steps of one position each; the last token"
         " generated is never fed."),
        (lambda t: t - 1,
         "off by one: the start token is fed too, at the first step: T positions."),
        (lambda t: 1,
         "one position is what a single step feeds; T steps feed T."),
        (lambda t: t * t, "T²: with the cache each step feeds one position, not T."),
    ],
}


@checker
def check_positions_processed(fn) -> Feedback:
    """Check ``fn(num_tokens, use_cache) -> int``: the positions a decoder is fed to
    generate T tokens, T with the cache and T(T + 1)/2 without, counted by running
    :func:`~attention_lib.efficient.generate`. Names T², T(T − 1)/2, no halving,
    off-by-ones and the modes swapped.

    Shapes:
        fn: (int T, bool use_cache) -> one number

    Taught in ``chapters/06_efficient/05_exercises.ipynb``.
    """
    return all_of((diagnose_numbers(
        fn, [(t, use_cache) for t in _POSITION_CASES], _positions,
        [(lambda t, c, formula=formula: formula(t), message)
         for formula, message in _POSITION_VARIANTS[use_cache]],
        what="number of positions", equal=_same,
        prefix=f"With use_cache={use_cache}: ",
        explain_case=lambda answer, expected, t, use_cache: f"For T = {t},"
        f" use_cache={use_cache} you count {answer:,.0f} positions; generate feeds the"
        f" decoder {expected:,.0f}.", correct="") for use_cache in (False, True)),
        f"Correct: T with the cache, T(T + 1)/2 without: for T = 1000 tokens {1000:,}"
        f" positions against {1000 * 1001 // 2:,}, (T + 1)/2 = {1001 / 2} times as"
        " many.")


# --- 7. the dilated window with global tokens -----------------------------------------

# (n, w, dilation, global tokens): every size differs within a case
_SPARSE_CASES = ((12, 4, 2, 1), (11, 5, 3, 2), (9, 2, 1, 3), (10, 4, 2, 0))


def _sparse(length: int, window: int, dilation: int, num_global: int) -> Tensor:
    return AttentionPattern(window=window, dilation=dilation,
                            global_tokens=num_global).mask(length)


def _sparse_variants(length: int, window: int, dilation: int, num_global: int):
    expected = _sparse(length, window, dilation, num_global)
    idx = torch.arange(length)
    rows = (idx < num_global).unsqueeze(1).expand(length, length)  # global queries
    cols = (idx < num_global).unsqueeze(0).expand(length, length)  # global keys
    local = _sparse(length, window, dilation, 0)
    every_dth = AttentionPattern(dilation=dilation).mask(length)
    variants = [
        (~expected,
         "your mask is inverted: True where a query may NOT attend."),
        (_sparse(length, window, 1, num_global),
         "the dilation is ignored: with dilation d the window keeps only keys at"
         " distances 0, d, 2d, ..., up to d·(w // 2)."),
        (_sparse(length, window, 1, 0) & every_dth | rows | cols,
         "your window is not stretched: you kept every d-th key within w // 2"
         " positions. A dilated window reaches d·(w // 2) positions on each side,"
         " and sees as many keys as the plain one."),
        (_sparse(length, 2 * dilation * (window // 2) + 1, 1, num_global),
         "the window is stretched but has no holes: with dilation d only keys at"
         " distances that are multiples of d are seen."),
        (local,
         "the global tokens are missing: the first g positions attend to every key,"
         " and every query attends to them."),
        (local | rows,
         "the global tokens attend to every key, but the other queries do not"
         " attend to them: add the first g columns too."),
        (local | cols,
         "every query attends to the global tokens, but the global tokens attend"
         " only within their window: add the first g rows too."),
        (local | (rows & every_dth) | (cols & every_dth),
         "you applied the dilation to the global tokens' rows and columns: global"
         " tokens see, and are seen by, every position."),
    ]
    return variants


@checker
def check_sparse_mask(fn) -> Feedback:
    """Check ``fn(n, window, dilation, global_tokens) -> mask``: the (n, n) bool mask of
    a dilated window with g global tokens, as ``AttentionPattern(window=w, dilation=d,
    global_tokens=g).mask(n)``. Names the dilation ignored or misapplied, a window not
    stretched or without holes, global tokens missing or one-sided, an inverted mask, a
    mask of numbers and a wrong shape.

    Shapes:
        fn: (int n, int w, int d, int g) -> (n, n) bool

    Taught in ``chapters/06_efficient/05_exercises.ipynb``.
    """
    return _check_mask(
        fn, _SPARSE_CASES, _sparse, _sparse_variants,
        lambda n, w, d, g: "For " + sizes(" = ", n=n, w=w, d=d, g=g),
        "Correct: ((i - j) % d == 0) & ((i - j).abs() <= d * (w // 2)), or'ed with"
        " (i < g) | (j < g): away from the edges each query sees the 2·(w // 2) + 1"
        " keys of its window spread over 2·d·(w // 2) + 1 positions, and the g"
        " global tokens see and are seen by all.",
    )

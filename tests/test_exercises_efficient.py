"""Chapter 6's checkers accept the right answers in every form and name each typical
mistake with the scores' memory, windows and their masks, the online softmax, merging
partial results, the cache's savings and the dilated pattern."""
import math

import numpy as np
import pytest
import torch
from answer_forms import NUMBER_FORMS, assert_rejects, in_form

import attention_lib.exercises.ch06_efficient as module
from attention_lib.efficient import (
    AttentionPattern,
    attend,
    chunked_attention,
    generate,
    merge_partials,
)
from attention_lib.exercises.ch06_efficient import (
    check_merge_partials,
    check_online_softmax,
    check_positions_processed,
    check_scores_bytes,
    check_sparse_mask,
    check_window_mask,
    check_window_pairs,
)

INF = math.inf

# float16 cannot hold 64 MiB as a count of bytes (its largest number is 65,504)
BIG_NUMBER_FORMS = [form for form in NUMBER_FORMS if form != "float16"]


# --- 1. the memory of the scores ------------------------------------------------------

def scores_bytes(n, batch_size, num_heads, nbytes):
    return batch_size * num_heads * n * n * nbytes


def test_the_oracle_is_the_size_of_real_scores():
    q = torch.randn(2, 3, 5, 4, dtype=torch.float16)  # (B, H, n, Dh)
    scores = q @ q.transpose(-1, -2)  # (B, H, n, n)
    assert module._scores_bytes(5, 2, 3, 2) == scores.nbytes == scores_bytes(5, 2, 3, 2)
    assert module._scores_bytes(4096, 1, 1, 4) == 64 * 2**20


@pytest.mark.parametrize("form", BIG_NUMBER_FORMS)
def test_scores_bytes_accepts_any_number_form(form):
    feedback = check_scores_bytes(in_form(lambda *a: float(scores_bytes(*a)), form))
    assert feedback and "64 MiB" in feedback.message and "8 GiB" in feedback.message


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (lambda n, b, h, x: b * h * n * x, ["n numbers per head", "n²"]),
        (lambda n, b, h, x: b * n * n * x, ["you forgot the heads"]),
        (lambda n, b, h, x: h * n * n * x, ["you forgot the batch"]),
        (lambda n, b, h, x: n * n * x, ["one head of one sequence"]),
        (lambda n, b, h, x: 8 * scores_bytes(n, b, h, x), ["you counted bits"]),
        (lambda n, b, h, x: scores_bytes(n, b, h, 8), ["8 bytes per number (float64)"]),
        (lambda n, b, h, x: scores_bytes(n, b, h, 4), ["4 bytes per number"]),
        (lambda n, b, h, x: b * h * n * n, ["you counted numbers, not bytes"]),
        (lambda n, b, h, x: b * h * n * (n + 1) // 2 * x, ["the lower triangle"]),
        (lambda n, b, h, x: scores_bytes(n, b, h, x) / 2**20, ["in MiB"]),
        (lambda n, b, h, x: scores_bytes(n, b, h, x) / 2**30, ["in GiB"]),
        (lambda n, b, h, x: scores_bytes(n, b, h, x) / 1e6, ["in MB"]),
        (lambda n, b, h, x: scores_bytes(n, b, h, x) + 1,
         ["For n = 4096, B = 1, H = 1, bytes = 4 you count 67,108,865",
          "take 67,108,864 bytes"]),
    ],
)
def test_scores_bytes_names_each_mistake(wrong, phrases):
    assert_rejects(check_scores_bytes(wrong), *phrases)


# --- 2. how many pairs a window allows ------------------------------------------------

def window_pairs(n, w, causal):
    if causal:  # query i sees min(i + 1, w) keys
        return n * w - w * (w - 1) // 2 if n >= w else n * (n + 1) // 2
    h = w // 2
    return n * (2 * h + 1) - h * (h + 1) if n > h else n * n


def window_pairs_by_rows(n, w, causal):
    if causal:
        return sum(min(i + 1, w) for i in range(n))
    h = w // 2
    return sum(min(n - 1, i + h) - max(0, i - h) + 1 for i in range(n))


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 9, 16, 33])
@pytest.mark.parametrize("w", [1, 2, 3, 4, 5, 8, 9])
@pytest.mark.parametrize("causal", [False, True])
def test_the_pair_formulas_equal_the_library(n, w, causal):
    expected = AttentionPattern(window=w, causal=causal).pairs(n)
    assert window_pairs(n, w, causal) == window_pairs_by_rows(n, w, causal) == expected


@pytest.mark.parametrize("solution", [window_pairs, window_pairs_by_rows])
def test_window_pairs_accepts_the_derivation(solution):
    feedback = check_window_pairs(solution)
    assert feedback and "w/n" in feedback.message


@pytest.mark.parametrize("form", NUMBER_FORMS)
def test_window_pairs_accepts_any_number_form(form):
    assert check_window_pairs(in_form(lambda *a: float(window_pairs(*a)), form))


def one_mode(causal, wrong):
    """The right count in the other mode, ``wrong`` in this one."""
    return lambda n, w, c: wrong(n, w) if c == causal else window_pairs(n, w, c)


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (one_mode(True, lambda n, w: n * w),
         ["With causal=True", "ignoring the edge", "w(w − 1)/2"]),
        (one_mode(True, lambda n, w: n * min(n, w)),
         ["With causal=True", "you ignored the edge"]),
        (one_mode(True, lambda n, w: window_pairs(n, w + 1, True)),
         ["off by one", "w + 1 keys"]),
        (one_mode(True, lambda n, w: window_pairs(n, w - 1, True)),
         ["off by one", "w − 1 keys"]),
        (one_mode(True, lambda n, w: window_pairs(n, w, True) - n),
         ["you left out the query itself"]),
        (one_mode(True, lambda n, w: n * (n + 1) // 2), ["without a window"]),
        (one_mode(False, lambda n, w: n * (2 * (w // 2) + 1)),
         ["With causal=False", "ignoring the edges"]),
        (one_mode(False, lambda n, w: n * w), ["n · w ignores the edges"]),
        (one_mode(False, lambda n, w: n * (w + 1)), ["n · (w + 1) ignores the edges"]),
        (one_mode(False, lambda n, w: window_pairs(n, w - 2, False)),
         ["off by one", "|i − j| < w // 2"]),
        (one_mode(False, lambda n, w: window_pairs(n, w + 2, False)),
         ["off by one", "w // 2 + 1"]),
        (one_mode(False, lambda n, w: window_pairs(n, 2 * w, False)),
         ["w keys on each side"]),
        (one_mode(False, lambda n, w: n * n), ["dense attention"]),
        (lambda n, w, c: window_pairs(n, w, not c),
         ["With causal=False", "that is the causal window's count"]),
        (lambda n, w, c: window_pairs(n, w, True),
         ["With causal=False", "that is the causal window's count"]),
        (lambda n, w, c: window_pairs(n, w, False),
         ["With causal=True", "that is the bidirectional window's count"]),
        (one_mode(True, lambda n, w: window_pairs(n, w, True) + (n < w)),
         ["For n = 3, w = 8, causal=True you count 7", "allows 6 pairs",
          "n < w"]),
    ],
)
def test_window_pairs_names_each_mistake(wrong, phrases):
    assert_rejects(check_window_pairs(wrong), *phrases)


@pytest.mark.parametrize("causal", [False, True])
def test_every_named_pair_count_is_recognised_as_itself(causal):
    """Each named count differs from the right one and from every count named before
    it, on the checker's cases: none is shadowed."""
    cases = module._PAIRS_CASES[causal]
    seen = [[window_pairs(n, w, causal) for n, w in cases]]
    for formula, message in module._pairs_variants(causal):
        values = [formula(n, w) for n, w in cases]
        assert values not in seen, message
        seen.append(values)
        assert_rejects(check_window_pairs(one_mode(causal, formula)), message)


# --- 3. the window mask ---------------------------------------------------------------

def window_mask(n, w, causal):
    i = torch.arange(n).unsqueeze(1)  # (n, 1) queries
    j = torch.arange(n).unsqueeze(0)  # (1, n) keys
    if causal:
        return (j <= i) & (i - j < w)  # (n, n)
    return (i - j).abs() <= w // 2


def window_mask_numpy(n, w, causal):
    offset = np.subtract.outer(np.arange(n), np.arange(n))  # i - j
    return (offset >= 0) & (offset < w) if causal else np.abs(offset) <= w // 2


def window_mask_lists(n, w, causal):
    return window_mask(n, w, causal).tolist()


@pytest.mark.parametrize(
    "solution",
    [window_mask, window_mask_numpy, window_mask_lists,
     lambda n, w, c: window_mask(n, w, c)[None, None]],
    ids=["torch", "numpy", "lists", "batched"],
)
def test_window_mask_accepts_every_form(solution):
    feedback = check_window_mask(solution)
    assert feedback, feedback


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (lambda n, w, c: ~window_mask(n, w, c), ["inverted"]),
        (lambda n, w, c: window_mask(n, w, c).T,
         ["causal=True", "transposed", "looks into the future"]),
        (lambda n, w, c: window_mask(n, w, c) & ~torch.eye(n, dtype=torch.bool),
         ["the diagonal is missing"]),
        (lambda n, w, c: window_mask(n, w + 1, c) if c else window_mask(n, w, c),
         ["off by one", "w + 1 keys"]),
        (lambda n, w, c: window_mask(n, w - 2, c) if not c else window_mask(n, w, c),
         ["causal=False", "off by one", "|i − j| < w // 2"]),
        (lambda n, w, c: window_mask(n, 2 * w, c), ["w keys on each side"]),
        (lambda n, w, c: window_mask(n, w, True), ["causal=False",
                                                   "that is the causal window"]),
        (lambda n, w, c: window_mask(n, w, False), ["causal=True",
                                                    "bidirectional window"]),
        (lambda n, w, c: torch.ones(n, n, dtype=torch.bool).tril() if c
         else window_mask(n, w, c), ["the causal mask without the window"]),
        (lambda n, w, c: torch.ones(n, n, dtype=torch.bool), ["dense attention"]),
        (lambda n, w, c: window_mask(n, w, c).float(),
         ["the pattern is right", "torch.float32", "dtype=torch.bool"]),
        (lambda n, w, c: window_mask(n, w, c).long(), ["torch.int64", "not bools"]),
        (lambda n, w, c: torch.zeros(n, n).masked_fill(~window_mask(n, w, c), -INF),
         ["additive float mask"]),
        (lambda n, w, c: (~window_mask(n, w, c)).float(), ["is inverted"]),
        (lambda n, w, c: window_mask(n, w, c)[:-1], ["has shape (7, 8)",
                                                     "expected (n, n) = (8, 8)"]),
        (lambda n, w, c: window_mask(n + 1, w, c), ["has shape (9, 9)"]),
        (lambda n, w, c: torch.eye(n, dtype=torch.bool),
         ["For n = 8, w = 4, causal=False: row 0 (query 0) should be"]),
    ],
)
def test_window_mask_names_each_mistake(wrong, phrases):
    assert_rejects(check_window_mask(wrong), *phrases)


def test_every_named_window_mask_is_recognised_as_itself():
    for number, case in enumerate(module._MASK_CASES):
        variants = module._window_variants(*case)
        for index, (variant, message) in enumerate(variants):
            shadowing = [earlier for earlier, _ in variants[:index]
                         if torch.equal(earlier, variant)]
            if torch.equal(variant, module._window(*case)) or shadowing:
                continue  # equal here (n < w): told apart in an earlier case
            def reader(n, w, c, case=case, variant=variant):
                return variant if (n, w, c) == case else window_mask(n, w, c)

            assert_rejects(check_window_mask(reader), message)
        if number < 4:  # the cases with n ≥ w tell every variant apart
            assert all(not torch.equal(v, module._window(*case)) for v, _ in variants)


# --- 4. the online softmax's statistics -----------------------------------------------

def online_stats(x, block, rescale=lambda old, new: math.exp(old - new),
                 skip_empty=True):
    maximum, total = -INF, 0.0
    for start in range(0, len(x), block):
        part = x[start:start + block]
        new = max(maximum, part.max().item())
        if skip_empty and new == -INF:
            continue
        total = total * rescale(maximum, new) + torch.exp(part - new).sum().item()
        maximum = new
    return maximum, total


def online_stats_from_first_block(x, block, sign=1):
    parts = x.split(block)
    maximum = parts[0].max()
    total = torch.exp(parts[0] - maximum).sum()
    for part in parts[1:]:
        new = torch.maximum(maximum, part.max())
        total = total * torch.exp(sign * (maximum - new)) + torch.exp(part - new).sum()
        maximum = new
    return maximum, total


def test_the_statistics_give_torchs_logsumexp():
    for scores, block in module._STATS_CASES:
        x = torch.tensor(scores)
        maximum, total = online_stats(x, block)
        assert maximum + math.log(total) == pytest.approx(
            torch.logsumexp(x.double(), 0).item(), rel=1e-6)


def running_logaddexp(x, block):
    # A running log-sum-exp in float32, block by block: correct, though at scores near
    # 1000 it keeps fewer digits of the total than (m, total) kept apart.
    lse = torch.tensor(-math.inf)
    for start in range(0, len(x), block):
        lse = torch.logaddexp(lse, torch.logsumexp(x[start:start + block], 0))
    top = x.max()
    return top, torch.exp(lse - top)


@pytest.mark.parametrize(
    "solution",
    [
        online_stats,
        lambda x, b: tuple(map(torch.tensor, online_stats(x, b))),
        lambda x, b: [np.float64(v) for v in online_stats(x, b)],
        lambda x, b: (x.max(), torch.exp(torch.logsumexp(x, 0) - x.max())),
        running_logaddexp,
    ],
    ids=["floats", "tensors", "numpy", "logsumexp", "running logaddexp in float32"],
)
def test_online_softmax_accepts_every_form(solution):
    feedback = check_online_softmax(solution)
    assert feedback and "logsumexp(x)" in feedback.message


def only_first_max(x, block):  # consistent, but the maximum is the first block's
    top = x[:block].max()
    return top, torch.exp(x.double() - top).sum()


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (lambda x, b: online_stats(x, b, rescale=lambda old, new: 1.0),
         ["block = 3", "the old total is not rescaled"]),
        (lambda x, b: online_stats_from_first_block(x, b, sign=-1),
         ["the rescaling has the wrong sign", "exp(m_old − m_new)"]),
        (lambda x, b: online_stats(x, b, rescale=lambda old, new: math.exp(new - old)),
         ["NaN although every score is finite", "old minus new"]),
        (lambda x, b: (x.max(), torch.exp(x).sum()), ["no maximum subtracted"]),
        (lambda x, b: (x.max(), torch.exp(x.double()).sum()),
         ["no maximum subtracted"]),
        (lambda x, b: (x.max(), sum(torch.exp(p - p.max()).sum() for p in x.split(b))),
         ["each block's exp is taken with its own maximum"]),
        (lambda x, b: (x.max(), torch.exp(x.split(b)[-1] - x.max()).sum()),
         ["only the last block"]),
        (lambda x, b: (x.split(b)[-1].max(), online_stats(x, b)[1]),
         ["your maximum is 2.5, the last block's", "running maximum"]),
        (only_first_max, ["the right log-sum-exp", "not the largest score"]),
        (lambda x, b: online_stats(x, b, skip_empty=False),
         ["x = [-inf, -inf, -inf, 1.0]", "NaN", "exp(−∞ − (−∞))"]),
        (lambda x, b: (1000 * x.max(), 1.0), ["your maximum is 5000"]),
        (lambda x, b: (x.max(), 1.0), ["your total is 1; Σ exp(x − m) is"]),
        (lambda x, b: torch.logsumexp(x, 0), ["Return a pair (maximum, total)"]),
        (lambda x, b: (x.max(), "1.5"), ["total: Return the total as one number"]),
    ],
)
def test_online_softmax_names_each_mistake(wrong, phrases):
    assert_rejects(check_online_softmax(wrong), *phrases)


def test_naive_exp_overflows_on_the_large_case():
    """A loop that never subtracts the maximum passes the small cases only if it is
    right in float64; the scores of 1000 catch it as an overflow."""
    def naive(x, b):
        return x.max(), sum(torch.exp(p).sum() for p in x.split(b))

    assert_rejects(check_online_softmax(naive), "no maximum subtracted")
    scores, block = module._STATS_CASES[2]
    _, total = naive(torch.tensor(scores), block)
    assert torch.isinf(total)
    fed_big = check_online_softmax(
        lambda x, b: naive(x, b) if x.max() > 100 else online_stats(x, b))
    assert_rejects(fed_big, "overflows to inf")


# --- 5. merging two partial results ---------------------------------------------------

def merge(out1, lse1, out2, lse2):
    top = torch.maximum(lse1, lse2)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    w1, w2 = torch.exp(lse1 - top), torch.exp(lse2 - top)
    total = w1 + w2
    safe = torch.where(total > 0, total, torch.ones_like(total))
    out = (w1 * out1 + w2 * out2) / safe
    return out, top + torch.log(total)


def merge_logaddexp(out1, lse1, out2, lse2):
    lse = torch.logaddexp(lse1, lse2)
    safe = torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))
    out = torch.exp(lse1 - safe) * out1 + torch.exp(lse2 - safe) * out2
    return out, lse


def test_merged_cases_equal_attention_over_all_keys():
    cases = module._merge_cases()
    out, lse = merge_partials(*cases[0][1])
    gen = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(4, 8, generator=gen), torch.randn(10, 8, generator=gen),
               torch.randn(10, 3, generator=gen))
    full_out, full_lse = attend(q, k, v)
    torch.testing.assert_close(out, full_out)
    torch.testing.assert_close(lse, full_lse)
    torch.testing.assert_close(out, chunked_attention(q, k, v, kv_block=6))
    large = cases[1][1]
    assert (large[1] > 900).all() and (large[3] > 900).all()
    empty_out, empty_lse = merge_partials(*cases[2][1])
    assert torch.isneginf(cases[2][1][1][0]) and torch.isneginf(empty_lse[1])
    assert (empty_out[1] == 0).all()


@pytest.mark.parametrize(
    "solution",
    [merge, merge_logaddexp, merge_partials,
     lambda *a: tuple(t.double() for t in merge(*a)),
     lambda *a: tuple(t.numpy() for t in merge(*a))],
    ids=["merge", "logaddexp", "library", "float64", "numpy"],
)
def test_merge_partials_accepts_every_form(solution):
    feedback = check_merge_partials(solution)
    assert feedback, feedback


def naive_merge(out1, lse1, out2, lse2):  # no maximum subtracted
    w1, w2 = torch.exp(lse1), torch.exp(lse2)
    return (w1 * out1 + w2 * out2) / (w1 + w2), torch.log(w1 + w2)


def merge_nan_without_keys(out1, lse1, out2, lse2):  # -inf maximum not replaced
    top = torch.maximum(lse1, lse2)
    w1, w2 = torch.exp(lse1 - top), torch.exp(lse2 - top)
    return (w1 * out1 + w2 * out2) / (w1 + w2), top + torch.log(w1 + w2)


def with_out(formula):
    return lambda o1, l1, o2, l2: (formula(o1, l1, o2, l2), merge(o1, l1, o2, l2)[1])


def with_lse(formula):
    return lambda o1, l1, o2, l2: (merge(o1, l1, o2, l2)[0], formula(o1, l1, o2, l2))


def weights(l1, l2, sign=1):
    top = torch.maximum(l1, l2)
    return torch.exp(sign * (l1 - top)), torch.exp(sign * (l2 - top))


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (with_out(lambda o1, l1, o2, l2: (o1 + o2) / 2),
         ["With two blocks of keys", "equal weights"]),
        (with_out(lambda o1, l1, o2, l2: o1 + o2), ["you added the two outputs"]),
        (with_out(lambda o1, l1, o2, l2: (weights(l1, l2, -1)[0] * o1
                                          + weights(l1, l2, -1)[1] * o2)
                  / sum(weights(l1, l2, -1))),
         ["the weights have the wrong sign"]),
        (with_out(lambda o1, l1, o2, l2: weights(l1, l2)[0] * o1
                  + weights(l1, l2)[1] * o2),
         ["the weights are not normalised"]),
        (with_out(lambda o1, l1, o2, l2: (l1 * o1 + l2 * o2) / (l1 + l2)),
         ["you weighed the parts by lse itself"]),
        (with_out(lambda o1, l1, o2, l2: torch.where(l1 >= l2, o1, o2)),
         ["you kept the part with the larger lse"]),
        (with_lse(lambda o1, l1, o2, l2: torch.maximum(l1, l2)),
         ["your lse is the larger of the two"]),
        (with_lse(lambda o1, l1, o2, l2: l1 + l2),
         ["the log of a sum is not the sum of the logs"]),
        (with_lse(lambda o1, l1, o2, l2: (l1 + l2) / 2), ["the mean of the two"]),
        (with_lse(lambda o1, l1, o2, l2: torch.log(sum(weights(l1, l2)))),
         ["you forgot to add the maximum back"]),
        (naive_merge, ["With scores near 1000", "overflows", "subtract the larger"]),
        (merge_nan_without_keys, ["no key at all", "−∞ − (−∞) = NaN"]),
        (with_out(lambda o1, l1, o2, l2: merge(o1, l1, o2, l2)[0] + 0.01),
         ["your out differs from the merged result: for query 0"]),
        (with_lse(lambda o1, l1, o2, l2: merge(o1, l1, o2, l2)[1] + 0.01),
         ["your out is right, but your lse differs"]),
        (lambda o1, l1, o2, l2: merge(o1, l1, o2, l2)[0], ["Return a pair (out, lse)"]),
        (lambda o1, l1, o2, l2: (merge(o1, l1, o2, l2)[0], l1.squeeze(-1)),
         ["lse: The lse should have shape (4, 1)"]),
    ],
)
def test_merge_partials_names_each_mistake(wrong, phrases):
    assert_rejects(check_merge_partials(wrong), *phrases)


# --- 6. positions processed while generating -----------------------------------------

def positions(num_tokens, use_cache):
    return num_tokens if use_cache else num_tokens * (num_tokens + 1) // 2


def test_generate_feeds_the_counted_positions():
    for num_tokens in (0, 1, 4, 9):
        for use_cache in (False, True):
            decoder = module._CountingDecoder()
            tokens = generate(decoder, None, torch.zeros(2, 1, dtype=torch.long),
                              num_tokens, use_cache=use_cache)
            assert tokens.shape == (2, num_tokens)
            assert decoder.positions == positions(num_tokens, use_cache)


@pytest.mark.parametrize("form", NUMBER_FORMS)
def test_positions_processed_accepts_any_number_form(form):
    feedback = check_positions_processed(in_form(lambda *a: float(positions(*a)),
                                                 form))
    assert feedback and "500,500" in feedback.message


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (lambda t, c: t if c else t * t, ["With use_cache=False", "T²"]),
        (lambda t, c: t if c else t * (t - 1) // 2, ["T(T − 1)/2 is one step short"]),
        (lambda t, c: t if c else (t + 1) * (t + 2) // 2,
         ["off by one", "feeding 1, 2, ..., T"]),
        (lambda t, c: t if c else (t + 1) * (t + 2) // 2 - 1,
         ["off by one", "not t + 1"]),
        (lambda t, c: t if c else t * (t + 1), ["you forgot to halve"]),
        (lambda t, c: positions(t, not c), ["With use_cache=False",
                                            "that is the count with the cache"]),
        (lambda t, c: t * (t + 1) // 2, ["With use_cache=True",
                                         "the count without the cache"]),
        (lambda t, c: t + 1 if c else positions(t, c),
         ["With use_cache=True", "the last token generated is never fed"]),
        (lambda t, c: t - 1 if c else positions(t, c), ["the start token is fed too"]),
        (lambda t, c: 1 if c else positions(t, c), ["a single step feeds"]),
        (lambda t, c: t * t if c else positions(t, c), ["With use_cache=True", "T²"]),
        (lambda t, c: positions(t, c) + (t == 10),
         ["For T = 10, use_cache=False you count 56", "feeds the decoder 55"]),
    ],
)
def test_positions_processed_names_each_mistake(wrong, phrases):
    assert_rejects(check_positions_processed(wrong), *phrases)


# --- 7. the dilated window with global tokens -----------------------------------------

def sparse_mask(n, w, d, g):
    i = torch.arange(n).unsqueeze(1)  # (n, 1)
    j = torch.arange(n).unsqueeze(0)  # (1, n)
    window = ((i - j) % d == 0) & ((i - j).abs() <= d * (w // 2))
    return window | (i < g) | (j < g)  # (n, n)


def plain_window(n, w):
    return window_mask(n, w, False)


def globals_of(n, g):
    idx = torch.arange(n)
    return (idx < g).unsqueeze(1) | (idx < g).unsqueeze(0)


def every_dth(n, d):
    offset = torch.arange(n).unsqueeze(1) - torch.arange(n).unsqueeze(0)
    return offset % d == 0


def test_sparse_mask_accepts_the_pattern_and_numpy():
    assert check_sparse_mask(sparse_mask)
    assert check_sparse_mask(lambda *a: sparse_mask(*a).numpy())


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (lambda n, w, d, g: ~sparse_mask(n, w, d, g), ["inverted"]),
        (lambda n, w, d, g: sparse_mask(n, w, 1, g), ["the dilation is ignored"]),
        (lambda n, w, d, g: plain_window(n, w) & every_dth(n, d) | globals_of(n, g),
         ["your window is not stretched"]),
        (lambda n, w, d, g: plain_window(n, 2 * d * (w // 2)) | globals_of(n, g),
         ["stretched but has no holes"]),
        (lambda n, w, d, g: sparse_mask(n, w, d, 0), ["the global tokens are missing"]),
        (lambda n, w, d, g: sparse_mask(n, w, d, 0)
         | (torch.arange(n) < g).unsqueeze(1).expand(n, n),
         ["add the first g columns"]),
        (lambda n, w, d, g: sparse_mask(n, w, d, 0)
         | (torch.arange(n) < g).unsqueeze(0).expand(n, n),
         ["add the first g rows"]),
        (lambda n, w, d, g: sparse_mask(n, w, d, 0)
         | (globals_of(n, g) & every_dth(n, d)),
         ["you applied the dilation to the global tokens"]),
        (lambda n, w, d, g: sparse_mask(n, w, d, g).int(), ["torch.int32"]),
        (lambda n, w, d, g: sparse_mask(n, w, d, g)[:, :-1],
         ["For n = 12, w = 4, d = 2, g = 1: your mask has shape (12, 11)"]),
        (lambda n, w, d, g: sparse_mask(n, w + 2, d, g),
         ["For n = 12, w = 4, d = 2, g = 1: row 1 (query 1) should be"]),
    ],
)
def test_sparse_mask_names_each_mistake(wrong, phrases):
    assert_rejects(check_sparse_mask(wrong), *phrases)


def test_the_sparse_cases_tell_every_variant_apart():
    for case in module._SPARSE_CASES[:2]:
        variants = module._sparse_variants(*case)
        masks = [module._sparse(*case)] + [v for v, _ in variants]
        for a in range(len(masks)):
            for b in range(a + 1, len(masks)):
                assert not torch.equal(masks[a], masks[b]), (case, a, b)


# --- all checkers: the starter, odd answers, documentation ----------------------------


def test_checkers_leave_the_random_state_alone():
    state = torch.get_rng_state()
    check_merge_partials(merge)
    check_online_softmax(online_stats)
    assert torch.equal(state, torch.get_rng_state())

"""attention_lib.efficient: patterns written out by hand, the online softmax's pieces,
chunked and local attention against dense SDPA (values, gradients, the work they do),
generation with and without the cache, and peak-memory measurements."""
import math
import sys

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_lib import (
    EncoderDecoder,
    TransformerDecoder,
    TransformerEncoder,
    greedy_decode,
)
from attention_lib import efficient
from attention_lib.efficient import (
    AttentionPattern,
    attend,
    chunked_attention,
    flex_attention_available,
    generate,
    local_attention,
    merge_partials,
    peak_memory,
)

LINUX = sys.platform.startswith("linux")


def grid(rows: str) -> torch.Tensor:
    """A 0/1 matrix written as lines of digits, as a boolean tensor."""
    return torch.tensor(
        [[c == "1" for c in line.split()[0]] for line in rows.strip().splitlines()]
    )


def randn(*shape, dtype=torch.float64, seed=0, requires_grad=False):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype)
    return x.requires_grad_(requires_grad)


def sdpa(q, k, v, mask=None, scale=None):
    """SDPA with the library's convention: a query with no key gets zeros."""
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    if mask is None:
        return out
    has_key = mask.any(dim=-1, keepdim=True)  # (..., Lq, 1)
    return torch.where(has_key, out, torch.zeros_like(out))


def dense_reference(q, k, v, mask, scale=None):
    """softmax(q kᵀ · scale) v written out, rows with no key 0 (gradients too)."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q * scale) @ k.transpose(-1, -2)  # (..., Lq, Lk)
    has_key = mask.any(dim=-1, keepdim=True)
    scores = scores.masked_fill(~(mask | ~has_key), -math.inf)
    weights = torch.softmax(scores, dim=-1) * mask  # (..., Lq, Lk)
    return weights @ v


# --- AttentionPattern: small masks written out ----------------------------------------

HAND_WRITTEN = [
    (  # |i − j| ≤ 1
        AttentionPattern(window=3),
        """
        110000
        111000
        011100
        001110
        000111
        000011
        """,
    ),
    (  # i − 3 < j ≤ i
        AttentionPattern(window=3, causal=True),
        """
        100000
        110000
        111000
        011100
        001110
        000111
        """,
    ),
    (  # |i − j| ∈ {0, 2}
        AttentionPattern(window=3, dilation=2),
        """
        101000
        010100
        101010
        010101
        001010
        000101
        """,
    ),
    (  # itself, plus position 0 seen by and seeing everyone
        AttentionPattern(window=1, global_tokens=1),
        """
        111111
        110000
        101000
        100100
        100010
        100001
        """,
    ),
    (  # i − 2 < j ≤ i, plus 0 and 1 global, never a key after the query
        AttentionPattern(window=2, causal=True, global_tokens=2),
        """
        100000
        110000
        111000
        111100
        110110
        110011
        """,
    ),
    (  # strided: every third key, both directions
        AttentionPattern(dilation=3),
        """
        100100
        010010
        001001
        100100
        010010
        001001
        """,
    ),
    (  # strided and causal: every second key up to the query
        AttentionPattern(dilation=2, causal=True),
        """
        100000
        010000
        101000
        010100
        101010
        010101
        """,
    ),
    (  # dense
        AttentionPattern(),
        "\n".join(["111111"] * 6),
    ),
]


@pytest.mark.parametrize("pattern, rows", HAND_WRITTEN)
def test_mask_equals_the_hand_written_matrix(pattern, rows):
    expected = grid(rows)
    mask = pattern.mask(6)
    assert mask.dtype == torch.bool
    assert torch.equal(mask, expected)
    assert pattern.pairs(6) == int(expected.sum())


@pytest.mark.parametrize("window", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("dilation", [1, 2, 3])
@pytest.mark.parametrize("causal", [False, True])
def test_pairs_has_the_closed_form(window, dilation, causal):
    n = 100
    pattern = AttentionPattern(window=window, causal=causal, dilation=dilation)
    if causal:  # offsets 0, d, ..., (w − 1)d before the query
        offsets = range(window)
        per_query = window
    else:  # offsets −h d, ..., h d
        half = window // 2
        offsets = range(-half, half + 1)
        per_query = 2 * half + 1
    expected = sum(n - abs(o) * dilation for o in offsets)
    assert pattern.pairs(n) == int(pattern.mask(n).sum()) == expected
    # a query far from the edges sees exactly its window
    assert int(pattern.mask(n)[n // 2].sum()) == per_query


def test_allows_broadcasts():
    pattern = AttentionPattern(window=3, causal=True, dilation=2, global_tokens=1)
    q_idx = torch.arange(5).view(5, 1, 1)
    kv_idx = torch.arange(7).view(1, 7)
    got = pattern.allows(q_idx, kv_idx)
    assert got.shape == (5, 1, 7)
    assert torch.equal(got[:, 0], pattern.mask(5, 7))
    # a single pair, as 0-d tensors
    assert bool(pattern.allows(torch.tensor(4), torch.tensor(2)))
    assert not bool(pattern.allows(torch.tensor(4), torch.tensor(3)))
    assert pattern.mask(0).shape == (0, 0)
    assert pattern.mask(3, 0).shape == (3, 0)


@pytest.mark.parametrize(
    "kwargs, error, name",
    [
        (dict(window=0), ValueError, "window"),
        (dict(window=2.5), TypeError, "window"),
        (dict(dilation=0), ValueError, "dilation"),
        (dict(global_tokens=-1), ValueError, "global_tokens"),
        (dict(causal=1), TypeError, "causal"),
        (dict(causal="yes"), TypeError, "causal"),
    ],
)
def test_bad_pattern_arguments_are_named(kwargs, error, name):
    with pytest.raises(error, match=name):
        AttentionPattern(**kwargs)


def test_mask_and_pairs_reject_bad_sizes():
    with pytest.raises(ValueError, match="num_queries"):
        AttentionPattern(window=2).mask(-1)
    with pytest.raises(TypeError, match="num_kv"):
        AttentionPattern(window=2).mask(3, 2.0)


# --- flex attention -------------------------------------------------------------------

needs_flex = pytest.mark.skipif(
    not flex_attention_available(),
    reason=f"torch {torch.__version__} has no torch.nn.attention.flex_attention",
)
FLEX_PATTERNS = [
    AttentionPattern(window=9),
    AttentionPattern(window=5, causal=True, dilation=2),
    AttentionPattern(window=3, global_tokens=3),
    AttentionPattern(dilation=4, causal=True),
]


def assert_block_dense_agrees(dense, mask, block):
    """A block is in the BlockMask exactly when some pair in it is allowed."""
    n = mask.shape[-1]
    nb = -(-n // block)
    padded = torch.zeros(nb * block, nb * block, dtype=torch.bool)
    padded[:n, :n] = mask
    expected = padded.view(nb, block, nb, block).any(dim=3).any(dim=1)  # (nb, nb)
    assert torch.equal(dense.reshape(nb, nb).bool(), expected)


@needs_flex
@pytest.mark.parametrize("pattern", FLEX_PATTERNS, ids=repr)
def test_mask_mod_builds_a_block_mask(pattern):
    from torch.nn.attention.flex_attention import create_block_mask

    n, block = 80, 16
    block_mask = create_block_mask(
        pattern.mask_mod, None, None, n, n, device="cpu", BLOCK_SIZE=block
    )
    assert_block_dense_agrees(block_mask.to_dense(), pattern.mask(n), block)
    # the method, too
    block_mask = pattern.block_mask(n, block_size=block)
    assert_block_dense_agrees(block_mask.to_dense(), pattern.mask(n), block)


@needs_flex
@pytest.mark.parametrize("pattern", FLEX_PATTERNS[:2], ids=repr)
def test_eager_flex_attention_equals_sdpa_with_the_mask(pattern):
    import warnings

    from torch.nn.attention.flex_attention import flex_attention

    n = 48
    q, k, v = (randn(1, 2, n, 8, dtype=torch.float32, seed=s) for s in range(3))
    block_mask = pattern.block_mask(n, block_size=16)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "called without torch.compile()"
            got = flex_attention(q, k, v, block_mask=block_mask)
    except Exception as error:  # noqa: BLE001 - an unsupported build: say why
        pytest.skip(f"flex_attention does not run eagerly on CPU here: {error}")
    torch.testing.assert_close(got, sdpa(q, k, v, pattern.mask(n)), atol=1e-5,
                               rtol=1e-5)


# --- attend and merge_partials --------------------------------------------------------

def test_attend_over_all_keys_is_softmax_attention_with_its_logsumexp():
    q, k, v = randn(2, 5, 4, seed=0), randn(2, 7, 4, seed=1), randn(2, 7, 3, seed=2)
    for scale in (None, 0.3):
        out, lse = attend(q, k, v, scale=scale)
        s = 0.5 if scale is None else scale  # 1/√4
        scores = q @ k.transpose(-1, -2) * s
        torch.testing.assert_close(out, torch.softmax(scores, -1) @ v, atol=1e-12,
                                   rtol=0)
        torch.testing.assert_close(lse, torch.logsumexp(scores, -1, keepdim=True),
                                   atol=1e-12, rtol=0)
    assert out.shape == (2, 5, 3) and lse.shape == (2, 5, 1)


def test_attend_accumulates_low_precision_in_float32():
    q = randn(3, 4, dtype=torch.bfloat16)
    out, lse = attend(q, q, q)
    assert out.dtype == lse.dtype == torch.float32


def test_two_disjoint_parts_merge_into_the_whole():
    q, k, v = randn(3, 6, 5, seed=3), randn(3, 11, 5, seed=4), randn(3, 11, 2, seed=5)
    gen = torch.Generator().manual_seed(6)
    first = torch.rand(11, generator=gen) < 0.5  # an arbitrary split, not contiguous
    first[0], first[1] = True, False
    part1 = attend(q, k[:, first], v[:, first])
    part2 = attend(q, k[:, ~first], v[:, ~first])
    out, lse = merge_partials(*part1, *part2)
    whole_out, whole_lse = attend(q, k, v)
    torch.testing.assert_close(out, whole_out, atol=1e-12, rtol=0)
    torch.testing.assert_close(lse, whole_lse, atol=1e-12, rtol=0)
    # the order of the parts does not matter
    torch.testing.assert_close(merge_partials(*part2, *part1)[0], whole_out,
                               atol=1e-12, rtol=0)
    # with a mask: each part sees its own slice of it
    allowed = torch.rand(3, 6, 11, generator=gen) < 0.6
    allowed[..., 0] = allowed[..., 1] = True
    out, lse = merge_partials(
        *attend(q, k[:, first], v[:, first], allowed[..., first]),
        *attend(q, k[:, ~first], v[:, ~first], allowed[..., ~first]),
    )
    torch.testing.assert_close(out, attend(q, k, v, allowed)[0], atol=1e-12, rtol=0)


def test_a_query_without_keys_gets_zero_and_minus_infinity():
    q, k, v = randn(4, 3, seed=0), randn(5, 3, seed=1), randn(5, 2, seed=2)
    allowed = torch.ones(4, 5, dtype=torch.bool)
    allowed[2] = False
    out, lse = attend(q, k, v, allowed)
    assert torch.equal(out[2], torch.zeros(2, dtype=out.dtype))
    assert lse[2].item() == -math.inf
    assert torch.isfinite(out).all() and torch.isfinite(lse[[0, 1, 3]]).all()
    # merging with an empty part (no keys for anyone) changes nothing
    full = attend(q, k, v)
    empty = attend(q, k, v, torch.zeros(4, 5, dtype=torch.bool))
    assert (empty[1] == -math.inf).all() and (empty[0] == 0).all()
    for merged in (merge_partials(*full, *empty), merge_partials(*empty, *full)):
        torch.testing.assert_close(merged[0], full[0], atol=1e-12, rtol=0)
        torch.testing.assert_close(merged[1], full[1], atol=1e-12, rtol=0)
    # two empty parts stay empty, without NaN
    out, lse = merge_partials(*empty, *empty)
    assert (out == 0).all() and (lse == -math.inf).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_no_nan_for_huge_scores(dtype):
    q = torch.tensor([[1000.0], [-1000.0]], dtype=dtype)  # scores ±1000 with k = ±1
    k = torch.tensor([[1.0], [-1.0], [0.5]], dtype=dtype)
    v = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]], dtype=dtype)
    out, lse = attend(q, k, v, scale=1.0)
    assert torch.isfinite(out).all() and torch.isfinite(lse).all()
    torch.testing.assert_close(out, torch.tensor([[1.0, 0.0], [0.0, 1.0]],
                                                 dtype=out.dtype))
    torch.testing.assert_close(lse[:, 0], torch.tensor([1000.0, 1000.0],
                                                       dtype=lse.dtype))
    # the same split in two parts and merged
    merged = merge_partials(*attend(q, k[:1], v[:1], scale=1.0),
                            *attend(q, k[1:], v[1:], scale=1.0))
    assert torch.isfinite(merged[0]).all()
    torch.testing.assert_close(merged[0], out)
    torch.testing.assert_close(
        chunked_attention(q, k, v, scale=1.0, kv_block=1), out.to(dtype)
    )


# --- chunked attention: parity with SDPA ----------------------------------------------

@st.composite
def chunked_cases(draw):
    batch = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    num_queries, num_kv = draw(st.integers(1, 70)), draw(st.integers(1, 70))
    size, value_size = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    kind = draw(st.sampled_from(["none", "mask", "pattern"]))
    seed = draw(st.integers(0, 2**16))
    mask = pattern = None
    gen = torch.Generator().manual_seed(seed)
    if kind == "mask":
        # fewer leading axes than q is fine: they broadcast
        lead = batch[draw(st.integers(0, len(batch))):]
        density = draw(st.sampled_from([0.1, 0.5, 0.9]))
        mask = torch.rand(lead + (num_queries, num_kv), generator=gen) < density
        if draw(st.booleans()):
            mask[..., draw(st.integers(0, num_queries - 1)), :] = False  # no key
    elif kind == "pattern":
        pattern = AttentionPattern(
            window=draw(st.one_of(st.none(), st.integers(1, 20))),
            causal=draw(st.booleans()),
            dilation=draw(st.integers(1, 3)),
            global_tokens=draw(st.integers(0, 4)),
        )
    return dict(
        shapes=(batch + (num_queries, size), batch + (num_kv, size),
                batch + (num_kv, value_size)),
        mask=mask,
        pattern=pattern,
        q_block=draw(st.integers(1, 80)),
        kv_block=draw(st.integers(1, 80)),
        scale=draw(st.sampled_from([None, 0.7])),
        seed=seed,
    )


@settings(max_examples=150, deadline=None)
@given(case=chunked_cases(), dtype=st.sampled_from([torch.float32, torch.float64]))
def test_chunked_attention_equals_sdpa(case, dtype):
    q, k, v = (randn(*shape, dtype=dtype, seed=case["seed"] + i)
               for i, shape in enumerate(case["shapes"]))
    mask, pattern = case["mask"], case["pattern"]
    got = chunked_attention(q, k, v, mask, pattern=pattern, q_block=case["q_block"],
                            kv_block=case["kv_block"], scale=case["scale"])
    if pattern is not None:
        mask = pattern.mask(q.shape[-2], k.shape[-2])
    expected = sdpa(q, k, v, mask, scale=case["scale"])
    assert got.shape == expected.shape and got.dtype == dtype
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(got, expected, atol=tol, rtol=tol)
    if mask is not None:  # a query without keys: exactly 0
        no_key = ~mask.any(-1).expand(got.shape[:-1])
        assert (got[no_key] == 0).all()


@pytest.mark.parametrize(
    "mask_shape",
    [(2, 9, 13), (9, 13), (2, 1, 13), (1, 9, 13), (2, 9, 1), (13,)],
    ids=str,
)
def test_chunked_attention_broadcasts_the_mask_as_sdpa_does(mask_shape):
    q, k, v = randn(2, 9, 4, seed=0), randn(2, 13, 4, seed=1), randn(2, 13, 3, seed=2)
    gen = torch.Generator().manual_seed(3)
    mask = torch.rand(mask_shape, generator=gen) < 0.6
    mask[..., 0] = True
    got = chunked_attention(q, k, v, mask, q_block=4, kv_block=5)
    torch.testing.assert_close(got, sdpa(q, k, v, mask), atol=1e-12, rtol=0)


@pytest.mark.parametrize("seed, n, size, causal",
                         [(0, 64, 32, False), (1, 256, 64, False), (2, 200, 16, True)])
def test_chunked_attention_in_bfloat16_errs_at_most_twice_as_much_as_sdpa(
    seed, n, size, causal
):
    q, k, v = (randn(2, 2, n, size, seed=seed * 3 + i).mul(2).to(torch.bfloat16)
               for i in range(3))
    mask = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    oracle = sdpa(q.double(), k.double(), v.double(), mask)
    sdpa_error = (sdpa(q, k, v, mask).double() - oracle).abs().max()
    got = chunked_attention(q, k, v, mask, q_block=64, kv_block=48)
    assert got.dtype == torch.bfloat16
    our_error = (got.double() - oracle).abs().max()
    assert sdpa_error > 0  # bfloat16 does round: the comparison means something
    assert our_error <= 2 * sdpa_error, (our_error, sdpa_error)


def test_chunked_attention_of_nothing():
    q, k, v = randn(2, 0, 4), randn(2, 5, 4), randn(2, 5, 3)
    assert chunked_attention(q, k, v).shape == (2, 0, 3)


# --- chunked attention: gradients and recomputation -----------------------------------

@pytest.mark.parametrize("recompute", [True, False])
@pytest.mark.parametrize("kind", ["none", "mask", "pattern"])
def test_chunked_attention_gradients_equal_sdpa(recompute, kind):
    q = randn(2, 17, 4, seed=0, requires_grad=True)
    k = randn(2, 23, 4, seed=1, requires_grad=True)
    v = randn(2, 23, 3, seed=2, requires_grad=True)
    upstream = randn(2, 17, 3, seed=3)
    mask = pattern = None
    if kind == "mask":
        mask = torch.rand(2, 17, 23, generator=torch.Generator().manual_seed(4)) < 0.5
        mask[..., 5] = True
    elif kind == "pattern":
        pattern = AttentionPattern(window=5, causal=True, global_tokens=1)
    got = chunked_attention(q, k, v, mask, pattern=pattern, q_block=5, kv_block=7,
                            recompute=recompute)
    grads = torch.autograd.grad(got, (q, k, v), upstream)
    ref_mask = pattern.mask(17, 23) if pattern is not None else mask
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=ref_mask)
    expected_grads = torch.autograd.grad(expected, (q, k, v), upstream)
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=0)
    for name, g, e in zip("qkv", grads, expected_grads):
        torch.testing.assert_close(g, e, atol=1e-12, rtol=0, msg=name)


@pytest.mark.parametrize("recompute", [True, False])
def test_gradients_of_a_query_without_keys_are_zero_not_nan(recompute):
    q = randn(9, 4, seed=0, requires_grad=True)
    k = randn(10, 4, seed=1, requires_grad=True)
    v = randn(10, 2, seed=2, requires_grad=True)
    mask = torch.rand(9, 10, generator=torch.Generator().manual_seed(3)) < 0.5
    mask[:, 0] = True
    mask[4] = False  # query 4 sees nothing
    got = chunked_attention(q, k, v, mask, q_block=3, kv_block=4, recompute=recompute)
    grads = torch.autograd.grad(got.sum(), (q, k, v))
    expected = torch.autograd.grad(dense_reference(q, k, v, mask).sum(), (q, k, v))
    for g, e in zip(grads, expected):
        assert torch.isfinite(g).all()
        torch.testing.assert_close(g, e, atol=1e-12, rtol=0)
    assert (grads[0][4] == 0).all()


@pytest.fixture
def attend_calls(monkeypatch):
    """Every call of ``efficient.attend``, as (q shape, k shape), in order."""
    calls = []

    def recording(q, k, *args, **kwargs):
        calls.append((tuple(q.shape), tuple(k.shape)))
        return attend(q, k, *args, **kwargs)

    monkeypatch.setattr(efficient, "attend", recording)
    return calls


@pytest.mark.parametrize("recompute", [True, False])
def test_recompute_saves_nothing_of_the_size_of_the_scores(recompute):
    # What autograd keeps for the backward pass: with recompute, only the inputs, the
    # output and the log-sum-exp (O(n)); without, every block's weights (O(n²) in all).
    q = randn(1, 64, 4, seed=0, requires_grad=True)
    k, v = randn(1, 48, 4, seed=1), randn(1, 48, 4, seed=2)
    saved = []

    def pack(t):
        saved.append(tuple(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = chunked_attention(q, k, v, q_block=16, kv_block=8, recompute=recompute)
    score_blocks = [shape for shape in saved if shape[-2:] == (16, 8)]
    assert (len(score_blocks) == 0) == recompute, saved
    if recompute:
        assert sum(math.prod(shape) for shape in saved) <= 3 * (64 * 4 + 2 * 48 * 4)
    torch.autograd.grad(out.sum(), q)  # and the backward runs


def test_chunked_attention_scores_are_at_most_one_block(attend_calls):
    n = 300
    q, k, v = randn(1, n, 8), randn(1, n, 8, seed=1), randn(1, n, 8, seed=2)
    chunked_attention(q, k, v, q_block=64, kv_block=32)
    assert len(attend_calls) == 5 * 10
    assert all(qs[-2] <= 64 and ks[-2] <= 32 for qs, ks in attend_calls)


# --- chunked attention: bad input -----------------------------------------------------

def bad_chunked_calls():
    q, k, v = randn(2, 5, 4), randn(2, 6, 4), randn(2, 6, 3)
    mask = torch.ones(5, 6, dtype=torch.bool)
    pattern = AttentionPattern(window=3)
    return [
        ("both", lambda: chunked_attention(q, k, v, mask, pattern=pattern),
         ValueError, "mask or pattern"),
        ("float mask", lambda: chunked_attention(q, k, v, mask.double()),
         TypeError, "mask must be a bool tensor .True = may attend., got dtype"),
        ("list mask", lambda: chunked_attention(q, k, v, [[True]]),
         TypeError, "mask must be a bool torch.Tensor .* got a list"),
        ("mask shape", lambda: chunked_attention(q, k, v, mask[:, :4]),
         ValueError, r"mask of shape \(5, 4\) does not broadcast to .*\(2, 5, 6\)"),
        ("batch", lambda: chunked_attention(q, k[:1], v[:1]),
         ValueError, r"keys must have the same leading \(batch\) dimensions as"),
        ("pattern", lambda: chunked_attention(q, k, v, pattern=mask),
         TypeError, "pattern must be an AttentionPattern"),
        ("D", lambda: chunked_attention(q, randn(2, 6, 5), v),
         ValueError, r"one size D.*\(2, 5, 4\).*\(2, 6, 5\)"),
        ("Lk", lambda: chunked_attention(q, k, randn(2, 7, 3)),
         ValueError, r"in pairs.*\(2, 6, 4\).*\(2, 7, 3\)"),
        ("dtypes", lambda: chunked_attention(q, k.float(), v),
         TypeError, "keys has dtype torch.float32 but queries has dtype torch.float64"),
        ("q list", lambda: chunked_attention(q.tolist(), k, v),
         TypeError, "queries must be a torch.Tensor, got a list"),
        ("v None", lambda: chunked_attention(q, k, None),
         TypeError, "values must be a torch.Tensor, got None"),
        ("integer", lambda: chunked_attention(q.long(), k, v),
         TypeError, "queries must be a floating-point tensor"),
        ("1-d", lambda: chunked_attention(q[0, 0], k, v),
         ValueError, r"queries must have shape \(\.\.\., L, size\)"),
        ("q_block", lambda: chunked_attention(q, k, v, q_block=0),
         ValueError, "q_block must be at least 1"),
        ("kv_block", lambda: chunked_attention(q, k, v, kv_block=2.0),
         TypeError, "kv_block must be an integer"),
    ]


@pytest.mark.parametrize("index", range(len(bad_chunked_calls())))
def test_bad_chunked_input_is_named(index):
    _, call, error, message = bad_chunked_calls()[index]
    with pytest.raises(error, match=message):
        call()


# --- local attention ------------------------------------------------------------------

@settings(max_examples=250, deadline=None)
@given(
    n=st.integers(1, 70),
    window=st.integers(1, 20),
    causal=st.booleans(),
    dilation=st.integers(1, 3),
    global_tokens=st.integers(0, 5),
    block_size=st.sampled_from([None, 1, 3, 16]),
    batch=st.sampled_from([(), (2,), (2, 3)]),
    seed=st.integers(0, 2**16),
)
def test_local_attention_equals_dense_attention_with_the_mask(
    n, window, causal, dilation, global_tokens, block_size, batch, seed
):
    pattern = AttentionPattern(window=window, causal=causal, dilation=dilation,
                               global_tokens=global_tokens)
    q, k = randn(*batch, n, 5, seed=seed), randn(*batch, n, 5, seed=seed + 1)
    v = randn(*batch, n, 3, seed=seed + 2)
    got = local_attention(q, k, v, pattern, block_size=block_size)
    expected = sdpa(q, k, v, pattern.mask(n))
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=0)


@pytest.mark.parametrize(
    "n, pattern, block_size",
    [
        (1, AttentionPattern(window=1), None),
        (7, AttentionPattern(window=20, causal=True), 1),  # window longer than n
        (10, AttentionPattern(window=4, dilation=3, global_tokens=5), 3),
        (4, AttentionPattern(window=3, global_tokens=9), None),  # g > n
        (33, AttentionPattern(window=6, causal=True, dilation=2), 16),
    ],
)
def test_local_attention_at_the_edges(n, pattern, block_size):
    q, k, v = randn(n, 4, seed=0), randn(n, 4, seed=1), randn(n, 2, seed=2)
    got = local_attention(q, k, v, pattern, block_size=block_size, scale=0.3)
    expected = sdpa(q, k, v, pattern.mask(n), scale=0.3)
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=0)


def test_local_attention_gradients_equal_dense():
    pattern = AttentionPattern(window=5, causal=True, dilation=2, global_tokens=2)
    q, k, v = (randn(2, 30, 4, seed=i, requires_grad=True) for i in range(3))
    upstream = randn(2, 30, 4, seed=5)
    grads = torch.autograd.grad(local_attention(q, k, v, pattern, block_size=4),
                                (q, k, v), upstream)
    expected = torch.autograd.grad(sdpa(q, k, v, pattern.mask(30)), (q, k, v),
                                   upstream)
    for g, e in zip(grads, expected):
        torch.testing.assert_close(g, e, atol=1e-12, rtol=0)


def test_local_attention_in_float32_keeps_its_dtype():
    pattern = AttentionPattern(window=7)
    q = randn(1, 40, 8, dtype=torch.float32)
    got = local_attention(q, q, q, pattern)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, sdpa(q, q, q, pattern.mask(40)))


@pytest.mark.parametrize("global_tokens", [0, 2])
def test_local_attention_never_builds_an_n_by_n_matrix(attend_calls, global_tokens):
    n, window = 512, 32
    pattern = AttentionPattern(window=window, global_tokens=global_tokens)
    q, k, v = randn(1, n, 8), randn(1, n, 8, seed=1), randn(1, n, 8, seed=2)
    got = local_attention(q, k, v, pattern)
    torch.testing.assert_close(got, sdpa(q, k, v, pattern.mask(n)), atol=1e-12,
                               rtol=0)
    assert attend_calls
    sizes = [(qs[-2], ks[-2]) for qs, ks in attend_calls]
    assert all(lq < n or lk < n for lq, lk in sizes), sizes
    if not global_tokens:
        assert all(lk < n for _, lk in sizes), sizes
    # all the scores together: about n·(block + window) entries, far below n²
    total = sum(math.prod(qs[:-1]) * ks[-2] for qs, ks in attend_calls)
    assert total <= n * (2 * window + 2 * global_tokens + 32), total


def test_bad_local_attention_input_is_named():
    q = randn(2, 8, 4)
    with pytest.raises(ValueError, match="chunked_attention"):
        local_attention(q, q, q, AttentionPattern(dilation=2))
    with pytest.raises(ValueError, match="same length.*8 and 6"):
        local_attention(q, q[:, :6], q[:, :6], AttentionPattern(window=3))
    with pytest.raises(TypeError, match="pattern must be an AttentionPattern"):
        local_attention(q, q, q, torch.ones(8, 8, dtype=torch.bool))
    with pytest.raises(TypeError, match="queries must be a torch.Tensor"):
        local_attention(None, q, q, AttentionPattern(window=3))
    with pytest.raises(ValueError, match=r"keys must have the same leading \(batch\)"):
        local_attention(q, q[:1], q[:1], AttentionPattern(window=3))
    empty = local_attention(q[:, :0], q[:, :0], q[:, :0], AttentionPattern(window=3))
    assert empty.shape == (2, 0, 4)  # no positions: an empty result, as chunked's
    for bad in (0, -1):
        with pytest.raises(ValueError, match="block_size"):
            local_attention(q, q, q, AttentionPattern(window=3), block_size=bad)


# --- generate: with and without the cache ---------------------------------------------

BOS = 1
SRC = torch.tensor([[5, 6, 7, 2, 0], [8, 2, 0, 0, 0], [3, 4, 5, 6, 2]])
SRC_LENS = torch.tensor([4, 2, 5])


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    model = EncoderDecoder(
        TransformerEncoder(10, 8, 2, 16, 2, max_len=32),
        TransformerDecoder(40, 8, 2, 16, 2, max_len=32),
    ).double().eval()
    with torch.no_grad():  # a sharp output distribution: no near-ties in the argmax
        model.decoder.dense.weight.mul_(4)
    return model


class CountingDecoder:
    """The decoder, recording how many positions each call feeds."""

    def __init__(self, decoder):
        self.decoder, self.fed = decoder, []

    def __call__(self, tgt_input, state):
        self.fed.append(tgt_input.shape[1])
        return self.decoder(tgt_input, state)


def start_state(model):
    return model.decoder.init_state(model.encoder(SRC, SRC_LENS), SRC_LENS)


def test_generate_gives_the_same_tokens_with_and_without_the_cache(model):
    T = 12
    start = torch.full((3, 1), BOS)
    cached, uncached = CountingDecoder(model.decoder), CountingDecoder(model.decoder)
    with_cache = generate(cached, start_state(model), start, T, use_cache=True)
    without = generate(uncached, start_state(model), start, T, use_cache=False)
    assert with_cache.shape == (3, T) and with_cache.dtype == torch.long
    assert torch.equal(with_cache, without)
    assert len(set(with_cache.flatten().tolist())) > 1  # not a constant sequence
    assert cached.fed == [1] * T and sum(cached.fed) == T
    assert uncached.fed == list(range(1, T + 1))
    assert sum(uncached.fed) == T * (T + 1) // 2


def test_generate_equals_greedy_decode_when_eos_never_comes(model):
    T = 12
    tokens = generate(model.decoder, start_state(model), torch.full((3, 1), BOS), T)
    eos = min(set(range(2, 40)) - set(tokens.flatten().tolist()))  # never generated
    sentences, _ = greedy_decode(model, SRC, SRC_LENS, BOS, eos, max_len=T)
    assert sentences == tokens.tolist()
    # and a plain argmax loop over the full prefix
    prefix = torch.full((3, 1), BOS)
    with torch.no_grad():
        for _ in range(T):
            logits, _ = model.decoder(prefix, start_state(model))
            prefix = torch.cat([prefix, logits[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(prefix[:, 1:], tokens)


def test_generate_edge_cases_and_bad_input(model):
    start = torch.full((3, 1), BOS)
    for use_cache in (True, False):
        empty = generate(model.decoder, start_state(model), start, 0, use_cache)
        assert empty.shape == (3, 0) and empty.dtype == torch.long
    for bad in (torch.full((3,), BOS), torch.full((3, 0), BOS), [[BOS]] * 3):
        with pytest.raises(ValueError, match=r"start must be a \(B, L0\)"):
            generate(model.decoder, start_state(model), bad, 3)
    with pytest.raises(ValueError, match="num_tokens"):
        generate(model.decoder, start_state(model), start, -1)


# --- peak_memory ----------------------------------------------------------------------

MIB = 2**20
linux_only = pytest.mark.skipif(not LINUX, reason="peak_memory on CPU reads /proc")


def allocate_and_free(num_bytes):
    x = torch.ones(num_bytes // 4, dtype=torch.float32)  # written: pages are resident
    del x


@linux_only
def test_peak_memory_measures_a_big_allocation():
    allocate_and_free(64 * MIB)  # warm up the allocator
    first = peak_memory(lambda: allocate_and_free(64 * MIB))
    second = peak_memory(lambda: allocate_and_free(64 * MIB))
    assert 60 * MIB <= first <= 80 * MIB, first / MIB
    assert abs(first - second) <= 0.1 * max(first, second), (first, second)
    assert peak_memory(lambda: None) < 8 * MIB
    assert peak_memory(lambda: allocate_and_free(16 * MIB)) < first / 2


@linux_only
def test_chunked_attention_needs_far_less_memory_than_dense():
    n, size = 2048, 64
    q, k, v = (randn(1, n, size, dtype=torch.float32, seed=i) for i in range(3))

    def dense():
        weights = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(size), dim=-1)
        return weights @ v  # (1, n, D)

    def chunked():
        return chunked_attention(q, k, v)

    torch.testing.assert_close(chunked(), dense(), atol=1e-5, rtol=1e-5)  # warm up
    dense_peak = peak_memory(dense)
    chunked_peak = peak_memory(chunked)
    assert dense_peak >= 2 * n * n * 4 * 0.9  # scores and weights, n × n each
    assert chunked_peak < dense_peak / 8, (chunked_peak / MIB, dense_peak / MIB)


def test_peak_memory_elsewhere_says_what_to_do(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    with pytest.raises(RuntimeError, match="subprocess"):
        peak_memory(lambda: None)

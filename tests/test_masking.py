"""masked_softmax and valid_lens_to_mask: parity with d2l, the mask convention, half
precision, errors."""
import math
import re

import numpy as np
import pytest
import torch
from d2l import torch as d2l
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_lib import masked_softmax, valid_lens_to_mask


def test_valid_lens_to_mask_marks_positions_below_the_length():
    mask = valid_lens_to_mask(torch.tensor([0, 2, 4]), 4)
    expected = torch.tensor([[False] * 4, [True, True, False, False], [True] * 4])
    assert torch.equal(mask, expected)


def test_valid_lens_to_mask_per_query_lengths():
    # (B, Lq) -> (B, Lq, Lk)
    mask = valid_lens_to_mask(torch.tensor([[1, 3], [0, 2]]), 3)
    assert mask.shape == (2, 2, 3)
    assert mask[0, 1].tolist() == [True, True, True] and mask[1, 0].tolist() == [
        False,
        False,
        False,
    ]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("lens_shape", ["per_example", "per_query"])
def test_masked_softmax_equals_d2l(dtype, lens_shape):
    torch.manual_seed(0)
    scores = torch.randn(3, 4, 5, dtype=dtype)
    # d2l fills masked scores with -1e6 and so gives a fully masked row uniform weights;
    # the library gives zeros. Parity is for rows with at least one valid key.
    valid_lens = (
        torch.tensor([1, 3, 5])
        if lens_shape == "per_example"
        else torch.randint(1, 6, (3, 4))
    )
    ours = masked_softmax(scores, valid_lens)
    theirs = d2l.masked_softmax(scores.clone(), valid_lens)  # d2l writes into its input
    torch.testing.assert_close(ours, theirs)


def test_fully_masked_row_gets_zeros_where_d2l_gets_uniform_weights():
    scores = torch.randn(2, 3, 4)
    valid_lens = torch.tensor([0, 4])
    ours = masked_softmax(scores, valid_lens)
    assert torch.equal(ours[0], torch.zeros(3, 4))
    assert torch.allclose(
        d2l.masked_softmax(scores.clone(), valid_lens)[0], torch.full((3, 4), 0.25)
    )


@settings(max_examples=40, deadline=None)
@given(
    batch_size=st.integers(1, 3),
    num_queries=st.integers(1, 4),
    num_kv=st.integers(1, 6),
    seed=st.integers(0, 2**16),
    scale=st.sampled_from([1.0, 10.0, 1e3]),
)
def test_rows_sum_to_one_over_valid_keys_and_zero_elsewhere(
    batch_size, num_queries, num_kv, seed, scale
):
    gen = torch.Generator().manual_seed(seed)
    scores = torch.randn(batch_size, num_queries, num_kv, generator=gen) * scale
    valid_lens = torch.randint(0, num_kv + 1, (batch_size, num_queries), generator=gen)
    weights = masked_softmax(scores, valid_lens)
    allowed = valid_lens_to_mask(valid_lens, num_kv)
    assert torch.isfinite(weights).all()
    assert torch.equal(weights[~allowed], torch.zeros_like(weights[~allowed]))
    row_sums = weights.sum(-1)
    # 1 where any key is valid, 0 where none is
    expected = (valid_lens > 0).to(weights.dtype)
    torch.testing.assert_close(row_sums, expected)


def test_mask_true_means_may_attend():
    scores = torch.zeros(1, 2, 3)
    # (Lq, Lk), broadcasts
    mask = torch.tensor([[True, False, True], [False, False, False]])
    weights = masked_softmax(scores, mask=mask)
    torch.testing.assert_close(
        weights[0], torch.tensor([[0.5, 0.0, 0.5], [0.0, 0.0, 0.0]])
    )


def test_mask_and_valid_lens_combine_with_and():
    scores = torch.zeros(1, 1, 4)
    causal_like = torch.tensor([[True, True, True, False]])
    weights = masked_softmax(scores, valid_lens=torch.tensor([2]), mask=causal_like)
    torch.testing.assert_close(weights, torch.tensor([[[0.5, 0.5, 0.0, 0.0]]]))


def test_valid_lens_broadcast_over_extra_head_dimension():
    scores = torch.randn(2, 3, 4, 5)  # (B, H, Lq, Lk)
    weights = masked_softmax(scores, torch.tensor([2, 5]))
    assert torch.equal(weights[0, ..., 2:], torch.zeros(3, 4, 3))
    torch.testing.assert_close(weights[1], torch.softmax(scores[1], -1))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_large_scores_stay_finite(dtype):
    scores = torch.tensor([[[1e4, -1e4, 5e3, 0.0], [1e4, 1e4, 1e4, 1e4]]], dtype=dtype)
    weights = masked_softmax(scores, valid_lens=torch.tensor([[3, 0]]))
    assert weights.dtype == dtype
    assert torch.isfinite(weights).all()
    assert weights[0, 0].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert weights[0, 1].tolist() == [0.0] * 4


def test_error_valid_lens_out_of_range():
    with pytest.raises(
        ValueError, match=r"valid_lens must lie in \[0, 4\].*got values from 0 to 5"
    ):
        masked_softmax(torch.randn(2, 3, 4), torch.tensor([0, 5]))
    with pytest.raises(ValueError, match=r"valid_lens must lie in \[0, 4\].*from -1"):
        masked_softmax(torch.randn(2, 3, 4), torch.tensor([-1, 2]))


def test_error_valid_lens_wrong_dtype():
    with pytest.raises(
        TypeError, match="valid_lens must hold integers, got dtype torch.float32"
    ):
        masked_softmax(torch.randn(2, 3, 4), torch.tensor([1.0, 2.0]))


def test_error_valid_lens_wrong_batch_or_query_count():
    with pytest.raises(
        ValueError,
        match=(
            r"valid_lens must have shape \(B,\) or \(B, Lq\) with B=2, Lq=3, got \(3,\)"
        ),
    ):
        masked_softmax(torch.randn(2, 3, 4), torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match=r"must have Lq=3, got \(2, 2\)"):
        masked_softmax(torch.randn(2, 3, 4), torch.tensor([[1, 2], [3, 4]]))


def test_error_mask_not_bool():
    with pytest.raises(
        TypeError,
        match="mask must be a bool tensor .True = may attend., got dtype torch.int64",
    ):
        masked_softmax(torch.randn(2, 3, 4), mask=torch.ones(2, 3, 4, dtype=torch.long))


def test_error_mask_does_not_broadcast():
    with pytest.raises(
        ValueError,
        match=(
            r"mask of shape \(2, 5\) does not broadcast to the scores' shape \(2,"
            r" 3, 4\)"
        ),
    ):
        masked_softmax(torch.randn(2, 3, 4), mask=torch.ones(2, 5, dtype=torch.bool))


def test_error_mask_with_extra_dimensions_is_not_silently_broadcast():
    with pytest.raises(
        ValueError, match=r"mask of shape \(5, 2, 3, 4\) does not broadcast"
    ):
        masked_softmax(
            torch.randn(2, 3, 4), mask=torch.ones(5, 2, 3, 4, dtype=torch.bool)
        )


def test_error_scores_not_float_or_too_few_dims():
    with pytest.raises(
        TypeError,
        match="attn_scores must be a floating-point tensor, got dtype torch.int64",
    ):
        masked_softmax(torch.ones(2, 3, dtype=torch.long))
    with pytest.raises(
        ValueError, match=r"attn_scores must have shape \(..., Lq, Lk\), got \(4,\)"
    ):
        masked_softmax(torch.randn(4))


# --- valid_lens and masks of the wrong kind: one clear error, from one place ----------


@pytest.mark.parametrize("valid_lens, got", [
    ([1, 2], "got a list of length 2 \\(convert it with torch.as_tensor"),
    ((1, 2), "got a tuple of length 2"),
    (np.array([1, 2]), "got a NumPy array of shape \\(2,\\) and dtype int64"),
    (2, "got the int 2"),
])
def test_valid_lens_that_is_not_a_tensor_is_named(valid_lens, got):
    with pytest.raises(
        TypeError,
        match=r"valid_lens must be a torch.Tensor of integer lengths with shape "
        r"\(B,\) or \(B, Lq\) with B=2, Lq=3, " + got,
    ):
        masked_softmax(torch.randn(2, 3, 4), valid_lens)
    with pytest.raises(
        TypeError,
        match=r"valid_lens must be a torch.Tensor of integer lengths with shape "
        r"\(B,\) or \(B, Lq\), " + got,
    ):
        valid_lens_to_mask(valid_lens, 4)


@pytest.mark.parametrize(
    "valid_lens", [torch.tensor(2), torch.ones(2, 3, 1, dtype=torch.long)]
)
def test_valid_lens_of_the_wrong_rank_is_named(valid_lens):
    expected = (
        "valid_lens must have shape (B,) or (B, Lq) with B=2, Lq=3, got"
        f" {tuple(valid_lens.shape)}"
    )
    with pytest.raises(ValueError, match=re.escape(expected)):
        masked_softmax(torch.randn(2, 3, 4), valid_lens)


@pytest.mark.parametrize(
    "mask, got",
    [
        (
            np.ones((3, 4), dtype=bool),
            r"got a NumPy array of shape \(3, 4\) and dtype bool \(convert it with",
        ),
        ([[True] * 4] * 3, r"got a list of length 3"),
        (True, r"got the bool True"),
    ],
)
def test_mask_that_is_not_a_tensor_is_named(mask, got):
    with pytest.raises(
        TypeError,
        match=r"mask must be a bool torch.Tensor \(True = may attend\) broadcastable "
        r"to the scores' shape \(2, 3, 4\) \(..., Lq, Lk\), " + got,
    ):
        masked_softmax(torch.randn(2, 3, 4), mask=mask)


def test_valid_lens_to_mask_checks_num_kv():
    with pytest.raises(ValueError, match="num_kv must be at least 0, got -1"):
        valid_lens_to_mask(torch.tensor([0]), -1)
    with pytest.raises(TypeError, match="num_kv must be an integer"):
        valid_lens_to_mask(torch.tensor([0]), 2.0)


def test_causal_mask_lets_each_query_see_its_past_and_itself():
    from attention_lib import causal_mask

    assert causal_mask(3).tolist() == [
        [True, False, False],
        [True, True, False],
        [True, True, True],
    ]
    # two positions cached: the queries are positions 2 and 3 of 4
    assert causal_mask(2, 4).tolist() == [
        [True, True, True, False],
        [True, True, True, True],
    ]
    with pytest.raises(ValueError, match="num_kv"):
        causal_mask(3, 2)


def test_a_minus_infinite_score_at_the_only_allowed_key_gives_no_weight_to_padding():
    """The score −∞ at the one key a query may see leaves it nothing to attend to:
    zeros, not the weight spread over the padding (which a finite fill would give)."""
    scores = torch.tensor([[[-math.inf, 0.0, 0.0]]])
    weights = masked_softmax(scores, valid_lens=torch.tensor([1]))
    assert torch.equal(weights, torch.zeros(1, 1, 3))
    weights = masked_softmax(torch.tensor([[[-math.inf, 1.0, 0.0]]]),
                             valid_lens=torch.tensor([2]))
    assert torch.equal(weights, torch.tensor([[[0.0, 1.0, 0.0]]]))

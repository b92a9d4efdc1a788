"""The token choosers on hand-made logits."""
import torch

from attention_lib.sampling import (
    apply_temperature,
    greedy,
    sample,
    top_k_filter,
    top_p_filter,
)

PROBS = torch.tensor([[0.1, 0.5, 0.15, 0.25]], dtype=torch.float64)


def test_greedy_and_temperature():
    logits = PROBS.log()
    assert greedy(logits).tolist() == [1]
    torch.testing.assert_close(apply_temperature(logits, 2.0), logits / 2)


def test_top_k_keeps_the_k_largest():
    kept = top_k_filter(PROBS.log(), 2).isfinite()
    assert kept.tolist() == [[False, True, False, True]]


def test_top_p_keeps_the_smallest_set_reaching_p():
    def kept(p):
        return top_p_filter(PROBS.log(), p).isfinite().tolist()

    assert kept(0.3) == [[False, True, False, False]]
    assert kept(0.6) == [[False, True, False, True]]
    assert kept(0.8) == [[False, True, True, True]]
    assert kept(1.0) == [[True, True, True, True]]


def test_top_p_always_keeps_the_top_token():
    assert top_p_filter(PROBS.log(), 1e-9).isfinite().sum() == 1


def test_sample_is_reproducible_and_respects_filters():
    logits = top_k_filter(PROBS.log().repeat(500, 1), 2)
    first = sample(logits, torch.Generator().manual_seed(0))
    again = sample(logits, torch.Generator().manual_seed(0))
    assert torch.equal(first, again)
    assert set(first.tolist()) == {1, 3}

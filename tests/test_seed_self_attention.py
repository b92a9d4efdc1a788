"""The claims of chapters/04_self_attention/01_self_attention.ipynb about two tutorial
examples, checked without executing the notebook.

(a) The 猫坐在垫子上 example (five tokens, D_k = 2): the library's attention reproduces
the two scores the tutorial prints, and row 1's largest weight is on the last key (上),
not on 垫子 as the tutorial says.

(b) The page's ``BuggySelfAttention`` rebuilds a tutorial program's four mistakes and
``FixedSelfAttention`` corrects them. Both classes and the page's checks are loaded
from the notebook's code cells, so there is one copy: every check must fail on the
buggy module, pass on the fixed one, and catch its own mistake when that mistake is
the only one.
"""
import math
from pathlib import Path

import nbformat
import pytest
import torch
from torch import nn

from attention_lib import (
    MultiHeadAttention,
    dot_product_attention,
    dot_product_scores,
    set_seed,
)

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "chapters/04_self_attention/01_self_attention.ipynb"

# --- (a) 猫坐在垫子上 -------------------------------------------------------------------

CAT_TOKENS = ["猫", "坐", "在", "垫子", "上"]
Q_CAT = torch.tensor([[1.0, 2], [3, 4], [5, 6], [7, 8], [9, 10]])  # (Lq, Dk)
K_CAT = torch.tensor([[1.0, 1], [2, 2], [3, 3], [4, 4], [5, 5]])  # (Lk, Dk)
V_CAT = torch.tensor([[0.0, 1], [1, 0], [2, 1], [3, 2], [4, 3]])  # (Lk, Dv)


def cat_attention(keys=K_CAT, queries=Q_CAT):
    output, weights = dot_product_attention(queries[None], keys[None], V_CAT[None])
    return output[0], weights[0]  # (Lq, Dv), (Lq, Lk)


def test_the_two_printed_scores_are_reproduced():
    scores = dot_product_scores(Q_CAT[None], K_CAT[None])[0]  # (5, 5), scale 1/√2
    assert abs(scores[0, 0].item() - 2.12) < 0.005  # 猫 against 猫
    assert abs(scores[0, 3].item() - 8.48) < 0.01  # 猫 against 垫子
    torch.testing.assert_close(scores[0], torch.tensor([3.0, 6, 9, 12, 15]) / 2**0.5)


def test_row_one_puts_its_largest_weight_on_the_last_key_not_on_the_mat():
    _, weights = cat_attention()
    a14, a15 = weights[0, 3].item(), weights[0, 4].item()
    assert CAT_TOKENS[weights[0].argmax()] == "上"
    assert a14 < a15
    assert 0.87 < a15 < 0.89 and 0.10 < a14 < 0.11  # the values the page quotes
    torch.testing.assert_close(weights.sum(-1), torch.ones(5))


def test_every_row_puts_its_largest_weight_on_the_last_key():
    _, weights = cat_attention()
    assert weights.argmax(-1).tolist() == [4] * 5


def test_with_parallel_keys_no_query_can_prefer_a_middle_key():
    # k_j = j (1, 1): every query's scores are a line in j, largest at j = 1 or j = 5.
    queries = torch.randn(2000, 2, generator=torch.Generator().manual_seed(0))
    _, weights = cat_attention(queries=queries)
    assert set(weights.argmax(-1).tolist()) <= {0, 4}


def test_keys_that_point_elsewhere_make_the_cat_attend_to_the_mat():
    keys = torch.tensor([[1.0, -1], [2, -2], [3, -3], [4, 4], [5, -5]])
    torch.testing.assert_close(keys.norm(dim=-1), K_CAT.norm(dim=-1))
    _, weights = cat_attention(keys=keys)
    assert CAT_TOKENS[weights[0].argmax()] == "垫子" and weights[0, 3] > 0.999


# --- (b) the buggy module and the checks, loaded from the notebook -------------------

DEFINES = ("class FixedSelfAttention", "class BuggySelfAttention", "def check_")


@pytest.fixture(scope="module")
def page():
    """The namespace of the page's class and check cells."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    sources = [
        cell.source
        for cell in nb.cells
        if cell.cell_type == "code"
        and any(line.startswith(DEFINES) for line in cell.source.splitlines())
    ]
    namespace = {
        "math": math,
        "torch": torch,
        "nn": nn,
        "MultiHeadAttention": MultiHeadAttention,
        "set_seed": set_seed,
    }
    for source in sources:
        exec(compile(source, str(NOTEBOOK), "exec"), namespace)
    missing = [
        name
        for name in ["FixedSelfAttention", "BuggySelfAttention", "checks"]
        if name not in namespace
    ]
    assert not missing, f"the notebook no longer defines {missing}"
    return namespace


# The methods that carry each mistake, and the check meant to catch it.
MISTAKES = {
    "1 mislabelled einsum": (["attn_scores", "mix"], "check_one_weight_per_word_pair"),
    "2 softmax axis": (["normalise"], "check_softmax_over_keys"),
    "3 scale": (["scale"], "check_scale_is_one_over_sqrt_head_dim"),
    "4 merge": (["merge"], "check_merge_undoes_split"),
}


def test_the_page_has_one_check_per_mistake_and_a_parity_check(page):
    names = [check.__name__ for check in page["checks"]]
    assert sorted(names) == sorted(
        [name for _, name in MISTAKES.values()] + ["check_matches_library"]
    )


def test_every_check_fails_on_the_buggy_module_and_passes_on_the_fixed_one(page):
    for check in page["checks"]:
        check(page["FixedSelfAttention"])
        with pytest.raises(AssertionError):
            check(page["BuggySelfAttention"])


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_each_check_catches_its_own_mistake_alone(page, mistake):
    fixed, buggy = page["FixedSelfAttention"], page["BuggySelfAttention"]
    methods, catching = MISTAKES[mistake]
    # The fixed module with only this mistake put back.
    one_mistake = type("OneMistake", (fixed,), {m: vars(buggy)[m] for m in methods})
    for check in page["checks"]:
        if check.__name__ in (catching, "check_matches_library"):
            with pytest.raises(AssertionError):
                check(one_mistake)
        else:
            check(one_mistake)  # the other mistakes' checks do not blame this one


SEED_EMBEDDINGS = torch.tensor([[1.0, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0]])[None]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_buggy_module_prints_a_single_weight_of_one(page, seed):
    set_seed(seed)
    with torch.no_grad():
        _, weights = page["BuggySelfAttention"](3, 1)(SEED_EMBEDDINGS)
    assert weights.shape == (1, 1, 1) and weights.item() == 1.0
    with torch.no_grad():
        _, weights = page["FixedSelfAttention"](3, 1)(SEED_EMBEDDINGS)
    assert weights.shape == (1, 1, 4, 4)
    torch.testing.assert_close(weights.sum(-1), torch.ones(1, 1, 4))


def test_the_buggy_scores_sum_over_positions(page):
    # With one head the mislabelled einsum gives one number: Σ_i q_i · k_i.
    layer = page["BuggySelfAttention"](3, 1)
    q, k = torch.randn(2, 1, 1, 4, 3)  # (B, H, L, Dh) each
    scores = layer.attn_scores(q, k)
    assert scores.shape == (1, 1, 1)
    torch.testing.assert_close(scores.flatten(), (q * k).sum().reshape(1))


@pytest.mark.parametrize("embed_dim, num_heads", [(4, 1), (4, 2), (8, 4), (6, 3)])
def test_the_fixed_module_equals_the_library(page, embed_dim, num_heads):
    set_seed(0)
    layer = page["FixedSelfAttention"](embed_dim, num_heads)
    mha = MultiHeadAttention(embed_dim, num_heads)
    x = torch.randn(3, 5, embed_dim)  # (B, L, D)
    with torch.no_grad():
        for name in ["W_q", "W_k", "W_v", "W_o"]:
            ours, theirs = getattr(layer, name), getattr(mha, name)
            theirs.weight.copy_(ours.weight)
            if ours.bias is None:
                theirs.bias.zero_()
            else:
                theirs.bias.copy_(ours.bias)
        output, weights = layer(x)
        expected = mha(x, x, x, need_weights=True)
    torch.testing.assert_close(output, expected)
    torch.testing.assert_close(weights, mha.attention_weights)

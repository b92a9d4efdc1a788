"""The bug hunt's checkers (chapter 5) accept the solutions in every form and name
each bug a reader can leave in: the causal mask, the cross-attention call and the
attention step."""
import math
from pathlib import Path

import pytest
import torch
from answer_forms import TENSOR_FORMS, assert_rejects, in_form, not_implemented
from torch.nn import functional as F

from attention_lib import (
    causal_mask,
    dot_product_attention,
    merge_heads,
    split_heads,
    valid_lens_to_mask,
)
from attention_lib.exercises.ch05_bug_hunt import (
    check_attention_step,
    check_causal_mask,
    check_cross_attention,
)


def ones(num_queries, num_kv):
    return torch.ones(num_queries, num_kv, dtype=torch.bool)


# --- 1. the causal mask ---------------------------------------------------------------

def mask_tril(num_queries, num_kv):
    return ones(num_queries, num_kv).tril(diagonal=num_kv - num_queries)


def mask_last_rows(num_queries, num_kv):  # the full mask's last Lq rows
    return ones(num_kv, num_kv).tril()[-num_queries:]


def mask_by_positions(num_queries, num_kv):  # key j <= position of query i
    query_positions = torch.arange(num_kv - num_queries, num_kv)[:, None]
    return torch.arange(num_kv)[None, :] <= query_positions


@pytest.mark.parametrize(
    "solution",
    [mask_tril, mask_last_rows, mask_by_positions, causal_mask,
     lambda q, k: mask_tril(q, k)[None, None]],  # (1, 1, Lq, Lk) broadcasts too
)
def test_causal_mask_accepts_the_solutions(solution):
    feedback = check_causal_mask(solution)
    assert feedback, feedback


@pytest.mark.parametrize("form", ["list", "tuple", "numpy", "list_of_rows"])
def test_causal_mask_accepts_every_bool_form(form):
    feedback = check_causal_mask(in_form(mask_tril, form))
    assert feedback, feedback


def additive(num_queries, num_kv):
    allowed = mask_tril(num_queries, num_kv)
    return torch.zeros(num_queries, num_kv).masked_fill(~allowed, float("-inf"))


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (lambda q, k: ones(q, k).tril(k - q - 1), ["diagonal hidden", "(no cache)"]),
        (lambda q, k: ones(q, k).tril(-1), ["diagonal hidden"]),
        (lambda q, k: ones(q, k).triu(k - q), ["transposed (hides the past)"]),
        (lambda q, k: ones(q, k).triu(), ["transposed (hides the past)"]),
        (lambda q, k: ones(q, k), ["no mask"]),
        (lambda q, k: ones(q, k).tril(),
         ["offset wrong with a cache", "(4 cached positions)", "t + i"]),
        (lambda q, k: ones(k, k).tril()[:q], ["offset wrong with a cache"]),
        (lambda q, k: ~mask_tril(q, k), ["inverted", "may NOT attend"]),
        (lambda q, k: mask_tril(q, k) & ones(q, k).triu(k - q),
         ["only its own position"]),
        (lambda q, k: ones(q, q).tril(), ["cache ignored", "(3, 7)"]),
        (lambda q, k: ones(k, k).tril(), ["mask of all Lk = 7", "mask[-num_queries:]"]),
        (lambda q, k: mask_tril(q, k).T.contiguous() if q != k else mask_tril(q, k),
         ["(Lk, Lq) = (7, 3)", "rows are queries"]),
        (lambda q, k: mask_tril(q, k)[:, :-1], ["expected (Lq, Lk) = (4, 4)"]),
        (lambda q, k: mask_tril(q, k).float(), ["pattern is right", "not bools"]),
        (additive, ["additive float mask"]),
        (lambda q, k: (~mask_tril(q, k)).long(), ["inverted (nonzero"]),
        (lambda q, k: mask_tril(q, k).float() * 3 - 1, ["return a bool mask"]),
        (lambda q, k: mask_tril(q, k) ^ torch.eye(q, k, dtype=torch.bool).flip(1),
         ["differs from the causal mask"]),
        (lambda q, k: None, ["returned None"]),
        (lambda q, k: "tril", ["returned the str"]),
        (lambda q: ones(q, q), ["raised TypeError", "two numbers"]),
        (lambda q, k: 1 / 0, ["raised ZeroDivisionError"]),
    ],
)
def test_causal_mask_names_each_mistake(wrong, phrases):
    assert_rejects(check_causal_mask(wrong), *phrases)


def test_causal_mask_starter_is_your_turn():
    feedback = check_causal_mask(not_implemented)
    assert feedback.todo and not feedback


# --- 2. the cross-attention call ------------------------------------------------------

def cross_right(attention, x, memory, lens):
    return attention(x, memory, memory, lens)


def cross_by_mask(attention, x, memory, lens):
    mask = valid_lens_to_mask(lens, memory.shape[1])[:, None, :]  # (B, 1, Lk)
    return attention(x, memory, memory, mask=mask)


def cross_over_both_with_lens(attention, x, memory, lens):  # right by accident
    both = torch.cat([memory, x], dim=1)
    return attention(x, both, both, lens)


@pytest.mark.parametrize(
    "solution", [cross_right, cross_by_mask, cross_over_both_with_lens]
)
@pytest.mark.parametrize("form", ["list", "numpy", "float32", "float64"])
def test_cross_attention_accepts_the_solutions(solution, form):
    feedback = check_cross_attention(in_form(solution, form))
    assert feedback, feedback


def over_both(attention, x, memory, lens, first_target=False, mask_kind="extended"):
    parts = [x, memory] if first_target else [memory, x]
    both = torch.cat(parts, dim=1)  # (B, Lk + Lq, D)
    if mask_kind == "none":
        return attention(x, both, both)
    if mask_kind == "lens":
        return attention(x, both, both, lens)
    source = valid_lens_to_mask(lens, memory.shape[1])  # (B, Lk)
    target = torch.ones(x.shape[:2], dtype=torch.bool)  # (B, Lq)
    masks = [target, source] if first_target else [source, target]
    return attention(x, both, both, mask=torch.cat(masks, dim=1)[:, None, :])


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (lambda a, x, m, lens: a(x, x, x), ["keys from the target"]),
        (lambda a, x, m, lens: a(x, x, x, lens), ["keys from the target"]),
        (lambda a, x, m, lens: a(x, x, x, mask=causal_mask(x.shape[1])),
         ["keys from the target"]),
        (lambda a, x, m, lens: over_both(a, x, m, lens, mask_kind="none"),
         ["attends over [memory; target]", "padding is ignored"]),
        (lambda a, x, m, lens: over_both(a, x, m, lens),
         ["attends over [memory; target]"]),
        # attention ignores the keys' order: [target; memory] is [memory; target]
        (lambda a, x, m, lens: over_both(a, x, m, lens, first_target=True),
         ["attends over [memory; target]"]),
        # the lengths, counted from the start, keep target positions only
        (lambda a, x, m, lens: over_both(a, x, m, lens, True, "lens"),
         ["keys from the target"]),
        (lambda a, x, m, lens: a(x, m, m), ["padding ignored"]),
        (lambda a, x, m, lens: a(x, m, m, mask=~valid_lens_to_mask(lens, m.shape[1])
                                 [:, None, :]),
         ["padding mask is inverted"]),
        (lambda a, x, m, lens: a(x, m, m, lens, mask=causal_mask(x.shape[1],
                                                                  m.shape[1])),
         ["causal mask in the cross-attention"]),
        (lambda a, x, m, lens: a(x, m, m, lens, mask=torch.ones(
            x.shape[1], m.shape[1], dtype=torch.bool).tril()),
         ["causal mask in the cross-attention"]),
        (lambda a, x, m, lens: a(m, x, x), ["Queries and keys swapped", "(3, 7, 8)"]),
        (lambda a, x, m, lens: a(x, x, m, lens),
         ["raised ValueError", "both from the memory"]),
        (lambda a, x, m, lens: a(x, m, m, lens.clamp(max=3)) if x.shape[1] == 5
         else a(x, x, x, lens),
         ["differs from attention(x, memory, memory"]),
        (lambda a, x, m, lens: a(x, m, m, lens) * 2, ["differs from attention"]),
        (lambda a, x, m, lens: a(x, m, m, lens)[:, :-1],
         ["should have shape (3, 5, 8)"]),
        (lambda a, x, m, lens: None, ["returned None"]),
        (lambda a, x, m, lens: a(x, m, m, lens + 10),
         ["raised ValueError", "pass them unchanged"]),
    ],
)
def test_cross_attention_names_each_mistake(wrong, phrases):
    assert_rejects(check_cross_attention(wrong), *phrases)


def test_cross_attention_starter_is_your_turn():
    feedback = check_cross_attention(not_implemented)
    assert feedback.todo and not feedback


def test_cross_attention_leaves_the_readers_random_state_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    check_cross_attention(cross_right)
    torch.testing.assert_close(torch.rand(3), expected)


# --- 3. the attention step ------------------------------------------------------------

def attend(q, k, v, num_heads, allowed, split="right", scale="Dh", dim=-1,
           use_mask=True, merge="right", matmul=torch.matmul):
    batch_size, num_queries, width = q.shape
    head_dim = width // num_heads

    def to_heads(t):
        if split == "view":
            return t.view(t.shape[0], num_heads, t.shape[1], head_dim)
        if split == "no transpose":
            return t.reshape(t.shape[0], t.shape[1], num_heads, head_dim)
        return t.reshape(t.shape[0], t.shape[1], num_heads, head_dim).transpose(1, 2)

    q, k, v = to_heads(q), to_heads(k), to_heads(v)
    attn_scores = matmul(q, k.transpose(-2, -1))
    attn_scores = attn_scores / {"Dh": math.sqrt(head_dim), "D": math.sqrt(width),
                                 "none": 1.0}[scale]
    if use_mask:
        attn_scores = attn_scores.masked_fill(~allowed, float("-inf"))
    context = torch.softmax(attn_scores, dim=dim) @ v  # (B, H, Lq, Dh)
    if merge == "view":
        return context.reshape(batch_size, num_queries, width)
    if merge == "view after transpose":
        return context.transpose(1, 2).view(batch_size, num_queries, width)
    if merge == "none":
        return context
    return context.transpose(1, 2).reshape(batch_size, num_queries, width)


def attend_sdpa(q, k, v, num_heads, allowed):
    heads = [split_heads(t, num_heads) for t in (q, k, v)]
    return merge_heads(F.scaled_dot_product_attention(*heads, attn_mask=allowed))


def attend_library(q, k, v, num_heads, allowed):
    heads = [split_heads(t, num_heads) for t in (q, k, v)]
    return merge_heads(dot_product_attention(*heads, mask=allowed)[0])


@pytest.mark.parametrize("solution", [attend, attend_sdpa, attend_library])
@pytest.mark.parametrize("form", TENSOR_FORMS[:5])
def test_attention_step_accepts_the_solutions(solution, form):
    feedback = check_attention_step(in_form(solution, form))
    assert feedback, feedback


def variant(**options):
    return lambda q, k, v, h, allowed: attend(q, k, v, h, allowed, **options)


@pytest.mark.parametrize(
    "wrong, phrases",
    [
        (variant(split="view"), ["view without transpose", ".transpose(1, 2)"]),
        (variant(merge="view"), ["merge without transpose"]),
        # the spread grows like √Dh; saturation is stated for large heads only
        (variant(scale="none"), ["no scale", "√Dh", "with large heads"]),
        (variant(scale="D"), ["scale √D instead of √Dh"]),
        (variant(dim=-2), ["softmax over the queries"]),
        (variant(use_mask=False), ["mask ignored"]),
        (lambda q, k, v, h, allowed: attend(q, k, v, h, ~allowed), ["mask inverted"]),
        (lambda q, k, v, h, allowed: attend(q, k, v, h, ~allowed, scale="none"),
         ["2 mistakes together", "no scale", "mask inverted"]),
        (variant(split="view", scale="none", dim=-2),
         ["3 mistakes together", "view without transpose", "no scale",
          "softmax over the queries"]),
        (variant(merge="view", use_mask=False),
         ["2 mistakes together", "mask ignored", "merge without transpose"]),
        (variant(matmul=torch.bmm), ["3D tensor", "torch.bmm takes"]),
        (variant(merge="view after transpose"),
         ["view size is not compatible", ".contiguous().view"]),
        (variant(split="no transpose"), ["must match the size", "heads attending"]),
        (variant(merge="none"), ["you returned the heads", "(2, 3, 5, 4)"]),
        (lambda q, k, v, h, allowed: attend(q, k, v, h, allowed) + 1,
         ["differs from multi-head attention"]),
        (lambda q, k, v, h, allowed: attend(q, k, v, h, allowed)[:, :-1],
         ["should have shape (2, 5, 12)"]),
        (lambda q, k, v, h, allowed: None, ["returned None"]),
    ],
)
def test_attention_step_names_each_mistake(wrong, phrases):
    assert_rejects(check_attention_step(wrong), *phrases)


def test_attention_step_starter_is_your_turn():
    feedback = check_attention_step(not_implemented)
    assert feedback.todo and not feedback


def test_every_checker_says_where_it_is_taught():
    import attention_lib.exercises.ch05_bug_hunt as module

    page = "chapters/05_transformer/04_bug_hunt.ipynb"
    assert (Path(__file__).resolve().parents[1] / page).exists()
    assert page in module.__doc__
    for name in module.__all__:
        doc = getattr(module, name).__doc__
        assert "Shapes:" in doc and f"Taught in ``{page}``" in doc, name


@pytest.mark.parametrize(
    "check", [check_causal_mask, check_cross_attention, check_attention_step]
)
def test_an_exception_in_the_answer_becomes_feedback(check):
    feedback = check(lambda *args: [][1])
    assert not feedback and "Your function raised IndexError" in feedback.message

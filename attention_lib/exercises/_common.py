"""What several checkers share: the mistakes they name, built from the library's
primitives (heads split or merged by a reshape alone, multi-head attention put
together one step at a time so that each step can be done wrong), and the reading of a
multiple-choice answer.

Shapes:
    see each function
"""
from __future__ import annotations

import torch
from torch import Tensor

from ..attention import dot_product_attention, dot_product_scores
from ..multihead import merge_heads, split_heads
from ._feedback import Feedback, read_tensor


def split_view(x: Tensor, num_heads: int) -> Tensor:
    """The split without the transpose: (B, L, D) reshaped straight to (B, H, L, Dh),
    which mixes tokens across heads.

    Shapes:
        x: (B, L, D); returns: (B, H, L, Dh)
    """
    batch_size, length, width = x.shape
    return x.reshape(batch_size, num_heads, length, width // num_heads)


def merge_view(x: Tensor) -> Tensor:
    """The merge without the transpose: (B, H, L, Dh) reshaped straight to (B, L, D).

    Shapes:
        x: (B, H, L, Dh); returns: (B, L, H·Dh)
    """
    batch_size, num_heads, length, head_dim = x.shape
    return x.reshape(batch_size, length, num_heads * head_dim)


def attention_output(queries, keys, values, scale=None, dim=-1, mask=None) -> Tensor:
    """softmax(Q Kᵀ · scale) V by the library's
    :func:`~attention_lib.attention.dot_product_attention` (``scale=None`` is 1/√D),
    with ``mask``. With ``dim`` other than -1 the softmax runs over that axis (the
    scores the mask hides filled with the dtype's lowest number): a mistake.

    Shapes:
        queries: (B, ..., Lq, D); keys: (B, ..., Lk, D); values: (B, ..., Lk, Dv);
            returns: (B, ..., Lq, Dv)
    """
    if dim == -1:
        return dot_product_attention(queries, keys, values, None, mask, scale)[0]
    attn_scores = dot_product_scores(queries, keys, scale)  # (B, ..., Lq, Lk)
    if mask is not None:
        attn_scores = attn_scores.masked_fill(~mask, torch.finfo(queries.dtype).min)
    return torch.softmax(attn_scores, dim=dim) @ values


def heads_attention(queries, keys, values, num_heads, scale=None, dim=-1,
                    split=split_heads, merge=merge_heads, mask=None) -> Tensor:
    """Multi-head attention on projected inputs: ``split``, :func:`attention_output`
    in every head (``scale=None`` is 1/√Dh), ``merge``.

    Shapes:
        queries: (B, Lq, D); keys, values: (B, Lk, D); mask: broadcastable to (B, H,
            Lq, Lk); returns: (B, Lq, D)
    """
    q, k, v = (split(t, num_heads) for t in (queries, keys, values))  # (B, H, L, Dh)
    return merge(attention_output(q, k, v, scale, dim, mask))  # (B, Lq, D)


def read_mask(got, expected: Tensor, where: str, wrong_shape) -> tuple:
    """The reader's mask as a bool tensor of ``expected``'s shape (leading sizes of 1
    dropped: they broadcast), or the feedback: ``wrong_shape(mask)`` on another shape,
    :func:`mask_dtype_feedback` on a mask of numbers.

    Shapes:
        got: (1, ..., Lq, Lk); expected: (Lq, Lk)
    """
    got, error = read_tensor(got, "mask")
    if error is not None:
        return None, error
    while got.dim() > 2 and got.shape[0] == 1:
        got = got[0]
    if got.shape != expected.shape:
        return None, wrong_shape(got)
    if got.dtype != torch.bool:
        return None, mask_dtype_feedback(got, expected, where)
    return got, None


def mask_dtype_feedback(got: Tensor, expected: Tensor, where: str) -> Feedback:
    """A mask of numbers: name the additive form and the 0/1 form.

    Shapes:
        got, expected: the same shape
    """
    if got.dtype.is_floating_point and bool(
        ((got == 0) | torch.isneginf(got) | (got <= -1e4)).all()
    ):
        if torch.equal(got == 0, expected):
            return Feedback.wrong(
                f"{where}: that is an additive float mask (0 where allowed, -inf"
                " where hidden), the form F.scaled_dot_product_attention adds to the"
                " scores. Here, as in the library, return the bool form: True where a"
                " query may attend."
            )
    as_bool = got != 0
    if torch.equal(as_bool, expected):
        what = (
            "A float 0/1 mask is *added* to the scores by"
            " F.scaled_dot_product_attention, which hides nothing"
            if got.dtype.is_floating_point
            else "F.scaled_dot_product_attention refuses an integer mask (it takes bool"
            " or float masks)"
        )
        return Feedback.wrong(
            f"{where}: the pattern is right, but your mask holds {got.dtype} numbers,"
            f" not bools. {what}, and the library refuses it: build it with"
            " dtype=torch.bool (or call .bool())."
        )
    if torch.equal(as_bool, ~expected):
        return Feedback.wrong(
            f"{where}: your mask holds {got.dtype} numbers and is inverted (nonzero"
            " where a query may NOT attend). Return a bool mask, True where a query"
            " may attend."
        )
    return Feedback.wrong(
        f"{where}: return a bool mask (True = may attend), got dtype {got.dtype}."
    )


def check_choice(choice, choices: dict) -> Feedback:
    """The feedback on a multiple-choice answer, a letter (any case, "(b)" and "b."
    too): ``choices`` maps each letter to ``(correct, message)``.

    Shapes:
        none
    """
    letters = [f'"{letter}"' for letter in choices]
    letters = ", ".join(letters[:-1]) + " or " + letters[-1]
    if choice is None:
        return Feedback.your_turn(f"set answer to {letters}.")
    key = str(choice).strip().lower().strip("().")
    if key not in choices:
        return Feedback.wrong(
            f"{choice!r} is not one of the choices: answer {letters}.")
    return Feedback(*choices[key])


def triangle(num_queries: int, num_kv: int, diagonal: int, upper=False) -> Tensor:
    """The lower (or, ``upper=True``, upper) triangle of a (Lq, Lk) boolean matrix from
    ``diagonal`` on: the correct causal mask and its typical mistakes."""
    ones = torch.ones(num_queries, num_kv, dtype=torch.bool)
    return ones.triu(diagonal) if upper else ones.tril(diagonal)

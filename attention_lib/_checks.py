"""Argument checks shared by the whole library, so every error says "got X, expected Y"
the same way.

Not taught: the book's listings call these helpers in one line and show the mathematics
around them.
"""
from __future__ import annotations

import functools
import math
import numbers
import operator

import numpy as np
import torch
from torch import Tensor


def describe(value) -> str:
    """What a value is, for an error message: its type, and its shape and dtype where it
    has them.

    Shapes:
        value: anything; returns: str, e.g. "a list of length 3", "a torch.Tensor of
            shape (2,) and dtype torch.int64"
    """
    if value is None:
        return "None"
    if isinstance(value, Tensor):
        return f"a torch.Tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
    if isinstance(value, np.ndarray):
        return f"a NumPy array of shape {value.shape} and dtype {value.dtype}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the str {shown!r}"
    if isinstance(value, (bool, int, float, complex, np.generic)):
        return f"the {type(value).__name__} {value!r}"
    if isinstance(value, (list, tuple, dict, set)):
        return f"a {type(value).__name__} of length {len(value)}"
    return f"a {type(value).__name__}"


def check_int(name: str, value, minimum: int) -> int:
    """``value`` as a Python int, or a TypeError/ValueError naming ``name``, what it got
    and the minimum.

    Accepts Python and NumPy integers and 0-d integer tensors (anything with
    ``__index__``), never a bool or a float (a float step count or index is a mistake
    worth naming, not rounding).

    Shapes:
        value: a scalar; returns: int
    """
    if not isinstance(value, bool):
        try:
            number = operator.index(value)
        except TypeError:
            pass
        else:
            if number < minimum:
                raise ValueError(f"{name} must be at least {minimum}, got {number}")
            return number
    raise TypeError(
        f"{name} must be an integer (at least {minimum}), got {describe(value)}"
    )


def check_real(name: str, value, meaning: str = "") -> float:
    """``value`` as a finite Python float (Python/NumPy numbers, not bools), or a
    TypeError naming ``name``.

    Shapes:
        value: a scalar; returns: float
    """
    if (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(value)
    ):
        return float(value)
    raise TypeError(f"{name} must be a finite number{meaning}, got {describe(value)}")


def check_probability(name: str, value) -> float:
    """``value`` as a float in [0, 1) (a dropout rate, say), or an error naming
    ``name``.

    Shapes:
        value: a scalar; returns: float
    """
    value = check_real(name, value, " (a probability)")
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must lie in [0, 1), got {value}")
    return value


def check_str_list(name: str, values) -> list[str]:
    """``values`` as a list of strings, or a TypeError naming ``name`` (a single str is
    refused, not split into characters).

    Shapes:
        values: N strings; returns: a list of N strings
    """
    if (
        isinstance(values, (str, bytes))
        or not hasattr(values, "__iter__")
        or isinstance(values, (dict, Tensor))
    ):
        raise TypeError(
            f"{name} must be a list of strings (e.g. [{'Go.'!r}]), got"
            f" {describe(values)}"
        )
    values = list(values)
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise TypeError(
                f"{name} must be a list of strings, but {name}[{i}] is"
                f" {describe(value)}"
            )
    return values


# --- tensors at the library's boundary ----------------------------------------------
# Public entry points call these once; everything inside runs unchecked. Checks that
# read a tensor's values (a host sync on a GPU) step aside while torch.compile or
# torch.export traces the code, so that the traced graph keeps its dimensions dynamic.


def tracing() -> bool:
    """Whether torch.compile or torch.export is tracing the code now (older PyTorch
    releases lack one question or the other: then the answer is no)."""
    compiler = getattr(torch, "compiler", None)
    return any(getattr(compiler, name, lambda: False)()
               for name in ("is_compiling", "is_exporting"))


def _as_tensor_hint(value) -> str:
    if isinstance(value, (list, tuple, np.ndarray)):
        return " (convert it with torch.as_tensor(...))"
    return ""


def check_float(name: str, t, shape: str, min_dim: int = 1, max_dim: int | None = None,
                size: int | None = None, like: Tensor | None = None,
                like_name: str = "", floating: bool = True) -> None:
    """A floating-point tensor with ``min_dim`` to ``max_dim`` dimensions (``shape``
    names the expected layout in the message), last dimension ``size`` when given, and
    the dtype and device of ``like`` when given."""
    if not isinstance(t, Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor, got {describe(t)}{_as_tensor_hint(t)}"
        )
    if floating and not t.dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")
    max_dim = min_dim if max_dim is None else max_dim
    if not min_dim <= t.dim() <= max_dim or (size is not None and t.shape[-1] != size):
        raise ValueError(f"{name} must have shape {shape}, got {tuple(t.shape)}")
    if like is not None:
        check_like(name, t, like, like_name)


def check_like(name: str, t: Tensor, like: Tensor, like_name: str) -> None:
    """``t`` has the dtype and device of ``like`` (another input, or a layer's
    parameters)."""
    if t.dtype != like.dtype:
        if like_name.endswith("parameters"):
            verb = "have" if name.endswith("s") else "has"
            raise TypeError(
                f"{name} {verb} dtype {t.dtype} but {like_name} have {like.dtype}; call"
                f" layer.to({t.dtype}) or convert the inputs"
            )
        raise TypeError(
            f"{name} has dtype {t.dtype} but {like_name} has dtype {like.dtype};"
            f" convert them to one dtype (e.g. {name}.to({like_name}.dtype))"
        )
    if t.device != like.device:
        raise ValueError(f"{name} is on {t.device} but {like_name} is on {like.device}")


def check_batch(name: str, t: Tensor, batch_shape: tuple, reference: str) -> None:
    """``t``'s leading dimensions (all but the last two) equal ``batch_shape``."""
    if tuple(t.shape[:-2]) != tuple(batch_shape) or t.dim() != len(batch_shape) + 2:
        raise ValueError(
            f"{name} must have the same leading (batch) dimensions as {reference}:"
            f" expected {tuple(batch_shape)} + (L, size), got {tuple(t.shape)}"
        )


def check_lengths(name: str, valid_lens, num_kv: int, batch_size: int | None = None,
                  num_queries: int | None = None, per_query: bool = True) -> None:
    """``valid_lens``: an integer tensor of shape (B,) (or (B, Lq) when ``per_query``),
    each length in ``[0, num_kv]``. Lists and NumPy arrays are refused with a hint:
    lengths live on the model's device next to the scores."""
    known = [f"B={batch_size}"] * (batch_size is not None) + [f"Lq={num_queries}"] * (
        per_query and num_queries is not None)
    expected = ("(B,) or (B, Lq)" if per_query else "(B,)") + (
        f" with {', '.join(known)}" if known else "")
    if not isinstance(valid_lens, Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor of integer lengths with shape {expected}, "
            f"got {describe(valid_lens)}{_as_tensor_hint(valid_lens)}"
        )
    if valid_lens.dtype.is_floating_point or valid_lens.dtype == torch.bool or (
            valid_lens.is_complex()):
        raise TypeError(f"{name} must hold integers, got dtype {valid_lens.dtype}")
    shape = tuple(valid_lens.shape)
    if valid_lens.dim() not in ((1, 2) if per_query else (1,)) or (
            batch_size is not None and shape[0] != batch_size):
        raise ValueError(f"{name} must have shape {expected}, got {shape}")
    if num_queries is not None and valid_lens.dim() == 2 and shape[1] != num_queries:
        raise ValueError(
            f"{name} of shape (B, Lq) must have Lq={num_queries}, got {shape}"
        )
    if valid_lens.numel() and not tracing():
        low, high = valid_lens.aminmax()
        if low < 0 or high > num_kv:
            raise ValueError(
                f"{name} must lie in [0, {num_kv}] (the number of keys), got values"
                f" from {int(low)} to {int(high)}"
            )


def check_mask(mask, scores_shape: tuple, name: str = "mask") -> None:
    """A bool tensor (True = may attend) that broadcasts to the scores' shape, no
    larger."""
    scores_shape = tuple(scores_shape)
    if not isinstance(mask, Tensor):
        raise TypeError(
            f"{name} must be a bool torch.Tensor (True = may attend) broadcastable to"
            f" the scores' shape {scores_shape} (..., Lq, Lk), got {describe(mask)}"
            f"{_as_tensor_hint(mask)}"
        )
    if mask.dtype != torch.bool:
        raise TypeError(
            f"{name} must be a bool tensor (True = may attend), got dtype {mask.dtype}"
        )
    try:
        if tuple(torch.broadcast_shapes(mask.shape, scores_shape)) != scores_shape:
            raise RuntimeError  # a mask with extra dims would silently grow the output
    except RuntimeError:
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} does not broadcast to the scores'"
            f" shape {scores_shape} (..., Lq, Lk)"
        ) from None


def check_tokens(name: str, tokens, vocab_size: int | None = None) -> None:
    """A (B, L) tensor of token indices (torch.long), not empty, each in
    ``[0, vocab_size)`` when the vocabulary size is given."""
    if not (isinstance(tokens, Tensor) and tokens.dtype == torch.long
            and tokens.dim() == 2):
        got = (f"{tokens.dtype} {tuple(tokens.shape)}" if isinstance(tokens, Tensor)
               else describe(tokens))
        raise TypeError(
            f"{name} must be a (B, L) tensor of token indices (torch.long), got {got}"
        )
    if tokens.numel() == 0:
        raise ValueError(
            f"{name} must hold at least one sentence of at least one token, "
            f"got shape {tuple(tokens.shape)}"
        )
    if vocab_size is not None and not tracing():
        low, high = tokens.aminmax()
        if low < 0 or high >= vocab_size:
            raise ValueError(
                f"{name} must hold token indices in [0, {vocab_size}) (the vocabulary's"
                f" size), got values from {int(low)} to {int(high)}"
            )


def check_qkv(queries, keys, values, min_dim: int = 3, same_size: bool = True) -> None:
    """Queries (..., Lq, D), keys (..., Lk, D) and values (..., Lk, Dv): floating
    point, one dtype and device, the same leading (batch) dimensions, keys and values
    in pairs, and (``same_size``) queries and keys of one size D."""
    layout = "(B, L, size) (or (B, ..., L, size))" if min_dim >= 3 else "(..., L, size)"
    check_float("queries", queries, layout, min_dim, 64)
    for name, t, like in (("keys", keys, "queries"), ("values", values, "keys")):
        check_float(name, t, layout, min_dim, 64, like={"queries": queries,
                                                        "keys": keys}[like],
                    like_name=like)
        check_batch(name, t, queries.shape[:-2], "queries")
    if same_size and queries.shape[-1] != keys.shape[-1]:
        raise ValueError(
            "dot-product scores need queries and keys of one size D: queries have"
            f" shape {tuple(queries.shape)} (B, Lq, D), so keys must have shape"
            f" (B, Lk, {queries.shape[-1]}), got {tuple(keys.shape)}"
        )
    if keys.shape[-2] != values.shape[-2]:
        raise ValueError(
            f"keys and values must come in pairs: keys have Lk={keys.shape[-2]} (shape"
            f" {tuple(keys.shape)}), so values must have shape (B, {keys.shape[-2]},"
            f" Dv), got {tuple(values.shape)}"
        )


def check_scale(scale) -> float | None:
    """None (meaning 1/√D) or a number."""
    if scale is None:
        return None
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError(f"scale must be a number or None (meaning 1/√D), got {scale!r}")
    return float(scale)


def check_src_lengths(src: Tensor, src_valid_lens) -> None:
    """One integer length per sentence of ``src`` (B, Lk, ...), each in [0, Lk]."""
    check_lengths("src_valid_lens", src_valid_lens, src.shape[1], src.shape[0],
                  per_query=False)


def check_sizes(named: list) -> None:
    """Each (name, tensor, size, size_name): the tensor's last dimension is ``size``,
    the constructor argument ``size_name``."""
    for name, t, size, size_name in named:
        if t.shape[-1] != size:
            raise ValueError(
                f"{name} must have last dimension {size_name}={size}, got shape"
                f" {tuple(t.shape)}"
            )


def checked_by(check):
    """Decorate a function of the mathematics with the check of its arguments: the
    public function runs ``check(*args, **kwargs)`` first; the undecorated function,
    ``fn.__wrapped__``, is for code inside the library that checked them already."""

    def decorate(fn):
        @functools.wraps(fn)
        def checked(*args, **kwargs):
            check(*args, **kwargs)
            return fn(*args, **kwargs)

        return checked

    return decorate


def check_sequence(name: str, x, embed_dim: int) -> None:
    """x of shape (B, L, D), floating, with D = embed_dim."""
    check_float(name, x, f"(B, L, {embed_dim}) (embed_dim={embed_dim})", 3,
                size=embed_dim)


def check_memory(x: Tensor, enc_outputs, src_valid_lens, embed_dim: int) -> None:
    """The encoder's outputs (B, Lk, D) for a decoder input x (B, Lq, D)."""
    check_sequence("enc_outputs", enc_outputs, embed_dim)
    if enc_outputs.shape[0] != x.shape[0]:
        raise ValueError(
            f"enc_outputs must have the batch size of x, B={x.shape[0]}, got shape"
            f" {tuple(enc_outputs.shape)}"
        )
    if src_valid_lens is not None:
        check_src_lengths(enc_outputs, src_valid_lens)


def check_rotary(rotary, positions, batch_size: int, num_queries: int, num_keys: int,
                 num_kv: int) -> None:
    """A rotary self-attention's ``positions``: (L,), (1, L) or (B, L) integers in
    [0, max_len), and as many new keys as queries."""
    if rotary is None:
        raise ValueError("positions were given to a MultiHeadAttention without a"
                         " rotary embedding; pass rotary=RotaryEmbedding(...)")
    if num_keys != num_queries:
        raise ValueError(f"rotary attention is self-attention: it needs as many keys"
                         f" as queries, got {num_keys} keys for {num_queries} queries")
    if positions is None:
        if num_kv > rotary.max_len:
            raise ValueError(f"the sequence has {num_kv} positions, more than the"
                             f" rotary embedding's max_len={rotary.max_len}")
        return
    shapes = ((num_queries,), (1, num_queries), (batch_size, num_queries))
    if (not isinstance(positions, torch.Tensor) or positions.is_floating_point()
            or positions.dtype == torch.bool or tuple(positions.shape) not in shapes):
        raise ValueError(f"positions must be integers of shape (L,) = {shapes[0]},"
                         f" (1, L) = {shapes[1]} or (B, L) = {shapes[2]}, got"
                         f" {describe(positions)}")
    if not tracing() and positions.numel() and (
            positions.min() < 0 or positions.max() >= rotary.max_len):
        raise ValueError(f"positions must lie in [0, {rotary.max_len}), got values"
                         f" from {int(positions.min())} to {int(positions.max())}")

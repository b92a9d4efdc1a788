"""Where a token is: sinusoidal, learned and rotary position information.

Self-attention treats its input as a set: permute the tokens and the outputs are
permuted the same way, nothing else changes. Word order has to be put into the vectors.
Three ways, all built on one list of angles:

    angle[p, i] = p · ω_i,   ω_i = 1 / base^(2i/D),   i = 0, ..., D/2 − 1

from 1 radian per position (i = 0) down to almost 1/base radians per position.

* sinusoidal (Vaswani et al., 2017, section 3.5): add sin and cos of these angles to
  the embeddings, ``x + PE[:L]``; nothing to learn, and PE[p + k] is a rotation of PE[p]
  that depends only on k;
* learned (BERT, GPT-2): add a trained row per position, ``x + W_pos[:L]``;
* rotary, RoPE (Su et al., 2021): rotate each pair of features of the queries and keys
  by its angle, so that the score q_mᵀ k_n depends on the positions only through n − m.

Taught in ``chapters/04_self_attention/03_positional_encoding.ipynb``.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ._checks import check_int, check_real, describe

__all__ = [
    "position_angles",
    "sinusoidal_encoding",
    "interleaved_to_concatenated",
    "sinusoidal_shift_matrix",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEncoding",
    "rotate_pairs",
    "apply_rotary",
    "rotary_matrix",
    "RotaryEmbedding",
]


# --- input checks: every message names the argument, what it got and what it expected


def _check_even(name: str, value, meaning: str) -> int:
    value = check_int(name, value, 1)
    if value % 2:
        raise ValueError(f"{name} must be even ({meaning}), got {name}={value}")
    return value


def _check_base(base) -> float:
    base = check_real("base", base)
    if base <= 0:
        raise ValueError(f"base must be positive (e.g. 10000.0), got {base}")
    return base


def _check_floating(name: str, x, expected: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape {expected}, got"
                        f" {describe(x)}")
    if not x.dtype.is_floating_point:
        raise TypeError(
            f"{name} must be a floating-point tensor of shape {expected} (vectors, not"
            f" token ids: embed the tokens first), got dtype {x.dtype}"
        )


def _check_length(length: int, offset: int, max_len: int) -> None:
    if offset + length > max_len:
        start = "" if offset == 0 else f" starting at offset={offset}"
        raise ValueError(
            f"x has L={length} positions{start}, which needs max_len >="
            f" {offset + length}, but this encoding was built with max_len={max_len};"
            f" build it with a larger max_len"
        )


def _check_sequence(x, embed_dim: int, max_len: int, offset) -> int:
    """Check x of shape (B, L, D) against the layer; return the offset as an int."""
    _check_floating("x", x, f"(B, L, {embed_dim})")
    if x.dim() != 3 or x.shape[-1] != embed_dim:
        raise ValueError(
            f"x must have shape (B, L, {embed_dim}) (embed_dim={embed_dim}), got"
            f" {tuple(x.shape)}"
        )
    offset = check_int("offset", offset, 0)
    _check_length(x.shape[1], offset, max_len)
    return offset


def _check_positions(positions, length: int, x_shape: tuple) -> None:
    if not isinstance(positions, Tensor) or positions.dtype == torch.bool:
        raise TypeError(
            f"positions must be a tensor of numbers of shape ({length},), got"
            f" {describe(positions)}"
        )
    if positions.shape != (length,):
        raise ValueError(
            f"positions must have shape (L,) = ({length},) for x of shape {x_shape},"
            f" got {tuple(positions.shape)}"
        )


def _check_pairs(x, head_dim: int | None = None) -> None:
    """x of shape (..., L, Dh), Dh even (or equal to head_dim), for a rotation."""
    size = "Dh" if head_dim is None else str(head_dim)
    _check_floating("x", x, f"(..., L, {size})")
    if head_dim is not None and (x.dim() < 2 or x.shape[-1] != head_dim):
        raise ValueError(
            f"x must have shape (..., L, {head_dim}) (head_dim={head_dim}), got"
            f" {tuple(x.shape)}"
        )
    if x.dim() < 2 or x.shape[-1] % 2:
        raise ValueError(
            f"x must have shape (..., L, Dh) with Dh even (features are rotated in"
            f" pairs), got {tuple(x.shape)}"
        )


def _check_angles(x, cos, sin) -> None:
    _check_pairs(x)
    expected = (x.shape[-2], x.shape[-1] // 2)
    for name, t in (("cos", cos), ("sin", sin)):
        if not isinstance(t, Tensor) or t.shape != expected:
            got = tuple(t.shape) if isinstance(t, Tensor) else describe(t)
            raise ValueError(
                f"{name} must have shape (L, Dh/2) = {expected} for x of shape"
                f" {tuple(x.shape)}, got {got}"
            )


# --- the angles both methods share ----------------------------------------------------


def position_angles(positions: Tensor, dim: int, base: float = 10000.0) -> Tensor:
    """The angles ``p / base^(2i/dim)`` that sinusoidal encoding and RoPE both use.

    Row p holds position p's angle for each of the dim/2 frequencies
    ``ω_i = 1 / base^(2i/dim)``: ω_0 = 1 radian per position, and each next frequency
    is slower by the factor base^(2/dim), down to ω_{dim/2−1} = base^(2/dim − 1).

    Shapes:
        positions: (L,), integer or floating (integers become float32)
        returns:   (L, dim/2), the dtype and device of ``positions``

    Taught in ``chapters/04_self_attention/03_positional_encoding.ipynb``.
    """
    dim = _check_even("dim", dim, "one angle serves a pair of features")
    base = _check_base(base)
    if not isinstance(positions, Tensor) or positions.dtype == torch.bool:
        raise TypeError(
            f"positions must be a tensor of numbers, got {describe(positions)}"
        )
    if positions.dim() != 1:
        raise ValueError(
            f"positions must have shape (L,), got {tuple(positions.shape)}"
        )
    if not positions.dtype.is_floating_point:
        positions = positions.float()  # (L,)
    two_i = torch.arange(0, dim, 2).to(positions)  # (dim/2,): 0, 2, ..., dim − 2
    return positions[:, None] / base ** (two_i / dim)  # (L, dim/2)


# --- sinusoidal encoding --------------------------------------------------------------


def sinusoidal_encoding(
    num_positions: int,
    dim: int,
    base: float = 10000.0,
    interleaved: bool = True,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> Tensor:
    """The sinusoidal positional encoding PE of Vaswani et al. (2017), section 3.5.

    With ``ω_i = 1 / base^(2i/D)`` for i = 0, ..., D/2 − 1 (:func:`position_angles`)::

        PE[p, 2i]   = sin(p · ω_i)
        PE[p, 2i+1] = cos(p · ω_i)

    Two layouts of the same numbers:

    * ``interleaved=True`` (the paper's formula, as above; also d2l and the Annotated
      Transformer): columns sin ω_0, cos ω_0, sin ω_1, cos ω_1, ...
    * ``interleaved=False``, concatenated: all sines, then all cosines,
      [sin ω_0 ... sin ω_{D/2−1} | cos ω_0 ... cos ω_{D/2−1}], the layout of
      tensor2tensor's ``get_timing_signal_1d`` and fairseq. (Those two also space the
      frequencies a little differently, ``base^(−i/(D/2−1))``, so that the slowest is
      exactly 1/base; here both layouts use the paper's frequencies.)

    The two layouts are a permutation of each other's columns::

        concatenated = interleaved[:, interleaved_to_concatenated(D)]

    They are equally good, but not interchangeable: a model trained with one layout has
    weights that expect it. Every row has norm √(D/2) (sin² + cos² = 1 for each pair),
    and PE[p + k] = M_k PE[p] for a rotation M_k that depends only on k
    (:func:`sinusoidal_shift_matrix`), so PE[p] · PE[p + k] = Σ_i cos(k ω_i) depends
    only on the distance k.

    Computed in float64 on the CPU, then converted to ``dtype`` and moved to
    ``device``.

    Shapes:
        returns: (L, D) with L = ``num_positions`` and D = ``dim``

    Taught in ``chapters/04_self_attention/03_positional_encoding.ipynb``.
    """
    num_positions = check_int("num_positions", num_positions, 0)
    dim = _check_even("dim", dim, "the encoding pairs a sine with a cosine")
    positions = torch.arange(num_positions, dtype=torch.float64)  # (L,)
    angles = position_angles(positions, dim, base)  # (L, D/2)
    if interleaved:
        # sin, cos, sin, cos, ...: stack the pairs, then lay them side by side
        encoding = torch.stack((angles.sin(), angles.cos()), dim=-1)  # (L, D/2, 2)
        encoding = encoding.flatten(-2)  # (L, D)
    else:
        encoding = torch.cat((angles.sin(), angles.cos()), dim=-1)  # (L, D)
    return encoding.to(device=device, dtype=dtype)


def interleaved_to_concatenated(dim: int) -> Tensor:
    """The column order that turns the interleaved layout into the concatenated one.

    ``perm = [0, 2, 4, ..., D−2, 1, 3, ..., D−1]``: first the sine columns, then the
    cosine columns. ``concatenated = interleaved[..., perm]`` and back,
    ``interleaved = concatenated[..., perm.argsort()]``. The same index relates the
    two pairings of rotary embeddings: adjacent pairs (2i, 2i+1), as in the RoPE paper,
    and halves (i, i + Dh/2), as in GPT-NeoX and Hugging Face's Llama.

    Shapes:
        returns: (D,), int64, with D = ``dim``

    Taught in ``chapters/04_self_attention/03_positional_encoding.ipynb``.
    """
    dim = _check_even("dim", dim, "features come in pairs")
    return torch.cat((torch.arange(0, dim, 2), torch.arange(1, dim, 2)))  # (D,)


def sinusoidal_shift_matrix(
    offset: float, dim: int, base: float = 10000.0, interleaved: bool = True
) -> Tensor:
    """The rotation M_k with ``PE[p + k] = M_k PE[p]`` for every p (k = ``offset``).

    From sin(a + b) = sin a cos b + cos a sin b and cos(a + b) = cos a cos b − sin a
    sin b, each (sin, cos) pair moves by a 2 × 2 block that depends only on k::

        [sin((p+k)ω_i)]   [ cos kω_i   sin kω_i] [sin(pω_i)]
        [cos((p+k)ω_i)] = [−sin kω_i   cos kω_i] [cos(pω_i)]

    This is the block-diagonal rotation of RoPE at position −k
    (:func:`rotary_matrix`): a pair stored as (sin, cos) turns the other way round.
    For the concatenated layout the rows and columns are permuted the same way.

    Shapes:
        returns: (D, D), float64 on the CPU, with D = ``dim``

    Taught in ``chapters/04_self_attention/03_positional_encoding.ipynb``.
    """
    offset = check_real("offset", offset)
    matrix = rotary_matrix(-offset, dim, base)  # (D, D)
    if interleaved:
        return matrix
    perm = interleaved_to_concatenated(dim)  # (D,)
    return matrix[perm][:, perm]  # (D, D)


class SinusoidalPositionalEncoding(nn.Module):
    """Add the sinusoidal encoding to a batch of embeddings, then dropout (Vaswani et
    al., 2017).

    ``x + PE[offset : offset + L]`` with PE from :func:`sinusoidal_encoding`, kept as a
    buffer (moved by ``.to(device)``, not saved in the ``state_dict``: it is computed,
    not learned). ``offset`` is the position of x's first token, for a decoder that
    feeds one token at a time. The paper also multiplies the embeddings by √D before
    this sum; that is the embedding layer's job, not this one's.

    Shapes:
        x:       (B, L, D), floating, with D = ``embed_dim`` and offset + L <= max_len
        returns: (B, L, D), the dtype of x
        encoding: (max_len, D)

    Taught in ``chapters/04_self_attention/03_positional_encoding.ipynb``.
    """

    def __init__(
        self,
        embed_dim: int,
        max_len: int = 1000,
        dropout: float = 0.0,
        base: float = 10000.0,
        interleaved: bool = True,
    ):
        super().__init__()
        self.embed_dim = _check_even(
            "embed_dim", embed_dim, "the encoding pairs a sine with a cosine"
        )
        self.max_len = check_int("max_len", max_len, 1)
        self.base = _check_base(base)
        self.interleaved = bool(interleaved)
        self.dropout = nn.Dropout(dropout)
        encoding = sinusoidal_encoding(max_len, embed_dim, base, interleaved)
        self.register_buffer("encoding", encoding, persistent=False)  # (max_len, D)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        offset = _check_sequence(x, self.embed_dim, self.max_len, offset)
        return self.add(x, offset)

    def add(self, x: Tensor, offset: int = 0) -> Tensor:
        """The encoding added, unchecked (``offset`` may be a traced size).

        Shapes:
            as :meth:`forward`
        """
        pe = self.encoding[offset : offset + x.shape[1]]  # (L, D)
        return self.dropout(x + pe.to(x.dtype))  # (B, L, D)

    def extra_repr(self) -> str:
        return (
            f"embed_dim={self.embed_dim}, max_len={self.max_len}, base={self.base},"
            f" interleaved={self.interleaved}"
        )


# --- learned encoding -----------------------------------------------------------------


class LearnedPositionalEncoding(nn.Module):
    """Add a learned vector per position to a batch of embeddings, then dropout (BERT,
    GPT-2).

    ``x + W_pos[offset : offset + L]``, where ``W_pos`` is the weight of an
    ``nn.Embedding(max_len, D)`` initialised with standard deviation 0.02 (the scale
    BERT and nanoGPT use). Any D works (there are no sine–cosine pairs), but a position
    the training data never reached keeps its random vector, and there is no row at all
    past max_len.

    Shapes:
        x:       (B, L, D), floating, with D = ``embed_dim`` and offset + L <= max_len
        returns: (B, L, D), the dtype of x
        embedding.weight: (max_len, D)

    Taught in ``chapters/04_self_attention/03_positional_encoding.ipynb``.
    """

    def __init__(self, embed_dim: int, max_len: int = 1000, dropout: float = 0.0):
        super().__init__()
        self.embed_dim = check_int("embed_dim", embed_dim, 1)
        self.max_len = check_int("max_len", max_len, 1)
        self.embedding = nn.Embedding(max_len, embed_dim)
        nn.init.normal_(self.embedding.weight, std=0.02)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        offset = _check_sequence(x, self.embed_dim, self.max_len, offset)
        length = x.shape[1]
        positions = torch.arange(offset, offset + length, device=x.device)  # (L,)
        pe = self.embedding(positions)  # (L, D)
        return self.dropout(x + pe.to(x.dtype))  # (B, L, D)

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, max_len={self.max_len}"


# --- rotary position embedding (RoPE) -------------------------------------------------


def rotate_pairs(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate each pair of features (x[..., 2i], x[..., 2i+1]) by its own angle.

    For the pair (a, b) = (x[2i], x[2i+1]) at position m, with angle m·ω_i::

        a' = a cos(mω_i) − b sin(mω_i)
        b' = a sin(mω_i) + b cos(mω_i)

    a counter-clockwise turn of the point (a, b). Computed in float32 at least (in
    float64 for float64 input) and returned in x's dtype.

    Shapes:
        x:        (..., L, Dh), floating, Dh even
        cos, sin: (L, Dh/2), the cosines and sines of the angles
        returns:  (..., L, Dh), the dtype of x

    Taught in ``chapters/04_self_attention/03_positional_encoding.ipynb``.
    """
    _check_angles(x, cos, sin)
    return _rotate(x, cos, sin)  # (..., L, Dh)


def _rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    # rotate_pairs unchecked: cos and sin broadcast to (..., L, Dh/2)
    dtype = x.dtype
    compute = torch.promote_types(torch.promote_types(dtype, cos.dtype), torch.float32)
    x, cos, sin = x.to(compute), cos.to(compute), sin.to(compute)
    a, b = x[..., 0::2], x[..., 1::2]  # (..., L, Dh/2) each: first and second of a pair
    rotated = torch.stack(
        (a * cos - b * sin, a * sin + b * cos), dim=-1
    )  # (..., L, Dh/2, 2): the turned pairs
    return rotated.flatten(-2).to(dtype)  # (..., L, Dh): each pair in its two columns


def apply_rotary(
    x: Tensor, positions: Tensor | None = None, base: float = 10000.0
) -> Tensor:
    """Rotary position embedding, RoPE (Su et al., 2021): rotate x's feature pairs by
    angles proportional to their positions.

    The token at position m has each adjacent pair (x[2i], x[2i+1]) turned by the angle
    ``m · ω_i``, ``ω_i = 1 / base^(2i/Dh)`` (the pairing and the frequencies of the
    paper, equation 34; :func:`rotate_pairs`). In matrix form x_m becomes R_m x_m, with
    R_m block-diagonal (:func:`rotary_matrix`). Applied to queries and keys, never to
    values. Because R_mᵀ R_n = R_{n−m}::

        (R_m q)ᵀ (R_n k) = qᵀ R_{n−m} k

    the score depends on the two positions only through their distance n − m.

    Hugging Face's Llama and GPT-NeoX pair feature i with feature i + Dh/2 instead (the
    "rotate_half" layout); that is the same rotation on columns permuted by
    :func:`interleaved_to_concatenated`, so weights trained with one layout need that
    permutation to work with the other.

    Shapes:
        x:         (..., L, Dh), floating, Dh even, e.g. (B, H, L, Dh)
        positions: (L,), optional, default 0, 1, ..., L − 1
        returns:   (..., L, Dh), the dtype of x

    Taught in ``chapters/04_self_attention/03_positional_encoding.ipynb``.
    """
    _check_pairs(x)
    length, head_dim = x.shape[-2], x.shape[-1]
    if positions is None:
        positions = torch.arange(length, device=x.device)  # (L,)
    _check_positions(positions, length, tuple(x.shape))
    compute = torch.promote_types(x.dtype, torch.float32)  # float32 or float64
    # The angles in float64 (on the CPU: not every GPU has it), so that their error
    # does not grow with the position, then cos and sin at the precision of the work.
    positions = positions.detach().to(device="cpu", dtype=torch.float64)  # (L,)
    angles = position_angles(positions, head_dim, base)  # (L, Dh/2)
    cos, sin = (f.to(device=x.device, dtype=compute) for f in (angles.cos(),
                                                               angles.sin()))
    return rotate_pairs(x, cos, sin)  # (..., L, Dh)


def rotary_matrix(position: float, dim: int, base: float = 10000.0) -> Tensor:
    """The rotation R_m of RoPE at position m as a matrix: ``apply_rotary`` computes
    ``R_m x`` without building it.

    Block-diagonal, one 2 × 2 rotation per feature pair (2i, 2i+1)::

        [cos mω_i   −sin mω_i]
        [sin mω_i    cos mω_i]

    with ``ω_i = 1 / base^(2i/dim)``. Orthogonal, R_0 = I and R_mᵀ R_n = R_{n−m}.

    Shapes:
        returns: (Dh, Dh), float64 on the CPU, with Dh = ``dim``

    Taught in ``chapters/04_self_attention/03_positional_encoding.ipynb``.
    """
    position = check_real("position", position)
    angles = position_angles(torch.tensor([position], dtype=torch.float64), dim, base)
    blocks = [
        torch.tensor([[math.cos(angle), -math.sin(angle)],
                      [math.sin(angle), math.cos(angle)]], dtype=torch.float64)
        for angle in angles[0].tolist()
    ]  # Dh/2 blocks of (2, 2)
    return torch.block_diag(*blocks)  # (Dh, Dh)


class RotaryEmbedding(nn.Module):
    """RoPE with the cosines and sines of positions 0, ..., max_len − 1 computed once.

    ``forward(x, offset)`` equals ``apply_rotary(x, offset + arange(L), base)``, read
    from a cache instead of recomputed; ``offset`` is the position of x's first token,
    for a decoder that feeds one token at a time. Call it on the queries and on the
    keys, after splitting the heads. The cache is float32 (angles computed in float64):
    float64 input is accurate to about 1e-7, so use :func:`apply_rotary` for float64
    checks. The cache is a buffer, moved by ``.to(device)`` and not saved in the
    ``state_dict``.

    Shapes:
        x:        (..., L, Dh), floating, with Dh = ``head_dim`` and offset + L <=
            max_len
        returns:  (..., L, Dh), the dtype of x
        cos, sin: (max_len, Dh/2)

    Taught in ``chapters/04_self_attention/03_positional_encoding.ipynb``.
    """

    def __init__(self, head_dim: int, max_len: int = 1000, base: float = 10000.0):
        super().__init__()
        self.head_dim = _check_even(
            "head_dim", head_dim, "features are rotated in pairs"
        )
        self.max_len = check_int("max_len", max_len, 1)
        self.base = _check_base(base)
        positions = torch.arange(self.max_len, dtype=torch.float64)  # (max_len,)
        angles = position_angles(positions, head_dim, base)  # (max_len, Dh/2)
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        _check_pairs(x, self.head_dim)
        offset = check_int("offset", offset, 0)
        length = x.shape[-2]
        _check_length(length, offset, self.max_len)
        cos = self.cos[offset : offset + length]  # (L, Dh/2)
        sin = self.sin[offset : offset + length]  # (L, Dh/2)
        return rotate_pairs(x, cos, sin)  # (..., L, Dh)

    def at(self, x: Tensor, positions: Tensor) -> Tensor:
        """Rotate x at the given positions, unchecked: one row of positions for all
        examples (L,), or one per example (B, L) with x of shape (B, H, L, Dh).

        Shapes:
            x: (..., L, Dh); positions: (L,) or (B, L), integer in [0, max_len)
            returns: (..., L, Dh)
        """
        cos, sin = self.cos[positions], self.sin[positions]  # (..., L, Dh/2)
        if positions.dim() > 1:
            cos, sin = cos.unsqueeze(-3), sin.unsqueeze(-3)  # (B, 1, L, Dh/2)
        return _rotate(x, cos, sin)  # (..., L, Dh)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, max_len={self.max_len}, base={self.base}"

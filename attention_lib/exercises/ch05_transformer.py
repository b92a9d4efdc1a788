"""Checkers for chapter 5's exercises: counting, scheduling and wiring the Transformer,
against the library (:mod:`attention_lib.transformer`, ``F.cross_entropy``). Counts
are built on the ``meta`` device: sizes only, no memory, no random numbers drawn.

Taught in ``chapters/05_transformer/05_exercises.ipynb``.
"""
from __future__ import annotations

import itertools
import math
from typing import Callable, NamedTuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.flop_counter import FlopCounterMode

from ..transformer import (
    AddNorm,
    PositionWiseFFN,
    TransformerDecoder,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
    warmup_rate,
)
from ._feedback import (
    Feedback,
    checker,
    close,
    close_where_defined,
    describe,
    diagnose,
    diagnose_numbers,
    read_number,
    read_tensor,
    run_safely,
    sizes,
)

__all__ = [
    "check_encoder_block_parameters",
    "check_decoder_block_parameters",
    "check_encoder_block_macs",
    "check_warmup_rate",
    "check_warmup_peak",
    "check_smoothed_loss",
    "check_sublayer",
    "check_cache_size",
]


# --- counting with named omissions ----------------------------------------------------
#
# A count is a polynomial in the sizes, kept as its coefficients over a basis of
# monomials (e.g. D², D·Dff, D, Dff). The block is a sum of parts; a typical mistake
# leaves out a group of parts (the biases, W_o, a LayerNorm, ...), so a wrong answer
# that equals the true count minus some groups names exactly those groups.

class _Group(NamedTuple):
    parts: frozenset[str]
    description: str


def _group(parts: str, description: str) -> _Group:
    return _Group(frozenset(parts.split()), description)


def _poly_text(coefs: tuple[int, ...], basis: tuple[str, ...]) -> str:
    """Coefficients over ``basis`` as text: (4, 0, 1) over (D², D·Dff, D) is 4D² + D."""
    terms = [
        monomial if coef == 1 else f"{coef}{monomial}"
        for coef, monomial in zip(coefs, basis)
        if coef
    ]
    return " + ".join(terms) or "0"


def _omissions(
    parts: dict[str, tuple[int, ...]], groups: list[_Group], max_groups: int = 3
) -> dict[tuple[int, ...], list[str]]:
    """Every way to leave out up to ``max_groups`` groups that share no part: what goes
    missing (coefficients) -> the descriptions that explain it, simplest first."""
    width = len(next(iter(parts.values())))
    found: dict[tuple[int, ...], list[str]] = {}
    for size in range(1, max_groups + 1):
        for combo in itertools.combinations(groups, size):
            names = [name for group in combo for name in group.parts]
            if len(names) != len(set(names)):
                continue
            coefs = tuple(sum(parts[name][i] for name in names) for i in range(width))
            descriptions = " and ".join(group.description for group in combo)
            found.setdefault(coefs, []).append(descriptions)
    return found


def _name_omission(
    answers: list[float],
    expected: list[float],
    values: list[tuple[float, ...]],
    parts: dict[str, tuple[int, ...]],
    groups: list[_Group],
    basis: tuple[str, ...],
) -> Feedback | None:
    """The feedback naming the groups the answers leave out, or None. ``values`` holds
    each case's monomials evaluated, in the order of ``basis``."""
    for coefs, descriptions in _omissions(parts, groups).items():
        short = [sum(c * v for c, v in zip(coefs, case)) for case in values]
        if all(a == e - s for a, e, s in zip(answers, expected, short)):
            message = descriptions[0]
            if len(descriptions) > 1:
                message += f" (or: {descriptions[1]})"
            return Feedback.wrong(
                f"Not yet: your count is short by {_poly_text(coefs, basis)}: you left"
                f" out {message}."
            )
    return None


def _meta_parameters(module_class, *sizes) -> float:
    with torch.device("meta"):  # sizes only: no memory, no random numbers drawn
        module = module_class(*sizes)
    return float(sum(p.numel() for p in module.parameters()))


def _difference(answer: float, expected: float) -> str:
    """'12 too many' or '12 too few': the reader's count against the right one."""
    return f"{abs(answer - expected):,.0f} too {'many' if answer > expected else 'few'}"


# --- 1. the parameters of a block -----------------------------------------------------

# (D, H, Dff): two cases share D and Dff and differ in H; Dff ≠ 4D in most, so that a
# count that assumes Dff = 4D, or that changes with H, is caught.
_BLOCK_CASES = ((8, 2, 32), (12, 3, 20), (512, 8, 2048), (64, 1, 100), (64, 16, 100))
_PARAM_BASIS = ("D²", "D·Dff", "D", "Dff")


def _param_values(width: int, ffn_hidden: int) -> tuple[int, ...]:
    return (width * width, width * ffn_hidden, width, ffn_hidden)


def _block_parts(num_norms: int, cross: bool) -> dict[str, tuple[int, ...]]:
    """The parts of a block, as coefficients over (D², D·Dff, D, Dff)."""
    parts = {
        "qkv": (3, 0, 0, 0), "qkv_bias": (0, 0, 3, 0),  # W_q, W_k, W_v
        "out": (1, 0, 0, 0), "out_bias": (0, 0, 1, 0),  # W_o
        "w1": (0, 1, 0, 0), "b1": (0, 0, 0, 1),  # FFN D -> Dff
        "w2": (0, 1, 0, 0), "b2": (0, 0, 1, 0),  # FFN Dff -> D
    }
    for i in range(1, num_norms + 1):
        parts[f"gain{i}"] = (0, 0, 1, 0)  # LayerNorm γ
        parts[f"beta{i}"] = (0, 0, 1, 0)  # LayerNorm β
    if cross:  # the cross-attention's W_q and W_o, W_k and W_v, and their biases
        parts.update(cross_qo=(2, 0, 0, 0), cross_qo_bias=(0, 0, 2, 0))
        parts.update(cross_kv=(2, 0, 0, 0), cross_kv_bias=(0, 0, 2, 0))
    return parts


def _block_groups(num_norms: int, cross: bool) -> list[_Group]:
    number = {2: "two", 3: "three"}[num_norms]
    norms = [f"gain{i} beta{i}" for i in range(1, num_norms + 1)]
    groups = [
        _group("qkv_bias out_bias",
               "the attention's four biases (b_q, b_k, b_v and W_o's, D each)"),
        _group("b1 b2", "the feed-forward network's biases (b_1: Dff, b_2: D)"),
        _group("out out_bias", "the output projection W_o (D × D, and its bias D)"),
        _group(" ".join(norms),
               f"the {number} LayerNorms (each a gain γ and a bias β of D numbers)"),
        _group(" ".join(f"beta{i}" for i in range(1, num_norms + 1)),
               "the LayerNorms' biases β (D each)"),
        _group(norms[-1],
               f"one of the {number} LayerNorms (a gain and a bias, D each)"),
    ] + [
        _group(layer, "one of the feed-forward network's two layers (you counted the"
               " FFN once: D → Dff and Dff → D, each with a bias)")
        for layer in ("w2 b2", "w1 b1")
    ]
    if cross:
        groups += [
            _group("cross_qo cross_qo_bias cross_kv cross_kv_bias",
                   "the second attention, the cross-attention to the encoder's outputs"
                   " (another 4D² + 4D)"),
            _group("cross_kv cross_kv_bias",
                   "the cross-attention's W_k and W_v (2D² + 2D): the keys and values"
                   " come from the encoder's outputs, but the decoder's layer projects"
                   " them with its own weights"),
            _group("qkv_bias out_bias cross_qo_bias cross_kv_bias",
                   "the two attentions' biases (four of D numbers each)"),
        ]
    return groups


def _encoder_count(d: int, h: int, f: int) -> int:
    return 4 * d * d + 2 * d * f + 9 * d + f


def _decoder_count(d: int, h: int, f: int) -> int:
    return 8 * d * d + 2 * d * f + 15 * d + f


def _check_block_parameters(fn, decoder: bool) -> Feedback:
    block = TransformerDecoderBlock if decoder else TransformerEncoderBlock
    name = "decoder" if decoder else "encoder"
    other = _encoder_count if decoder else _decoder_count
    own = _decoder_count if decoder else _encoder_count
    specific: list[tuple[Callable[[int, int, int], float], str]] = [
        (lambda d, h, f: other(d, h, f),
         "that is the encoder block's count. The decoder block adds a second"
         " attention, the cross-attention (4D² + 4D), and a third LayerNorm (2D)."
         if decoder else
         "that is a decoder block's count: the encoder block has one attention"
         " (self-attention) and two LayerNorms, no cross-attention."),
        (lambda d, h, f: (
             own(d, h, f) + (h - 1) * (4 * d * d + 4 * d) * (1 + decoder)
         ),
         "your count depends on H: you multiplied the attention's parameters by H."
         " Splitting D into H heads of D/H features only regroups the"
         " projections' outputs: W_q, W_k, W_v and W_o are D × D whatever H is."),
        (lambda d, h, f: own(d, h, 4 * d),
         "you assumed Dff = 4D (the paper's 2048 = 4 × 512). Use the ffn_hidden"
         " argument: the FFN has D·Dff + Dff + Dff·D + D parameters."),
    ]

    def explain(answers, expected):
        values = [_param_values(d, f) for d, _, f in _BLOCK_CASES]
        num_norms = 3 if decoder else 2
        named = _name_omission(
            answers, expected, values, _block_parts(num_norms, decoder),
            _block_groups(num_norms, decoder), _PARAM_BASIS,
        )
        if named is not None:
            return named
        one_head, many_heads = 3, 4  # (64, 1, 100) and (64, 16, 100)
        if answers[one_head] != answers[many_heads]:
            return (
                f"Your count depends on H (D = 64, Dff = 100: {answers[one_head]:,.0f}"
                f" with H = 1, {answers[many_heads]:,.0f} with H = 16). The number of"
                " heads only decides how the D projected features are grouped; it adds"
                " no parameters."
            )
        return None

    def explain_case(answer, expected, d, h, f):
        parts = ("self-attention, cross-attention, FFN and three LayerNorms"
                 if decoder else "self-attention, FFN and two LayerNorms")
        return (f"For {sizes(' = ', D=d, H=h, Dff=f)} you count {answer:,.0f}; the"
                f" {name} block has {expected:,.0f}, {_difference(answer, expected)}."
                f" Count the {parts}, every weight and every bias.")

    formula = "8D² + 2D·Dff + 15D + Dff" if decoder else "4D² + 2D·Dff + 9D + Dff"
    return diagnose_numbers(
        fn, _BLOCK_CASES, lambda d, h, f: _meta_parameters(block, d, h, f), specific,
        what="number of parameters", explain=explain, explain_case=explain_case,
        correct=lambda expected: f"Correct: {formula}, {expected[2]:,.0f} for D = 512,"
        " Dff = 2048, with one head or eight.",
    )


@checker
def check_encoder_block_parameters(fn) -> Feedback:
    """Check ``fn(embed_dim, num_heads, ffn_hidden) -> int``: the parameters of one
    :class:`~attention_lib.TransformerEncoderBlock`, 4D² + 2D·Dff + 9D + Dff whatever
    H is. Names missing biases, LayerNorms, W_o or an FFN layer, Dff = 4D assumed and
    a count that depends on H.

    Shapes:
        fn: (int D, int H, int Dff) -> one number

    Taught in ``chapters/05_transformer/05_exercises.ipynb``.
    """
    return _check_block_parameters(fn, decoder=False)


@checker
def check_decoder_block_parameters(fn) -> Feedback:
    """Check ``fn(embed_dim, num_heads, ffn_hidden) -> int``: the parameters of one
    :class:`~attention_lib.TransformerDecoderBlock`, 8D² + 2D·Dff + 15D + Dff. Names
    the encoder's count, a missing cross-attention (or its W_k and W_v), LayerNorm or
    biases, and a count that depends on H.

    Shapes:
        fn: (int D, int H, int Dff) -> one number

    Taught in ``chapters/05_transformer/05_exercises.ipynb``.
    """
    return _check_block_parameters(fn, decoder=True)


# --- 2. the work per token ------------------------------------------------------------

# (L, D, H, Dff): the reader's formula takes (L, D, Dff); H only builds the library's
# block.
_MAC_CASES = ((5, 12, 3, 20), (7, 8, 2, 32), (100, 512, 8, 2048), (30, 64, 4, 100),
              (9, 64, 16, 256))
_MAC_BASIS = ("D²", "LD", "D·Dff")
_MAC_PARTS = {
    "qkv": (3, 0, 0), "out": (1, 0, 0), "scores": (0, 1, 0), "mix": (0, 1, 0),
    "w1": (0, 0, 1), "w2": (0, 0, 1),
}
_SCORES = ("a token's scores q·kᵀ (L keys × D features, summed over the heads) and its"
           " weighted sum of the values (L × D again)")
_MAC_GROUPS = [
    _group(
        "scores mix",
        f"the attention's own work, {_SCORES}; you counted the weight matrices only",
    ),
    _group("scores", f"one of the attention's two L·D terms: {_SCORES}"),
    _group("w2", "one of the FFN's two layers (D × Dff, then Dff × D)"),
    _group("out", "the output projection W_o (D × D)"),
    _group("qkv", "the projections W_q, W_k, W_v (D × D each)"),
]


def _block_macs_per_token(length: int, width: int, num_heads: int, ffn: int) -> float:
    """Multiply-adds per token of the library's encoder block, counted by PyTorch's
    FlopCounterMode (2 FLOPs per multiply-add); the global random state is left
    alone."""
    with torch.random.fork_rng(devices=[]):
        block = TransformerEncoderBlock(width, num_heads, ffn)
    x = torch.zeros(1, length, width)  # (B, L, D)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        block(x, need_weights=True)  # the explicit path: every product a matmul
    return counter.get_total_flops() / 2 / length


@checker
def check_encoder_block_macs(fn) -> Feedback:
    """Check ``fn(length, embed_dim, ffn_hidden) -> number``: the multiply-adds per
    token of one encoder block, 4D² + 2LD + 2D·Dff, against PyTorch's
    ``FlopCounterMode`` on the library's block (halved). Names the attention's L·D
    terms left out, the FFN counted once, a missing W_o, FLOPs, the whole sequence,
    L²·D per token and Dff = 4D.

    Shapes:
        fn: (int L, int D, int Dff) -> one number

    Taught in ``chapters/05_transformer/05_exercises.ipynb``.
    """
    cases = [(length, width, ffn) for length, width, _, ffn in _MAC_CASES]
    macs = {case: _block_macs_per_token(*full) for case, full in zip(cases, _MAC_CASES)}

    def right(length, width, ffn):
        return 4 * width**2 + 2 * length * width + 2 * width * ffn

    specific = [
        (lambda l, d, f: 2 * right(l, d, f),
         "that is twice the answer: FLOPs (a multiply and an add) rather than"
         " multiply-adds. Count each multiply-add once."),
        (lambda l, d, f: l * right(l, d, f),
         "that is the count for all L tokens of the sequence: divide by L for one"
         " token."),
        (lambda l, d, f: 4 * d * d + 2 * l * l * d + 2 * d * f,
         "the attention terms are L²·D: that is the whole sequence's attention"
         " (L queries × L keys × D). One token's query meets L keys: L·D for the"
         " scores and L·D for the weighted sum of the values."),
        (lambda l, d, f: right(l, d, 4 * d),
         "you assumed Dff = 4D: use the ffn_hidden argument, the FFN costs 2D·Dff."),
    ]

    def explain(answers, expected):
        values = [(d * d, l * d, d * f) for l, d, f in cases]
        named = _name_omission(
            answers, expected, values, _MAC_PARTS, _MAC_GROUPS, _MAC_BASIS
        )
        if named is not None:
            return named
        return None

    def explain_case(answer, expected, length, width, ffn):
        return (f"For {sizes(' = ', L=length, D=width, Dff=ffn)} you count"
                f" {answer:,.0f} multiply-adds per token; the block does"
                f" {expected:,.0f}. Count every"
                " matrix product one token takes part in: four projections, its scores"
                " and its weighted sum of the values, the FFN's two layers.")

    return diagnose_numbers(
        fn, cases, lambda *case: macs[case], specific, what="number of multiply-adds",
        explain=explain, explain_case=explain_case,
        correct=lambda expected: f"Correct: 4D² + 2LD + 2D·Dff, {expected[2]:,.0f}"
        " multiply-adds per token for L = 100, D = 512, Dff = 2048. The attention's"
        " share grows with L.",
    )


# --- 3. the warm-up schedule ----------------------------------------------------------

# (D, warmup, steps): steps on both sides of the peak, the peak itself, far in the
# decay; the second case changes D and warmup, so that constants fixed at 512 and 4000
# are caught.
_WARMUP_CASES = ((512, 4000, (1, 2, 100, 3999, 4000, 4001, 10000, 100000)),
                 (64, 100, (1, 50, 99, 100, 101, 1000)))


def _rate_variants() -> list[tuple[Callable[[int, int, int], float], str]]:
    def paper(s, d, w):
        return d**-0.5 * min(s**-0.5, s * w**-1.5)

    return [
        (lambda s, d, w: d**-0.5 * s**-0.5,
         "no warm-up: your rate decays from step 1, where it is largest. The"
         " paper's rate grows linearly, step · warmup^-1.5, for the first warmup"
         " steps: lr = D^-0.5 · min(step^-0.5, step · warmup^-1.5)."),
        (lambda s, d, w: d**-0.5 * s * w**-1.5,
         "no decay: your rate grows linearly forever. After warmup steps it must"
         " fall as 1/√step: take the min of step^-0.5 and step · warmup^-1.5."),
        (lambda s, d, w: d**-0.5 * min(s * w**-1.5, w**-0.5),
         "no decay: your rate stays at its peak after the warm-up. It must fall as"
         " 1/√step: min(step^-0.5, step · warmup^-1.5)."),
        (lambda s, d, w: d**-0.5 * max(s**-0.5, s * w**-1.5),
         "max instead of min: your rate falls, then grows without bound. The"
         " smaller of the two terms is the rate."),
        (lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-0.5),
         "wrong exponent: the warm-up term is step · warmup^-1.5, not warmup^-0.5;"
         " with -0.5 the two terms meet at step warmup^(1/3), so the peak comes far"
         " too early."),
        (lambda s, d, w: d**-0.5 * min(w**0.5 / s, s * w**-1.5),
         "wrong exponent: your rate decays as 1/step; the paper's decays as"
         " 1/√step, step^-0.5."),
        (lambda s, d, w: d**-0.5 * min(1 / s, s * w**-1.5),
         "wrong exponent: your rate decays as 1/step (and so peaks at warmup^0.75);"
         " the paper's decays as step^-0.5."),
        (lambda s, d, w: min(s**-0.5, s * w**-1.5),
         "the factor D^-0.5 is missing: wider models train with smaller steps."),
        (lambda s, d, w: d**-1 * min(s**-0.5, s * w**-1.5),
         "wrong exponent: the factor is D^-0.5 = 1/√D, not 1/D."),
        (lambda s, d, w: d**0.5 * min(s**-0.5, s * w**-1.5),
         "wrong exponent: the factor is D^-0.5 = 1/√D, not √D."),
        (lambda s, d, w: paper(s + 1, d, w),
         "off by one: your rate at step n is the paper's at step n + 1, so it peaks"
         " at step warmup − 1. Steps count updates from 1."),
    ]


def _peak_step(fn, width: int, warmup: int, last: int) -> int | None:
    """The step in 1..last where the reader's rate is largest, or None if it fails."""
    best_step, best_rate = None, -math.inf
    for step in range(1, last + 1):
        got, error = run_safely(fn, step, width, warmup)
        if error is None:
            got, error = read_number(got, "learning rate")
        if error is not None or not math.isfinite(float(got)):
            return None
        if float(got) > best_rate:
            best_step, best_rate = step, float(got)
    return best_step


@checker
def check_warmup_rate(fn) -> Feedback:
    """Check ``fn(step, embed_dim, warmup_steps) -> float``: the learning rate of
    Vaswani et al. (2017), D^-0.5 · min(step^-0.5, step · warmup^-1.5), against
    :func:`~attention_lib.warmup_rate`, on both sides of the peak for two (D, warmup).
    Names no warm-up, no decay, max for min, a wrong exponent, a missing D^-0.5 and a
    shift by one step; otherwise the step where the reader's rate peaks.

    Shapes:
        fn: (int step >= 1, int D, int warmup) -> one number

    Taught in ``chapters/05_transformer/05_exercises.ipynb``.
    """
    cases = [(s, d, w) for d, w, steps in _WARMUP_CASES for s in steps]

    def hint(error, step, width, warmup):
        if step == 1 and error.message.startswith("Your function raised"):
            return Feedback.wrong(
                f"At step 1: {error.message.rstrip('.')}. The first update is step"
                " 1 (a rate with step^-0.5 cannot start at step 0)."
            )
        return error

    def explain(answers, expected):
        width, warmup, _ = _WARMUP_CASES[1]
        peak = _peak_step(fn, width, warmup, 3 * warmup)
        if peak is not None and peak != warmup:
            return (
                f"For D = {width}, warmup = {warmup} your rate peaks at step {peak};"
                f" the paper's peaks at step warmup = {warmup}, where its two terms"
                " meet: step^-0.5 = step · warmup^-1.5."
            )
        return None

    def explain_case(answer, expected, step, width, warmup):
        return (f"At step {step} (D = {width}, warmup = {warmup}) your rate is"
                f" {answer:.6g}; expected {expected:.6g}. The rate is"
                " D^-0.5 · min(step^-0.5, step · warmup^-1.5).")

    return diagnose_numbers(
        fn, cases, warmup_rate, _rate_variants(), what="learning rate",
        equal=lambda a, b: math.isclose(a, b, rel_tol=1e-6), hint=hint, explain=explain,
        explain_case=explain_case,
        correct="Correct: D^-0.5 · min(step^-0.5, step · warmup^-1.5) grows linearly"
        " for warmup steps, peaks at step = warmup, then decays as 1/√step.",
    )


_PEAK_CASES = ((512, 4000), (64, 100), (1024, 8000))  # (D, warmup)


@checker
def check_warmup_peak(fn) -> Feedback:
    """Check ``fn(embed_dim, warmup_steps) -> (step, rate)``: the step at which
    :func:`~attention_lib.warmup_rate` is largest and its value there, warmup and
    (D · warmup)^-0.5. Names a peak one step late (or early), a peak without the
    D^-0.5, and D^-0.5 alone (step 1 without warm-up).

    Shapes:
        fn: (int D, int warmup) -> a pair of numbers (step, rate)

    Taught in ``chapters/05_transformer/05_exercises.ipynb``.
    """
    def read(got, width, warmup):
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            return None, Feedback.wrong(
                f"Return a pair (step, rate), e.g. (4000, 0.0007); got {describe(got)}."
            )
        step, error = read_number(got[0], "step of the peak")
        if error is None:
            rate, error = read_number(got[1], "peak learning rate")
        if error is not None:
            return None, Feedback.wrong(f"{where(width, warmup)}: {error.message}")
        return (float(step), float(rate)), None

    def where(width, warmup):
        return f"For D = {width}, warmup = {warmup}"

    def compare(got, expected):  # None: any value
        return got[0] == expected[0] and (
            expected[1] is None or math.isclose(got[1], expected[1], rel_tol=1e-4)
        )

    def off_by_one(shift):
        return (lambda d, w: (w + shift, None), lambda d, w: (
            f"the peak is at step {w}, not {w + shift}. At step = warmup the two terms"
            " are equal, step^-0.5 = step · warmup^-1.5 = warmup^-0.5; before it the"
            " linear term is smaller, after it the decay."
        ))

    def rate(value, text):
        return (lambda d, w: (w, value(d, w)), lambda d, w: _peak_rate(d, w) + text)

    def explain(got, expected, width, warmup):
        if got[0] != warmup:
            return (f"your peak step is {got[0]:g}; the rate peaks where its two terms"
                    " meet, step^-0.5 = step · warmup^-1.5.")
        return _peak_rate(width, warmup) + f"your rate is {got[1]:.6g}."

    return diagnose(
        fn, _PEAK_CASES, lambda d, w: (w, (d * w) ** -0.5), [
            off_by_one(-1), off_by_one(1),
            rate(lambda d, w: w**-0.5, "the factor D^-0.5 is missing."),
            rate(lambda d, w: d**-0.5, "D^-0.5 is the rate at step 1 without warm-up;"
                 " at the peak step^-0.5 = warmup^-0.5 joins it."),
            rate(lambda d, w: warmup_rate(w + 1, d, w),
                 "that is the rate one step after the peak."),
        ], what="peak", where=where, read=read, compare=compare, explain=explain,
        correct=f"Correct: the rate peaks at step = warmup at (D · warmup)^-0.5,"
        f" {(512 * 4000) ** -0.5:.3g} for D = 512, warmup = 4000.",
    )


def _peak_rate(width: int, warmup: int) -> str:
    return ("the peak rate is D^-0.5 · warmup^-0.5 = (D · warmup)^-0.5 ="
            f" {(width * warmup) ** -0.5:.6g}; ")


# --- 4. label smoothing ---------------------------------------------------------------

# (V, target, ε): the right class in the middle, first and last; ε = 0 last (plain
# cross-entropy), so that the mistakes are told apart on the smoothed cases first.
_SMOOTH_CASES = ((5, 2, 0.1), (7, 0, 0.3), (4, 3, 0.0))


def _smoothed_variants(logits: Tensor, target: int, eps: float) -> list:
    """(wrong loss, message) for the typical mistakes, in float64."""
    vocab = logits.shape[0]
    log_probs = torch.log_softmax(logits, dim=-1)  # (V,)
    probs = log_probs.exp()
    one_hot = F.one_hot(torch.tensor(target), vocab).double()  # (V,)
    q = (1 - eps) * one_hot + eps / vocab  # the right smoothed target
    q_other = (1 - eps) * one_hot + eps / (vocab - 1) * (1 - one_hot)
    right = -(q * log_probs).sum()
    entropy = -(q * q.log()).sum()
    return [
        (-(q_other * log_probs).sum(),
         "ε spread over the V − 1 wrong classes (1 − ε on the right one, ε/(V − 1)"
         " on each other): that is the other convention (current fairseq's). PyTorch's"
         " label_smoothing, the library and Szegedy et al. mix the one-hot target"
         " with the uniform distribution over all V classes: 1 − ε + ε/V on the"
         " right class, ε/V on every other."),
        (-((one_hot + eps / vocab) * log_probs).sum(),
         "ε is not subtracted from the right class: your target puts 1 + ε/V on it"
         " and sums to 1 + ε. The smoothed target is (1 − ε)·one-hot + ε/V."),
        (-(q * probs).sum(),
         "the log of the probabilities is missing: the cross-entropy is"
         " −Σ q_v log p_v, with log p = log_softmax(logits)."),
        (-(q * logits).sum(),
         "you used the raw logits as log-probabilities: take"
         " log_softmax(logits) first."),
        (-log_probs[target],
         "no smoothing: that is the plain cross-entropy, −log p_target; ε changes"
         " nothing in your loss."),
        (-(1 - eps) * log_probs[target],
         "the uniform part is missing: besides (1 − ε)·(−log p_target), the target"
         " puts ε/V on every class: + (ε/V)·Σ_v (−log p_v)."),
        (right - entropy,
         "that is the KL divergence KL(q ‖ p), the cross-entropy minus the entropy"
         " of the smoothed target q. Its gradient is the same, but its value is not"
         " the loss F.cross_entropy reports: return −Σ q_v log p_v."),
        (right / vocab,
         "you averaged over the V classes instead of summing: −Σ_v q_v log p_v."),
        (-torch.log((1 - eps) * probs[target] + eps / vocab),
         "you smoothed the prediction, not the target: the loss is −Σ q_v log p_v"
         " with the smoothed target q, not −log of a smoothed probability."),
        (-right,
         "the sign is wrong: a cross-entropy is ≥ 0, −Σ q_v log p_v."),
    ]


@checker
def check_smoothed_loss(fn) -> Feedback:
    """Check ``fn(logits, target, epsilon) -> number``: the label-smoothed
    cross-entropy of one position, against ``F.cross_entropy(...,
    label_smoothing=ε)``: the target puts 1 − ε on the right class and ε/V on every
    class. Names ε over V − 1 classes, ε not subtracted, a missing log, logits for
    log-probabilities, no smoothing, no uniform part, the KL divergence, a mean, a
    smoothed prediction and a sign error.

    Shapes:
        fn: (logits (V,) float, int target, float ε) -> one number

    Taught in ``chapters/05_transformer/05_exercises.ipynb``.
    """
    gen = torch.Generator().manual_seed(0)
    cases = [(2 * torch.randn(vocab, generator=gen), target, eps)  # logits (V,)
             for vocab, target, eps in _SMOOTH_CASES]

    def explain(got, expected, logits, target, eps):
        if torch.isnan(got):
            return ("your loss is NaN: the log of a negative number? Take"
                    " log_softmax(logits), not log(logits).")
        return (
            f"your loss is {got.item():.6g}, expected {expected.item():.6g}: −Σ_v q_v"
            " log p_v with q = (1 − ε)·one-hot + ε/V and log p = log_softmax(logits)."
        )

    return diagnose(
        fn, cases, lambda logits, target, eps: F.cross_entropy(
            logits.double()[None], torch.tensor([target]), label_smoothing=eps),
        lambda logits, target, eps: _smoothed_variants(logits.double(), target, eps),
        what="loss", read=lambda got, *case: read_number(got, "loss"), explain=explain,
        where=lambda logits, target, eps: f"For V = {len(logits)}, target = {target},"
        f" ε = {eps}",
        correct="Correct: −Σ_v q_v log p_v with q = (1 − ε)·one-hot + ε/V, the same as"
        " F.cross_entropy(..., label_smoothing=ε).",
    )


# --- 5. one residual sublayer ---------------------------------------------------------

_SUBLAYER_SIZES = (2, 3, 6, 10)  # (B, L, D, Dff): every size differs


def _sublayer_setup() -> tuple[Tensor, nn.Module, nn.LayerNorm]:
    """x (B, L, D), an FFN and a LayerNorm with gains and biases far from 1 and 0, so
    that every placement of the norm gives different numbers; the global random state
    is left alone."""
    batch_size, length, width, ffn = _SUBLAYER_SIZES
    gen = torch.Generator().manual_seed(0)
    with torch.device("meta"):
        sublayer = PositionWiseFFN(width, ffn)
        norm = nn.LayerNorm(width)
    sublayer.to_empty(device="cpu")
    norm.to_empty(device="cpu")
    with torch.no_grad():
        for p in [*sublayer.parameters(), *norm.parameters()]:
            p.copy_(torch.randn(p.shape, generator=gen))
    x = 3 * torch.randn(batch_size, length, width, generator=gen) + 1  # (B, L, D)
    return x, sublayer.eval(), norm.eval()


@checker
def check_sublayer(fn) -> Feedback:
    """Check ``fn(x, sublayer, norm, norm_first) -> y``: one residual sublayer,
    post-norm ``norm(x + sublayer(x))`` for ``norm_first=False`` and pre-norm
    ``x + sublayer(norm(x))`` for ``norm_first=True``, against the library's
    :class:`~attention_lib.AddNorm` with the same norm. Names the orders swapped,
    ``norm_first`` ignored, no residual, the norm twice or on the output only, a
    normalised residual and no norm.

    Shapes:
        fn: (x (B, L, D), a module (B, L, D) -> (B, L, D), nn.LayerNorm(D), bool)
            -> (B, L, D)

    Taught in ``chapters/05_transformer/05_exercises.ipynb``.
    """
    x, sub, norm = _sublayer_setup()
    if not callable(fn):
        return run_safely(fn)[1]
    with torch.no_grad():
        post, pre = (_add_norm(x, sub, norm, flag) for flag in (False, True))
        anything = torch.full_like(x, math.nan)  # matches every answer
        both = norm(x + sub(norm(x)))
        own = {False: [(norm(sub(x)), _NO_RESIDUAL[False]), (both, _BOTH)], True: [
            (sub(norm(x)), _NO_RESIDUAL[True]), (both, _BOTH),
            (x + norm(sub(norm(x))), _BOTH), (norm(x) + sub(norm(x)), _NORMED_RESIDUAL),
        ]}
        variants = [((pre, post), _SWAPPED), ((anything, post), _IGNORED[True]),
                    ((pre, anything), _IGNORED[False])] + [
            ((anything, v) if flag else (v, anything), f"With norm_first={flag}: {m}")
            for flag in (False, True)
            for v, m in own[flag] + [(x + norm(sub(x)), _OUTPUT_ONLY),
                                     (x + sub(x), _NO_NORM)]
        ]
    variants = [(torch.stack(pair), message) for pair, message in variants]

    def answer(x, sub, norm):
        with torch.no_grad():
            return [fn(x.clone(), sub, norm, flag) for flag in (False, True)]

    def read(got, *case):
        tensors = []
        for flag, value in zip((False, True), got):
            tensor, error = read_tensor(value, "output (B, L, D)", x.shape)
            if error is not None:
                return None, Feedback.wrong(f"With norm_first={flag}: {error.message}")
            tensors.append(tensor)
        return torch.stack(tensors), None

    def explain(got, expected, *case):
        flag = close(got[0], expected[0])  # the first order that is wrong
        formula = "x + sublayer(norm(x))" if flag else "norm(x + sublayer(x))"
        got, expected = ([round(v, 4) for v in t[int(flag), 0, 0].tolist()]
                         for t in (got, expected))
        return (f"With norm_first={flag}: your output differs from {formula}: e.g. the"
                f" first position is {got}, expected {expected}.")

    return diagnose(
        answer, [(x, sub, norm)], lambda *case: torch.stack([post, pre]),
        lambda *case: variants, what="output", read=read,
        compare=close_where_defined, explain=explain,
        correct="Correct: post-norm normalises the sum, norm(x + sublayer(x)); pre-norm"
        " normalises only the sublayer's input, x + sublayer(norm(x)), and leaves the"
        " residual path untouched.",
    )


def _add_norm(x, sub, norm, norm_first: bool) -> Tensor:
    """The library's AddNorm around ``sub``, with the reader's LayerNorm."""
    add_norm = AddNorm(x.shape[-1], norm_first=norm_first)
    add_norm.norm = norm
    return add_norm(x, sub(add_norm.sublayer_input(x)))


_SWAPPED = (
    "Not yet: post-norm and pre-norm are swapped. norm_first=True (pre-norm) is x +"
    " sublayer(norm(x)); norm_first=False (post-norm, the paper's) is norm(x +"
    " sublayer(x))."
)
_IGNORED = {
    True: "Not yet: with norm_first=True you return post-norm, norm(x + sublayer(x)):"
    " norm_first is ignored. Pre-norm is x + sublayer(norm(x)).",
    False: "Not yet: with norm_first=False you return pre-norm, x + sublayer(norm(x)):"
    " norm_first is ignored. Post-norm, the paper's, is norm(x + sublayer(x)).",
}
_NO_RESIDUAL = {
    False: "no residual: norm(sublayer(x)) loses x. Post-norm adds x back before the"
    " norm: norm(x + sublayer(x)).",
    True: "no residual: sublayer(norm(x)) loses x. Pre-norm adds x back after the"
    " sublayer: x + sublayer(norm(x)).",
}
_BOTH = (
    "the norm is applied to the sublayer's input and to its output (or the sum). Use"
    " it once: post-norm normalises the sum, norm(x + sublayer(x)); pre-norm"
    " normalises the sublayer's input, x + sublayer(norm(x))."
)
_OUTPUT_ONLY = (
    "you normalised the sublayer's output and then added x: x + norm(sublayer(x)) is"
    " neither order. Post-norm normalises the sum, norm(x + sublayer(x)); pre-norm the"
    " sublayer's input."
)
_NORMED_RESIDUAL = (
    "the residual is taken from the normalised input, norm(x) + sublayer(norm(x)). In"
    " pre-norm the residual path carries x itself, untouched: x + sublayer(norm(x))."
)
_NO_NORM = "no norm: x + sublayer(x) leaves out the LayerNorm."


# --- 6. the decoder's cache -----------------------------------------------------------

# (T steps, N layers, D, B): every size differs, so that each factor is told apart
_CACHE_CASES = ((5, 3, 8, 2), (4, 2, 12, 3), (7, 6, 16, 1), (3, 1, 6, 4))


def _cache_numbers(steps: int, num_layers: int, width: int, batch_size: int) -> float:
    """The numbers in the library decoder's cache after ``steps`` one-token steps,
    counted by running it; the global random state is left alone."""
    with torch.random.fork_rng(devices=[]):
        decoder = TransformerDecoder(11, width, 2, 2 * width, num_layers).eval()
    enc_outputs = torch.zeros(batch_size, 4, width)  # (B, Lk, D)
    token = torch.zeros(batch_size, 1, dtype=torch.long)  # (B, 1)
    state = decoder.init_state(enc_outputs)
    with torch.no_grad():
        for _ in range(steps):
            _, state = decoder(token, state)
    # each layer's KVCache: projected keys and values, (B, H, T, Dh) each
    return float(sum(t.numel() for layer_cache in state.cache for t in layer_cache))


@checker
def check_cache_size(fn) -> Feedback:
    """Check ``fn(num_steps, num_layers, embed_dim, batch_size) -> int``: the numbers in
    :class:`~attention_lib.TransformerDecoder`'s cache after T steps, 2·N·B·T·D, counted
    by running it. Names the values (or keys), layers, batch or width forgotten, an
    off-by-one and the sum over all steps.

    Shapes:
        fn: (int T, int N, int D, int B) -> one number

    Taught in ``chapters/05_transformer/05_exercises.ipynb``.
    """
    variants = [
        (lambda t, n, d, b: n * b * t * d,
         "you counted one tensor per layer. The cache keeps the keys *and* the"
         " values, each projected once at its own step: two (B, H, T, Dh) tensors"
         " per layer (a cache of the layer's inputs would be one tensor, and would"
         " be projected again at every step)."),
        (lambda t, n, d, b: 2 * b * t * d, "every layer keeps its own cache: × N."),
        (lambda t, n, d, b: 2 * n * t * d,
         "each sentence of the batch has a cache: × B."),
        (lambda t, n, d, b: 2 * n * b * t,
         "each cached position is D numbers (H heads of Dh), for keys and for"
         " values: × D."),
        (lambda t, n, d, b: 2 * n * b * (t + 1) * d,
         "one position too many: after T steps the cache holds T positions, the"
         " tokens fed so far (<bos> and the T − 1 tokens after it)."),
        (lambda t, n, d, b: 2 * n * b * (t - 1) * d,
         "one position too few: the token fed at step T is cached too, T positions"
         " in all."),
        (lambda t, n, d, b: 8 * n * b * t * d,
         "that is the cache's size in bytes in float32 (4 bytes a number); count"
         " numbers: 2·N·B·T·D."),
        (lambda t, n, d, b: 4 * n * b * t * d,
         "twice the answer. If you counted the cross-attention's keys and values"
         " as well: they are the source's Lk positions, projected once into"
         " state.memory, and do not grow with T. If you counted bytes in float16"
         " (2 a number): count numbers."),
        (lambda t, n, d, b: n * b * d * t * (t + 1),
         "you summed the cache's size over all steps, 1 + 2 + ... + T. The cache"
         " grows by one position a step; after T steps it holds T."),
    ]

    def explain_case(answer, expected, steps, num_layers, width, batch_size):
        return (
            f"For {sizes(' = ', T=steps, N=num_layers, D=width, B=batch_size)} you"
            f" count {answer:,.0f}; the cache holds {expected:,.0f}: keys and values,"
            " two (B, H, T, Dh) tensors per layer."
        )

    return diagnose_numbers(
        fn, _CACHE_CASES, _cache_numbers, variants, what="number of cached numbers",
        explain_case=explain_case,
        correct=f"Correct: 2·N·B·T·D, keys and values per layer: {2 * 6 * 100 * 512:,}"
        " numbers for T = 100, N = 6, D = 512, B = 1.",
    )

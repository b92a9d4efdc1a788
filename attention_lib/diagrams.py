"""Schematic diagrams of the book's mechanisms, drawn by code so they are reproducible.

Each function returns a :class:`matplotlib.figure.Figure` of a fixed size, with few
words, large fonts and the book's symbols, readable when scaled to 400 pixels wide. The
colours are the Okabe–Ito palette, which stays distinguishable under the common
colour-vision deficiencies, and every box also carries its symbol, so a grey-scale print
still reads. One role, one colour in every diagram: queries and decoder states orange,
keys and encoder states blue, values green, contexts and outputs purple, words sky blue.

:func:`draw_mask_grid` draws the mask that
:func:`~attention_lib.masking.valid_lens_to_mask` computes, so the picture cannot drift
from the code.

Taught in ``chapters/02_attention/01_queries_keys_values.ipynb`` (attention pooling);
each function's docstring names the page that shows its diagram.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from matplotlib import colors
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch, Patch, Rectangle
from torch import Tensor

from ._checks import check_int, describe
from .masking import valid_lens_to_mask

__all__ = ["draw_attention_pooling", "draw_seq2seq_contexts", "draw_decoder_step",
           "draw_dependency_chain", "draw_mask_grid"]

# Okabe & Ito's colour-blind-safe palette, one colour per role.
QUERY = "#E69F00"  # orange: queries, decoder states s
KEY = "#0072B2"  # blue: keys, encoder states h
VALUE = "#009E73"  # bluish green: values
CONTEXT = "#CC79A7"  # reddish purple: contexts c, outputs
WORD = "#56B4E9"  # sky blue: words y
CHAIN = "#D55E00"  # vermillion: the sequential chain
GREY = "#555555"
MASKED = "#E6E6E6"  # light grey: masked cells

FONT = 18  # symbols in boxes
SMALL = 16  # the few words around them
# 8 inches at 80 dpi is 640 px: the website shows a diagram at its own size in the text
# column (about 672 px), so its text keeps its size.
DPI = 80


def _tint(colour: str, amount: float = 0.28) -> tuple[float, float, float]:
    """A light version of ``colour`` for a box's face (black text stays readable)."""
    return tuple(1 - amount + amount * channel for channel in colors.to_rgb(colour))


def _canvas(width: float, height: float, units_per_inch: float = 1.5):
    """A figure with one axis-free axes, ``units_per_inch`` data units to the inch."""
    fig = plt.figure(figsize=(width, height), dpi=DPI)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width * units_per_inch)
    ax.set_ylim(0, height * units_per_inch)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def _box(ax, x: float, y: float, text: str, colour: str, width: float = 1.0,
         height: float = 0.7, fontsize: float = FONT, rotation: float = 0):
    """A rounded box centred on (x, y) with ``text`` in it; returns the patch."""
    patch = FancyBboxPatch((x - width / 2, y - height / 2), width, height,
                           boxstyle="round,pad=0,rounding_size=0.15",
                           facecolor=_tint(colour), edgecolor=colour, linewidth=2.2)
    ax.add_patch(patch)
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, rotation=rotation)
    return patch


def _arrow(ax, start, end, colour: str = GREY, linewidth: float = 1.8, source=None,
           target=None, bend: float = 0.0):
    """An arrow from ``start`` to ``end``, clipped at the two boxes it joins."""
    ax.annotate("", xy=end, xytext=start, arrowprops=dict(
        arrowstyle="-|>", color=colour, linewidth=linewidth, mutation_scale=16,
        shrinkA=2, shrinkB=2, patchA=source, patchB=target,
        connectionstyle=f"arc3,rad={bend}"))


def _label(ax, x: float, y: float, text: str, colour: str = GREY, **kwargs):
    kwargs.setdefault("ha", "center")
    kwargs.setdefault("va", "center")
    kwargs.setdefault("fontsize", SMALL)
    ax.text(x, y, text, color=colour, **kwargs)


def draw_attention_pooling(attn_scores: Tensor | None = None) -> Figure:
    """Attention pooling for one query: scores, softmax weights, weighted sum of values.

    The query ``q`` is scored against each key ``k_i``; a softmax turns the scores into
    weights ``α_i`` (bars, computed with ``torch.softmax`` from ``attn_scores``); the
    output is the weighted sum of the values ``v_i``, each value's arrow as thick as its
    weight.

    Shapes:
        attn_scores: (Lk,), float, 2 <= Lk <= 5 (default: four fixed scores)
        returns:     a Figure of 8 x 3.4 inches

    Taught in ``chapters/02_attention/01_queries_keys_values.ipynb``.
    """
    if attn_scores is None:
        attn_scores = torch.tensor([1.0, 2.5, 0.0, 1.5])
    if not isinstance(attn_scores, Tensor) or not attn_scores.dtype.is_floating_point:
        raise TypeError("attn_scores must be a float torch.Tensor of shape (Lk,), got "
                        f"{describe(attn_scores)}")
    if attn_scores.dim() != 1 or not 2 <= attn_scores.shape[0] <= 5:
        raise ValueError("attn_scores must have shape (Lk,) with 2 <= Lk <= 5 (more "
                         f"keys do not fit), got {tuple(attn_scores.shape)}")
    attn_scores = attn_scores.detach().float().cpu()
    attn_weights = torch.softmax(attn_scores, dim=-1)  # (Lk,)
    num_kv = attn_weights.shape[0]

    fig, ax = _canvas(8, 3.4)  # 12 x 5.1 units
    rows = [4.0 - i * 3.2 / (num_kv - 1) for i in range(num_kv)]  # one row per key
    middle = sum(rows) / num_kv
    for x, text in [(0.6, "query"), (2.1, "keys"), (3.55, "scores"), (6.0, "weights"),
                    (8.55, "values"), (10.85, "output")]:
        _label(ax, x, 4.75, text)
    query = _box(ax, 0.6, middle, "$q$", QUERY, width=0.8)
    _box(ax, 4.6, middle, "softmax", GREY, width=0.55, height=3.9, fontsize=SMALL,
         rotation=90)
    output = _box(ax, 10.85, middle, r"$\Sigma_i\, \alpha_i v_i$", CONTEXT, width=1.9,
                  height=0.8)
    largest = float(attn_weights.max())
    for i, (y, score, weight) in enumerate(zip(rows, attn_scores.tolist(),
                                               attn_weights.tolist()), start=1):
        key = _box(ax, 2.1, y, f"$k_{i}$", KEY, width=0.8)
        _arrow(ax, (0.6, middle), (2.1, y), source=query, target=key)
        _label(ax, 3.55, y, f"{score:.1f}", colour="black", fontsize=SMALL + 1)
        _arrow(ax, (2.5, y), (3.05, y))
        _arrow(ax, (4.0, y), (4.32, y))
        bar_width = 1.3 * weight / largest
        ax.add_patch(Rectangle((5.05, y - 0.25), bar_width, 0.5, facecolor=KEY))
        _label(ax, 5.15 + bar_width, y, f"{weight:.2f}", colour="black", ha="left")
        _label(ax, 7.75, y, r"$\times$", colour="black", fontsize=SMALL + 2)
        value = _box(ax, 8.55, y, f"$v_{i}$", VALUE, width=0.8)
        _arrow(ax, (8.55, y), (10.85, middle), source=value, target=output,
               colour=CONTEXT, linewidth=0.8 + 7 * weight)
    _label(ax, 6.0, 0.05, r"$\alpha_i$: sum to 1", va="bottom")
    return fig


def _state_row(ax, xs, y, texts, colour):
    """Boxes along a row, each with an arrow to the next (a recurrence)."""
    boxes = [_box(ax, x, y, text, colour, width=0.9) for x, text in zip(xs, texts)]
    for left, right, x_left, x_right in zip(boxes, boxes[1:], xs, xs[1:]):
        _arrow(ax, (x_left, y), (x_right, y), source=left, target=right)
    return boxes


def draw_seq2seq_contexts() -> Figure:
    """Two encoder–decoders: one context ``c`` for all steps, or one ``c_t'`` per step.

    Left, chapter 1's model: the encoder's last state is the context ``c``, copied to
    every decoder step. Right, chapter 3's: each decoder step ``t'`` gets its own
    context ``c_t'``, computed from all the encoder states ``h_1 ... h_Lk``.

    Shapes:
        none (returns a Figure of 8 x 3.4 inches with two panels)

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.4), dpi=DPI)
    fig.subplots_adjust(left=0.01, right=0.99, bottom=0.01, top=0.88, wspace=0.08)
    xs = [1.0, 2.2, 3.4]
    encoder_y, context_y, decoder_y = 0.55, 1.95, 3.35
    titles = ["one context $c$", r"a context $c_{t'}$ per step"]
    for panel, (ax, title) in enumerate(zip(axes, titles)):
        ax.set_xlim(0, 4.2)
        ax.set_ylim(-0.15, 4.0)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(title, fontsize=FONT)
        _label(ax, 0.05, encoder_y - 0.52, "encoder", ha="left", fontsize=SMALL - 1)
        _label(ax, 0.05, decoder_y + 0.52, "decoder", ha="left", fontsize=SMALL - 1)
        encoder = _state_row(ax, xs, encoder_y, ["$h_1$", "$h_2$", "$h_{L_k}$"], KEY)
        decoder = _state_row(ax, xs, decoder_y, ["$s_1$", "$s_2$", "$s_3$"], QUERY)
        if panel == 0:  # the last encoder state, copied to every step
            context = _box(ax, xs[1], context_y, "$c$", CONTEXT, width=0.8)
            _arrow(ax, (xs[-1], encoder_y), (xs[1], context_y), source=encoder[-1],
                   target=context, colour=CONTEXT, linewidth=2.4)
            for x, state in zip(xs, decoder):
                _arrow(ax, (xs[1], context_y), (x, decoder_y), source=context,
                       target=state, colour=CONTEXT, linewidth=2.4)
            continue
        for step, (x, state) in enumerate(zip(xs, decoder), start=1):
            context = _box(ax, x, context_y, f"$c_{step}$", CONTEXT, width=0.8)
            for x_source, source in zip(xs, encoder):  # every h_t feeds every c_t'
                _arrow(ax, (x_source, encoder_y), (x, context_y), source=source,
                       target=context, colour=CONTEXT, linewidth=1.2)
            _arrow(ax, (x, context_y), (x, decoder_y), source=context, target=state,
                   colour=CONTEXT, linewidth=2.4)
    return fig


def draw_decoder_step() -> Figure:
    """One step of Bahdanau's decoder: ``s_t'-1`` queries the ``h_t``, then a GRU step.

    The previous state ``s_t'-1`` is the query, the encoder states ``h_1 ... h_Lk`` are
    the keys and the values; the weights ``α_t'`` give the context ``c_t'``; a GRU reads
    ``c_t'`` and the previous word ``y_t'-1`` and turns ``s_t'-1`` into ``s_t'``, from
    which the output layer predicts the word ``y_t'``. The bars are schematic.

    Shapes:
        none (returns a Figure of 8 x 3.5 inches)

    Taught in ``chapters/03_bahdanau/01_attention_decoder.ipynb``.
    """
    fig, ax = _canvas(8, 3.5)  # 12 x 5.25 units
    upper, middle, lower = 4.4, 2.75, 1.0
    previous = _box(ax, 0.85, upper, "$s_{t'-1}$", QUERY, width=1.3)
    _label(ax, 0.85, upper - 0.45, "query", va="top")
    xs = [0.65, 1.85, 3.35]
    encoder = [_box(ax, x, lower, text, KEY, width=0.95)
               for x, text in zip(xs, ["$h_1$", "$h_2$", "$h_{L_k}$"])]
    _label(ax, 2.6, lower, r"$\cdots$", colour="black", fontsize=FONT)
    _label(ax, 2.0, lower - 0.45, "keys = values", va="top")

    attention = _box(ax, 4.0, middle, "score,\nsoftmax", GREY, width=1.5, height=1.0,
                     fontsize=SMALL)
    _arrow(ax, (0.85, upper), (4.0, middle), source=previous, target=attention,
           colour=QUERY, linewidth=2.4)
    for box, x in zip(encoder, xs):
        _arrow(ax, (x, lower), (4.0, middle), source=box, target=attention, colour=KEY)
    _arrow(ax, (4.75, middle), (5.12, middle))
    for j, weight in enumerate([0.15, 0.6, 0.25]):  # the weights α_t', as bars
        ax.add_patch(Rectangle((5.25 + 0.35 * j, middle - 0.45), 0.26, 1.3 * weight,
                               facecolor=KEY))
    ax.plot([5.15, 6.3], [middle - 0.45, middle - 0.45], color=GREY, linewidth=1.2)
    _label(ax, 5.72, middle + 0.65, r"$\alpha_{t'}$", colour="black", fontsize=FONT)

    context = _box(ax, 7.2, middle, "$c_{t'}$", CONTEXT, width=0.9)
    _arrow(ax, (6.35, middle), (7.2, middle), target=context)
    _arrow(ax, (xs[-1], lower), (7.2, middle), source=encoder[-1], target=context,
           colour=KEY, bend=0.25)  # the values

    gru = _box(ax, 8.4, upper, "GRU", GREY, width=1.1, fontsize=SMALL + 1)
    _arrow(ax, (0.85, upper), (8.4, upper), source=previous, target=gru, colour=QUERY,
           linewidth=2.4)
    _arrow(ax, (7.2, middle), (8.4, upper), source=context, target=gru, colour=CONTEXT,
           linewidth=2.4)
    word_in = _box(ax, 8.4, lower, "$y_{t'-1}$", WORD, width=1.2)
    _arrow(ax, (8.4, lower), (8.4, upper), source=word_in, target=gru, colour=WORD,
           linewidth=2.4)
    _label(ax, 8.4, lower - 0.45, "previous word", va="top")
    state = _box(ax, 10.9, upper, "$s_{t'}$", QUERY, width=1.0)
    _arrow(ax, (8.4, upper), (10.9, upper), source=gru, target=state, colour=QUERY,
           linewidth=2.4)
    word_out = _box(ax, 10.9, lower, "$y_{t'}$", WORD, width=1.0)
    _arrow(ax, (10.9, upper), (10.9, lower), source=state, target=word_out)
    _label(ax, 10.9, lower - 0.45, "output word", va="top")
    return fig


def draw_dependency_chain(num_steps: int = 3) -> Figure:
    """Why the attention decoder cannot stack its states into one query matrix ``Q``.

    Each state needs the context of its step, and each context needs the state before
    it: ``s_t'-1 -> c_t' -> s_t' -> c_t'+1 -> ...``, so the query of step ``t'+1`` does
    not exist until step ``t'`` has run. Teacher forcing gives the words ``y`` up front
    (bottom row), not the states.

    Shapes:
        none (``num_steps`` from 2 to 4; returns a Figure of 8 x 3.2 inches)

    Taught in ``chapters/02_attention/04_vectorised_attention.ipynb``.
    """
    num_steps = check_int("num_steps", num_steps, 2)
    if num_steps > 4:
        raise ValueError(f"num_steps must be at most 4 (more do not fit), "
                         f"got {num_steps}")
    fig, ax = _canvas(8, 3.2)  # 12 x 4.8 units
    state_y, context_y, word_y = 3.75, 2.2, 0.55
    spacing = (12.0 - 1.4) / (2 * num_steps)
    xs = [0.7 + k * spacing for k in range(2 * num_steps + 1)]  # s, c, s, c, ..., s
    steps = ["t'-1", "t'"] + [f"t'+{k}" for k in range(1, num_steps)]
    states = [_box(ax, xs[2 * k], state_y, f"$s_{{{steps[k]}}}$", QUERY, width=1.15)
              for k in range(num_steps + 1)]
    contexts = [_box(ax, xs[2 * k + 1], context_y, f"$c_{{{steps[k + 1]}}}$", CONTEXT,
                     width=1.15) for k in range(num_steps)]
    words = [_box(ax, xs[2 * k + 2], word_y, f"$y_{{{steps[k]}}}$", WORD, width=1.15)
             for k in range(num_steps)]
    for k in range(num_steps):
        before, context, after = xs[2 * k], xs[2 * k + 1], xs[2 * k + 2]
        _arrow(ax, (before, state_y), (context, context_y), source=states[k],
               target=contexts[k], colour=CHAIN, linewidth=3)
        _arrow(ax, (context, context_y), (after, state_y), source=contexts[k],
               target=states[k + 1], colour=CHAIN, linewidth=3)
        _arrow(ax, (before, state_y), (after, state_y), source=states[k],
               target=states[k + 1], colour=QUERY, linewidth=1.5)
        _arrow(ax, (after, word_y), (after, state_y), source=words[k],
               target=states[k + 1], colour=WORD, linewidth=1.5)
    left, right = xs[2] - 0.68, xs[-1] + 0.68
    ax.add_patch(FancyBboxPatch((left, word_y - 0.5), right - left, 1.0,
                                boxstyle="round,pad=0,rounding_size=0.15",
                                facecolor="none", edgecolor=WORD, linewidth=1.5,
                                linestyle="--"))
    _label(ax, xs[0] + 0.2, word_y, "known\nup front", colour="black")
    _label(ax, xs[0] + 0.2, context_y, "one step\nat a time", colour=CHAIN)
    return fig


def draw_mask_grid(valid_lens: Tensor, num_kv: int, num_queries: int | None = None,
                   causal: bool = True) -> Figure:
    """The mask as a grid of query × key cells: a panel per sentence, and a causal one.

    A sentence's panel shows the mask that
    :func:`~attention_lib.masking.valid_lens_to_mask` computes from ``valid_lens`` (keys
    from ``valid_len`` on are padding), for every query of that sentence; the causal
    panel shows the lower triangle ``torch.ones(Lq, Lk).tril()`` (query ``i`` may attend
    to keys ``1 ... i``). Dark cells are allowed (True), light ones masked (False). Each
    panel's image holds the mask itself, as 0 and 1.

    Shapes:
        valid_lens: (B,) or (B, Lq), integer, 1 <= B <= 4; num_kv: Lk <= 10;
                    num_queries: Lq <= 10 (default: Lk, or Lq of a (B, Lq) valid_lens)
        returns:    a Figure of 8 x 3.2 inches with B panels (B + 1 when ``causal``)

    Taught in ``chapters/02_attention/02_masked_softmax.ipynb``.
    """
    num_kv = check_int("num_kv", num_kv, 1)
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be True or False, got {describe(causal)}")
    mask = valid_lens_to_mask(valid_lens, num_kv).cpu()  # (B, Lk) or (B, Lq, Lk)
    if num_queries is None:
        num_queries = mask.shape[1] if mask.dim() == 3 else num_kv
    num_queries = check_int("num_queries", num_queries, 1)
    if mask.dim() == 3 and mask.shape[1] != num_queries:
        raise ValueError(f"valid_lens of shape (B, Lq) must have Lq={num_queries} "
                         f"(num_queries), got {tuple(valid_lens.shape)}")
    if not 1 <= mask.shape[0] <= 4:
        raise ValueError("valid_lens must hold 1 to 4 sentences (more panels do not "
                         f"fit), got shape {tuple(valid_lens.shape)}")
    if num_kv > 10 or num_queries > 10:
        raise ValueError("num_kv and num_queries must be at most 10 (larger grids are "
                         f"unreadable), got num_kv={num_kv}, num_queries={num_queries}")
    if mask.dim() == 2:  # one length per sentence: every query sees the same keys
        mask = mask[:, None, :].expand(-1, num_queries, -1)  # (B, Lq, Lk)
        titles = [f"valid_len={int(length)}" for length in valid_lens]
    else:
        titles = [f"sentence {b}" for b in range(1, len(mask) + 1)]
    panels = list(zip(titles, mask))
    if causal:
        causal_mask = torch.ones(num_queries, num_kv, dtype=torch.bool).tril()
        panels.append(("causal", causal_mask))

    fig, axes = plt.subplots(1, len(panels), figsize=(8, 3.2), squeeze=False,
                             dpi=DPI)
    fig.subplots_adjust(left=0.07, right=0.99, bottom=0.27, top=0.9, wspace=0.08)
    cmap = colors.ListedColormap([MASKED, KEY])
    for index, (ax, (title, grid)) in enumerate(zip(axes[0], panels)):
        ax.imshow(grid.int().numpy(), cmap=cmap, vmin=0, vmax=1)  # (Lq, Lk)
        ax.set_title(title, fontsize=SMALL)
        ax.set_xticks(range(num_kv), [str(j) for j in range(1, num_kv + 1)],
                      fontsize=SMALL - 1)
        row_labels = [str(i) if index == 0 else "" for i in range(1, num_queries + 1)]
        ax.set_yticks(range(num_queries), row_labels, fontsize=SMALL - 1)
        ax.set_xticks([j - 0.5 for j in range(1, num_kv)], minor=True)
        ax.set_yticks([i - 0.5 for i in range(1, num_queries)], minor=True)
        ax.grid(which="minor", color="white", linewidth=1.5)
        ax.tick_params(which="both", length=0)
        ax.set_xlabel("keys", fontsize=SMALL)
    axes[0, 0].set_ylabel("queries", fontsize=SMALL)
    fig.legend(handles=[Patch(facecolor=KEY, label="allowed (True)"),
                        Patch(facecolor=MASKED, edgecolor=GREY,
                              label="masked (False)")],
               loc="lower center", ncol=2, fontsize=SMALL, frameon=False)
    return fig

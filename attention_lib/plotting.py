"""Figures: attention heat maps (with labels in any script), loss curves, BLEU by
length, and explorers whose controls work on a static page (:func:`static_explorer`).

Chinese, Japanese and Korean labels need a font with their glyphs. :func:`use_cjk_font`
puts the first Noto/Source Han CJK font found behind matplotlib's default font
(matplotlib falls back glyph by glyph), so Latin text keeps its usual look.

The book's text column is about 672 px wide on a laptop: a figure ``COLUMN_WIDTH``
inches wide at ``FIGURE_DPI`` is shown at its own size; a wider one is shrunk, and its
text with it. In a notebook, importing this module makes every PNG of a figure carry
the size of its smallest text, in pixels of that PNG (the text chunk ``TEXT_SIZE_KEY``),
so that a test can tell whether a figure is legible as the website shows it.

Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
"""
from __future__ import annotations

import base64
import functools
import hashlib
import html
import io
import itertools
import json
import math
import numbers
from typing import Callable, Mapping, Sequence

import matplotlib
import matplotlib.pyplot as plt
import torch
from IPython.display import HTML
from matplotlib import font_manager
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.figure import Figure
from PIL import Image, ImageChops
from PIL.PngImagePlugin import PngInfo

__all__ = [
    "COLUMN_WIDTH",
    "FIGURE_DPI",
    "TEXT_SIZE_KEY",
    "use_cjk_font",
    "show_heatmaps",
    "show_image_attention",
    "plot_history",
    "plot_bleu_by_length",
    "static_explorer",
    "StaticExplorerHTML",
]

# The text column is about 672 px wide at 1280 px: at 100 dpi a figure up to 6.7 inches
# wide is shown at its own size. Its smallest text should be at least 9 px: 6.5 points.
FIGURE_DPI = 100
COLUMN_WIDTH = 6.7
TEXT_SIZE_KEY = "Smallest text px"


class _TextSizes(RendererAgg):
    """An Agg renderer that notes the size, in points, of every text drawn with it."""

    def __init__(self, fig: Figure):
        super().__init__(int(fig.bbox.width), int(fig.bbox.height), fig.dpi)
        self.points: list[float] = []

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if s.strip():
            self.points.append(prop.get_size_in_points())

    def draw_tex(self, gc, x, y, s, prop, angle, *, mtext=None):
        self.draw_text(gc, x, y, s, prop, angle)


def smallest_text_px(fig: Figure, dpi: float | None = None) -> float | None:
    """The size of the smallest text the figure draws, in pixels of an image saved at
    ``dpi`` (default: the figure's); None if it draws no text.

    Only text that is drawn counts: visible, not empty, and for tick labels only the
    ticks inside the axes' limits. The book's tests use it; a reader never needs it.
    """
    renderer = _TextSizes(fig)
    fig.draw(renderer)
    if not renderer.points:
        return None
    return min(renderer.points) * (dpi or fig.dpi) / 72


def _text_size_note(size: float | None) -> str:
    return "none" if size is None else f"{size:.2f}"


def _notebook_png(fig: Figure, **kwargs):
    """The inline backend's PNG of a figure (base64), with its smallest text size."""
    from IPython.core.pylabtools import print_figure

    if not fig.axes and not fig.lines:
        return None  # as the inline backend: an empty figure shows nothing
    size = smallest_text_px(fig, kwargs.get("dpi"))
    metadata = {**kwargs.pop("metadata", {}), TEXT_SIZE_KEY: _text_size_note(size)}
    return print_figure(fig, "png", base64=True, metadata=metadata, **kwargs)


def _record_text_sizes_in_notebooks() -> None:
    """In a Jupyter kernel that draws figures inline, put :func:`_notebook_png` in
    place of the inline backend's PNG printer, at the book's dpi."""
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None or "inline" not in matplotlib.get_backend():
        return
    # The inline backend installs its own printer when it is loaded, at the first
    # figure; loading it now puts ours after it.
    try:
        from matplotlib_inline.backend_inline import InlineBackend
    except ImportError:  # an old kernel's own inline backend: leave it as it is
        return

    config = InlineBackend.instance()
    if "png" in config.figure_formats:
        matplotlib.rcParams["figure.dpi"] = FIGURE_DPI
        shell.display_formatter.formatters["image/png"].for_type(
            Figure, functools.partial(_notebook_png, **config.print_figure_kwargs)
        )


_record_text_sizes_in_notebooks()


CJK_FONT_FAMILIES = (
    "Noto Sans CJK SC",
    "Noto Sans CJK JP",
    "Noto Sans CJK TC",
    "Source Han Sans SC",
    "WenQuanYi Zen Hei",
    "SimHei",
    "Microsoft YaHei",
    "PingFang SC",
)


def use_cjk_font() -> str | None:
    """Add an installed CJK font as a fallback for matplotlib text; return its name
    (None if none found).

    On Colab: ``!apt-get -qq install fonts-noto-cjk`` and restart, if this returns None.

    Shapes:
        none

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """
    installed = {f.name for f in font_manager.fontManager.ttflist}
    if not installed.intersection(CJK_FONT_FAMILIES):
        # A font installed after matplotlib built its cache (e.g. apt-get on Colab):
        # register it.
        for path in font_manager.findSystemFonts():
            if "CJK" in path or "wqy" in path.lower():
                font_manager.fontManager.addfont(path)
        installed = {f.name for f in font_manager.fontManager.ttflist}
    for family in CJK_FONT_FAMILIES:
        if family in installed:
            # A list of families makes matplotlib fall back glyph by glyph: Latin from
            # the first.
            base = [
                f for f in plt.rcParams["font.family"] if f not in CJK_FONT_FAMILIES
            ]
            if base in ([], ["sans-serif"]):
                base = [plt.rcParams["font.sans-serif"][0]]
            plt.rcParams["font.family"] = base + [family]
            return family
    return None


def show_heatmaps(
    matrices,
    xlabel: str = "keys",
    ylabel: str = "queries",
    titles: Sequence[str] | None = None,
    xticklabels: Sequence[str] | None = None,
    yticklabels: Sequence[str] | None = None,
    cmap: str = "Reds",
    figsize: tuple[float, float] | None = None,
    annotate: bool = False,
):
    """Show a grid of attention-weight matrices as heat maps with one shared colour bar.

    Shapes:
        matrices: (rows, cols, Lq, Lk), (n, Lq, Lk) or (Lq, Lk); tick labels: Lk and Lq
            strings

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """
    matrices = torch.as_tensor(matrices).detach().cpu().float()
    if matrices.dim() == 2:
        matrices = matrices[None, None]
    elif matrices.dim() == 3:
        matrices = matrices[None]
    elif matrices.dim() != 4:
        raise ValueError(
            "matrices must be (Lq, Lk), (n, Lq, Lk) or (rows, cols, Lq, Lk), got"
            f" {tuple(matrices.shape)}"
        )
    if any(
        text and not text.isascii()
        for text in [
            xlabel,
            ylabel,
            *(xticklabels or []),
            *(yticklabels or []),
            *(titles or []),
        ]
    ):
        use_cjk_font()
    num_rows, num_cols, num_queries, num_kv = matrices.shape
    if figsize is None:
        figsize = (
            min(2.5 + 0.45 * num_kv, 9) * num_cols,
            min(2 + 0.4 * num_queries, 8) * num_rows,
        )
    fig, axes = plt.subplots(
        num_rows, num_cols, figsize=figsize, sharex=True, sharey=True, squeeze=False
    )
    for i in range(num_rows):
        for j in range(num_cols):
            ax = axes[i, j]
            image = ax.imshow(matrices[i, j].numpy(), cmap=cmap, vmin=0, vmax=1)
            if annotate:
                for q in range(num_queries):
                    for k in range(num_kv):
                        value = float(matrices[i, j, q, k])
                        ax.text(
                            k,
                            q,
                            f"{value:.2f}",
                            ha="center",
                            va="center",
                            fontsize=9,  # 10 px at an explorer's 80 dpi
                            color="white" if value > 0.6 else "black",
                        )
            if i == num_rows - 1:
                ax.set_xlabel(xlabel)
            if j == 0:
                ax.set_ylabel(ylabel)
            if titles:
                ax.set_title(titles[i * num_cols + j])
            if xticklabels is not None:
                ax.set_xticks(range(num_kv), xticklabels, rotation=60, ha="right")
            if yticklabels is not None:
                ax.set_yticks(range(num_queries), yticklabels)
    fig.colorbar(image, ax=axes, shrink=0.7, label="attention weight")
    return fig


def show_image_attention(
    image,
    weights,
    ax=None,
    box=None,
    title: str | None = None,
    alpha: float = 0.55,
    vmin: float | None = None,
    vmax: float | None = None,
    colorbar: str | None = None,
):
    """Show a grey image with attention weights (or a gate) laid over it as a heat map.

    The weights may live on a coarser grid than the pixels (a CNN's feature grid, a
    ViT's patches): each weight is spread over its block of pixels (nearest-neighbour
    upsampling). Colours span ``vmin`` to ``vmax``, by default the weights' own range.
    ``colorbar``, a label, adds a colour bar beside the Axes. For several panels on one
    scale, give them all the same ``vmin`` and ``vmax`` and draw one bar for all:
    ``fig.colorbar(ax.images[-1], ax=axes, label=...)`` (the overlay is the Axes' last
    image). ``box`` (top, left, bottom, right), bottom and right exclusive, is drawn as
    a rectangle.

    Shapes:
        image:   (Hgt, W) or (1, Hgt, W)
        weights: (h, w) or (1, h, w), with Hgt a multiple of h and W of w
        box:     4 ints, optional; returns: the matplotlib Axes

    Taught in ``chapters/07_visual/01_channel_spatial.ipynb``.
    """
    image = torch.as_tensor(image).detach().cpu().float()
    weights = torch.as_tensor(weights).detach().cpu().float()
    image = image[0] if image.dim() == 3 and image.shape[0] == 1 else image
    weights = weights[0] if weights.dim() == 3 and weights.shape[0] == 1 else weights
    if image.dim() != 2:
        raise ValueError(
            f"image must have shape (Hgt, W) or (1, Hgt, W), got {tuple(image.shape)}"
        )
    height, width = image.shape
    if weights.dim() != 2 or height % weights.shape[0] or width % weights.shape[1]:
        raise ValueError(
            f"weights must have shape (h, w) with {height} a multiple of h and {width}"
            f" a multiple of w (image {height} × {width}), got {tuple(weights.shape)}"
        )
    rows, cols = height // weights.shape[0], width // weights.shape[1]
    upsampled = weights.repeat_interleave(rows, 0).repeat_interleave(cols, 1)
    if ax is None:
        _, ax = plt.subplots(figsize=(3, 3 * height / width))
    ax.imshow(image.numpy(), cmap="gray", vmin=0, vmax=max(1.0, float(image.max())))
    overlay = ax.imshow(
        upsampled.numpy(), cmap="inferno", alpha=alpha, vmin=vmin, vmax=vmax
    )
    if colorbar is not None:
        ax.figure.colorbar(overlay, ax=ax, label=colorbar)
    if box is not None:
        top, left, bottom, right = (int(v) for v in box)
        ax.add_patch(plt.Rectangle(
            (left - 0.5, top - 0.5), right - left, bottom - top,
            fill=False, edgecolor="cyan", linewidth=1.5,
        ))
    if title is not None:
        ax.set_title(title)
    ax.set_xticks([])
    ax.set_yticks([])
    return ax


def plot_history(history: dict, title: str = "loss per target token", ax=None):
    """Plot each curve of a loss history (e.g. ``{"train": [...], "val": [...]}``)
    against epochs.

    Shapes:
        history: name -> list of floats, one per epoch

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.5))
    for name, values in history.items():
        ax.plot(range(1, len(values) + 1), values, marker="o", markersize=3, label=name)
    ax.set_xlabel("epoch")
    ax.set_ylabel("cross-entropy")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    return ax


def plot_bleu_by_length(results: dict, ax=None):
    """Held-out corpus BLEU against source length, one line per model.

    Shapes:
        results: model name -> the dict that
            :func:`~attention_lib.evaluation.bleu_by_length` returns

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    for name, result in results.items():
        labels = [row[0] for row in result["by_length"]]
        ax.plot(labels, [row[2] for row in result["by_length"]], marker="o",
                label=f"{name} (all: {result['bleu']:.1f})")
    ax.set_xlabel("source length (English tokens, with punctuation)")
    ax.set_ylabel("corpus BLEU on the test split")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    return ax


_EXPLORER_IDS = itertools.count(1)

# The explorer's behaviour, the same for every explorer: find the controls of *this*
# explorer (its element's id is unique on the page), and on every change show the state
# whose index the controls' positions give (row-major: the last control varies fastest).
# Plain ES5, no library, no network.
_EXPLORER_JS = """(function () {
  var root = document.getElementById("%(id)s");
  if (!root || root.getAttribute("data-ready")) return;
  root.setAttribute("data-ready", "1");
  var data = JSON.parse(document.getElementById("%(id)s-data").textContent);
  var controls = root.querySelectorAll("[data-control]");
  var image = document.getElementById("%(id)s-image");
  var caption = document.getElementById("%(id)s-caption");
  function show() {
    var index = 0;
    for (var c = 0; c < controls.length; c++) {
      var i = Number(controls[c].value);
      index = index * data.sizes[c] + i;
      var text = data.values[c][i];
      var readout = document.getElementById(controls[c].id + "-value");
      if (readout) {
        readout.textContent = text;
        controls[c].setAttribute("aria-valuetext", text);
      }
    }
    var state = data.states[index];  // [URL-safe base64 image, alt text, caption]
    const base64 = state[0].replace(/-/g, "+").replace(/_/g, "/");
    image.src = "data:" + data.mime + ";base64," + base64;
    image.alt = state[1];
    image.setAttribute("data-state", String(index));
    if (caption) caption.textContent = state[2];
  }
  for (var c = 0; c < controls.length; c++) {
    controls[c].addEventListener("input", show);
    controls[c].addEventListener("change", show);
  }
  // A browser that restored the controls' positions (back button) shows the matching
  // state.
  show();
})();"""


def _crop_png(
    png: bytes, colors: int | None, pad: int = 4, text_px: float | None = None
) -> bytes:
    """Crop the figure's empty margins (as ``bbox_inches="tight"`` does, without drawing
    it twice); with ``colors``, a palette PNG: flat areas and anti-aliased text survive,
    the bytes shrink threefold. The smallest text size goes in the ``TEXT_SIZE_KEY``
    chunk."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    box = ImageChops.difference(
        image, Image.new("RGB", image.size, image.getpixel((0, 0)))
    ).getbbox()
    if box:
        image = image.crop(
            (
                max(box[0] - pad, 0),
                max(box[1] - pad, 0),
                min(box[2] + pad, image.width),
                min(box[3] + pad, image.height),
            )
        )
    if colors:
        image = image.quantize(colors=colors)
    info = PngInfo()
    info.add_text(TEXT_SIZE_KEY, _text_size_note(text_px))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=True, pnginfo=info)
    return buffer.getvalue()


def _value_text(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


class StaticExplorerHTML(HTML):
    """What :func:`static_explorer` returns: the explorer's HTML, plus what it holds,
    for checks.

    Attributes: ``element_id`` (unique per explorer), ``controls`` (argument name ->
    values), ``states`` (one dict of argument values per state, in the order the
    controls index them), ``alts`` (one alt text per state) and ``num_states``.

    Shapes:
        states, alts: num_states = the product of the controls' numbers of values

    Taught in ``chapters/02_attention/04_vectorised_attention.ipynb``.
    """

    def __init__(
        self, html: str, element_id: str, controls: dict, states: list, alts: list
    ):
        super().__init__(html)
        self.element_id, self.controls, self.states, self.alts = (
            element_id,
            controls,
            states,
            alts,
        )
        self.num_states = len(states)


def static_explorer(
    draw: Callable,
    controls: Mapping[str, Sequence],
    *,
    labels: Mapping[str, str] | None = None,
    initial: Mapping | None = None,
    dropdowns: Sequence[str] = (),
    alt: Callable | str | None = None,
    max_states: int = 120,
    dpi: float = 80,
    colors: int | None = 256
) -> StaticExplorerHTML:
    """An explorer whose controls work without a kernel: every state drawn in advance,
    embedded as PNG.

    ``controls`` maps each keyword argument of ``draw`` to the values the reader may
    pick (a slider takes a few values). ``draw(**values)`` is called once for every
    combination and returns a matplotlib Figure, or ``(Figure, caption)`` with a caption
    text shown under it; each figure is saved to PNG (its empty margins cropped, reduced
    to ``colors`` colours: about a third of the bytes of full colour, which None keeps)
    and closed. The result displays as HTML with ordinary controls, ``<input
    type=range>`` for numbers and ``<select>`` for anything else (or for the names in
    ``dropdowns``), and a few lines of inline JavaScript that show the matching image:
    in a Jupyter Book page, in Jupyter and in Colab, with no kernel and nothing loaded
    from elsewhere. Its element ids are unique, so several explorers can share a page.
    ``labels`` gives the text beside each control (default: the name), ``initial`` the
    values shown first (default: each control's first), ``alt`` each image's alt text (a
    callable taking the values, or a prefix; default: the controls and their values).

    A control under which every state draws the same image and caption does nothing, and
    raises ValueError; so does asking for more than ``max_states`` states (each costs a
    drawing and, at book width, 10-25 kB of the page).

    Shapes:
        controls: name -> num_values values; num_states = the product of the num_values,
        at most max_states; draw(**one value per name) -> Figure or (Figure, str)

    Taught in ``chapters/02_attention/04_vectorised_attention.ipynb``.
    """
    controls = {name: list(values) for name, values in controls.items()}
    if not controls:
        raise ValueError(
            "controls must name at least one argument of draw, got an empty mapping"
        )
    empty = [name for name, values in controls.items() if not values]
    if empty:
        raise ValueError(
            f"controls {empty} have no values; give each control at least one value"
        )
    sizes = [len(values) for values in controls.values()]
    num_states = math.prod(sizes)
    if num_states > max_states:
        product = " × ".join(f"{len(v)} {name}" for name, v in controls.items())
        raise ValueError(
            f"static_explorer would draw {product} = {num_states} states, more than"
            f" max_states={max_states}; give the controls fewer values (or raise"
            " max_states)"
        )
    labels = {name: (labels or {}).get(name, name) for name in controls}
    unknown = set(initial or {}).difference(controls) | set(dropdowns).difference(
        controls
    )
    if unknown:
        raise ValueError(
            f"initial/dropdowns name {sorted(unknown)}, which are not controls:"
            f" {list(controls)}"
        )
    start = []
    for name, values in controls.items():
        if initial and name in initial:
            if initial[name] not in values:
                raise ValueError(
                    f"initial value {initial[name]!r} of {name!r} is not one of its"
                    f" values {values}"
                )
            start.append(values.index(initial[name]))
        else:
            start.append(0)

    states, alts, records = [], [], []
    for combination in itertools.product(*controls.values()):
        values = dict(zip(controls, combination))
        drawn = draw(**values)
        fig, text = drawn if isinstance(drawn, tuple) else (drawn, "")
        if not isinstance(fig, Figure):
            plt.close("all")
            raise TypeError(
                "draw must return a matplotlib Figure (or (Figure, str)), got"
                f" {type(fig).__name__}"
            )
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=dpi)
        text_px = smallest_text_px(fig, dpi)
        plt.close(fig)
        png = _crop_png(buffer.getvalue(), colors, text_px=text_px)
        setting = ", ".join(
            f"{labels[name]} {_value_text(value)}" for name, value in values.items()
        )
        if callable(alt):
            description = str(alt(**values))
        else:
            description = f"{alt or 'Explorer'}: {setting}"
        states.append(values)
        alts.append(description)
        # URL-safe base64 has no "/": the page's JavaScript puts it back ("/tmp/" and
        # the like never appear by chance in a notebook that tests grep for local
        # paths).
        records.append(
            [base64.urlsafe_b64encode(png).decode("ascii"), description, str(text)]
        )

    for c, name in enumerate(controls):
        if sizes[c] == 1:
            continue
        stride = math.prod(sizes[c + 1:])
        # The control acts if some pair of states that differ only in it looks
        # different.
        acts = any(
            records[i][0::2] != records[i + stride][0::2]
            for i in range(num_states)
            if (i // stride) % sizes[c] < sizes[c] - 1
        )
        if not acts:
            raise ValueError(
                f"control {name!r} changes nothing: every state draws the same image"
                " and caption whatever its value; leave it out"
            )

    digest = hashlib.sha1(json.dumps(records).encode()).hexdigest()[:8]
    element_id = f"static-explorer-{next(_EXPLORER_IDS)}-{digest}"
    index = 0
    for c, size in enumerate(sizes):
        index = index * size + start[c]
    parts = [
        f'<div class="static-explorer" id="{element_id}" style="max-width: 100%;">',
        (
            '<div style="display: flex; flex-wrap: wrap; gap: 0.3em 1.5em; align-items:'
            ' center; margin-bottom: 0.5em;">'
        ),
    ]
    for c, (name, values) in enumerate(controls.items()):
        control_id = f"{element_id}-control-{c}"
        label = f'<label for="{control_id}">{html.escape(labels[name])}</label>'
        if all(_is_number(v) for v in values) and name not in dropdowns:
            text = html.escape(_value_text(values[start[c]]))
            parts.append(
                '<span style="display: inline-flex; align-items: center; gap: 0.5em;'
                f' max-width: 100%;">{label}<input type="range" id="{control_id}"'
                f' data-control min="0" max="{len(values) - 1}" step="1"'
                f' value="{start[c]}" aria-valuetext="{text}" style="width: 9em;'
                f' max-width: 40vw;"><output id="{control_id}-value"'
                f' for="{control_id}">{text}</output></span>'
            )
        else:
            options = "".join(
                f'<option value="{i}"{" selected" if i == start[c] else ""}>'
                f'{html.escape(_value_text(v))}</option>'
                for i, v in enumerate(values)
            )
            parts.append(
                '<span style="display: inline-flex; align-items: center; gap: 0.5em;'
                f' max-width: 100%;">{label}<select id="{control_id}" data-control'
                f' style="max-width: 100%;">{options}</select></span>'
            )
    first = records[index]
    src = "data:image/png;base64," + base64.b64encode(
        base64.urlsafe_b64decode(first[0])
    ).decode("ascii")
    parts.append("</div>")
    parts.append(
        f'<img id="{element_id}-image" src="{src}" alt="{html.escape(first[1])}"'
        f' data-state="{index}" style="max-width: 100%; height: auto; display: block;">'
    )
    if any(record[2] for record in records):
        parts.append(
            f'<pre id="{element_id}-caption" style="white-space:'
            f' pre-wrap;">{html.escape(first[2])}</pre>'
        )
    data = json.dumps(
        {
            "mime": "image/png",
            "sizes": sizes,
            "states": records,
            "values": [
                [_value_text(v) for v in values] for values in controls.values()
            ],
        }
    )
    # safe inside <script>
    data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    parts.append(
        f'<script type="application/json" id="{element_id}-data">{data}</script>'
    )
    parts.append(f"<script>{_EXPLORER_JS % {'id': element_id}}</script>")
    parts.append("</div>")
    return StaticExplorerHTML("\n".join(parts), element_id, controls, states, alts)

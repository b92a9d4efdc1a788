"""Figures: attention heat maps (with labels in any script), loss curves, BLEU by length.

Chinese, Japanese and Korean labels need a font with their glyphs. :func:`use_cjk_font` puts the
first Noto/Source Han CJK font found behind matplotlib's default font (matplotlib falls back glyph
by glyph), so Latin text keeps its usual look.

Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
"""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib import font_manager

__all__ = ["use_cjk_font", "show_heatmaps", "plot_history", "plot_bleu_by_length"]

CJK_FONT_FAMILIES = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans CJK TC", "Source Han Sans SC",
                     "WenQuanYi Zen Hei", "SimHei", "Microsoft YaHei", "PingFang SC")


def use_cjk_font() -> str | None:
    """Add an installed CJK font as a fallback for matplotlib text; return its name (None if none found).

    On Colab: ``!apt-get -qq install fonts-noto-cjk`` and restart, if this returns None.

    Shapes:
        none

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """
    installed = {f.name for f in font_manager.fontManager.ttflist}
    if not installed.intersection(CJK_FONT_FAMILIES):
        # A font installed after matplotlib built its cache (e.g. apt-get on Colab): register it.
        for path in font_manager.findSystemFonts():
            if "CJK" in path or "wqy" in path.lower():
                font_manager.fontManager.addfont(path)
        installed = {f.name for f in font_manager.fontManager.ttflist}
    for family in CJK_FONT_FAMILIES:
        if family in installed:
            # A list of families makes matplotlib fall back glyph by glyph: Latin from the first.
            base = [f for f in plt.rcParams["font.family"] if f not in CJK_FONT_FAMILIES]
            if base in ([], ["sans-serif"]):
                base = [plt.rcParams["font.sans-serif"][0]]
            plt.rcParams["font.family"] = base + [family]
            return family
    return None


def show_heatmaps(matrices, xlabel: str = "keys", ylabel: str = "queries", titles: Sequence[str] | None = None,
                  xticklabels: Sequence[str] | None = None, yticklabels: Sequence[str] | None = None,
                  cmap: str = "Reds", figsize: tuple[float, float] | None = None, annotate: bool = False):
    """Show a grid of attention-weight matrices as heat maps with one shared colour bar.

    Shapes:
        matrices: (rows, cols, Lq, Lk), (n, Lq, Lk) or (Lq, Lk); tick labels: Lk and Lq strings

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """
    matrices = torch.as_tensor(matrices).detach().cpu().float()
    if matrices.dim() == 2:
        matrices = matrices[None, None]
    elif matrices.dim() == 3:
        matrices = matrices[None]
    elif matrices.dim() != 4:
        raise ValueError(f"matrices must be (Lq, Lk), (n, Lq, Lk) or (rows, cols, Lq, Lk), got {tuple(matrices.shape)}")
    if any(text and not text.isascii() for text in [xlabel, ylabel, *(xticklabels or []), *(yticklabels or []),
                                                     *(titles or [])]):
        use_cjk_font()
    num_rows, num_cols, num_queries, num_kv = matrices.shape
    if figsize is None:
        figsize = (min(2.5 + 0.45 * num_kv, 9) * num_cols, min(2 + 0.4 * num_queries, 8) * num_rows)
    fig, axes = plt.subplots(num_rows, num_cols, figsize=figsize, sharex=True, sharey=True, squeeze=False)
    for i in range(num_rows):
        for j in range(num_cols):
            ax = axes[i, j]
            image = ax.imshow(matrices[i, j].numpy(), cmap=cmap, vmin=0, vmax=1)
            if annotate:
                for q in range(num_queries):
                    for k in range(num_kv):
                        value = float(matrices[i, j, q, k])
                        ax.text(k, q, f"{value:.2f}", ha="center", va="center", fontsize=8,
                                color="white" if value > 0.6 else "black")
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


def plot_history(history: dict, title: str = "loss per target token", ax=None):
    """Plot each curve of a loss history (e.g. ``{"train": [...], "val": [...]}``) against epochs.

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
        results: model name -> the dict that :func:`~attention_lib.evaluation.bleu_by_length` returns

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

import warnings

import matplotlib.pyplot as plt
import pytest
import torch

from attention_lib import plot_bleu_by_length, plot_history, show_heatmaps, use_cjk_font


def test_a_cjk_font_is_installed():
    assert use_cjk_font() is not None, "no CJK font found: install Debian's fonts-noto-cjk (CI's .ci/run does)"


def test_chinese_labels_render_without_missing_glyphs(tmp_path):
    weights = torch.softmax(torch.randn(3, 4), dim=-1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warns "Glyph ... missing from font(s)"
        fig = show_heatmaps(weights, xlabel="键", ylabel="查询", xticklabels=["我", "爱", "你", "。"],
                            yticklabels=["I", "love", "you"], titles=["注意力权重"])
        fig.savefig(tmp_path / "heatmap.png")
    assert (tmp_path / "heatmap.png").stat().st_size > 1000
    plt.close(fig)


def test_heatmap_grid_shapes_and_errors():
    fig = show_heatmaps(torch.rand(2, 3, 4, 5))
    assert len(fig.axes) == 2 * 3 + 1  # six heat maps and a colour bar
    plt.close(fig)
    with pytest.raises(ValueError, match=r"matrices must be .* got \(5,\)"):
        show_heatmaps(torch.rand(5))


def test_history_and_bleu_plots_draw_one_line_per_series():
    ax = plot_history({"train": [3.0, 2.0], "val": [3.1, 2.5]})
    assert len(ax.lines) == 2
    result = {"bleu": 10.0, "by_length": [("1–3", 5, 20.0), ("4", 7, 10.0)]}
    ax = plot_bleu_by_length({"a": result, "b": result})
    assert len(ax.lines) == 2 and ax.get_xlabel().startswith("source length")
    plt.close("all")

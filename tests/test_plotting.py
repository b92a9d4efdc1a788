import base64
import json
import re
import warnings

import matplotlib.pyplot as plt
import pytest
import torch

from attention_lib import (
    plot_bleu_by_length,
    plot_history,
    show_heatmaps,
    show_image_attention,
    static_explorer,
    use_cjk_font,
)


def test_a_cjk_font_is_installed():
    assert (
        use_cjk_font() is not None
    ), "no CJK font found: install Debian's fonts-noto-cjk (CI's .ci/run does)"


def test_chinese_labels_render_without_missing_glyphs(tmp_path):
    weights = torch.softmax(torch.randn(3, 4), dim=-1)
    with warnings.catch_warnings():
        # matplotlib warns "Glyph ... missing from font(s)"
        warnings.simplefilter("error")
        fig = show_heatmaps(
            weights,
            xlabel="键",
            ylabel="查询",
            xticklabels=["我", "爱", "你", "。"],
            yticklabels=["I", "love", "you"],
            titles=["注意力权重"],
        )
        fig.savefig(tmp_path / "heatmap.png")
    assert (tmp_path / "heatmap.png").stat().st_size > 1000
    plt.close(fig)


def test_heatmap_grid_shapes_and_errors():
    fig = show_heatmaps(torch.rand(2, 3, 4, 5))
    assert len(fig.axes) == 2 * 3 + 1  # six heat maps and a colour bar
    plt.close(fig)
    with pytest.raises(ValueError, match=r"matrices must be .* got \(5,\)"):
        show_heatmaps(torch.rand(5))


def test_image_attention_scale_and_colour_bar():
    image, weights = torch.rand(8, 8), torch.rand(4, 4) * 0.5
    ax = show_image_attention(image, weights)
    assert len(ax.figure.axes) == 1  # no colour bar unless asked
    overlay = ax.images[-1]
    assert overlay.get_clim() == pytest.approx(
        (weights.min().item(), weights.max().item())
    )  # by default the weights' own range
    plt.close("all")
    ax = show_image_attention(image, weights, vmin=0, vmax=1, colorbar="gate")
    bar = ax.figure.axes[-1]
    assert len(ax.figure.axes) == 2 and bar.get_ylabel() == "gate"
    assert ax.images[-1].get_clim() == (0, 1)
    plt.close("all")
    # several panels on one scale share one bar
    fig, axes = plt.subplots(1, 3)
    for ax in axes:
        show_image_attention(image, weights, ax=ax, vmin=0, vmax=0.5)
    fig.colorbar(axes[0].images[-1], ax=axes, label="weight")
    assert len(fig.axes) == 4 and fig.axes[-1].get_ylabel() == "weight"
    plt.close(fig)


def test_history_and_bleu_plots_draw_one_line_per_series():
    ax = plot_history({"train": [3.0, 2.0], "val": [3.1, 2.5]})
    assert len(ax.lines) == 2
    result = {"bleu": 10.0, "by_length": [("1–3", 5, 20.0), ("4", 7, 10.0)]}
    ax = plot_bleu_by_length({"a": result, "b": result})
    assert len(ax.lines) == 2 and ax.get_xlabel().startswith("source length")
    plt.close("all")


def _line(a, b, title=""):
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([0, 1], [a, b])
    ax.set_title(title)
    return fig


def _embedded(explorer):
    """The state data the explorer's page script reads, and the first image shown."""
    html = explorer.data
    start = html.index(f'id="{explorer.element_id}-data">') + len(
        f'id="{explorer.element_id}-data">'
    )
    data = json.loads(html[start:html.index("</script>", start)])
    first = re.search(
        rf'id="{explorer.element_id}-image" src="data:image/png;base64,([^"]+)"', html
    ).group(1)
    return data, base64.b64decode(first)


def test_static_explorer_embeds_every_state_in_order():
    plt.close("all")
    explorer = static_explorer(
        _line,
        {"a": [0, 1, 2], "b": ["up", "down"]},
        labels={"a": "start"},
        initial={"a": 1},
        alt=lambda a, b: f"a line from {a}, {b}",
    )
    assert (
        explorer.num_states == 6 and not plt.get_fignums()
    ), "every figure drawn must be closed"
    assert explorer.states == [
        {"a": a, "b": b} for a in [0, 1, 2] for b in ["up", "down"]
    ]
    assert explorer.alts[3] == "a line from 1, down"
    data, first = _embedded(explorer)
    assert data["sizes"] == [3, 2] and data["values"] == [
        ["0", "1", "2"],
        ["up", "down"],
    ]
    images = [base64.urlsafe_b64decode(state[0]) for state in data["states"]]
    assert (
        all(image.startswith(b"\x89PNG") for image in images) and len(set(images)) == 6
    )
    # URL-safe: no "/tmp/" by chance
    assert all("/" not in state[0] for state in data["states"])
    assert (
        first == images[2]
    ), "the page must first show the initial state (a=1, b='up')"
    html = explorer.data
    # numbers: slider; words: list
    assert html.count('type="range"') == 1 and html.count("<select") == 1
    assert ">start</label>" in html and 'alt="a line from 1, up"' in html


def test_static_explorer_ids_are_unique_per_explorer():
    first = static_explorer(_line, {"a": [0, 1], "b": [1]})
    second = static_explorer(_line, {"a": [0, 1], "b": [1]})
    assert first.element_id != second.element_id
    ids = re.findall(r'id="([^"]+)"', first.data)
    assert (
        ids
        and all(i.startswith(first.element_id) for i in ids)
        and len(ids) == len(set(ids))
    )
    assert first.element_id not in second.data


def test_static_explorer_caption_and_dropdowns():
    explorer = static_explorer(
        lambda n: (_line(0, n), f"n = {n}"), {"n": [1, 2, 3]}, dropdowns=["n"]
    )
    data, _ = _embedded(explorer)
    assert [state[2] for state in data["states"]] == ["n = 1", "n = 2", "n = 3"]
    assert (
        "<select" in explorer.data
        and 'type="range"' not in explorer.data
        and "<pre" in explorer.data
    )


def test_static_explorer_refuses_too_many_states_a_dead_control_and_bad_input():
    with pytest.raises(
        ValueError, match=r"3 a × 5 b = 15 states, more than max_states=10"
    ):
        static_explorer(_line, {"a": [0, 1, 2], "b": range(5)}, max_states=10)
    with pytest.raises(ValueError, match=r"control 'title' changes nothing"):
        static_explorer(
            lambda a, title: _line(a, 0), {"a": [0, 1], "title": ["x", "y"]}
        )
    assert not plt.get_fignums()
    with pytest.raises(TypeError, match=r"must return a matplotlib Figure .* got Axes"):
        static_explorer(lambda a: _line(a, 0).axes[0], {"a": [0, 1]})
    with pytest.raises(
        ValueError, match=r"initial value 5 of 'a' is not one of its values \[0, 1\]"
    ):
        static_explorer(_line, {"a": [0, 1], "b": [0]}, initial={"a": 5})
    with pytest.raises(ValueError, match=r"controls \['b'\] have no values"):
        static_explorer(_line, {"a": [0, 1], "b": []})
    plt.close("all")


# --- chapter 7's overlay of attention on an image -------------------------------------

def test_show_image_attention_upsamples_and_draws_the_box():
    image = torch.rand(1, 8, 12)
    weights = torch.arange(6.0).reshape(2, 3)
    ax = show_image_attention(image, weights, box=(1, 2, 5, 6), title="t")
    grey, overlay = ax.get_images()
    assert overlay.get_array().shape == (8, 12)
    assert overlay.get_array()[7, 11] == 5 and overlay.get_array()[3, 3] == 0
    (box,) = ax.patches
    assert (box.get_x(), box.get_y(), box.get_width(), box.get_height()) == (
        1.5, 0.5, 4, 4)
    assert ax.get_title() == "t"
    with pytest.raises(ValueError, match=r"multiple of h.*got \(3, 3\)"):
        show_image_attention(image, torch.rand(3, 3))
    plt.close("all")

"""The size of a figure's smallest text, as its PNG records it for the site test
(tests/site/test_figures.py): measured from what matplotlib draws, recorded by the
notebooks' PNG printer and by static explorers, for library figures and plain
matplotlib alike."""
import base64
import io
import json

import matplotlib.pyplot as plt
import nbformat
import pytest
from nbclient import NotebookClient
from PIL import Image

from attention_lib import plot_history, static_explorer
from attention_lib.plotting import (
    COLUMN_WIDTH,
    FIGURE_DPI,
    TEXT_SIZE_KEY,
    _notebook_png,
    smallest_text_px,
)


def _recorded(png: bytes) -> str | None:
    return Image.open(io.BytesIO(png)).text.get(TEXT_SIZE_KEY)


@pytest.fixture
def fig():
    fig, ax = plt.subplots(figsize=(4, 3), dpi=100)
    ax.plot([0, 1], [0, 1])
    ax.set_xlim(0, 1)
    ax.set_title("title", fontsize=14)
    ax.tick_params(labelsize=7)
    yield fig
    plt.close(fig)


def test_smallest_text_is_the_smallest_drawn_in_pixels_at_the_dpi(fig):
    assert smallest_text_px(fig) == pytest.approx(7 * 100 / 72)
    assert smallest_text_px(fig, dpi=200) == pytest.approx(7 * 200 / 72)
    fig.axes[0].set_xlabel("x", fontsize=5)
    assert smallest_text_px(fig) == pytest.approx(5 * 100 / 72)


def test_text_that_is_not_drawn_does_not_count(fig):
    ax = fig.axes[0]
    ax.text(0.5, 0.5, "hidden", fontsize=3).set_visible(False)
    ax.set_ylabel("", fontsize=2)
    ax.text(0.2, 0.2, "   ", fontsize=2)
    # A tick far outside the limits is not drawn, however small its label.
    ax.set_xticks([0, 0.5, 1, 50], ["0", "0.5", "1", "far"])
    ax.get_xticklabels()[-1].set_fontsize(3)
    ax.set_xlim(0, 1)  # set_xticks widened the limits to show the far tick
    assert smallest_text_px(fig) == pytest.approx(7 * 100 / 72)
    ax.set_xlim(0, 60)  # now the tick at 50 is drawn
    assert smallest_text_px(fig) == pytest.approx(3 * 100 / 72)


def test_a_figure_without_text_has_no_smallest_text():
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.imshow([[0, 1], [1, 0]])
    ax.axis("off")
    assert smallest_text_px(fig) is None
    plt.close(fig)


def test_the_notebook_png_records_the_size_and_is_the_inline_backends_png(fig):
    png = base64.b64decode(_notebook_png(fig, bbox_inches="tight"))
    assert float(_recorded(png)) == pytest.approx(7 * 100 / 72, abs=0.01)
    width = Image.open(io.BytesIO(png)).width
    assert 300 < width < 400  # 4 inches at 100 dpi, cropped to the drawing
    # The dpi it is printed at is the dpi the size is counted in.
    png = base64.b64decode(_notebook_png(fig, bbox_inches="tight", dpi=50))
    assert float(_recorded(png)) == pytest.approx(7 * 50 / 72, abs=0.01)


def test_explorer_images_record_their_text_size_at_the_explorers_dpi():
    def draw(size):
        fig, ax = plt.subplots(figsize=(3, 2))
        ax.plot([0, 1], [0, size])
        ax.tick_params(labelsize=size)
        return fig

    explorer = static_explorer(draw, {"size": [6, 12]}, dpi=80)
    states = json.loads(
        explorer.data.split('-data">', 1)[1].split("</script>", 1)[0]
    )["states"]
    sizes = [float(_recorded(base64.urlsafe_b64decode(s[0]))) for s in states]
    assert sizes == pytest.approx([6 * 80 / 72, 12 * 80 / 72], abs=0.01)


def test_library_figures_at_their_default_size_fit_the_column():
    """A figure at most COLUMN_WIDTH wide is shown at its own size in the ~672 px
    column; its text then needs 9 px."""
    assert COLUMN_WIDTH * FIGURE_DPI <= 672
    ax = plot_history({"train": [3.0, 2.0, 1.5], "val": [3.1, 2.4, 2.0]})
    fig = ax.figure
    fig.set_dpi(FIGURE_DPI)
    png = base64.b64decode(_notebook_png(fig, bbox_inches="tight"))
    plt.close(fig)
    assert Image.open(io.BytesIO(png)).width <= 672
    assert float(_recorded(png)) >= 9


def test_plain_matplotlib_in_a_notebook_records_its_text_size():
    """In a Jupyter kernel, importing the library is enough: figures that plain
    matplotlib code draws, shown by the inline backend, carry the size too."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import attention_lib\nimport matplotlib.pyplot as plt"
        ),
        nbformat.v4.new_code_cell(
            "fig, ax = plt.subplots(figsize=(4, 3))\nax.plot([1, 2], [3, 4])\n"
            "ax.tick_params(labelsize=7)"
        ),
        nbformat.v4.new_code_cell("%matplotlib inline\nplt.plot([1, 2])\nplt.show()"),
    ]
    NotebookClient(nb, kernel_name="python3", timeout=120).execute()
    pngs = [
        base64.b64decode(output["data"]["image/png"])
        for cell in nb.cells
        for output in cell.outputs
        if "image/png" in output.get("data", {})
    ]
    assert len(pngs) == 2
    # Default figure dpi (100): 7 pt tick labels are 9.72 px, 10 pt ones 13.89 px.
    assert [float(_recorded(png)) for png in pngs] == pytest.approx(
        [7 * FIGURE_DPI / 72, 10 * FIGURE_DPI / 72], abs=0.01
    )

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

import attention_lib.diagrams as diagrams
from attention_lib import valid_lens_to_mask
from attention_lib.diagrams import (draw_attention_pooling, draw_decoder_step,
                                    draw_dependency_chain, draw_mask_grid,
                                    draw_seq2seq_contexts)

DEFAULT_CALLS = {
    "draw_attention_pooling": lambda: draw_attention_pooling(),
    "draw_seq2seq_contexts": lambda: draw_seq2seq_contexts(),
    "draw_decoder_step": lambda: draw_decoder_step(),
    "draw_dependency_chain": lambda: draw_dependency_chain(),
    "draw_mask_grid": lambda: draw_mask_grid(torch.tensor([2, 4, 5]), num_kv=5),
}


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def drawn_texts(fig):
    """The non-empty Text artists that the figure really draws (no hidden axes'
    ticks)."""
    texts = list(fig.texts)
    for legend in fig.legends:
        texts += legend.get_texts()
    for ax in fig.axes:
        texts += ax.texts + [ax.title]
        if ax.axison:
            texts += [ax.xaxis.label, ax.yaxis.label]
            texts += ax.get_xticklabels() + ax.get_yticklabels()
    return [text for text in texts if text.get_visible() and text.get_text()]


def texts_of(fig):
    return [text.get_text() for text in drawn_texts(fig)]


def test_every_diagram_is_in_all_and_has_a_call_here():
    assert sorted(diagrams.__all__) == sorted(DEFAULT_CALLS)


@pytest.mark.parametrize("name", sorted(DEFAULT_CALLS))
def test_diagram_is_a_deterministic_slide_with_all_text_inside_and_apart(name):
    fig, again = DEFAULT_CALLS[name](), DEFAULT_CALLS[name]()
    assert isinstance(fig, Figure)
    width, height = fig.get_size_inches()
    assert 7 <= width <= 8 and 3 <= height <= 3.5
    fig.canvas.draw()
    again.canvas.draw()
    np.testing.assert_array_equal(np.asarray(fig.canvas.buffer_rgba()),
                                  np.asarray(again.canvas.buffer_rgba()))
    renderer = fig.canvas.get_renderer()
    figure_box = fig.bbox
    boxes = []
    for text in drawn_texts(fig):
        box = text.get_window_extent(renderer)
        assert (box.x0 >= figure_box.x0 - 1 and box.x1 <= figure_box.x1 + 1
                and box.y0 >= figure_box.y0 - 1 and box.y1 <= figure_box.y1 + 1), (
            f"{name}: {text.get_text()!r} is clipped by the figure's edge")
        boxes.append((text.get_text(), box))
    for i, (text_a, box_a) in enumerate(boxes):
        for text_b, box_b in boxes[i + 1:]:
            overlap_x = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
            overlap_y = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
            assert (
                overlap_x <= 1 or overlap_y <= 1
            ), f"{name}: {text_a!r} overlaps {text_b!r}"


def test_attention_pooling_labels_and_weights_from_softmax():
    scores = torch.tensor([0.5, -1.0, 2.0])
    texts = texts_of(draw_attention_pooling(scores))
    for label in ["$q$", "$k_1$", "$k_3$", "$v_1$", "$v_3$", "softmax"]:
        assert label in texts
    assert "$k_4$" not in texts
    weights = torch.softmax(scores, dim=-1)
    for weight in weights.tolist():
        assert f"{weight:.2f}" in texts
    assert abs(sum(float(f"{w:.2f}") for w in weights.tolist()) - 1) < 0.02


def test_seq2seq_contexts_has_one_context_left_and_one_per_step_right():
    fig = draw_seq2seq_contexts()
    left, right = fig.axes
    left_texts = [t.get_text() for t in left.texts]
    right_texts = [t.get_text() for t in right.texts]
    assert left_texts.count("$c$") == 1 and not any("c_" in t for t in left_texts)
    assert {"$c_1$", "$c_2$", "$c_3$"} <= set(right_texts) and "$c$" not in right_texts
    for texts in (left_texts, right_texts):
        assert {"$h_1$", "$h_{L_k}$", "$s_1$", "$s_3$"} <= set(texts)
    # Right: every encoder state feeds every context (3 x 3 arrows) and each context its
    # step (3); left: h_Lk -> c and c -> each of the 3 steps. Plus 2 + 2 recurrences.
    assert len(right.texts) - len(right_texts) == 0  # arrows carry no text
    arrows = [
        child for child in right.get_children() if type(child).__name__ == "Annotation"
    ]
    assert len(arrows) == 9 + 3 + 4
    arrows = [
        child for child in left.get_children() if type(child).__name__ == "Annotation"
    ]
    assert len(arrows) == 1 + 3 + 4


def test_decoder_step_shows_the_books_symbols():
    texts = texts_of(draw_decoder_step())
    for label in [
        "$s_{t'-1}$",
        "$h_1$",
        "$h_{L_k}$",
        r"$\alpha_{t'}$",
        "$c_{t'}$",
        "GRU",
        "$y_{t'-1}$",
        "$s_{t'}$",
        "$y_{t'}$",
    ]:
        assert label in texts, label


@pytest.mark.parametrize("num_steps", [2, 3, 4])
def test_dependency_chain_alternates_states_and_contexts(num_steps):
    texts = texts_of(draw_dependency_chain(num_steps))
    states = [t for t in texts if t.startswith("$s_")]
    contexts = [t for t in texts if t.startswith("$c_")]
    words = [t for t in texts if t.startswith("$y_")]
    assert len(states) == num_steps + 1 and len(contexts) == len(words) == num_steps
    assert states[:2] == ["$s_{t'-1}$", "$s_{t'}$"] and contexts[:2] == [
        "$c_{t'}$",
        "$c_{t'+1}$",
    ]
    assert words[0] == "$y_{t'-1}$"


@pytest.mark.parametrize("valid_lens, num_kv, num_queries", [
    ([2, 4, 5], 5, None),
    ([0, 3], 3, 2),
    ([1], 1, 1),
    ([7, 1, 0, 10], 10, 4),
])
def test_mask_grid_cells_are_the_library_mask(valid_lens, num_kv, num_queries):
    valid_lens = torch.tensor(valid_lens)
    fig = draw_mask_grid(valid_lens, num_kv, num_queries)
    expected = valid_lens_to_mask(valid_lens, num_kv)  # (B, Lk)
    assert len(fig.axes) == len(valid_lens) + 1
    rows = num_kv if num_queries is None else num_queries
    for b, ax in enumerate(fig.axes[:-1]):
        cells = np.asarray(ax.images[0].get_array())
        assert cells.shape == (rows, num_kv)
        np.testing.assert_array_equal(cells, expected[b].expand(rows, -1).int().numpy())
        assert ax.get_title() == f"valid_len={int(valid_lens[b])}"
    causal = np.asarray(fig.axes[-1].images[0].get_array())
    np.testing.assert_array_equal(causal, np.tril(np.ones((rows, num_kv), dtype=int)))
    assert fig.axes[-1].get_title() == "causal"


def test_mask_grid_with_one_length_per_query_and_no_causal_panel():
    valid_lens = torch.tensor([[1, 2, 3], [3, 3, 0]])  # (B, Lq)
    fig = draw_mask_grid(valid_lens, num_kv=4, causal=False)
    assert len(fig.axes) == 2
    expected = valid_lens_to_mask(valid_lens, 4).int().numpy()  # (B, Lq, Lk)
    for b, ax in enumerate(fig.axes):
        np.testing.assert_array_equal(np.asarray(ax.images[0].get_array()), expected[b])
    assert [ax.get_title() for ax in fig.axes] == ["sentence 1", "sentence 2"]


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda: draw_mask_grid([2, 3], 5),
            TypeError,
            r"valid_lens must be a torch.Tensor .* got a list of length 2",
        ),
        (
            lambda: draw_mask_grid(torch.tensor([2.0, 3.0]), 5),
            TypeError,
            r"valid_lens must hold integers",
        ),
        (
            lambda: draw_mask_grid(torch.tensor([2, 6]), 5),
            ValueError,
            r"valid_lens must lie in \[0, 5\]",
        ),
        (
            lambda: draw_mask_grid(torch.tensor([1, 2, 3, 4, 5]), 5),
            ValueError,
            r"1 to 4 sentences .* got shape \(5,\)",
        ),
        (
            lambda: draw_mask_grid(torch.tensor([2]), 11),
            ValueError,
            r"at most 10 .* num_kv=11",
        ),
        (
            lambda: draw_mask_grid(torch.tensor([2]), 5, num_queries=0),
            ValueError,
            r"num_queries must be at least 1, got 0",
        ),
        (
            lambda: draw_mask_grid(torch.tensor([[1, 2]]), 5, num_queries=3),
            ValueError,
            r"must have Lq=3 \(num_queries\), got \(1, 2\)",
        ),
        (
            lambda: draw_mask_grid(torch.tensor([2]), 5.0),
            TypeError,
            r"num_kv must be an integer .* got the float 5.0",
        ),
        (
            lambda: draw_mask_grid(torch.tensor([2]), 5, causal="yes"),
            TypeError,
            r"causal must be True or False, got the str 'yes'",
        ),
        (
            lambda: draw_attention_pooling([1.0, 2.0]),
            TypeError,
            r"attn_scores must be a float torch.Tensor of shape \(Lk,\), got a list",
        ),
        (
            lambda: draw_attention_pooling(torch.tensor([1, 2])),
            TypeError,
            r"attn_scores must be a float torch.Tensor .* dtype torch.int64",
        ),
        (
            lambda: draw_attention_pooling(torch.zeros(6)),
            ValueError,
            r"2 <= Lk <= 5 .* got \(6,\)",
        ),
        (
            lambda: draw_attention_pooling(torch.zeros(2, 3)),
            ValueError,
            r"got \(2, 3\)",
        ),
        (
            lambda: draw_dependency_chain(5),
            ValueError,
            r"num_steps must be at most 4 .*got 5",
        ),
        (
            lambda: draw_dependency_chain(1),
            ValueError,
            r"num_steps must be at least 2, got 1",
        ),
        (
            lambda: draw_dependency_chain(2.0),
            TypeError,
            r"num_steps must be an integer",
        ),
    ],
)
def test_bad_arguments_are_refused_with_a_message(call, error, message):
    with pytest.raises(error, match=message):
        call()

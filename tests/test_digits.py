"""attention_lib.digits: the real digits, the two pools, cluttered canvases and strips
(seeded, boxes tight around the digit, clutter outside the box, captions matching the
pool images used), caption batches and box masks."""
from collections import Counter

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_lib.digits import (
    BOS,
    CAPTION_VOCAB_SIZE,
    DIGIT_WORDS,
    EOS,
    PAD,
    box_mask,
    caption_batch,
    cluttered_digits,
    digit_pool,
    digit_strips,
    load_digit_images,
)


def key(image: torch.Tensor) -> bytes:
    return image.contiguous().numpy().tobytes()


def tight(image: torch.Tensor) -> torch.Tensor:
    """The rows and columns with ink, written independently of the library."""
    rows = [r for r in range(image.shape[0]) if image[r].max() > 0]
    cols = [c for c in range(image.shape[1]) if image[:, c].max() > 0]
    return image[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]


def crop_labels(split: str) -> dict[bytes, set[int]]:
    """Each pool image's tight crop -> the labels it has in that pool."""
    images, labels = digit_pool(split)
    found: dict[bytes, set[int]] = {}
    for image, label in zip(images, labels.tolist()):
        found.setdefault(key(tight(image)), set()).add(label)
    return found


def inside(image: torch.Tensor, box) -> torch.Tensor:
    top, left, bottom, right = box.tolist()
    return image[..., top:bottom, left:right]


# --- the digits and the pools ---------------------------------------------------------

def test_vocabulary():
    assert DIGIT_WORDS[0] == "zero" and DIGIT_WORDS[9] == "nine"
    assert len(DIGIT_WORDS) == 10
    assert (PAD, BOS, EOS, CAPTION_VOCAB_SIZE) == (10, 11, 12, 13)


def test_load_digit_images_are_the_real_digits_scaled():
    images, labels = load_digit_images()
    assert images.shape == (1797, 8, 8) and images.dtype == torch.float32
    assert labels.shape == (1797,) and labels.dtype == torch.long
    assert images.min() == 0 and images.max() == 1
    assert torch.equal(images * 16, (images * 16).round())  # grey levels 0..16
    assert labels.bincount().tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174,
                                          180]
    images[0] = -1  # a caller's change does not reach the next call
    assert load_digit_images()[0].min() == 0


def test_pools_split_the_digits_stratified_and_fixed():
    images, labels = load_digit_images()
    train, train_labels = digit_pool("train")
    test, test_labels = digit_pool("test")
    assert (len(train), len(test)) == (1347, 450)
    whole = Counter((key(i), int(lab)) for i, lab in zip(images, labels))
    parts = Counter((key(i), int(lab)) for i, lab in zip(train, train_labels))
    parts.update((key(i), int(lab)) for i, lab in zip(test, test_labels))
    assert parts == whole  # every digit in exactly one pool
    per_class = labels.bincount()
    assert torch.equal(
        test_labels.bincount(), torch.tensor([round(n / 4) for n in per_class.tolist()])
    )
    assert torch.equal(train_labels.bincount() + test_labels.bincount(), per_class)
    assert torch.equal(digit_pool("test")[0], test)  # fixed
    other, _ = digit_pool("test", seed=1)
    assert len(other) == 450 and not torch.equal(other, test)


def test_pool_rejects_unknown_split():
    with pytest.raises(ValueError, match="split must be 'train' or 'test'"):
        digit_pool("val")


# --- cluttered digits -----------------------------------------------------------------

@pytest.fixture(scope="module")
def canvases():
    return cluttered_digits(60, split="test", seed=3)


def test_cluttered_digits_shapes_and_seeding(canvases):
    images, labels, boxes = canvases
    assert images.shape == (60, 1, 24, 24) and images.dtype == torch.float32
    assert labels.shape == (60,) and labels.dtype == torch.long
    assert boxes.shape == (60, 4) and boxes.dtype == torch.long
    assert 0 <= images.min() and images.max() <= 1
    again = cluttered_digits(60, split="test", seed=3)
    assert all(torch.equal(a, b) for a, b in zip(canvases, again))
    assert not torch.equal(cluttered_digits(60, split="test", seed=4).images, images)


def test_the_box_holds_a_whole_pool_digit_of_the_label_and_nothing_else(canvases):
    images, labels, boxes = canvases
    clean = cluttered_digits(60, split="test", seed=3, num_fragments=0)
    assert torch.equal(clean.labels, labels) and torch.equal(clean.boxes, boxes)
    known = crop_labels("test")
    rows = zip(images[:, 0], clean.images[:, 0], labels, boxes)
    for image, plain, label, box in rows:
        digit = inside(image, box)
        # Tight: the box's outer rows and columns have ink.
        assert digit[0].max() > 0 and digit[-1].max() > 0
        assert digit[:, 0].max() > 0 and digit[:, -1].max() > 0
        assert int(label) in known[key(digit)]  # a test-pool digit with that label
        # Fragments never enter the box; without them there is no ink outside it.
        assert torch.equal(digit, inside(plain, box))
        outside = ~box_mask(box[None], 24, 24)[0]
        assert plain[outside].max() == 0
        assert image[outside].max() > 0  # but the clutter is there


def test_more_fragments_more_clutter_and_other_sizes():
    few = cluttered_digits(30, num_fragments=1, seed=0)
    many = cluttered_digits(30, num_fragments=8, seed=0)
    assert torch.equal(few.boxes, many.boxes)
    assert many.images.sum() > few.images.sum()
    big = cluttered_digits(5, canvas_size=40, fragment_size=6, seed=1)
    assert big.images.shape == (5, 1, 40, 40)
    assert (big.boxes[:, 2:] <= 40).all() and (big.boxes[:, :2] >= 0).all()


def test_cluttered_digits_bad_arguments():
    with pytest.raises(ValueError, match="canvas_size must be at least 15"):
        cluttered_digits(2, canvas_size=12)
    assert cluttered_digits(2, canvas_size=8, num_fragments=0).images.shape[-1] == 8
    with pytest.raises(ValueError, match="fragment_size must be at most 8"):
        cluttered_digits(2, fragment_size=9)
    with pytest.raises(ValueError, match="split"):
        cluttered_digits(2, split="valid")


# --- strips ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def strips():
    return digit_strips(80, split="train", seed=5)


def test_strips_shapes_counts_and_seeding(strips):
    images, captions, boxes = strips
    assert images.shape == (80, 1, 12, 40)
    assert len(captions) == len(boxes) == 80
    assert {len(c) for c in captions} == {2, 3, 4}
    assert all(b.shape == (len(c), 4) and b.dtype == torch.long
               for b, c in zip(boxes, captions))
    again = digit_strips(80, split="train", seed=5)
    assert torch.equal(again.images, images) and again.captions == captions
    assert digit_strips(80, split="train", seed=6).captions != captions


def test_strip_boxes_go_left_to_right_apart_and_hold_the_captioned_digits(strips):
    known = crop_labels("train")
    for image, caption, box in zip(strips.images[:, 0], strips.captions, strips.boxes):
        assert (box[:, 0] >= 0).all() and (box[:, 2] <= 12).all()
        assert (box[:, 1] >= 0).all() and (box[:, 3] <= 40).all()
        assert (box[1:, 1] > box[:-1, 3]).all()  # at least one empty column between
        for digit_box, label in zip(box, caption):
            assert label in known[key(inside(image, digit_box))]
        outside = ~box_mask(box, 12, 40).any(dim=0)
        assert image[outside].max() == 0


def test_strips_bad_arguments():
    with pytest.raises(ValueError, match="width must be at least 35"):
        digit_strips(2, width=30)
    with pytest.raises(ValueError, match="max_digits must be at least 3"):
        digit_strips(2, min_digits=3, max_digits=2)
    one = digit_strips(3, min_digits=1, max_digits=1, width=8, height=8)
    assert [len(c) for c in one.captions] == [1, 1, 1]


# --- caption batches and box masks ----------------------------------------------------

def test_caption_batch_by_hand():
    tgt_input, tgt_output, valid = caption_batch([[3, 1, 4], [5]])
    assert tgt_input.tolist() == [[BOS, 3, 1, 4], [BOS, 5, PAD, PAD]]
    assert tgt_output.tolist() == [[3, 1, 4, EOS], [5, EOS, PAD, PAD]]
    assert valid.tolist() == [4, 2]
    padded, _, _ = caption_batch([[7]], max_len=4)
    assert padded.tolist() == [[BOS, 7, PAD, PAD]]
    assert all(t.dtype == torch.long for t in caption_batch([[1]]))


def test_caption_batch_bad_input():
    with pytest.raises(ValueError, match="max_len must be at least 4"):
        caption_batch([[1, 2, 3]], max_len=3)
    with pytest.raises(ValueError, match=r"captions\[1\] must hold digits 0..9"):
        caption_batch([[1], [12]])
    with pytest.raises(TypeError, match="captions must be a list of lists"):
        caption_batch("123")


def test_box_mask_by_hand():
    mask = box_mask(torch.tensor([[1, 0, 3, 2]]), 4, 3)
    assert mask.tolist() == [[[False, False, False],
                               [True, True, False],
                               [True, True, False],
                               [False, False, False]]]
    with pytest.raises(ValueError, match=r"boxes must have shape \(N, 4\).*\(4,\)"):
        box_mask(torch.tensor([1, 0, 3, 2]), 4, 3)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=4, max_size=4))
def test_box_mask_covers_exactly_the_box(corners):
    top, bottom = sorted(corners[:2])
    left, right = sorted(corners[2:])
    mask = box_mask(torch.tensor([[top, left, bottom, right]]), 9, 9)[0]
    expected = torch.zeros(9, 9, dtype=torch.bool)
    expected[top:bottom, left:right] = True
    assert torch.equal(mask, expected)

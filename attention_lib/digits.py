"""Images for the visual-attention chapter, built from real handwriting: the 1,797
8 × 8 digits of scikit-learn's ``load_digits`` (UCI's optical digits; nothing is
downloaded).

* :func:`digit_pool`: a fixed, stratified 75/25 split of the digits into a "train"
  and a "test" pool, so held-out images are held-out handwriting.
* :func:`cluttered_digits`: one digit on a larger canvas among fragments of other
  digits, with the digit's box: where attention should look.
* :func:`digit_strips`: a few digits side by side, the caption "the digits left to
  right" and one box per digit: something to describe word by word.
* :func:`caption_batch` turns captions into a decoder's input and target;
  :func:`box_mask` turns boxes into pixel masks.

A box is ``(top, left, bottom, right)`` in pixels, bottom and right exclusive, so box
``b`` covers ``image[..., b[0]:b[2], b[1]:b[3]]``. It is the digit's tight box: the
smallest one holding all its ink (pixels above zero).

Taught in ``chapters/07_visual/01_channel_spatial.ipynb``.
"""
from __future__ import annotations

import functools
import numbers
from typing import NamedTuple

import torch
from torch import Tensor
from torch.nn import functional as F

from ._checks import check_int, describe

__all__ = [
    "DIGIT_WORDS",
    "PAD",
    "BOS",
    "EOS",
    "CAPTION_VOCAB_SIZE",
    "load_digit_images",
    "digit_pool",
    "DigitCanvases",
    "cluttered_digits",
    "DigitStrips",
    "digit_strips",
    "caption_batch",
    "box_mask",
]

DIGIT_WORDS = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"
)
# The captions' vocabulary: tokens 0-9 are the digits themselves, then three specials.
PAD, BOS, EOS = 10, 11, 12
CAPTION_VOCAB_SIZE = 13

DIGIT_SIZE = 8  # load_digits' images are 8 × 8
TEST_SHARE = 0.25


# --- the digits and the two pools ----------------------------------------------------

@functools.lru_cache(maxsize=1)
def _digits() -> tuple[Tensor, Tensor]:
    from sklearn.datasets import load_digits  # imported when first needed: it is slow

    data = load_digits()
    images = torch.tensor(data.images, dtype=torch.float32) / 16  # (1797, 8, 8)
    return images, torch.tensor(data.target, dtype=torch.long)  # (1797,)


def load_digit_images() -> tuple[Tensor, Tensor]:
    """All 1,797 handwritten digits of ``sklearn.datasets.load_digits``, grey levels
    0..16 scaled to [0, 1], and their labels. Each call returns new tensors.

    Shapes:
        returns: images (1797, 8, 8) float32 in [0, 1], labels (1797,) long in 0..9

    Taught in ``chapters/07_visual/01_channel_spatial.ipynb``.
    """
    images, labels = _digits()
    return images.clone(), labels.clone()


def _check_split(split) -> None:
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {describe(split)}")


def digit_pool(split: str, seed: int = 0) -> tuple[Tensor, Tensor]:
    """One side of a stratified 75/25 split of the 1,797 digits: "train" or "test".

    Each class is shuffled (by ``seed``) and its first quarter, rounded, goes to
    "test", so both pools hold every class in the proportions of the whole set. The
    generators below always use ``seed=0`` here: their own seeds choose images from a
    pool, never move an image between pools.

    Shapes:
        returns: images (N, 8, 8) float32, labels (N,) long; N = 1,347 ("train") or
        450 ("test") for every seed

    Taught in ``chapters/07_visual/01_channel_spatial.ipynb``.
    """
    _check_split(split)
    images, labels = load_digit_images()
    generator = torch.Generator().manual_seed(check_int("seed", seed, 0))
    in_test = torch.zeros(len(labels), dtype=torch.bool)
    for digit in range(10):
        members = (labels == digit).nonzero().squeeze(1)  # (n_digit,)
        shuffled = members[torch.randperm(len(members), generator=generator)]
        in_test[shuffled[: round(TEST_SHARE * len(members))]] = True
    keep = in_test if split == "test" else ~in_test
    return images[keep], labels[keep]


def _tight_crop(image: Tensor) -> Tensor:
    """The image cut down to the rows and columns that hold ink."""
    rows = (image.amax(dim=1) > 0).nonzero().squeeze(1)
    cols = (image.amax(dim=0) > 0).nonzero().squeeze(1)
    return image[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]  # (h, w)


def _pick(u: Tensor, count: int) -> int:
    """A uniform choice in 0..count-1 from a uniform number u in [0, 1)."""
    return min(int(u * count), count - 1)


# --- one digit among clutter ----------------------------------------------------------

class DigitCanvases(NamedTuple):
    """Digits placed on larger canvases, what :func:`cluttered_digits` returns.

    Shapes:
        images: (N, 1, S, S) float32 in [0, 1]
        labels: (N,) long, the whole digit's class
        boxes:  (N, 4) long, the whole digit's (top, left, bottom, right)

    Taught in ``chapters/07_visual/01_channel_spatial.ipynb``.
    """

    images: Tensor
    labels: Tensor
    boxes: Tensor


def cluttered_digits(
    num_images: int,
    split: str = "train",
    canvas_size: int = 24,
    num_fragments: int = 4,
    fragment_size: int = 4,
    seed: int = 0,
) -> DigitCanvases:
    """One whole digit at a random place on an S × S canvas, among ``num_fragments``
    fragments of other digits (cluttered MNIST in miniature, as in Mnih et al. 2014).

    The digit comes from the ``split`` pool, cut to its tight box and placed uniformly
    at random. Each fragment is a ``fragment_size`` square crop, from the inkier half of
    the crops of a pool digit of another class, placed where it does not touch the
    digit's box; fragments may overlap each other (pixels combine by maximum). So the
    box holds the digit and nothing else, and outside it there is no ink of the digit.

    Seeded with its own ``torch.Generator``: the same arguments give the same images.
    The digits and their places are drawn first, so they do not depend on
    ``num_fragments``: ``num_fragments=0`` gives the same digits without clutter.

    Shapes:
        returns: :class:`DigitCanvases` with images (N, 1, S, S), labels (N,), boxes
        (N, 4); N = ``num_images``, S = ``canvas_size``

    Taught in ``chapters/07_visual/01_channel_spatial.ipynb``.
    """
    num_images = check_int("num_images", num_images, 0)
    size = check_int("canvas_size", canvas_size, DIGIT_SIZE)
    num_fragments = check_int("num_fragments", num_fragments, 0)
    f = check_int("fragment_size", fragment_size, 1)
    if f > DIGIT_SIZE:
        raise ValueError(f"fragment_size must be at most {DIGIT_SIZE}, got {f}")
    if num_fragments and size < DIGIT_SIZE + 2 * f - 1:
        raise ValueError(
            f"canvas_size must be at least {DIGIT_SIZE + 2 * f - 1} (8 + 2 ×"
            f" fragment_size − 1) to leave room for fragments beside any digit, got"
            f" {size}"
        )
    pool_images, pool_labels = digit_pool(split)
    generator = torch.Generator().manual_seed(check_int("seed", seed, 0))
    # 1. The digits and their places.
    chosen = torch.randint(len(pool_labels), (num_images,), generator=generator)
    u_place = torch.rand(num_images, 2, generator=generator)  # (N, 2)
    # 2. The fragments: a source, a crop of it, a place on the canvas.
    u_frag = torch.rand(num_images, num_fragments, 3, generator=generator)  # (N, F, 3)
    ink = F.avg_pool2d(pool_images.unsqueeze(1), f, stride=1).squeeze(1)  # (n, c, c)
    inky = ink >= ink.amax(dim=(1, 2), keepdim=True) / 2  # the inkier crops
    corners = torch.arange(size - f + 1)  # a fragment's possible top (or left)

    images = torch.zeros(num_images, 1, size, size)
    boxes = torch.zeros(num_images, 4, dtype=torch.long)
    for i in range(num_images):
        digit = _tight_crop(pool_images[chosen[i]])  # (h, w)
        h, w = digit.shape
        top = _pick(u_place[i, 0], size - h + 1)
        left = _pick(u_place[i, 1], size - w + 1)
        boxes[i] = torch.tensor([top, left, top + h, left + w])
        # Fragment corners (r, c) whose f × f square misses the box.
        clear_rows = (corners + f <= top) | (corners >= top + h)  # (S − f + 1,)
        clear_cols = (corners + f <= left) | (corners >= left + w)
        free = (clear_rows[:, None] | clear_cols[None, :]).nonzero()  # (n_free, 2)
        others = (pool_labels != pool_labels[chosen[i]]).nonzero().squeeze(1)
        canvas = images[i, 0]  # (S, S), filled in place
        for u_source, u_crop, u_where in u_frag[i]:
            source = others[_pick(u_source, len(others))]
            crops = inky[source].nonzero()  # (n_inky, 2)
            r, c = crops[_pick(u_crop, len(crops))].tolist()
            fragment = pool_images[source, r : r + f, c : c + f]  # (f, f)
            y, x = free[_pick(u_where, len(free))].tolist()
            region = canvas[y : y + f, x : x + f]
            region.copy_(torch.maximum(region, fragment))
        canvas[top : top + h, left : left + w] = digit
    return DigitCanvases(images, pool_labels[chosen], boxes)


# --- a few digits in a row ------------------------------------------------------------

class DigitStrips(NamedTuple):
    """Rows of digits, what :func:`digit_strips` returns.

    Shapes:
        images:   (N, 1, height, width) float32 in [0, 1]
        captions: N lists of n_i ints, the digits left to right
        boxes:    N long tensors (n_i, 4), each digit's (top, left, bottom, right), in
                  the order of the caption

    Taught in ``chapters/07_visual/02_cross_attention.ipynb``.
    """

    images: Tensor
    captions: list[list[int]]
    boxes: list[Tensor]


def digit_strips(
    num_images: int,
    split: str = "train",
    min_digits: int = 2,
    max_digits: int = 4,
    height: int = 12,
    width: int = 40,
    seed: int = 0,
) -> DigitStrips:
    """Strips of ``min_digits`` to ``max_digits`` digits from the ``split`` pool, left
    to right, each cut to its tight box, with random gaps (at least one empty column
    between two digits) and a random vertical place. Boxes never overlap.

    Seeded with its own ``torch.Generator``: the same arguments give the same strips.

    Shapes:
        returns: :class:`DigitStrips` with images (N, 1, height, width), N captions of
        n_i digits and N boxes (n_i, 4); N = ``num_images``

    Taught in ``chapters/07_visual/02_cross_attention.ipynb``.
    """
    num_images = check_int("num_images", num_images, 0)
    min_digits = check_int("min_digits", min_digits, 1)
    max_digits = check_int("max_digits", max_digits, min_digits)
    height = check_int("height", height, DIGIT_SIZE)
    needed = max_digits * (DIGIT_SIZE + 1) - 1
    if check_int("width", width, 1) < needed:
        raise ValueError(
            f"width must be at least {needed} to hold max_digits={max_digits} digits"
            f" of width {DIGIT_SIZE} with a gap between them, got {width}"
        )
    pool_images, pool_labels = digit_pool(split)
    generator = torch.Generator().manual_seed(check_int("seed", seed, 0))
    counts = torch.randint(min_digits, max_digits + 1, (num_images,),
                           generator=generator)  # (N,)
    chosen = torch.randint(len(pool_labels), (num_images, max_digits),
                           generator=generator)  # (N, max_digits)
    u_gaps = torch.rand(num_images, max_digits + 1, generator=generator)
    u_tops = torch.rand(num_images, max_digits, generator=generator)

    images = torch.zeros(num_images, 1, height, width)
    captions, boxes = [], []
    for i in range(num_images):
        n = int(counts[i])
        digits = [_tight_crop(pool_images[j]) for j in chosen[i, :n]]
        # The columns left over, beyond the digits and a one-column gap between each
        # two, shared at random among the n + 1 gaps (margins included).
        spare = width - sum(d.shape[1] for d in digits) - (n - 1)
        shares = u_gaps[i, : n + 1] / u_gaps[i, : n + 1].sum()  # (n + 1,)
        extra = (spare * shares).floor().long()  # (n + 1,), sums to <= spare
        left = int(extra[0])
        strip_boxes = []
        for k, digit in enumerate(digits):
            h, w = digit.shape
            top = _pick(u_tops[i, k], height - h + 1)
            images[i, 0, top : top + h, left : left + w] = digit
            strip_boxes.append([top, left, top + h, left + w])
            left += w + 1 + int(extra[k + 1])
        captions.append(pool_labels[chosen[i, :n]].tolist())
        boxes.append(torch.tensor(strip_boxes, dtype=torch.long))  # (n, 4)
    return DigitStrips(images, captions, boxes)


# --- captions and boxes as tensors ----------------------------------------------------

def caption_batch(
    captions, max_len: int | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """Captions (lists of digits) as a decoder's teacher-forcing batch: input ``<bos>``
    d_1 ... d_n, target d_1 ... d_n ``<eos>``, both padded with PAD to ``max_len``
    (default: the longest caption plus one). ``tgt_valid_lens`` counts the target's
    real tokens, ``<eos>`` included.

    Shapes:
        captions: N lists of n_i ints in 0..9; returns: tgt_input (N, L), tgt_output
        (N, L), tgt_valid_lens (N,), all long; L = ``max_len``

    Taught in ``chapters/07_visual/02_cross_attention.ipynb``.
    """
    if isinstance(captions, (str, Tensor)) or not hasattr(captions, "__iter__"):
        raise TypeError(
            f"captions must be a list of lists of digits, got {describe(captions)}"
        )
    captions = [list(caption) for caption in captions]
    for i, caption in enumerate(captions):
        if not all(isinstance(d, numbers.Integral) and 0 <= d <= 9 for d in caption):
            raise ValueError(
                f"captions[{i}] must hold digits 0..9 (ints), got {caption!r}"
            )
    longest = max((len(caption) for caption in captions), default=0) + 1
    length = longest if max_len is None else check_int("max_len", max_len, 1)
    if length < longest:
        raise ValueError(
            f"max_len must be at least {longest} (the longest caption plus <eos>), got"
            f" {length}"
        )
    tgt_input = torch.full((len(captions), length), PAD, dtype=torch.long)
    tgt_output = torch.full((len(captions), length), PAD, dtype=torch.long)
    for i, caption in enumerate(captions):
        digits = [int(d) for d in caption]
        tgt_input[i, : len(digits) + 1] = torch.tensor([BOS] + digits)
        tgt_output[i, : len(digits) + 1] = torch.tensor(digits + [EOS])
    tgt_valid_lens = torch.tensor([len(c) + 1 for c in captions], dtype=torch.long)
    return tgt_input, tgt_output, tgt_valid_lens


def box_mask(boxes: Tensor, height: int, width: int) -> Tensor:
    """A pixel mask per box: True inside it (rows top..bottom − 1, columns
    left..right − 1).

    Shapes:
        boxes: (N, 4) integer (top, left, bottom, right); returns: (N, height, width)
        bool

    Taught in ``chapters/07_visual/01_channel_spatial.ipynb``.
    """
    if not isinstance(boxes, Tensor) or boxes.dim() != 2 or boxes.shape[1] != 4:
        got = tuple(boxes.shape) if isinstance(boxes, Tensor) else describe(boxes)
        raise ValueError(
            f"boxes must have shape (N, 4) as (top, left, bottom, right), got {got}"
        )
    rows = torch.arange(check_int("height", height, 1), device=boxes.device)
    cols = torch.arange(check_int("width", width, 1), device=boxes.device)
    top, left, bottom, right = (boxes[:, k, None] for k in range(4))  # (N, 1) each
    in_rows = (rows >= top) & (rows < bottom)  # (N, height)
    in_cols = (cols >= left) & (cols < right)  # (N, width)
    return in_rows[:, :, None] & in_cols[:, None, :]  # (N, height, width)

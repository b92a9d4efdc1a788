"""Device choice, seeding, and one plain training function for sequence-to-sequence
models.

Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
"""
from __future__ import annotations

import contextlib
import random
import time
from functools import partial
from typing import Callable, Iterable

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.optim.lr_scheduler import LRScheduler
from tqdm.auto import tqdm

from ._checks import describe
from .measure import fitted_threads, native_bfloat16

__all__ = [
    "choose_device",
    "autocast",
    "set_seed",
    "sequence_loss",
    "History",
    "TimeBudget",
    "train_seq2seq",
    "evaluate_loss",
    "train_classifier",
    "evaluate_accuracy",
]


def choose_device() -> torch.device:
    """CUDA if available, then Apple's MPS, then the CPU.

    Shapes:
        returns: a ``torch.device``

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """
    if torch.cuda.is_available():
        return torch.device("cuda")
    if (
        getattr(torch.backends, "mps", None) is not None
        and torch.backends.mps.is_available()
    ):
        return torch.device("mps")
    return torch.device("cpu")


def autocast(device: torch.device | str, precision: str = "auto"):
    """The context in which a model computes: ``"float32"`` (nothing changes),
    ``"bfloat16"`` (``torch.autocast``: matrix products in bfloat16, reductions such
    as softmax, LayerNorm and the loss in float32), or ``"auto"``: bfloat16 where
    :func:`native_bfloat16` says the device has it, float32 elsewhere.

    Shapes:
        returns: a context manager

    Taught in ``chapters/05_transformer/02_training.ipynb``.
    """
    device = torch.device(device)
    if precision not in ("auto", "float32", "bfloat16"):
        raise ValueError(
            f"precision must be 'auto', 'float32' or 'bfloat16', got {precision!r}"
        )
    if precision == "auto":
        precision = "bfloat16" if native_bfloat16(device) else "float32"
    if precision == "float32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)


def set_seed(seed: int = 0) -> None:
    """Seed Python, NumPy and PyTorch (all devices) so a run can be repeated.

    Shapes:
        none

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds CUDA and MPS


def sequence_loss(
    logits: torch.Tensor, targets: torch.Tensor, pad: int, label_smoothing: float = 0.0
) -> torch.Tensor:
    """Mean cross-entropy per real target token; padding positions (``targets == pad``)
    count for nothing. With ``label_smoothing`` ε the target puts 1 − ε on the right
    token and ε spread evenly over the whole vocabulary (the Transformer's ε = 0.1).

    Shapes:
        logits: (B, Lq, V); targets: (B, Lq); returns: scalar

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """
    if logits.dim() != 3 or logits.shape[:2] != targets.shape:
        raise ValueError(
            "logits must be (B, Lq, V) matching targets (B, Lq); got"
            f" {tuple(logits.shape)} and {tuple(targets.shape)}"
        )
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing!r}")
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]),
        targets.reshape(-1),
        ignore_index=pad,
        label_smoothing=label_smoothing,
    )


class History(dict):
    """A loss history, ``{"train": [...], "val": [...]}`` (one number per epoch), that
    also records the training time and work: ``seconds``, ``batches`` and ``tokens``.

    Taught in ``chapters/05_transformer/02_training.ipynb``.
    """

    seconds: float = 0.0
    batches: int = 0
    tokens: int = 0


def _end_bar_early(bar) -> None:
    """Make a progress bar stopped early (by a time budget) read n/n and show full.

    Setting ``bar.total`` alone leaves a notebook bar's drawn maximum at the old total
    (tqdm's widget keeps its own), so "1021/1021" would sit in a bar filled to 3 %.
    ``reset(total=...)`` updates both; the start time is kept so the rate stays true.
    """
    if bar.disable:
        return
    done, started = bar.n, bar.start_t
    bar.reset(total=done)
    bar.start_t = started
    bar.update(done)
    bar.refresh()


class TimeBudget:
    """A race against the clock, as :func:`train_seq2seq`'s ``callback``: training
    stops once it has used ``max_seconds`` (None: no limit; the batch under way is
    finished), and ``checkpoint(batches_done, training_seconds)`` is called every
    ``every`` batches and once at the end, e.g. to measure BLEU. The time spent in
    ``checkpoint`` is not training time.

    Shapes:
        none

    Taught in ``chapters/05_transformer/02_training.ipynb``.
    """

    def __init__(
        self,
        max_seconds: float | None = None,
        checkpoint: Callable[[int, float], None] | None = None,
        every: int = 0,
    ):
        self.max_seconds, self.checkpoint, self.every = max_seconds, checkpoint, every

    def __call__(self, batches: int, seconds: float, done: bool = False) -> str | None:
        out_of_time = self.max_seconds is not None and seconds >= self.max_seconds
        due = done or (self.every and batches % self.every == 0 and not out_of_time)
        if self.checkpoint is not None and due:
            self.checkpoint(batches, seconds)
        return "time budget" if out_of_time and not done else None


def train_seq2seq(
    model: nn.Module,
    loader,
    num_epochs: int,
    pad: int,
    lr: float = 0.005,
    grad_clip: float = 1.0,
    device: torch.device | None = None,
    val_loader=None,
    progress: bool = True,
    optimizer: Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer] | None = None,
    schedule: Callable[[torch.optim.Optimizer], LRScheduler] | None = None,
    label_smoothing: float = 0.0,
    precision: str = "float32",
    callback: Callable[..., str | None] | None = None,
) -> History:
    """Train an :class:`~attention_lib.seq2seq.EncoderDecoder` with teacher forcing.

    Adam with learning rate ``lr`` unless ``optimizer`` is given: a factory that takes
    the model's parameters and returns an optimiser, e.g.
    ``lambda params: torch.optim.SGD(params, lr=0.1)``. ``schedule``, if given, takes
    the optimiser and returns a learning-rate scheduler, stepped after every batch (a
    Transformer's warm-up is one). ``label_smoothing`` applies to the training loss
    only (the validation loss stays plain cross-entropy, comparable between runs).
    Gradient-norm clipping at ``grad_clip``, one progress bar over all batches.
    ``precision`` is :func:`autocast`'s (``"auto"``: bfloat16 where the device has it
    natively).

    ``callback(batches_done, training_seconds, done=False)``, if given, is called
    after every batch; a string it returns stops training, and is shown on the bar as
    the reason. It is called once more with ``done=True`` when training ends. Time
    spent in it (and in the validation loss) is not training time. A
    :class:`TimeBudget` stops at a time limit and measures checkpoints.

    Returns the loss history: the mean training loss per token for each epoch
    (``"train"``; a last, cut-short epoch counts too) and, when a ``val_loader`` is
    given, the validation loss after each epoch (``"val"``). It is a
    :class:`History`: its attributes ``seconds``, ``batches`` and ``tokens`` (target
    tokens, padding excluded) give the training time and the work done.

    Shapes:
        each batch: :class:`~attention_lib.data.Batch` (src (B, Lk), src_valid_lens
        (B,), tgt_input (B, Lq), tgt_output (B, Lq), tgt_valid_lens (B,))

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """
    if num_epochs < 1:
        raise ValueError(f"num_epochs must be at least 1, got {num_epochs}")
    device = device or choose_device()
    model.to(device)
    optimizer = (optimizer or partial(torch.optim.Adam, lr=lr))(model.parameters())
    scheduler = None if schedule is None else schedule(optimizer)
    history = History(train=[], **({} if val_loader is None else {"val": []}))
    # At most about 100 refreshes per bar, however long the run: each refresh of the bar
    # in Jupyter is a few kernel messages, and a runner that reads them only after a
    # long cell (nbval) loses some when thousands pile up.
    total_batches = num_epochs * len(loader)
    bar = tqdm(total=total_batches, desc="training", unit="batch", disable=not progress,
               miniters=max(1, total_batches // 100))
    precision_context = autocast(device, precision)  # decided once, entered per batch
    stop = None
    with fitted_threads() as refit:  # as many threads as the machine can give
        for epoch in range(num_epochs):
            total, tokens = 0.0, 0
            started = time.perf_counter()
            for batch in loader:
                refit()  # the machine's load may have changed
                model.train()  # (a callback may have evaluated the model)
                src, src_valid_lens, tgt_input, tgt_output, _ = (
                    t.to(device) for t in batch
                )
                # 1. Teacher forcing: the decoder reads the true previous token, not
                # its own guess.
                with precision_context:
                    logits = model(src, src_valid_lens, tgt_input)  # (B, Lq, V)
                    loss = sequence_loss(
                        logits.float(), tgt_output, pad, label_smoothing
                    )
                # 2. Backpropagate, clip the gradient norm (RNNs' gradients can
                # explode), step.
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()
                n = int((tgt_output != pad).sum())
                total, tokens = total + loss.item() * n, tokens + n
                history.batches += 1
                bar.update(1)
                bar.set_postfix(
                    epoch=epoch + 1, loss=f"{total / tokens:.3f}", refresh=False
                )  # shown at the next refresh
                # 3. The callback, off the clock; it may stop training.
                history.seconds += time.perf_counter() - started
                stop = callback and callback(history.batches, history.seconds)
                started = time.perf_counter()
                if stop:
                    # stopped on purpose, not by an error: drawn full
                    _end_bar_early(bar)
                    bar.set_postfix(epoch=epoch + 1, loss=f"{total / tokens:.3f}",
                                    stopped=stop)
                    break
            history.seconds += time.perf_counter() - started
            history.tokens += tokens
            history["train"].append(total / tokens)
            if val_loader is not None:
                history["val"].append(evaluate_loss(model, val_loader, pad, device))
            if stop:
                break
    bar.close()
    if callback is not None:
        callback(history.batches, history.seconds, done=True)
    return history


@torch.no_grad()
def evaluate_loss(
    model: nn.Module, loader, pad: int, device: torch.device | None = None
) -> float:
    """Mean cross-entropy per real target token over a loader, with teacher forcing, no
    gradient.

    Shapes:
        each batch: :class:`~attention_lib.data.Batch`; returns: float

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """
    device = device or next(model.parameters()).device
    model.eval()
    total, tokens = 0.0, 0
    for batch in loader:
        src, src_valid_lens, tgt_input, tgt_output, _ = (t.to(device) for t in batch)
        loss = sequence_loss(model(src, src_valid_lens, tgt_input), tgt_output, pad)
        n = int((tgt_output != pad).sum())
        total, tokens = total + loss.item() * n, tokens + n
    return total / tokens


def _check_examples(images, labels) -> None:
    """images (N, ...) and labels (N,) long, one label per image."""
    if not isinstance(images, torch.Tensor) or not images.dtype.is_floating_point:
        raise TypeError(
            f"images must be a floating-point torch.Tensor, got {describe(images)}"
        )
    if len(images) == 0:
        raise ValueError("images must hold at least one image, got none")
    if not isinstance(labels, torch.Tensor) or labels.dim() != 1 or (
        len(labels) != len(images)
    ):
        is_tensor = isinstance(labels, torch.Tensor)
        got = tuple(labels.shape) if is_tensor else describe(labels)
        raise ValueError(
            f"labels must have shape (N,) = ({len(images)},), one per image, got {got}"
        )


def train_classifier(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    num_epochs: int,
    batch_size: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
    device: torch.device | None = None,
    progress: bool = True,
    weight_decay: float = 0.0,
) -> History:
    """Train an image classifier with cross-entropy and Adam on shuffled mini-batches.

    The order of the examples comes from a generator seeded with ``seed`` (the model's
    initial weights come from whatever seeded it: call :func:`set_seed` before
    building it). One progress bar over all batches. Returns a :class:`History` with
    the mean training loss per example of each epoch (``"train"``), the training time
    ``seconds`` and the number of ``batches``.

    Shapes:
        images: (N, C, Hgt, W) float; labels: (N,) long in 0..num_classes − 1;
        model(images) -> logits (N, num_classes)

    Taught in ``chapters/07_visual/01_channel_spatial.ipynb``.
    """
    _check_examples(images, labels)
    if num_epochs < 1:
        raise ValueError(f"num_epochs must be at least 1, got {num_epochs}")
    device = device or choose_device()
    model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    generator = torch.Generator().manual_seed(seed)
    batches_per_epoch = -(-len(labels) // batch_size)  # ceil(N / batch_size)
    total_batches = num_epochs * batches_per_epoch
    bar = tqdm(total=total_batches, desc="training", unit="batch", disable=not progress,
               miniters=max(1, total_batches // 100))
    history = History(train=[])
    started = time.perf_counter()
    with fitted_threads() as refit:  # as many threads as the machine can give
        for epoch in range(num_epochs):
            model.train()
            order = torch.randperm(len(labels), generator=generator)  # (N,)
            total = 0.0
            for batch in order.split(batch_size):
                refit()  # the machine's load may have changed
                x, y = images[batch].to(device), labels[batch].to(device)
                loss = F.cross_entropy(model(x), y)  # the mean over the batch
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                total += loss.item() * len(batch)
                bar.update(1)
                bar.set_postfix(
                    epoch=epoch + 1, loss=f"{loss.item():.3f}", refresh=False
                )
            history["train"].append(total / len(labels))
    bar.close()
    history.seconds = time.perf_counter() - started
    history.batches = total_batches
    return history


@torch.no_grad()
def evaluate_accuracy(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    batch_size: int = 512,
) -> float:
    """The share of images whose largest logit is the right class, in eval mode with
    no gradient, on the model's device.

    Shapes:
        images: (N, C, Hgt, W); labels: (N,) long; returns: float in [0, 1]

    Taught in ``chapters/07_visual/01_channel_spatial.ipynb``.
    """
    _check_examples(images, labels)
    device = next(model.parameters()).device
    model.eval()
    correct = 0
    for start in range(0, len(labels), batch_size):
        x = images[start : start + batch_size].to(device)
        y = labels[start : start + batch_size].to(device)
        correct += int((model(x).argmax(dim=-1) == y).sum())
    return correct / len(labels)

"""Device choice, seeding, and one plain training function for sequence-to-sequence
models.

Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
"""
from __future__ import annotations

import random
from typing import Callable, Iterable

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.optim.lr_scheduler import LRScheduler
from tqdm.auto import tqdm

__all__ = [
    "choose_device",
    "set_seed",
    "sequence_loss",
    "train_seq2seq",
    "evaluate_loss",
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
) -> dict[str, list[float]]:
    """Train an :class:`~attention_lib.seq2seq.EncoderDecoder` with teacher forcing.

    Adam with learning rate ``lr`` unless ``optimizer`` is given: a factory that takes
    the model's parameters and returns an optimiser, e.g.
    ``lambda params: torch.optim.SGD(params, lr=0.1)``. ``schedule``, if given, takes
    the optimiser and returns a learning-rate scheduler, stepped after every batch (a
    Transformer's warm-up is one). ``label_smoothing`` applies to the training loss
    only (the validation loss stays plain cross-entropy, comparable between runs).
    Gradient-norm clipping at ``grad_clip``, one
    progress bar over all batches. Returns the loss history: the mean training loss per
    token for each epoch (``"train"``) and, when a ``val_loader`` is given, the
    validation loss after each epoch (``"val"``).

    Shapes:
        each batch: :class:`~attention_lib.data.Batch` (src (B, Lk), src_valid_lens
        (B,), tgt_input (B, Lq), tgt_output (B, Lq), tgt_valid_lens (B,))

    Taught in ``chapters/01_seq2seq/02_encoder_decoder.ipynb``.
    """
    if num_epochs < 1:
        raise ValueError(f"num_epochs must be at least 1, got {num_epochs}")
    device = device or choose_device()
    model.to(device)
    if optimizer is None:
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    else:
        optimizer = optimizer(model.parameters())
    scheduler = None if schedule is None else schedule(optimizer)
    history: dict[str, list[float]] = {"train": []}
    if val_loader is not None:
        history["val"] = []
    # At most about 100 refreshes per bar, however long the run: each refresh of the bar
    # in Jupyter is a few kernel messages, and a runner that reads them only after a
    # long cell (nbval) loses some when thousands pile up.
    total_batches = num_epochs * len(loader)
    bar = tqdm(total=total_batches, desc="training", unit="batch", disable=not progress,
               miniters=max(1, total_batches // 100))
    for epoch in range(num_epochs):
        model.train()
        total, tokens = 0.0, 0
        for batch in loader:
            src, src_valid_lens, tgt_input, tgt_output, _ = (
                t.to(device) for t in batch
            )
            # 1. Teacher forcing: the decoder reads the true previous token, not its own
            # guess.
            logits = model(src, src_valid_lens, tgt_input)  # (B, Lq, V)
            loss = sequence_loss(logits, tgt_output, pad, label_smoothing)
            # 2. Backpropagate, clip the gradient norm (RNNs' gradients can explode),
            # step.
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            n = int((tgt_output != pad).sum())
            total, tokens = total + loss.item() * n, tokens + n
            bar.update(1)
            bar.set_postfix(
                epoch=epoch + 1, loss=f"{total / tokens:.3f}", refresh=False
            )  # shown at the next refresh
        history["train"].append(total / tokens)
        if val_loader is not None:
            history["val"].append(evaluate_loss(model, val_loader, pad, device))
    bar.close()
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



import pytest
import torch
from torch import nn

from attention_lib import (
    EncoderDecoder,
    History,
    Seq2SeqDecoder,
    Seq2SeqEncoder,
    TimeBudget,
    bleu_by_length,
    choose_device,
    evaluate_accuracy,
    sequence_loss,
    set_seed,
    train_classifier,
    train_seq2seq,
)


def test_choose_device_prefers_an_accelerator():
    device = choose_device()
    expected = (
        "cuda"
        if torch.cuda.is_available()
        else ("mps" if torch.backends.mps.is_available() else "cpu")
    )
    assert device.type == expected


def test_set_seed_repeats_random_draws():
    set_seed(5)
    a = torch.rand(3)
    set_seed(5)
    assert torch.equal(a, torch.rand(3))


def test_sequence_loss_ignores_padding_positions():
    logits = torch.randn(2, 4, 6)
    targets = torch.tensor([[3, 4, 2, 0], [5, 2, 0, 0]])
    changed = logits.clone()
    changed[0, 3] += 10 * torch.randn(6)
    changed[1, 2:] += 10 * torch.randn(2, 6)
    torch.testing.assert_close(
        sequence_loss(logits, targets, pad=0), sequence_loss(changed, targets, pad=0)
    )
    manual = torch.nn.functional.cross_entropy(
        logits[targets != 0], targets[targets != 0]
    )
    torch.testing.assert_close(sequence_loss(logits, targets, pad=0), manual)


def test_sequence_loss_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match=r"logits must be \(B, Lq, V\)"):
        sequence_loss(torch.randn(2, 4, 6), torch.zeros(2, 5, dtype=torch.long), pad=0)


def test_train_rejects_zero_epochs(small_data):
    model = EncoderDecoder(Seq2SeqEncoder(5, 2, 2), Seq2SeqDecoder(5, 2, 2))
    with pytest.raises(ValueError, match="num_epochs"):
        train_seq2seq(model, small_data.loader("val"), 0, pad=0)


def test_optimiser_and_schedule_factories_are_used(small_data):
    """A factory for the optimiser and one for the schedule, stepped after every batch:
    with a warm-up that multiplies the rate by the number of steps taken, the rate after
    training tells how many steps the schedule saw."""
    set_seed(0)
    model = EncoderDecoder(
        Seq2SeqEncoder(len(small_data.src_vocab), 4, 8),
        Seq2SeqDecoder(len(small_data.tgt_vocab), 4, 8),
    )
    loader = small_data.loader("val", batch_size=256)
    made = {}

    def sgd(params):
        made["optimizer"] = torch.optim.SGD(params, lr=0.001)
        return made["optimizer"]

    def warm_up(optimizer):
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: step + 1)

    history = train_seq2seq(model, loader, num_epochs=2, pad=0, optimizer=sgd,
                            schedule=warm_up, device=torch.device("cpu"),
                            progress=False)
    steps = 2 * len(loader)
    assert isinstance(made["optimizer"], torch.optim.SGD) and len(history["train"]) == 2
    assert made["optimizer"].param_groups[0]["lr"] == pytest.approx(0.001 * (steps + 1))
    assert made["optimizer"].param_groups[0]["params"][0] is next(model.parameters())


def test_short_training_run_learns(small_data):
    """Regression test of learning: seeded, 3,000 real pairs, 3 epochs (about 10 s on 2
    CPU cores)."""
    set_seed(0)
    data = small_data
    model = EncoderDecoder(
        Seq2SeqEncoder(len(data.src_vocab), 64, 128),
        Seq2SeqDecoder(len(data.tgt_vocab), 64, 128),
    )
    history = train_seq2seq(
        model,
        data.loader("train", batch_size=64),
        num_epochs=3,
        pad=data.tgt_vocab.pad,
        lr=0.01,
        device=torch.device("cpu"),
        val_loader=data.loader("val", 256),
        progress=False,
    )
    assert history["train"][-1] < history["train"][0] - 1.0
    assert history["train"][-1] < 4.0
    assert history["val"][-1] < history["val"][0]
    result = bleu_by_length(model, data)
    assert result["bleu"] > 1.0  # a model that has learned nothing scores ~0
    assert sum(n for _, n, _ in result["by_length"]) == len(data.pairs["test"])


def test_progress_bar_refreshes_about_a_hundred_times_however_many_batches(
    capsys, monkeypatch
):
    """Each refresh of a Jupyter progress bar is a few kernel messages; thousands of
    them in one long cell make nbval lose messages ("Timeout ... waiting for output"). A
    bar over 1,000 batches must refresh about 100 times, not once per batch."""
    from torch.utils.data import DataLoader, TensorDataset

    from attention_lib import training

    set_seed(0)
    src = torch.randint(4, 9, (1000, 3))
    lens = torch.full((1000,), 3)
    loader = DataLoader(TensorDataset(src, lens, src, src, lens), batch_size=1)
    model = EncoderDecoder(Seq2SeqEncoder(9, 2, 2), Seq2SeqDecoder(9, 2, 2))
    refreshes = []
    original = training.tqdm.refresh

    def counting_refresh(self, *args, **kwargs):
        refreshes.append(self.n)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(training.tqdm, "refresh", counting_refresh)
    train_seq2seq(model, loader, num_epochs=1, pad=0, device=torch.device("cpu"))
    assert 0 < len(refreshes) <= 110, f"{len(refreshes)} refreshes for 1,000 batches"
    assert "1000/1000" in capsys.readouterr().err  # the bar still ends complete


def test_label_smoothing_matches_the_formula_over_real_tokens():
    """ε on the whole vocabulary, 1 − ε on the right token; padding still ignored."""
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 5, dtype=torch.float64)
    targets = torch.tensor([[1, 4, 0], [2, 0, 0]])  # 0 = <pad>
    epsilon, vocab_size = 0.1, 5
    log_probs = logits.log_softmax(-1)
    real = targets != 0
    smoothed = torch.full_like(log_probs, epsilon / vocab_size)
    smoothed.scatter_add_(-1, targets[..., None],
                          torch.full_like(log_probs[..., :1], 1 - epsilon))
    by_hand = -(smoothed * log_probs).sum(-1)[real].mean()
    torch.testing.assert_close(sequence_loss(logits, targets, 0, epsilon), by_hand)
    plain = sequence_loss(logits, targets, 0)
    assert sequence_loss(logits, targets, 0, epsilon) > plain
    with pytest.raises(ValueError, match="label_smoothing must be in"):
        sequence_loss(logits, targets, 0, 1.0)


def test_label_smoothing_reaches_the_training_loss_only(small_data):
    """With a learning rate of 0 nothing changes, so the logged losses are the losses of
    the initial model: smoothed for training, plain for validation."""
    set_seed(0)
    model = EncoderDecoder(
        Seq2SeqEncoder(len(small_data.src_vocab), 4, 8),
        Seq2SeqDecoder(len(small_data.tgt_vocab), 4, 8),
    )
    loader = small_data.loader("val", batch_size=10_000)  # one batch
    history = train_seq2seq(
        model, loader, num_epochs=1, pad=small_data.tgt_vocab.pad,
        optimizer=lambda params: torch.optim.SGD(params, lr=0.0),
        label_smoothing=0.3,
        val_loader=loader, device=torch.device("cpu"), progress=False,
    )
    batch = next(iter(loader))
    model.eval()
    with torch.no_grad():
        logits = model(batch.src, batch.src_valid_lens, batch.tgt_input)
    pad = small_data.tgt_vocab.pad
    assert history["train"][0] == pytest.approx(
        sequence_loss(logits, batch.tgt_output, pad, 0.3).item(), rel=1e-5)
    assert history["val"][0] == pytest.approx(
        sequence_loss(logits, batch.tgt_output, pad).item(), rel=1e-5)


# --- mixed precision and the clock (chapter 5's race) ---------------------------------

def tiny_model(data):
    set_seed(0)
    return EncoderDecoder(
        Seq2SeqEncoder(len(data.src_vocab), 4, 8),
        Seq2SeqDecoder(len(data.tgt_vocab), 4, 8),
    )


def test_autocast_precisions():
    from attention_lib import autocast, native_bfloat16

    x = torch.randn(3, 4)
    with autocast("cpu", "bfloat16"):
        assert (x @ x.T).dtype == torch.bfloat16
    with autocast("cpu", "float32"):
        assert (x @ x.T).dtype == torch.float32
    with autocast("cpu", "auto"):
        expected = torch.bfloat16 if native_bfloat16("cpu") else torch.float32
        assert (x @ x.T).dtype == expected
    with pytest.raises(ValueError, match="precision must be"):
        autocast("cpu", "float16")


def test_bfloat16_training_runs_and_keeps_float32_weights(small_data):
    model = tiny_model(small_data)
    history = train_seq2seq(model, small_data.loader("val", batch_size=256), 1, pad=0,
                            device=torch.device("cpu"), progress=False,
                            precision="bfloat16")
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert history["train"][0] == pytest.approx(history["train"][0])  # not NaN
    assert history.tokens == int((small_data.tensors("val").tgt_output != 0).sum())


def test_a_time_budget_stops_training_and_checkpoints_are_not_training_time(
    small_data, monkeypatch
):
    """A fake clock: every batch takes 1 s, every checkpoint 100 s. With a budget of 5 s
    training stops after the 5th batch, and the checkpoints' time is not counted."""
    from attention_lib import training

    now = [0.0]
    monkeypatch.setattr(training.time, "perf_counter", lambda: now[0])
    real_step = torch.optim.Adam.step

    def step(self, *args, **kwargs):
        now[0] += 1.0
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "step", step)
    seen = []

    def checkpoint(batches, seconds):
        seen.append((batches, seconds))
        now[0] += 100.0

    loader = small_data.loader("val", batch_size=64)
    assert len(loader) > 10
    history = train_seq2seq(tiny_model(small_data), loader, 3, pad=0,
                            device=torch.device("cpu"), progress=False,
                            callback=TimeBudget(5, checkpoint, every=2))
    assert seen == [(2, 2.0), (4, 4.0), (5, 5.0)]
    assert (history.batches, history.seconds) == (5, 5.0)
    assert len(history["train"]) == 1


def test_a_callback_sees_every_batch_may_stop_training_and_hears_the_end(small_data):
    """The callback is called after each batch with the batches done, then once with
    done=True; the reason it returns stops training. A callback that evaluates the
    model leaves it in eval mode: the next batch trains it again (dropout on)."""
    calls, modes = [], []
    model = tiny_model(small_data)

    def callback(batches, seconds, done=False):
        calls.append((batches, done))
        modes.append(model.training)
        model.eval()
        return "enough" if batches == 3 else None

    history = train_seq2seq(model, small_data.loader("val", batch_size=64), 2, pad=0,
                            device=torch.device("cpu"), progress=False,
                            callback=callback)
    assert calls == [(1, False), (2, False), (3, False), (3, True)]
    assert modes == [True, True, True, False]
    assert history.batches == 3 and len(history["train"]) == 1


@pytest.mark.parametrize("kind", ["console", "notebook"])
def test_a_bar_stopped_by_the_time_budget_reads_and_draws_full(kind, capsys):
    from tqdm import tqdm as console_tqdm
    from tqdm.notebook import tqdm as notebook_tqdm

    from attention_lib.training import _end_bar_early

    make = console_tqdm if kind == "console" else notebook_tqdm
    bar = make(total=31_300, desc="training")
    bar.update(1021)
    started = bar.start_t
    _end_bar_early(bar)
    assert (bar.n, bar.total) == (1021, 1021)
    assert bar.start_t == started  # the rate is not reset
    if kind == "notebook":  # the drawn widget: value and maximum agree
        _, drawn, _ = bar.container.children
        assert (drawn.value, drawn.max) == (1021, 1021)
    bar.close()


# --- chapter 7's classifier: training and evaluation ----------------------------------

def test_train_classifier_learns_a_tiny_problem_and_repeats():
    gen = torch.Generator().manual_seed(0)
    images = torch.randn(96, 1, 2, 2, generator=gen)
    labels = (images[:, 0, 0, 0] > images[:, 0, 1, 1]).long()  # a linear rule

    def run(seed):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Flatten(), nn.Linear(4, 2))
        history = train_classifier(model, images, labels, num_epochs=15, batch_size=32,
                                   lr=0.05, seed=seed, device="cpu", progress=False)
        return model, history

    model, history = run(seed=0)
    assert isinstance(history, History) and len(history["train"]) == 15
    assert history["train"][-1] < 0.5 * history["train"][0]
    assert history.batches == 45 and history.seconds > 0
    assert evaluate_accuracy(model, images, labels) > 0.9
    assert run(seed=0)[1]["train"] == history["train"]  # seeded
    assert run(seed=1)[1]["train"] != history["train"]  # the seed orders the batches


class FirstPixels(nn.Module):
    """Logits = the first three pixels of each image; it also counts its calls."""

    def __init__(self):
        super().__init__()
        self.unused = nn.Parameter(torch.zeros(1))
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x.flatten(1)[:, :3]


def test_evaluate_accuracy_on_a_model_made_by_hand():
    images = torch.zeros(5, 1, 1, 3)
    for i, winner in enumerate([0, 1, 2, 2, 0]):
        images[i, 0, 0, winner] = 1.0
    labels = torch.tensor([0, 1, 0, 2, 1])  # right, right, wrong, right, wrong
    model = FirstPixels().train()
    assert evaluate_accuracy(model, images, labels, batch_size=2) == pytest.approx(0.6)
    assert model.calls == 3 and not model.training
    with pytest.raises(ValueError, match=r"labels must have shape \(N,\) = \(5,\)"):
        evaluate_accuracy(model, images, labels[:4])

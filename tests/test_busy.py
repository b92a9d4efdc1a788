"""A busy machine: the timers and the training functions run on as many threads as the
cores other processes leave idle (attention_lib.measure), and `make busy-check`
(tools/busy_check.py) re-runs the pages that time or train while one core is busy."""
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch import nn

from attention_lib import measure

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location(
    "busy_check", ROOT / "tools/busy_check.py")
busy_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(busy_check)
linux = pytest.mark.skipif(
    not Path("/proc/stat").is_file(), reason="reads Linux's /proc")


@pytest.fixture
def machine(monkeypatch):
    """A simulated machine: `cores` cores, of which other processes keep `busy` busy;
    PyTorch's own thread count is restored afterwards."""
    state = {"cores": 2, "busy": 0.0}
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(state["cores"])))
    monkeypatch.setattr(measure, "busy_cores", lambda interval=0.2: state["busy"])
    threads = torch.get_num_threads()
    yield state
    torch.set_num_threads(threads)


@pytest.mark.parametrize(
    "cores, wanted, busy, expected",
    [
        (2, 2, 0.0, 2),  # a quiet machine keeps PyTorch's setting
        (2, 2, 0.4, 2),  # a core less than half busy still counts as idle
        (2, 2, 1.0, 1),  # one of two cores busy: one thread
        (2, 2, 2.0, 1),  # never fewer than one
        (16, 4, 1.0, 4),  # never more than PyTorch asks for...
        (16, 16, 3.2, 13),  # ... nor more than the idle cores
        (2, 1, 0.0, 1),  # OMP_NUM_THREADS=1 stays 1
    ],
)
def test_thread_count_leaves_out_the_cores_other_processes_keep_busy(
    machine, cores, wanted, busy, expected
):
    machine.update(cores=cores, busy=busy)
    assert measure.thread_count(wanted) == expected


def test_thread_count_is_unchanged_where_the_load_cannot_be_read(monkeypatch):
    monkeypatch.setattr(measure, "busy_cores", lambda interval=0.2: None)
    assert measure.thread_count(3) == 3


def test_busy_cores_counts_other_processes_not_this_one(monkeypatch):
    """From /proc's counters: 1.5 CPU-seconds busy on our cores in 1 s, 0.5 of them
    ours, is one core kept busy by others; a reading within the interval is reused."""
    readings = iter([(100.0, 10.0, 2.0), (101.0, 11.5, 2.5), (101.1, 11.6, 2.6),
                     (102.0, 11.7, 3.4)])
    monkeypatch.setattr(measure, "_cpu_seconds", lambda: next(readings))
    monkeypatch.setattr(measure, "_load", {"since": None, "busy": 0.0})
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    assert measure.busy_cores() == pytest.approx(1.0)  # the first call: two readings
    assert measure.busy_cores() == pytest.approx(1.0)  # 0.1 s later: the same answer
    assert measure.busy_cores() == pytest.approx(0.0, abs=1e-9)  # this process only


def test_busy_cores_is_none_off_linux(monkeypatch):
    monkeypatch.setattr(measure, "_cpu_seconds", lambda: None)
    assert measure.busy_cores() is None


@linux
def test_busy_cores_sees_a_spinning_process():
    spinner = subprocess.Popen([sys.executable, "-c", busy_check.SPIN])
    try:
        time.sleep(0.3)
        measure.busy_cores()  # start a window with the spinner running
        time.sleep(0.3)
        assert measure.busy_cores() >= 0.7
    finally:
        spinner.kill()
        spinner.wait()


def test_fitted_threads_sets_the_count_follows_the_load_and_restores(machine):
    torch.set_num_threads(2)
    machine["busy"] = 1.0
    with pytest.raises(RuntimeError), measure.fitted_threads() as refit:
        assert torch.get_num_threads() == 1
        machine["busy"] = 0.0
        refit()
        assert torch.get_num_threads() == 2
        machine["busy"] = 1.0
        refit()
        assert torch.get_num_threads() == 1
        raise RuntimeError("restored even after an error")
    assert torch.get_num_threads() == 2


def _threads_seen():
    seen = []
    return seen, lambda *args: seen.append(torch.get_num_threads())


@pytest.mark.parametrize("busy, expected", [(0.0, 2), (1.0, 1)])
def test_the_timers_run_on_fitted_threads(machine, busy, expected):
    torch.set_num_threads(2)
    machine["busy"] = busy
    seen, fn = _threads_seen()
    measure.seconds_per_call(fn, min_seconds=0)
    measure.best_seconds(fn, repeats=2, min_seconds=0)
    assert seen == [expected] * 4
    assert torch.get_num_threads() == 2


class _Recorder(nn.Module):
    """A model that records the thread count of every forward call."""

    def __init__(self, outputs=5):
        super().__init__()
        self.linear, self.seen = nn.LazyLinear(outputs), []

    def forward(self, x, *rest):
        self.seen.append(torch.get_num_threads())
        return self.linear(x.float())


def _train(kind, model):
    from attention_lib import train_classifier, train_lm, train_seq2seq

    if kind == "train_classifier":
        train_classifier(model, torch.randn(8, 3), torch.arange(8) % 5, num_epochs=2,
                         batch_size=4, progress=False, device=torch.device("cpu"))
    elif kind == "train_lm":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        train_lm(model, lambda g: (torch.randn(2, 4, 3), None,
                                   torch.randint(5, (2, 4), generator=g)),
                 steps=3, optimizer=optimizer, progress=False)
    else:
        batch = (torch.randn(2, 4, 3), torch.tensor([4, 4]), torch.randn(2, 4, 3),
                 torch.randint(1, 5, (2, 4)), torch.tensor([4, 4]))
        train_seq2seq(model, [batch, batch], num_epochs=1, pad=0, progress=False,
                      device=torch.device("cpu"))


@pytest.mark.parametrize("kind", ["train_classifier", "train_lm", "train_seq2seq"])
@pytest.mark.parametrize("busy, expected", [(0.0, 2), (1.0, 1)])
def test_training_runs_on_fitted_threads(machine, kind, busy, expected):
    torch.set_num_threads(2)
    machine["busy"] = busy
    model = _Recorder()
    model(torch.zeros(1, 3))  # materialise the lazy layer
    model.seen.clear()
    _train(kind, model)
    assert model.seen and set(model.seen) == {expected}
    assert torch.get_num_threads() == 2


# tools/busy_check.py

def _notebook(path, sources, seconds=None):
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    if seconds is not None:
        nb.metadata["attention_book"] = {"executed": {"seconds": seconds}}
    nbformat.write(nb, path)
    return path


def test_the_pages_checked_are_those_that_time_or_train(tmp_path):
    chosen = {
        "from attention_lib.measure import best_seconds\nbest_seconds(f)": True,
        "history = train_seq2seq(model, loader, 2, pad)": True,
        "loss.backward()": True,
        "print('seconds_per_call is taught here')": False,
        "x = 1 + 1": False,
    }
    for i, (source, expected) in enumerate(chosen.items()):
        path = _notebook(tmp_path / f"{i}.ipynb", [source], seconds=12.5)
        assert busy_check.times_or_trains(path) is expected, source
        assert busy_check.quiet_seconds(path) == 12.5
    assert busy_check.quiet_seconds(_notebook(tmp_path / "x.ipynb", ["1"])) is None
    pages = [p for p in sorted((ROOT / "chapters").rglob("*.ipynb"))
             if busy_check.times_or_trains(p)]
    names = {p.relative_to(ROOT / "chapters").as_posix() for p in pages}
    assert {"02_attention/04_vectorised_attention.ipynb",
            "03_bahdanau/01_attention_decoder.ipynb",
            "04_self_attention/04_complexity.ipynb",
            "08_pretraining/01_decoder_only.ipynb"} <= names
    assert "01_seq2seq/01_data.ipynb" not in names


@pytest.mark.parametrize(
    "passed, busy, quiet, expected",
    [(True, 40, 20, "ok"), (True, 71, 20, "TOO SLOW"), (False, 10, 20, "FAILED"),
     (True, 500, None, "ok (no quiet time")],
)
def test_verdict(passed, busy, quiet, expected):
    assert busy_check.verdict(passed, busy, quiet, 2.5, 20).startswith(expected)


@pytest.mark.slow
def test_busy_check_fails_a_failing_claim_and_a_slow_page_and_stops_its_spinner(
    tmp_path, capsys
):
    nbval = ["--nbval", "-p", "no:cacheprovider", "-q"]
    code = ["import torch\nfrom attention_lib.measure import best_seconds\n"
            "best_seconds(lambda: torch.ones(3).sum())"]
    good = _notebook(tmp_path / "good.ipynb", code, seconds=60)
    assert busy_check.main([str(good), "--", *nbval]) == 0
    claim = "from attention_lib import claim\nclaim('x', 2.51, low=0.75, high=2.5)"
    bad = _notebook(tmp_path / "bad.ipynb", code + [claim], seconds=60)
    assert busy_check.main([str(bad), "--", *nbval]) == 1  # strict, whatever the env
    slow = _notebook(tmp_path / "slow.ipynb", code, seconds=0.01)
    assert busy_check.main([str(slow), "--slack", "0", "--", *nbval]) == 1
    out = capsys.readouterr().out
    assert "TOO SLOW" in out and "FAILED" in out
    pid = int(out.split("busy process ")[1].split()[0])
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(
        f"/proc/{pid}/status").read_text()

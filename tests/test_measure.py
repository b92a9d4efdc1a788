"""attention_lib.measure: every kind of machine a reader uses, simulated.

The book runs on CPUs with and without native bfloat16 and on Colab's GPUs (a T4 without
it, an A100 or H100 with it). This machine is one of those; the others are simulated
here by replacing what the library reads (``/proc/cpuinfo``, ``torch.cuda``), so each
branch of :func:`hardware`, :func:`by_device`, :func:`matmul_size` and of
``autocast("auto")`` runs in the tests.
"""
import contextlib

import pytest
import torch

from attention_lib import autocast, by_device, hardware, native_bfloat16
from attention_lib import measure
from attention_lib.measure import (
    best_seconds,
    matmul_rate,
    matmul_size,
    seconds_per_call,
)

CPUINFO = "processor\t: 0\nmodel name\t: {name}\nflags\t\t: {flags}\n"

# (kind, flags or capability, name, native bfloat16)
MACHINES = {
    "cpu without bf16": ("cpu", "fpu avx2 avx512f", "Intel Xeon (Skylake)", False),
    "cpu with avx512_bf16": ("cpu", "avx512f avx512_bf16", "Intel Xeon (Sapphire)",
                             True),
    "cpu with amx_bf16": ("cpu", "amx_bf16 amx_tile", "Intel Xeon (AMX)", True),
    "cuda sm75 (T4)": ("cuda", (7, 5), "Tesla T4", False),
    "cuda sm80 (A100)": ("cuda", (8, 0), "NVIDIA A100-SXM4-40GB", True),
    "cuda sm90 (H100)": ("cuda", (9, 0), "NVIDIA H100 80GB HBM3", True),
}


class RecordedAutocast:
    def __init__(self, device_type, dtype=None):
        self.device, self.fast_dtype = device_type, dtype


@contextlib.contextmanager
def simulated(monkeypatch, tmp_path, machine):
    """Make the library see ``machine``: its /proc/cpuinfo, or a CUDA GPU."""
    kind, what, name, _ = MACHINES[machine]
    with monkeypatch.context() as m:
        if kind == "cpu":
            cpuinfo = tmp_path / "cpuinfo"
            cpuinfo.write_text(CPUINFO.format(name=name, flags=what))
            real = measure.Path
            m.setattr(measure, "Path",
                      lambda p: cpuinfo if p == "/proc/cpuinfo" else real(p))
        else:
            m.setattr(torch.cuda, "is_available", lambda: True)
            m.setattr(torch.cuda, "current_device", lambda: 0)
            m.setattr(torch.cuda, "get_device_capability", lambda index=None: what)
            m.setattr(torch.cuda, "get_device_name", lambda index=None: name)
            # torch.autocast("cuda") would look for a driver: record what it was asked.
            m.setattr(torch, "autocast", RecordedAutocast)
        yield kind


@pytest.mark.parametrize("machine", MACHINES)
def test_hardware_describes_every_kind_of_machine(monkeypatch, tmp_path, machine):
    _, what, name, native = MACHINES[machine]
    with simulated(monkeypatch, tmp_path, machine) as kind:
        found = hardware(kind)
        assert (found.kind, found.name, found.native_bfloat16) == (kind, name, native)
        assert native_bfloat16(kind) is native
        assert found.capability == (what if kind == "cuda" else None)
        assert found.is_gpu is (kind == "cuda")
        text = str(found)
        assert name in text and ("with native" if native else "without native") in text
        if kind == "cuda":
            assert f"sm{what[0]}{what[1]}" in text


@pytest.mark.parametrize("machine", MACHINES)
def test_by_device_and_matmul_size_follow_the_machine(monkeypatch, tmp_path, machine):
    _, _, _, native = MACHINES[machine]
    with simulated(monkeypatch, tmp_path, machine) as kind:
        gpu = kind == "cuda"
        assert by_device(kind, cpu="c", gpu="g") == ("g" if gpu else "c")
        assert matmul_size(kind, torch.float32) == (4096 if gpu else 2048)
        # Only a CPU that emulates bfloat16 gets the small product: it is that slow.
        small = not gpu and not native
        assert matmul_size(kind, torch.bfloat16) == (256 if small else
                                                     4096 if gpu else 2048)


@pytest.mark.parametrize("machine", MACHINES)
def test_autocast_auto_picks_bfloat16_only_where_native(monkeypatch, tmp_path, machine):
    _, _, _, native = MACHINES[machine]
    with simulated(monkeypatch, tmp_path, machine) as kind:
        context = autocast(kind, "auto")
        if native:
            assert isinstance(context, torch.autocast)
            assert context.fast_dtype == torch.bfloat16
            assert context.device == kind
        else:
            assert isinstance(context, contextlib.nullcontext)
        # Asked for by name, each precision is what it says on every machine.
        assert isinstance(autocast(kind, "float32"), contextlib.nullcontext)
        assert isinstance(autocast(kind, "bfloat16"), torch.autocast)


def test_cuda_without_a_gpu_and_other_devices(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert hardware("cuda").native_bfloat16 is False
    assert hardware("meta").kind == "meta" and not hardware("meta").native_bfloat16
    assert by_device("meta", cpu=1, gpu=2) == 1
    assert hardware("mps").is_gpu and by_device("mps", cpu=1, gpu=2) == 2


def test_cpu_without_proc_cpuinfo_asks_onednn(monkeypatch):
    class Missing:
        def __init__(self, path):
            pass

        def read_text(self):
            raise OSError("no /proc here")

    monkeypatch.setattr(measure, "Path", Missing)
    expected = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    assert hardware("cpu").native_bfloat16 is expected
    assert hardware("cpu").name == "unknown CPU"


def test_this_machine_is_described():
    found = hardware("cpu")
    assert found.kind == "cpu" and found.name
    flags = open("/proc/cpuinfo").read().split()
    assert found.native_bfloat16 is ("avx512_bf16" in flags or "amx_bf16" in flags)


def test_best_seconds_takes_the_fastest_measurement():
    import time

    delays = iter([0.0] + [0.03, 0.01, 0.02] * 10)
    seconds = best_seconds(lambda: time.sleep(next(delays)), repeats=3,
                           min_seconds=0.005)
    assert 0.009 <= seconds < 0.02


def test_seconds_per_call_repeats_until_the_minimum_and_divides(monkeypatch):
    from attention_lib import measure

    now, calls = [0.0], []
    monkeypatch.setattr(measure.time, "perf_counter", lambda: now[0])

    def call():  # a fake clock: each call takes 0.02 s
        calls.append(1)
        now[0] += 0.02

    assert seconds_per_call(call, min_seconds=0.05) == pytest.approx(0.02)
    assert len(calls) == 3  # 0.06 s ≥ 0.05 s
    calls.clear()
    assert seconds_per_call(call, min_seconds=0) == pytest.approx(0.02)
    assert len(calls) == 1


def test_matmul_rate_is_a_rate_on_this_cpu():
    rate = matmul_rate("cpu", torch.float32, size=256)
    assert 0.1 < rate < 1e5  # GFLOP/s: a CPU core does at least 0.1

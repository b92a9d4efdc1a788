"""The machine a page runs on, and how fast it multiplies: the one place where the book
decides anything from the hardware.

A page runs the same experiment on every machine (a CPU with or without native
bfloat16, a T4, an H100). Where the hardware changes a *result*, a speed or a precision,
the page measures it on its own device and says what that device shows. What has to
differ between devices (the range a timing claim allows, the sentence that explains
it) is chosen by :func:`by_device`, from :func:`hardware`'s description, so every
branch is one that the tests run, by simulating each kind of machine.

What a call costs is measured here too, for every page and benchmark:
:func:`best_seconds` (time, synchronising a GPU) and :func:`peak_memory` (memory).

A CPU shared with other work gives fewer cores than PyTorch asks for: two threads on a
machine with one of its two cores busy wait for each other, and a product can take 7
times as long as on one thread. The timers and the training functions therefore run on
:func:`fitted_threads`: as many threads as there are cores other processes leave idle
(:func:`busy_cores`), never more than PyTorch's own setting, which a quiet
machine keeps.

Taught in ``chapters/05_transformer/02_training.ipynb``.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeVar

import torch

__all__ = [
    "Hardware",
    "hardware",
    "native_bfloat16",
    "by_device",
    "synchronize",
    "busy_cores",
    "thread_count",
    "fitted_threads",
    "seconds_per_call",
    "best_seconds",
    "matmul_size",
    "matmul_rate",
    "peak_memory",
]

T = TypeVar("T")

# Compute capability from which an NVIDIA GPU multiplies bfloat16 natively (Ampere:
# A100 is 8.0; a T4 is 7.5, a V100 7.0).
NATIVE_BF16_CAPABILITY = (8, 0)


@dataclass(frozen=True)
class Hardware:
    """What a device is: its kind (``"cpu"``, ``"cuda"``, ``"mps"``, ...), its name, a
    CUDA GPU's compute capability, and whether it computes in bfloat16 natively.

    Shapes:
        none

    Taught in ``chapters/05_transformer/02_training.ipynb``.
    """

    kind: str
    name: str
    native_bfloat16: bool
    capability: tuple[int, int] | None = None

    @property
    def is_gpu(self) -> bool:
        return self.kind in ("cuda", "mps")

    def __str__(self) -> str:
        what = {"cpu": "a CPU", "cuda": "a CUDA GPU", "mps": "an Apple GPU"}.get(
            self.kind, f"a {self.kind} device")
        detail = self.name
        if self.capability is not None:
            detail += f", sm{self.capability[0]}{self.capability[1]}"
        bf16 = "with" if self.native_bfloat16 else "without"
        return f"{what} ({detail}) {bf16} native bfloat16"


def _cpu_flags_and_name() -> tuple[set[str] | None, str]:
    # Linux: the flags and model name in /proc/cpuinfo; elsewhere, no flags (None).
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None, "unknown CPU"
    flags, name = set(), "unknown CPU"
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            flags.update(value.split())
        elif key.strip() == "model name" and name == "unknown CPU":
            name = value.strip()
    return flags, name


def hardware(device: torch.device | str) -> Hardware:
    """Describe ``device``. bfloat16 is native on a CUDA GPU of compute capability 8.0
    or later (A100, H100; not a T4) and on a CPU with the AVX-512 BF16 or AMX
    instructions (read from ``/proc/cpuinfo`` on Linux; elsewhere oneDNN is asked).
    Without them bfloat16 is emulated, and can be hundreds of times slower than float32.

    Shapes:
        returns: :class:`Hardware`

    Taught in ``chapters/05_transformer/02_training.ipynb``.
    """
    device = torch.device(device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            return Hardware("cuda", "CUDA not available", False)
        index = torch.cuda.current_device() if device.index is None else device.index
        capability = tuple(torch.cuda.get_device_capability(index))
        return Hardware("cuda", torch.cuda.get_device_name(index),
                        capability >= NATIVE_BF16_CAPABILITY, capability)
    if device.type == "cpu":
        flags, name = _cpu_flags_and_name()
        if flags is None:
            native = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
        else:
            native = "avx512_bf16" in flags or "amx_bf16" in flags
        return Hardware("cpu", name, native)
    return Hardware(device.type, device.type, False)


def native_bfloat16(device: torch.device | str) -> bool:
    """Whether ``device`` computes in bfloat16 natively (see :func:`hardware`).

    Shapes:
        returns: bool

    Taught in ``chapters/05_transformer/02_training.ipynb``.
    """
    return hardware(device).native_bfloat16


def by_device(device: torch.device | str, *, cpu: T, gpu: T) -> T:
    """``cpu`` on a CPU, ``gpu`` on a GPU (CUDA or Apple's MPS): the one switch through
    which a page lets the hardware choose, e.g. a timing claim's range
    (``low=by_device(device, cpu=2.5, gpu=0.7)``) or the sentence that explains it.

    Shapes:
        returns: ``cpu`` or ``gpu``, as given

    Taught in ``chapters/05_transformer/02_training.ipynb``.
    """
    return gpu if hardware(device).is_gpu else cpu


def synchronize(device: torch.device | str) -> None:
    """Wait until ``device`` has finished the work queued on it: GPU calls return before
    the work is done, so a timer must wait before reading the clock. Nothing to wait
    for on a CPU.

    Shapes:
        none

    Taught in ``chapters/05_transformer/02_training.ipynb``.
    """
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # GPU calls return before the work is done
    elif device.type == "mps":
        torch.mps.synchronize()


def _cpu_seconds() -> tuple[float, float, float] | None:
    """(clock, CPU-seconds busy on this process's cores, CPU-seconds of this process)
    from Linux's /proc; None elsewhere."""
    try:
        cores = os.sched_getaffinity(0)
        with open("/proc/stat") as stat:
            lines = stat.readlines()
        with open("/proc/self/stat") as own:
            fields = own.read().rpartition(")")[2].split()
    except (OSError, AttributeError):  # not Linux
        return None
    busy = 0
    for line in lines:  # "cpu3 user nice system idle iowait irq softirq steal ..."
        name, *ticks = line.split()
        if name[3:].isdigit() and int(name[3:]) in cores:
            user, nice, system, _, _, irq, softirq, steal = map(int, ticks[:8])
            busy += user + nice + system + irq + softirq + steal
    own_ticks = int(fields[11]) + int(fields[12])  # utime + stime, all threads
    tick = os.sysconf("SC_CLK_TCK")
    return time.monotonic(), busy / tick, own_ticks / tick


_load = {"since": None, "busy": 0.0}  # the last reading of /proc, and what it gave


def busy_cores(interval: float = 0.2) -> float | None:
    """How many of this process's cores other processes keep busy, in cores (1.0: one
    core fully busy): the time the kernel counts as busy on those cores
    (``/proc/stat``) less this process's own (``/proc/self/stat``), per second of the
    last ``interval`` seconds or more. It is measured since the previous reading, so
    calling it often costs nothing: within ``interval`` of a reading it returns that
    reading's answer; the first call waits ``interval``. None where ``/proc`` is
    missing (macOS, Windows).

    Shapes:
        returns: float, cores, or None

    Taught in ``chapters/02_attention/04_vectorised_attention.ipynb``.
    """
    now = _cpu_seconds()
    if now is None:
        return None
    since = _load["since"]
    if since is None:  # the first reading: measure over the next interval
        time.sleep(interval)
        since, now = now, _cpu_seconds()
    elif now[0] - since[0] < interval:
        return _load["busy"]
    others = (now[1] - since[1]) - (now[2] - since[2])
    _load.update(since=now, busy=max(0.0, others / (now[0] - since[0])))
    return _load["busy"]


def thread_count(wanted: int | None = None) -> int:
    """The threads the machine can give: ``wanted`` (default: PyTorch's setting, one
    per core unless ``OMP_NUM_THREADS`` says otherwise) less one for each core that
    other processes keep more than half busy (:func:`busy_cores`), at least 1. On a
    quiet machine, ``wanted``.

    Shapes:
        returns: int

    Taught in ``chapters/02_attention/04_vectorised_attention.ipynb``.
    """
    wanted = wanted or torch.get_num_threads()
    busy = busy_cores()
    if busy is None:
        return wanted
    idle = len(os.sched_getaffinity(0)) - int(busy + 0.5)
    return max(1, min(wanted, idle))


@contextlib.contextmanager
def fitted_threads():
    """Run the body on :func:`thread_count` threads (``torch.set_num_threads``) and
    restore PyTorch's setting afterwards. It yields a function that fits the count
    again, for a long loop to call at every step as the machine's load changes.

    Shapes:
        none

    Taught in ``chapters/04_self_attention/02_multihead_attention.ipynb``.
    """
    wanted = torch.get_num_threads()

    def refit() -> None:
        threads = thread_count(wanted)
        if threads != torch.get_num_threads():
            torch.set_num_threads(threads)

    refit()
    try:
        yield refit
    finally:
        torch.set_num_threads(wanted)


def seconds_per_call(
    fn: Callable[[], object],
    device: torch.device | str = "cpu",
    min_seconds: float = 0.05,
) -> float:
    """Seconds per call of ``fn()``, measured once: the call is repeated until
    ``min_seconds`` have passed (a long call runs once; ``min_seconds=0``: exactly
    once), then the time is divided by the calls. On a GPU the device is synchronised
    before the clock is read. It runs on :func:`fitted_threads`, so another busy
    process slows it no more than it must. No warm-up: the caller decides.

    Shapes:
        returns: float, seconds

    Taught in ``chapters/02_attention/04_vectorised_attention.ipynb``.
    """
    device = torch.device(device)
    with fitted_threads():
        calls, started = 0, time.perf_counter()
        while True:
            fn()
            synchronize(device)  # GPU calls return before the work is done
            calls += 1
            elapsed = time.perf_counter() - started
            if elapsed >= min_seconds:
                return elapsed / calls


def best_seconds(
    fn: Callable[[], object],
    device: torch.device | str = "cpu",
    repeats: int = 3,
    min_seconds: float = 0.05,
) -> float:
    """Seconds per call of ``fn()``: after one warm-up call, the fastest of ``repeats``
    measurements by :func:`seconds_per_call`, the one least disturbed by other work.

    Shapes:
        returns: float, seconds

    Taught in ``chapters/05_transformer/02_training.ipynb``.
    """
    with fitted_threads():  # the warm-up too
        fn()
        synchronize(device)
    return min(seconds_per_call(fn, device, min_seconds) for _ in range(repeats))


def matmul_size(device: torch.device | str, dtype: torch.dtype) -> int:
    """The side of the square matrices :func:`matmul_rate` multiplies by default:
    large enough to keep the device busy (2048 on a CPU, 4096 on a GPU), but only 256
    for bfloat16 on a CPU that emulates it, where a large product would take minutes.

    Shapes:
        returns: int

    Taught in ``chapters/05_transformer/02_training.ipynb``.
    """
    machine = hardware(device)
    if dtype == torch.bfloat16 and not machine.native_bfloat16 and not machine.is_gpu:
        return 256
    return by_device(device, cpu=2048, gpu=4096)


def matmul_rate(
    device: torch.device | str,
    dtype: torch.dtype = torch.float32,
    size: int | None = None,
) -> float:
    """The rate of one (size × size) @ (size × size) matrix product on ``device`` in
    ``dtype``, in GFLOP/s (2 size³ operations: a multiply and an add per term), timed
    with :func:`best_seconds`. ``size`` defaults to :func:`matmul_size`.

    Shapes:
        returns: float, GFLOP/s

    Taught in ``chapters/05_transformer/02_training.ipynb``.
    """
    device = torch.device(device)
    size = size or matmul_size(device, dtype)
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    return 2 * size**3 / best_seconds(lambda: a @ b, device) / 1e9


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def peak_memory(fn: Callable[[], Any], device=None) -> int:
    """Run ``fn()`` and return the peak of the memory it added, in bytes, measured.

    * CUDA: PyTorch's allocator statistics (``torch.cuda.max_memory_allocated``,
      reset before the call).
    * CPU on Linux: the kernel's peak resident memory of this process (``VmHWM`` in
      ``/proc/self/status``), reset to the current size just before the call by
      writing 5 to ``/proc/self/clear_refs``, after ``malloc_trim`` has handed freed
      memory back to the system (so that the call's allocations are new pages and
      counted). Granularity: pages; a few hundred KiB of noise.

    Raises RuntimeError elsewhere (macOS, Windows): there, measure in a subprocess.

    Shapes:
        returns: int, bytes

    Taught in ``chapters/06_efficient/01_cost.ipynb``.
    """
    device = torch.device(device or "cpu")
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    if not sys.platform.startswith("linux"):
        raise RuntimeError(
            "peak_memory on CPU reads Linux's /proc/self/status; on this system"
            " measure in a subprocess (resource.getrusage) instead"
        )
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # reset the peak (VmHWM) to the current size (VmRSS)
    before = _status_kib("VmRSS:")
    fn()
    return (_status_kib("VmHWM:") - before) * 1024

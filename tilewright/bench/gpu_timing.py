"""Timing PyTorch baselines on a GPU beside our kernels, in one process.

A GPU launch returns before the work is done, so a host clock around it
measures the launch, not the kernel: on CUDA the baseline is timed with CUDA
events recorded on the current stream around `number` calls (after a warm-up
that also lets `cudnn.benchmark` pick its algorithm), synchronising on the end
event; the median of `repeat` rounds is kept. The calls of a round are queued
behind a spin kernel (`torch.cuda._sleep`) long enough to cover their launch
from Python, so that calls shorter than a launch run back to back and the
events measure the GPU, not the host. Our kernels time themselves the same way
(`CudaKernel.time`: the same spin, events around the queued launches;
`OpenCLKernel.time`: profiling events). On the host (tests) the fallback is
perf_counter.

The sides alternate in rounds so that clock and thermal drift spreads over
all of them; there is no settling pause as on the CPU (`timing.py`), since a
device-side time is not disturbed by host thread pools."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

from ..stats import median

ROUNDS = 5
MIN_ROUND_S = 0.01  # each timing averages enough calls to last this long
MAX_QUEUED = 512  # calls queued behind one spin (the driver's launch queue holds about a thousand)


def _calls_for(once_s: float, min_s: float) -> int:
    return max(1, min(10_000, int(min_s / max(once_s, 1e-7))))


@functools.cache
def _sleep_cycles_per_s() -> float:
    """Clock cycles per second of torch.cuda._sleep, measured with events (the clock the spin counts)."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    cycles = 10_000_000
    torch.cuda._sleep(1000)  # loads the kernel
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    return cycles / (start.elapsed_time(end) * 1e-3)


def _host_launch_seconds(fn: Callable[[], object], calls: int = 4) -> float:
    """Host seconds to queue one call (what the spin must cover per queued call)."""
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def _cuda_seconds(fn: Callable[[], object], number: int) -> float:
    import torch

    host = _host_launch_seconds(fn)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    total, left = 0.0, number
    while left:
        batch = min(left, MAX_QUEUED)
        torch.cuda._sleep(int((batch * host * 1.5 + 50e-6) * _sleep_cycles_per_s()))
        start.record()
        for _ in range(batch):
            fn()
        end.record()
        end.synchronize()
        total += start.elapsed_time(end) * 1e-3
        left -= batch
    return total / number


def _host_seconds(fn: Callable[[], object], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def device_median_seconds(fn: Callable[[], object], device: str = "cuda", repeat: int = 3, warmup: int = 2,
                          min_s: float = MIN_ROUND_S) -> float:
    """Median seconds per call of `fn` over `repeat` timings of enough calls to last `min_s` each:
    CUDA events when `device` is a CUDA device, perf_counter otherwise."""
    on_cuda = str(device).startswith("cuda")
    seconds = _cuda_seconds if on_cuda else _host_seconds
    for _ in range(warmup):
        fn()
    if on_cuda:
        import torch

        torch.cuda.synchronize()
    number = _calls_for(seconds(fn, 1), min_s)
    return median(seconds(fn, number) for _ in range(repeat))


def kernel_median_seconds(kernel, arrays: list, repeat: int = 3, min_s: float = MIN_ROUND_S) -> float:
    """Median seconds per call of one of our device kernels via its own `.time` (device events), with
    `number` chosen so a timing lasts `min_s`. `arrays` are best device buffers (nothing copied)."""
    once = kernel.time(*arrays, number=1, repeat=1).median
    return kernel.time(*arrays, number=_calls_for(once, min_s), repeat=repeat).median


def alternating(sides: dict[str, Callable[[], float]], rounds: int = ROUNDS) -> dict[str, float]:
    """Median over `rounds` of each side's timing (a callable returning seconds), the sides taking turns."""
    samples: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, timed in sides.items():
            samples[name].append(timed())
    return {name: median(v) for name, v in samples.items()}


__all__ = ["alternating", "device_median_seconds", "kernel_median_seconds"]

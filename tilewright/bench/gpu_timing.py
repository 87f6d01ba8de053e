"""Timing PyTorch baselines on a GPU beside our kernels, in one process.

A GPU launch returns before the work is done, so a host clock around it
measures the launch, not the kernel: on CUDA the baseline is timed with CUDA
events recorded on the current stream around `number` calls (after a warm-up
that also lets `cudnn.benchmark` pick its algorithm), synchronising on the end
event; the median of `repeat` rounds is kept. Our kernels time themselves the
same way (`CudaKernel.time`: events around `number` launches; `OpenCLKernel.time`:
profiling events). On the host (tests) the fallback is perf_counter.

The sides alternate in rounds so that clock and thermal drift spreads over
all of them; there is no settling pause as on the CPU (`timing.py`), since a
device-side time is not disturbed by host thread pools."""

from __future__ import annotations

import time
from collections.abc import Callable

from ..stats import median

ROUNDS = 5
MIN_ROUND_S = 0.01  # each timing averages enough calls to last this long


def _calls_for(once_s: float, min_s: float) -> int:
    return max(1, min(10_000, int(min_s / max(once_s, 1e-7))))


def _cuda_seconds(fn: Callable[[], object], number: int) -> float:
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(number):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e-3 / number


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

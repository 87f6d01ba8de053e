"""Timing a kernel beside other libraries in one process.

The thread pools of other runtimes in the process (OpenBLAS under NumPy and
the reference evaluator, PyTorch's OpenMP) keep spinning for a while after
each call, and a kernel timed in that window shares the cores with them:
measured on the 2-core host, a GEMM 512 kernel took 1.9 ms alone and 4-6 ms
when timed right after NumPy and PyTorch calls, while PyTorch was barely
affected. So every side waits `SETTLE_S` before it is timed, and the sides
alternate in rounds, which also spreads the VM's drift over all of them."""

from __future__ import annotations

import time
from collections.abc import Callable

from ..stats import median

SETTLE_S = 0.3  # longer than OpenBLAS's and libgomp's spin-wait after a call
ROUNDS = 5


def settle() -> None:
    time.sleep(SETTLE_S)


def median_seconds(fn: Callable[[], object], repeat: int = 9, min_s: float = 0.02) -> float:
    """Median over `repeat` timings of `fn`, each averaging enough calls to last `min_s`,
    after the other thread pools have gone idle."""
    settle()
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    number = max(1, int(min_s / once))
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return median(times)


def alternating_medians(sides: dict[str, Callable[[], float]], rounds: int = ROUNDS) -> dict[str, float]:
    """Median seconds of each side (a callable returning one timing), timed in
    alternating rounds, each after the others' thread pools have gone idle."""
    samples: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, timed in sides.items():
            settle()
            samples[name].append(timed())
    return {name: median(v) for name, v in samples.items()}

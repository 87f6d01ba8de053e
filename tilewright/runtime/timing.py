"""What `kernel.time()` returns on every target: seconds per call over
`repeat` measurements of `number` calls, summarised by the one median
(stats.median)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from ..stats import median


@dataclass(frozen=True)
class TimingResult:
    """Seconds per kernel call over `repeat` measurements of `number` calls."""

    median: float
    min: float
    max: float
    stdev: float
    number: int
    repeat: int
    samples: tuple[float, ...] = ()  # each repeat's seconds per call

    def __str__(self) -> str:
        return (f"median {self.median * 1e3:.4f} ms (min {self.min * 1e3:.4f}, max {self.max * 1e3:.4f}, "
                f"{self.repeat}x{self.number} calls)")

    @classmethod
    def of(cls, samples: list[float], number: int) -> TimingResult:
        return cls(median(samples), min(samples), max(samples), statistics.pstdev(samples), number, len(samples),
                   tuple(samples))


__all__ = ["TimingResult"]

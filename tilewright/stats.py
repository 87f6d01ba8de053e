"""The one median every time in tilewright is summarised by: the lower median,
an observed value (never the mean of two), so a reported time is one that a
kernel really took and equal inputs rank the same everywhere (tuner, records,
kernel.time, benchmarks). Imports nothing."""

from __future__ import annotations

import math
from collections.abc import Iterable


def median(values: Iterable[float]) -> float:
    """The lower median of `values`; inf for none (a point with no time ranks last)."""
    v = sorted(values)
    return v[(len(v) - 1) // 2] if v else math.inf


__all__ = ["median"]

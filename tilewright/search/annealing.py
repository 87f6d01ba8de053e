"""Start points by simulated annealing (FlexTensor 5.1): a random measured
point is accepted with probability exp(-gamma * (E* - Ep) / E*) in terms of
performance E = 1 / time (equivalently exp(-gamma * (t - t*) / t*) in time),
otherwise the best point is used."""

from __future__ import annotations

import math
import random

from ..space.space import Point


def choose_starts(costs: dict[Point, float], k: int, rng: random.Random, gamma: float = 0.5) -> list[Point]:
    ok = [(p, c) for p, c in costs.items() if math.isfinite(c)]
    if not ok:
        return []
    best_p, best_c = min(ok, key=lambda pc: pc[1])
    starts = []
    for _ in range(k):
        p, c = rng.choice(ok)
        accept = math.exp(-gamma * (c - best_c) / best_c) if best_c > 0 else 1.0
        starts.append(p if rng.random() < accept else best_p)
    return starts

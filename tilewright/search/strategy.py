"""The interface every search method implements, and the memory they share:
`propose(n)` points not measured before, `observe(points, costs)` after the
measurements (cost = seconds, inf for a failed candidate), `discard(points)`
for proposals a cost model screened out."""

from __future__ import annotations

import math
import random

from ..space.space import Point, Space


class SearchStrategy:
    name = "base"

    def __init__(self, space: Space, seed: int = 0):
        self.space = space
        self.rng = random.Random(seed)
        self.costs: dict[Point, float] = {}  # every measured point (the visited set)
        self.trials = 0

    @property
    def best(self) -> tuple[Point | None, float]:
        ok = [(c, p) for p, c in self.costs.items() if math.isfinite(c)]
        if not ok:
            return None, math.inf
        c, p = min(ok, key=lambda cp: cp[0])
        return p, c

    def visited(self, p: Point) -> bool:
        return p in self.costs

    def propose(self, n: int) -> list[Point]:
        raise NotImplementedError

    def discard(self, points: list[Point]) -> None:
        """Proposed points that will not be measured now (a cost model preferred others); they stay
        unvisited and may be proposed again."""

    def observe(self, points: list[Point], costs: list[float]) -> None:
        for p, c in zip(points, costs):
            self.costs[p] = c
        self.trials += len(points)

    def random_unvisited(self, n: int, exclude: set | None = None, tries: int = 200) -> list[Point]:
        out: list[Point] = []
        exclude = set(exclude or ())
        for _ in range(tries):
            if len(out) >= n:
                break
            p = self.space.sample(self.rng)
            if not self.visited(p) and p not in exclude:
                exclude.add(p)
                out.append(p)
        return out

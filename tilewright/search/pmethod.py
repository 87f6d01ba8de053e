"""P-method (FlexTensor 5.1): from annealing-chosen start points, measure all
unvisited neighbours (every direction) of each start."""

from __future__ import annotations

from .annealing import choose_starts
from .strategy import SearchStrategy


class PMethod(SearchStrategy):
    name = "p"

    def propose(self, n: int):
        out, seen = [], set()
        for start in choose_starts(self.costs, max(1, n), self.rng):
            for q in self.space.neighbours(start):
                if not self.visited(q) and q not in seen:
                    seen.add(q)
                    out.append(q)
            if len(out) >= n:
                break
        out = out[:n]
        if len(out) < n:  # a local optimum with every neighbour measured: restart randomly
            out += self.random_unvisited(n - len(out), exclude=seen)
        return out

"""Random sampling: the AutoTVM-style baseline."""

from __future__ import annotations

from .strategy import SearchStrategy


class RandomSearch(SearchStrategy):
    name = "random"

    def propose(self, n: int):
        return self.random_unvisited(n)

"""One search walk over a space whose points are costed by a model rather than measured (the
accelerator targets: aie's cycle model, hls's FPGA model): `space.cost(point)` gives (cost, error),
nothing is built or timed, so every proposal is costed at once and handed to `record`."""

from __future__ import annotations


def walk(strategy, space, first, trials: int, record) -> None:
    """`trials` proposals of `strategy` (a repeat counts as a trial), the points `first` first; each is
    costed by `space.cost` and passed to `record(point, cost, error)`, repeats included."""
    proposed = 0
    while proposed < trials:
        points = list(first[:trials - proposed]) or strategy.propose(min(8, trials - proposed))
        first = []
        if not points:
            break
        proposed += len(points)
        costs = []
        for p in points:
            cost, err = space.cost(p)
            costs.append(cost)
            record(p, cost, err)
        strategy.observe(points, costs)


__all__ = ["walk"]

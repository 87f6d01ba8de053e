"""Re-timing a task's finalists. The fastest few points of a run are timed again, in alternating rounds, and
the best median wins: on a shared machine one measurement can be 20% off, enough to crown the wrong schedule.
A point whose only measurement was lucky would still outrank finalists whose re-timing raised their median,
so passes repeat until the top few are all re-timed points (at most FINAL_PASSES)."""

from __future__ import annotations

import math

from ..stats import median
from .result import valid_point

FINALISTS, FINAL_ROUNDS, FINAL_PASSES = 3, 2, 4


def retime_finalists(task, default_times: list) -> None:
    """Time the best few points of `task`'s records, and its default, again and take the best of the
    records' per-point medians (`Records.best`: the median of every time of a point), so the run and
    later builds agree; repeat for points that rise into the top few without having been re-timed. The
    default's cost becomes the median of every time this task took of it, the same statistic: tuned and
    untuned are compared like with like."""
    result, store = task.result, task.store

    def ranked():
        for r in store.best(result.workload, task.target.key, k=FINALISTS):
            p = valid_point(r, result.space)
            if p is not None:
                yield p, r

    retimed: set = set()
    for n in range(FINAL_PASSES):
        finalists = [p for p, _ in ranked() if p not in retimed]
        if n == 0 and math.isfinite(result.default_cost) and task.default not in finalists:
            finalists.append(task.default)
        if not finalists or (n == 0 and len(finalists) < 2):
            break
        libraries = [task.libraries.get(p) for p in finalists]
        schedules = task.screen.instantiate(finalists)  # for the records' traces; made once per point
        results = task.measurer.measure(schedules, libraries=libraries, rounds=FINAL_ROUNDS,
                                        on_result=lambda i, m, f=finalists, s=schedules: task.record(f[i], s[i], m))
        for n_result, m in enumerate(results):
            p = finalists[n_result % len(finalists)]
            if m.ok:
                task.libraries[p] = m.library
                if p == task.default:
                    default_times.extend(m.costs)
        retimed.update(finalists)
    if default_times:  # this task's times of the default, not older runs' records of it
        result.default_cost = median(default_times)
    now = list(ranked())
    for _, r in now:
        task.log(f"finalist\t{r.cost:.6g} (median record)\t{r.point}")
    if now:
        result.best_point, result.best_cost = now[0][0], now[0][1].cost


__all__ = ["FINAL_PASSES", "FINAL_ROUNDS", "FINALISTS", "retime_finalists"]

"""The task scheduler (Ansor, section 6): spread one trial budget over a model's
tasks by expected gain. A round-robin warm-up gives each task a few trials
(tasks whose records already hold a schedule skip it: their time is known and
a rerun costs nothing); then each slice goes to the task with the largest
weight x best time x recent improvement rate (an optimistic rate, decaying with
the slices it has had, while it has no history). Every measurement goes to one
record store, so records are reused across runs and across models. The store
also counts the trials spent on each model (keyed by its set of tasks): they count
against its budget, so a rerun with the same budget measures nothing, while a model
that shares some tasks with another (ResNet-50's 3x3 layers with ResNet-18's) still
gets its own budget. A store from before that count: the records count once every
task of the model has some."""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field

from ..build.artefact_cache import content_key
from ..records import Records
from ..search.options import TuneOptions
from ..search.task import TuningTask
from .tasks import Task

MAX_LIVE_RUNNERS = 6  # tasks that keep a runner process between their slices; the others pause theirs


@dataclass
class _State:
    task: Task
    slices: int = 0
    history: list[float] = field(default_factory=list)  # best cost after each slice
    tuning: TuningTask | None = None  # set up at the task's first slice, kept to the end

    def rate(self) -> float:
        """Relative improvement of the last slice, or an optimistic guess without two points."""
        h = [c for c in self.history if math.isfinite(c)]
        optimistic = 0.5 / (1 + self.slices)
        if len(h) < 2:
            return optimistic
        return max((h[-2] - h[-1]) / h[-2], optimistic * 0.1)

    def gain(self) -> float:
        cost = self.task.best_cost if math.isfinite(self.task.best_cost) else 1.0
        return self.task.weight * cost * self.rate()


def estimated_latency(tasks: list[Task]) -> float:
    """Sum over tasks of weight x best time (inf while some task has none)."""
    return sum(t.weight * t.best_cost for t in tasks)


def model_key(tasks: list[Task]) -> str:
    """A model's key in the store's trial count: its tasks' workload keys and weights."""
    return content_key(*sorted(f"{t.key} x{t.weight}" for t in tasks))


def known_costs(tasks: list[Task], target, store: Records) -> tuple[int, bool]:
    """Fill each task's best_cost and trials from the records of its workload on this
    target; returns how many measurements the records already hold for these tasks,
    and whether every task has some."""
    total, every = 0, True
    for t in tasks:
        rows = store.query(t.key, target.key)
        finite = [r.cost for r in rows if math.isfinite(r.cost)]
        if finite:
            t.best_cost = min(t.best_cost, min(finite))
        t.trials = max(t.trials, len(rows))
        total += len(rows)
        every = every and bool(rows)
    return total, every


def tune_tasks(tasks: list[Task], target, trials: int, records=None, slice_trials: int = 8,
               warmup_trials: int | None = None, progress: bool = True, model: str = "model",
               options: TuneOptions | None = None, executor=None, **tune_options) -> dict:
    """Tune `tasks` with `trials` measurements in all (those the store counts as spent on
    this model included); returns a summary (new trials, reused records, seconds, estimated
    latency before and after). Each task is one `TuningTask`, set up at its first slice and
    kept to the end (its space, strategy, cost model, inputs and reference made once); a task
    that stops improving (its early stop) gets no more slices. `options` or `tune_options`:
    how each task searches (TuneOptions: seed, timeout, cost_model, method, ...). `executor`: where the
    candidates are built and run (None: here; a RayExecutor: on its cluster)."""
    from ..backends import backend_for
    from ..targets import as_target

    target = as_target(target)
    opts = TuneOptions.of(options, **{"progress": False, **tune_options})
    backend = backend_for(target)
    store = records if isinstance(records, Records) else Records(records)
    reused, every_task = known_costs(tasks, target, store)
    before = estimated_latency(tasks)
    states = [_State(t) for t in tasks]
    warm = warmup_trials if warmup_trials is not None else max(1, min(slice_trials, trials // max(len(tasks), 1)))
    share = max(slice_trials, trials // max(len(tasks), 1))  # a task's expected budget: sizes its warm-up
    key = model_key(tasks)
    spent_before = store.model_trials(key, target.key)
    if spent_before is None:  # a store from before the count: its records count once every task has some
        spent_before = reused if every_task else 0
    counted = min(spent_before, trials)
    spent, start = counted, time.perf_counter()
    live: list[_State] = []  # tasks holding a runner process, least recently used first

    def give(st: _State, n: int) -> None:
        nonlocal spent
        n = min(n, trials - spent)
        if n <= 0 or (st.tuning is not None and st.tuning.stopped):
            return
        if st.tuning is None:  # weights are packed once, outside the timed kernel, as the model runs them
            args = st.task.args
            st.tuning = TuningTask(args, target, backend, opts, store, [args[i] for i in st.task.constants],
                                   budget=share, executor=executor)
        if st in live:
            live.remove(st)
        live.append(st)
        while len(live) > MAX_LIVE_RUNNERS:
            live.pop(0).tuning.pause()
        got = len(st.tuning.tune(n))
        spent += got
        store.add_model_trials(key, target.key, got)
        st.task.trials += got
        st.slices += 1
        st.task.best_cost = min(st.task.best_cost, st.tuning.best[1])
        st.history.append(st.task.best_cost)
        _show(progress, model, spent, trials, tasks, start)

    try:
        for st in states:  # warm-up, round robin; known tasks skip it
            if spent >= trials:
                break
            if math.isfinite(st.task.best_cost):
                st.history.append(st.task.best_cost)
                continue
            give(st, warm)
        while spent < trials:
            open_states = [st for st in states if st.tuning is None or not st.tuning.stopped]
            if not open_states:
                break
            before_spent, chosen = spent, max(open_states, key=_State.gain)
            give(chosen, slice_trials)
            if spent == before_spent and not chosen.tuning.stopped:  # a stopped task just leaves the pool
                break
        retime_start = time.perf_counter()
        for st in live:  # each task takes the device in turn to re-time (one runner per device on a cluster)
            st.tuning.pause()
        for st in states:  # the best few points of each tuned task timed again, once (not after every slice)
            if st.tuning is not None:
                st.task.best_cost = st.tuning.retime()
                st.tuning.pause()
        retime_s = time.perf_counter() - retime_start
    finally:
        for st in states:
            if st.tuning is not None:
                st.tuning.close()
    _show(progress, model, spent, trials, tasks, start, end=True)
    tuned = [st.tuning for st in states if st.tuning is not None]
    return {"trials": spent - counted, "reused": reused, "seconds": time.perf_counter() - start,
            "setup_s": sum(t.setup_s for t in tuned), "build_s": sum(t.build_s for t in tuned),
            "run_s": sum(t.run_s for t in tuned), "retime_s": retime_s,
            "estimated_before_s": before, "estimated_after_s": estimated_latency(tasks)}


def _show(on: bool, model: str, spent: int, trials: int, tasks: list[Task], start: float, end: bool = False) -> None:
    """One progress line per model, rewritten in place."""
    if not on:
        return
    est = estimated_latency(tasks)
    known = sum(math.isfinite(t.best_cost) for t in tasks)
    est_text = f"estimated {est * 1e3:.3f} ms" if math.isfinite(est) else f"warming up ({known} tasks timed)"
    line = (f"\rtuning {model}: {spent}/{trials} trials over {len(tasks)} tasks, {est_text}, "
            f"{time.perf_counter() - start:.0f} s")
    sys.stderr.write(line.ljust(100) + ("\n" if end else ""))
    sys.stderr.flush()

"""`TuningTask`: the tuning of one program on one target, kept across calls (MetaSchedule's task). It owns
the space, the search strategy, the cost-model screen, the measurer (its random inputs, NumPy reference and
runner process) and the log, set up once: `task.tune(n)` measures n more schedules, as often as a caller
likes (the task scheduler gives a model's tasks slices of its budget), `task.retime()` times the best few
again, `task.best` and `task.result` say where it stands. Early stopping counts the task's own trials
across calls, so a task that stopped improving is `task.stopped` and gets no more.

The default (heuristic) point is measured first, so the report shows what search added; known records of
the same workload on the same target seed the search (a rerun resumes an interrupted one without
re-measuring anything). Every measurement is committed to the records as it completes."""

from __future__ import annotations

import math
import sys
import time
import uuid
from pathlib import Path

from .. import __version__
from ..analysis import workload_key
from ..config import cache_dir
from ..errors import TilewrightError
from ..records import Record, open_records
from ..runtime.measure import Measurer, MeasureResult
from ..space import Point
from . import make_strategy
from .best import split_args
from .finalists import retime_finalists
from .options import TuneOptions
from .prescreen import Prescreen
from .replay import trace_of
from .result import Trial, TuneResult, valid_point


class TuningTask:
    """Tune the program whose arguments are `tensors` (inputs and outputs, in kernel order) on `target`
    (a Target) through `backend`, its backend record (`tw.tuning_task` looks it up). `records`: the
    store or path every measurement goes to (default: the enclosing `with tw.records(...)`, else the
    user cache). `budget`: the trials this task expects in all (sizes the warm-up and the early stop
    where `options` leave them unset). `constants`:
    inputs that never change between calls (a model's weights): a candidate's packs of them are made
    once, outside the timed kernel. `executor`: where candidates are built and run (None: here, a
    LocalBuilder and a LocalRunner; a RayExecutor: on its cluster)."""

    def __init__(self, tensors, target, backend, options: TuneOptions | None = None, records=None,
                 constants=(), budget: int = 200, executor=None):
        created = time.perf_counter()
        self.args, self.outputs = split_args(tensors)
        self.backend, self.target = backend, target
        self.options = options = options or TuneOptions()
        self.generator = backend.space_generator(self.outputs, target, constants)
        self.space, self.plan = self.generator.space, self.generator.plan
        self.strategy = make_strategy(options.method, self.space, options.seed)
        self.store = open_records(records)
        self.workload = workload_key(self.outputs)
        self.run_id = uuid.uuid4().hex[:12]
        self.description = f"{self.plan.main.name} {list(self.plan.main.tensor.shape)} {self.plan.main.tensor.dtype}"
        self.batch = options.batch or max(2, target.cores * 2)
        self.warmup = min(budget // 5, 20) if options.warmup is None else options.warmup
        self.early_stop = options.early_stop or max(60, budget // 2)
        self._log_path = Path(options.log) if options.log else cache_dir() / "logs" / f"tune-{self.run_id}.log"
        self._log = _open_log(self._log_path)
        for r in self.store.query(self.workload, target.key):  # warm start: never measure a known point again
            p = valid_point(r, self.space)
            if p is not None:
                self.strategy.observe([p], [r.cost])
        self.strategy.trials = 0
        self.screen = Prescreen(options.cost_model, backend, target, self.args, self.outputs, self.plan,
                                self.space, self.store, self.workload, options.seed)
        self.result = TuneResult(self.args, self.outputs, target, backend, self.space, self.plan, options.method,
                                 self.workload, *self.strategy.best, math.inf, log_path=self._log_path)
        self.default = self.generator.default()
        try:
            make = Measurer if executor is None else executor.measurer
            self.measurer = make(self.outputs, self.args, target, self.screen.backend, timeout=options.timeout,
                                 seed=options.seed, flush_cache=options.flush_cache, constants=constants)
        except BaseException:
            self.screen.close()
            self._log.close()
            raise
        if self.default in self.strategy.costs:
            self.result.default_cost = self.measurer.baseline = self.strategy.costs[self.default]
        seeds = self.generator.heuristic(self.batch) if options.from_default else []
        self._queue = [p for p in seeds if p not in self.strategy.costs]
        self._default_times: list[float] = []  # every time this task takes of the default point
        self._last_gain = 0
        self._errors = 0
        self._start = time.perf_counter()
        self.stopped = ""  # why the task measures no more: "space exhausted", "early stop: ..."
        self.build_s = self.run_s = 0.0  # seconds its measurements spent building (wall) and running
        self.setup_s = self._start - created
        self.libraries: dict[Point, str] = {}  # point -> the artefact measured for it (re-timing reuses it)
        self._closed = False

    @property
    def best(self) -> tuple[Point | None, float]:
        return self.result.best_point, self.result.best_cost

    @property
    def trials(self) -> int:
        return len(self.result.history)

    def tune(self, n_trials: int) -> list[Trial]:
        """Measure up to `n_trials` more schedules (fewer once the task has stopped); their trials."""
        first = self.trials
        goal = first + n_trials
        bar = _Progress(_show(self.options.progress), self.plan.main.name, goal, self.plan.graph.flops)
        while self.trials < goal and not self.stopped:
            want = min(self.batch, goal - self.trials)
            if self._queue:
                points, self._queue = self._queue[:want], self._queue[want:]
            else:
                warm = self.trials < self.warmup or not self.strategy.costs
                points = self.screen.propose(self.strategy, want, warm=warm)
            if not points:
                self.stopped = "space exhausted"
                break
            schedules = self.screen.instantiate(points)
            measured = self.measurer.measure(schedules, on_result=lambda i, m, p=points, s=schedules:
                                             self._done(p[i], s[i], m))
            self.strategy.observe(points, [m.cost for m in measured])
            self.screen.observe(points, schedules, measured, trial=self.trials)
            bar.update(self.trials, self.result.best_cost, self._errors)
            if self.trials - self._last_gain >= self.early_stop:
                self.stopped = f"early stop: no improvement in {self.early_stop} trials"
        if self.stopped:
            self.log(self.stopped)
        bar.done()
        return self.result.history[first:]

    def _done(self, p: Point, schedule, m: MeasureResult) -> None:
        """One measurement, committed at once (a kill loses nothing measured) and logged."""
        self.record(p, schedule, m)
        cost = m.cost
        if p == self.default:
            self.result.default_cost = cost
            self.measurer.baseline = cost  # later timeouts scale with the default's time
            self._default_times.extend(m.costs if m.ok else ())
        if cost < self.result.best_cost:
            self.result.best_point, self.result.best_cost = p, cost
            self._last_gain = self.trials
        self._errors += not m.ok
        self.build_s += m.build_s
        if m.ok and m.library:
            self.libraries[p] = m.library
        self.run_s += m.run_s
        trial = Trial(self.trials, time.perf_counter() - self._start, p, cost, m.error_kind.value, m.error_msg,
                      self.result.best_cost)
        self.result.history.append(trial)
        self.log(f"{trial.index}\t{trial.elapsed_s:.2f}s\t{cost:.6g}\t{m.error_kind.value}\t{p}\t{m.error_msg[:300]}")

    def log(self, line: str) -> None:
        self._log.write(line + "\n")
        self._log.flush()

    def record(self, point: Point, schedule, m: MeasureResult) -> None:
        trace = "" if isinstance(schedule, BaseException) else trace_of(schedule)
        self.store.add(Record(self.workload, self.target.key, point.to_json(), trace, m.costs, m.error_kind.value,
                              m.error_msg, self.options.method, self.options.seed, self.run_id, __version__,
                              time.time(), self.description))

    def retime(self) -> float:
        """Time the best few points of the records (and the default) again; the best median becomes `best`."""
        retime_finalists(self, self._default_times)
        return self.result.best_cost

    def pause(self) -> None:
        """Stop the runner process (a model's idle tasks need not each hold one); the next measurement
        starts a fresh one. Inputs, reference and search state stay."""
        self.measurer.suspend()

    def close(self) -> TuneResult:
        """Release the measurer and the screen; the result, complete."""
        if not self._closed:
            self._closed = True
            self.measurer.close()
            self.screen.close()
            self.result.cost_model = self.screen.report()
            self.log(f"cost model: {self.result.cost_model}")
            self._log.close()
            if self.result.best_point is None and self.strategy.best[0] is not None:  # all from records
                self.result.best_point, self.result.best_cost = self.strategy.best
        return self.result

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _open_log(path: Path):
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return open(path, "a")
    except OSError as exc:
        raise TilewrightError(f"cannot write the tuning log {path}: {exc}; pass log= a writable file or set "
                              f"TILEWRIGHT_CACHE_DIR to a writable directory") from None


def _show(progress: bool | None) -> bool:
    return sys.stderr.isatty() if progress is None else progress


class _Progress:
    def __init__(self, enabled: bool, name: str, total: int, flops: int):
        self.enabled, self.name, self.total, self.flops = enabled, name, total, flops

    def update(self, n: int, best: float, errors: int) -> None:
        if not self.enabled:
            return
        perf = f"{best * 1e3:.4f} ms {self.flops / best / 1e9:7.1f} GFLOP/s" if math.isfinite(best) else "no result"
        sys.stderr.write(f"\r[tune {self.name}] trial {n}/{self.total}  best {perf}  errors {errors}   ")
        sys.stderr.flush()

    def done(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


__all__ = ["TuningTask"]

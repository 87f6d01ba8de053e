"""The tuner loop behind `tw.tune`: explore the schedule space of a program by
measurement, record every measurement, and return the best schedule found.
It knows no target kind: the backend record (backends.py) passed in supplies
the space, the point -> schedule implementation and the build pipeline.

The default (heuristic) point is measured first, so the report shows what
search added; known records of the same workload on the same target seed the
search (a rerun resumes an interrupted one without re-measuring anything).
Proposals are pre-screened by the learned cost model when the target has
enough measured schedules to train it (search/prescreen.py)."""

from __future__ import annotations

import math
import sys
import time
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ..analysis import workload_key
from ..config import cache_dir
from ..errors import TilewrightError, TilewrightWarning
from ..records import Record, Records
from ..runtime.measure import ErrorKind, Measurer, MeasureResult
from ..space import Point
from ..stats import median
from ..te.tensor import PlaceholderOp, Tensor
from . import make_strategy
from .prescreen import Prescreen
from .replay import schedule_from_trace, trace_of


@dataclass(frozen=True)
class Trial:
    index: int
    elapsed_s: float
    point: Point
    cost: float
    error_kind: str
    error_msg: str
    best_cost: float


@dataclass
class TuneResult:
    args: list
    outputs: list
    target: object
    backend: object
    space: object
    plan: object
    method: str
    workload: str
    best_point: Point | None
    best_cost: float
    default_cost: float
    history: list[Trial] = field(default_factory=list)
    log_path: Path | None = None
    cost_model: str = ""  # what the learned cost model did in this run (report line)

    @property
    def flops(self) -> int:
        return self.plan.graph.flops

    @property
    def gflops(self) -> float:
        return self.flops / self.best_cost / 1e9 if math.isfinite(self.best_cost) else 0.0

    @property
    def errors(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.history:
            if t.error_kind != "none":
                out[t.error_kind] = out.get(t.error_kind, 0) + 1
        return out

    def schedule(self):
        if self.best_point is None:
            raise TilewrightError("tuning found no working schedule; see the errors in the report")
        return self.backend.apply(self.outputs, self.plan, self.best_point)

    def build(self):
        """The best kernel, compiled (cached), taking `args` in order."""
        return self.backend.build(self.schedule(), self.args, self.target)

    def report(self) -> str:
        lines = [f"tuned {self.plan.main.name} ({self.flops / 1e9:.3f} GFLOP) on {self.target} with method "
                 f"{self.method}: {len(self.history)} measurements"]
        if math.isfinite(self.default_cost):
            lines.append(f"  untuned default: {self.default_cost * 1e3:.4f} ms "
                         f"({self.flops / self.default_cost / 1e9:.1f} GFLOP/s)")
        if math.isfinite(self.best_cost):
            gain = f", {self.default_cost / self.best_cost:.2f}x over default" if math.isfinite(self.default_cost) \
                else ""
            lines.append(f"  best: {self.best_cost * 1e3:.4f} ms ({self.gflops:.1f} GFLOP/s{gain})")
            lines.append(f"  point: {self.best_point}")
        if self.cost_model:
            lines.append(f"  cost model: {self.cost_model}")
        if self.errors:
            lines.append("  failed candidates: " + ", ".join(f"{k} {v}" for k, v in sorted(self.errors.items())))
        if self.log_path:
            lines.append(f"  log: {self.log_path}")
        return "\n".join(lines)


_NON_NEGATIVE = ("seed", "warmup")


def check_options(zero_trials: bool = False, **options) -> None:
    """Tuning options: counts are positive ints (or None where optional), the timeout a positive number,
    the seed and warmup non-negative ints; `zero_trials`: trials may be 0 as well (re-time only)."""
    lowest = {name: 0 for name in _NON_NEGATIVE} | ({"trials": 0} if zero_trials else {})
    for name, value in options.items():
        optional = name in ("batch", "warmup", "early_stop")
        if value is None and optional:
            continue
        if name == "timeout":
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
            want = "a positive number of seconds"
        else:
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= lowest.get(name, 1)
            want = "a non-negative int" if name in lowest else "a positive int"
        if not ok:
            raise TilewrightError(f"tune: {name} must be {want}{' or None' if optional else ''}, got {value!r}")


def _split_args(tensors) -> tuple[list, list]:
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    args = list(tensors)
    outputs = [t for t in args if not isinstance(t.op, PlaceholderOp)]
    if not outputs:
        raise TilewrightError("tune needs the program's tensors, inputs and outputs, e.g. [A, B, C]; "
                              "no computed tensor was given")
    return args, outputs


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


def run_tuning(backend, tensors, tgt, trials: int = 200, method: str = "q", timeout: float = 10.0, seed: int = 0,
               records=None, early_stop: int | None = None, batch: int | None = None, warmup: int | None = None,
               progress: bool | None = None, log=None, from_default: bool = True,
               cost_model: str = "auto", flush_cache: bool = False, constants=(), retime: bool = True) -> TuneResult:
    """Search `trials` schedules of the program whose arguments are `tensors`
    (inputs and outputs, in kernel order) on target `tgt` through `backend`.

    The heuristic default point is measured first, with the next best
    register-tile shapes of the model, and the search starts from them;
    `from_default=False` leaves them out (to compare search methods from
    scratch, as FlexTensor's Figure 7 does).

    `cost_model`: "auto" (default) pre-screens proposals with the learned
    cost model once the target has enough measured schedules (of any
    workload) to train it, "on" as soon as one can be fitted, "off" never
    (search/prescreen.py).

    `flush_cache`: each measurement times single calls after evicting the caches, as Ansor does for
    networks: the state a kernel meets inside a model, where back-to-back warm calls rank schedules
    that copy their inputs (a padded copy, a packed panel) too well.

    `constants`: input tensors that never change between calls (a model's weights; `tw.compile`
    passes them): a candidate's packs of them are made once, outside the timed kernel, as the
    compiled model makes them (graph/const_packs.py).

    `retime`: time the best few points of the records again at the end (`_retime_finalists`); a
    caller that tunes in slices (the task scheduler) re-times once after its last slice instead.
    `trials=0` (here, not in `tw.tune`) measures no new point and only re-times."""
    args, outputs = _split_args(tensors)
    check_options(zero_trials=True, trials=trials, timeout=timeout, seed=seed, batch=batch,
                   warmup=warmup, early_stop=early_stop)
    backend.require_space()
    space, plan = backend.space(outputs, tgt, constants=constants)
    strategy = make_strategy(method, space, seed)
    store = records if isinstance(records, Records) else Records(records)
    wkey, tkey = workload_key(outputs), tgt.key
    run_id = uuid.uuid4().hex[:12]
    description = f"{plan.main.name} {list(plan.main.tensor.shape)} {plan.main.tensor.dtype}"
    log_path = Path(log) if log else cache_dir() / "logs" / f"tune-{run_id}.log"
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        logf = open(log_path, "a")
    except OSError as exc:
        raise TilewrightError(f"cannot write the tuning log {log_path}: {exc}; pass log= a writable file or set "
                              f"TILEWRIGHT_CACHE_DIR to a writable directory") from None
    batch = batch or max(2, tgt.cores * 2)
    warmup = min(trials // 5, 20) if warmup is None else warmup
    early_stop = early_stop or max(60, trials // 2)

    for r in store.query(wkey, tkey):  # warm start: never measure a known point again
        p = _valid_point(r, space)
        if p is not None:
            strategy.observe([p], [r.cost])
    strategy.trials = 0
    screen = Prescreen(cost_model, backend, tgt, args, outputs, plan, space, store, wkey, seed)

    result = TuneResult(args, outputs, tgt, backend, space, plan, method, wkey, *strategy.best, math.inf,
                        log_path=log_path)
    show = sys.stderr.isatty() if progress is None else progress
    bar = _Progress(show, plan.main.name, trials, plan.graph.flops)
    start = time.perf_counter()
    default = backend.default_point(space, plan)
    last_gain = 0
    default_times: list[float] = []  # every time this run takes of the default point
    n_errors = 0
    with Measurer(outputs, args, tgt, screen.backend, timeout=timeout, seed=seed, flush_cache=flush_cache,
                  constants=constants) as measurer:
        if default in strategy.costs:
            result.default_cost = measurer.baseline = strategy.costs[default]
        seeds = backend.heuristic_points(space, plan, k=batch) if from_default else []
        queue = [p for p in seeds if p not in strategy.costs]
        while len(result.history) < trials:
            want = min(batch, trials - len(result.history))
            if queue:
                points, queue = queue[:want], queue[want:]
            else:
                points = screen.propose(strategy, want, warm=len(result.history) < warmup or not strategy.costs)
            if not points:
                logf.write("space exhausted\n")
                break
            schedules = screen.instantiate(points)

            def done(i, m, points=points, schedules=schedules):  # each measurement is committed at once
                nonlocal last_gain, n_errors
                p = points[i]
                _record(store, wkey, tkey, p, schedules[i], m, method, seed, run_id, description)
                cost = m.cost
                if p == default:
                    result.default_cost = cost
                    measurer.baseline = cost  # later timeouts scale with the default's time
                    default_times.extend(m.costs if m.ok else ())
                if cost < result.best_cost:
                    result.best_point, result.best_cost = p, cost
                    last_gain = len(result.history)
                n_errors += not m.ok
                trial = Trial(len(result.history), time.perf_counter() - start, p, cost, m.error_kind.value,
                              m.error_msg, result.best_cost)
                result.history.append(trial)
                logf.write(f"{trial.index}\t{trial.elapsed_s:.2f}s\t{cost:.6g}\t{m.error_kind.value}\t{p}"
                           f"\t{m.error_msg[:300]}\n")
                logf.flush()

            measured = measurer.measure(schedules, on_result=done)
            strategy.observe(points, [m.cost for m in measured])
            screen.observe(points, schedules, measured, trial=len(result.history))
            bar.update(len(result.history), result.best_cost, n_errors)
            if len(result.history) - last_gain >= early_stop:
                logf.write(f"early stop: no improvement in {early_stop} trials\n")
                break
        if retime:
            _retime_finalists(result, store, tkey, measurer, lambda p, s, m: _record(
                store, wkey, tkey, p, s, m, method, seed, run_id, description), logf, default, default_times)
    bar.done()
    screen.close()
    result.cost_model = screen.report()
    logf.write(f"cost model: {result.cost_model}\n")
    logf.close()
    if result.best_point is None and strategy.best[0] is not None:  # all from records
        result.best_point, result.best_cost = strategy.best
    return result


# The fastest few points of a run are timed again, in alternating rounds, and the best median wins:
# on a shared machine one measurement can be 20% off, enough to crown the wrong schedule. A point
# whose only measurement was lucky would still outrank finalists whose re-timing raised their median,
# so passes repeat until the top few are all re-timed points (at most FINAL_PASSES).
FINALISTS, FINAL_ROUNDS, FINAL_PASSES = 3, 2, 4


def _retime_finalists(result: TuneResult, store: Records, tkey: str, measurer, record, logf, default,
                      default_times: list) -> None:
    """Time the best few points of the records, and the default, again and take the best
    of the records' per-point medians (`Records.best`: the median of every time of a point),
    so the run and later builds agree; repeat for points that rise into the top few without
    having been re-timed. The default's cost becomes the median of every time this run took
    of it, the same statistic: tuned and untuned are compared like with like."""
    def ranked():
        for r in store.best(result.workload, tkey, k=FINALISTS):
            p = _valid_point(r, result.space)
            if p is not None:
                yield p, r

    retimed: set = set()
    for n in range(FINAL_PASSES):
        finalists = [p for p, _ in ranked() if p not in retimed]
        if n == 0 and math.isfinite(result.default_cost) and default not in finalists:
            finalists.append(default)
        if not finalists or (n == 0 and len(finalists) < 2):
            break
        schedules = _instantiate(result.backend, result.outputs, result.plan, finalists)
        for _ in range(FINAL_ROUNDS):
            for p, m in zip(finalists, measurer.measure(
                    schedules, on_result=lambda i, m, f=finalists, s=schedules: record(f[i], s[i], m))):
                if p == default and m.ok:
                    default_times.extend(m.costs)
        retimed.update(finalists)
    if default_times:  # this run's times of the default, not older runs' records of it
        result.default_cost = median(default_times)
    now = list(ranked())
    for _, r in now:
        logf.write(f"finalist\t{r.cost:.6g} (median record)\t{r.point}\n")
    if now:
        result.best_point, result.best_cost = now[0][0], now[0][1].cost


def _instantiate(backend, outputs, plan, points) -> list:
    """The schedule of each point, or the error that stopped it (measured as a failure)."""
    out = []
    for p in points:
        try:
            out.append(backend.apply(outputs, plan, p))
        except TilewrightError as exc:
            out.append(exc)
    return out


def _valid_point(record: Record, space) -> Point | None:
    """A record's point when it parses and lies in this space (records outlive space changes)."""
    try:
        p = space.upgrade(Point.from_json(record.point))
    except ValueError:
        return None
    return p if space.valid(p) else None


def best_schedule(backend, tensors, tgt, constants=()):
    """The schedule of the best record in the active store for this workload and target
    fingerprint, rebuilt by replaying its stored trace (not re-derived from its point, so
    a later change of the space code cannot change it), or else the default point's.
    Records of the same workload for other fingerprints are never applied: a warning says
    they exist; so does one for a record whose trace no longer replays. `constants`: inputs
    that never change between calls (a model's weights), which the default packs for free."""
    from ..records import active_records

    _, outputs = _split_args(tensors)
    store = active_records()
    if store is not None:
        wkey = workload_key(outputs)
        mine = [r for r in store.best(wkey, tgt.key, k=5) if r.trace]
        failures = []
        for r in mine:
            try:
                return schedule_from_trace(outputs, r.trace)
            except TilewrightError as exc:
                failures.append(str(exc))
        if failures:
            warnings.warn(f"the {len(failures)} best records of this workload on {tgt.key} no longer replay onto "
                          f"the program ({failures[0]}); using the default schedule. Re-tune to replace them.",
                          TilewrightWarning, stacklevel=3)
        elif not mine:
            others = sorted({r.target for r in store.query(wkey) if r.target != tgt.key})
            if others:
                warnings.warn(f"records of this workload exist only for other targets ({', '.join(others[:3])}"
                              f"{', ...' if len(others) > 3 else ''}); they are not applied to {tgt.key}. "
                              f"Using the default schedule; tune on this target to get one.",
                              TilewrightWarning, stacklevel=3)
    return backend.default_schedule(outputs, tgt, constants)


def _record(store: Records, wkey, tkey, point: Point, schedule, m: MeasureResult, method, seed, run_id, desc):
    trace = "" if isinstance(schedule, BaseException) else trace_of(schedule)
    store.add(Record(wkey, tkey, point.to_json(), trace, m.costs, m.error_kind.value, m.error_msg, method, seed,
                     run_id, __version__, time.time(), desc))


__all__ = ["ErrorKind", "TuneResult", "Trial", "best_schedule", "run_tuning"]

"""What a user calls: `tw.lower`, `tw.build`, `tw.tune`. Each resolves the
target, asks its backend record (backends.py) and hands it down; nothing
here knows a target kind."""

from __future__ import annotations

# The `build` package is loaded before this module defines `build`, so that the package's first
# import cannot later rebind `tilewright.build` from this function to the package.
from . import build as _build_package  # noqa: F401
from .backends import backend_for
from .errors import TensorizeError
from .lower import LoweredFunc
from .lower import lower as _lower
from .schedule import Schedule
from .search.best import best_schedule
from .search.options import TuneOptions, check_count
from .search.task import TuningTask
from .search.tuner import TuneResult, run_tuning
from .targets import as_target


def _hinted(call):
    """`call()`, where a tensorize the matcher cannot place also says where the embedder would."""
    try:
        return call()
    except TensorizeError as exc:
        from .intrin.embed import embedding_hint

        hint = embedding_hint(exc.tensor, exc.intrin) if exc.tensor is not None and exc.intrin is not None else ""
        if not hint:
            raise
        raise TensorizeError(f"{exc}\n{hint}", exc.tensor, exc.intrin) from None


def lower(s: Schedule, args, name: str = "kernel", target=None) -> LoweredFunc:
    """The loop IR of `s`; print it to read C-like pseudo-code. With `target`,
    that target's passes and limits apply (as `build` would)."""
    if target is None:
        return _hinted(lambda: _lower(s, args, name))
    tgt = as_target(target)
    return _hinted(lambda: backend_for(tgt).lower(s, args, name, tgt))


def build(s, args=None, target="cpu", name: str = "kernel"):
    """Compile schedule `s` for `target` into a callable kernel taking `args` in
    order. Given tensors instead of a schedule (`tw.build([A, B, C])`), it uses
    the best tuning record of the active `with tw.records(...)` store for this
    workload and target (replaying its stored trace), or else the untuned
    default schedule."""
    tgt = as_target(target)
    backend = backend_for(tgt)
    if backend.operator_compiler is not None and not isinstance(s, Schedule):
        return backend.operator_compiler(list(s) if args is None else list(args), tgt)
    if not isinstance(s, Schedule):
        args = list(s) if args is None else list(args)
        s = best_schedule(backend, args, tgt)
    return _hinted(lambda: backend.build(s, args, tgt, name))


def tune(tensors, target="cpu", trials: int = 200, method: str = "q", **options) -> TuneResult:
    """Search `trials` schedules of the program whose arguments are `tensors`
    (inputs and outputs, in kernel order). Returns a TuneResult with the best
    schedule, its time, the history, `report()` and `build()`. Options: records
    (a store or path; default: the enclosing `with tw.records(...)`, else the user
    cache), constants (input tensors that never change, whose packs are made once
    outside the timed kernel), and those of
    `tilewright.search.options.TuneOptions` (timeout, seed, early_stop, batch,
    warmup, progress, log, from_default, cost_model: "auto" | "on" | "off", the
    learned model that pre-screens proposals, flush_cache: time single calls after
    evicting the caches), or `options=` a TuneOptions. A `TuningTask`
    (`tuning_task`) keeps a tuning open across calls."""
    check_count("trials", trials)
    tgt = as_target(target)
    backend = backend_for(tgt)
    if backend.operator_tuner is not None:
        return backend.operator_tuner(tensors, tgt, trials=trials, method=method, **options)
    return run_tuning(backend, tensors, tgt, trials=trials, method=method, **options)


def tuning_task(tensors, target="cpu", records=None, budget: int = 200, constants=(), executor=None,
                **options) -> TuningTask:
    """A TuningTask for the program whose arguments are `tensors` on `target`: set up once, then
    `task.tune(n)` as often as wanted, `task.retime()`, `task.best`, `task.close()` (or `with`).
    `options`: those of TuneOptions; `executor`: a RayExecutor, or None for this machine."""
    tgt = as_target(target)
    return TuningTask(tensors, tgt, backend_for(tgt), TuneOptions.of(**options), records, constants, budget,
                      executor)


__all__ = ["build", "lower", "tune", "tuning_task"]

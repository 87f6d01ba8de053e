"""The best recorded schedule of a program, or its default: what `tw.build([tensors])` and a compiled model
build from. It replays a record's stored trace, so it needs no tuning machinery (no measurer, no strategy)."""

from __future__ import annotations

import warnings

from ..analysis import workload_key
from ..errors import TilewrightError, TilewrightWarning
from ..te.tensor import PlaceholderOp, Tensor
from .replay import schedule_from_trace


def best_schedule(backend, tensors, tgt, constants=()):
    """The schedule of the best record in the active store for this workload and target
    fingerprint, rebuilt by replaying its stored trace (not re-derived from its point, so
    a later change of the space code cannot change it), or else the default point's.
    Records of the same workload for other fingerprints are never applied: a warning says
    they exist; so does one for a record whose trace no longer replays. `constants`: inputs
    that never change between calls (a model's weights), which the default packs for free."""
    from ..records import active_records

    _, outputs = split_args(tensors)
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


def split_args(tensors) -> tuple[list, list]:
    """(every argument in kernel order, the computed ones)."""
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    args = list(tensors)
    outputs = [t for t in args if not isinstance(t.op, PlaceholderOp)]
    if not outputs:
        raise TilewrightError("tune needs the program's tensors, inputs and outputs, e.g. [A, B, C]; "
                              "no computed tensor was given")
    return args, outputs


__all__ = ["best_schedule", "split_args"]

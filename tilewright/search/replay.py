"""A tuning record's schedule, rebuilt from its stored trace.

A record stores the trace of primitives that made its schedule, so a build
from records replays exactly those primitives and does not depend on today's
space code. A schedule over a program with merged axes (analysis/axis_merge.py)
stores the merged shapes as a first step, `merge_axes`; replay re-runs the merge
and refuses, naming both, when it no longer gives the recorded shapes."""

from __future__ import annotations

import json

from ..analysis.axis_merge import merge_contiguous_axes
from ..errors import ScheduleError
from ..schedule import create_schedule
from ..schedule.trace import Trace

MERGE_STEP = "merge_axes"


def _merged_shapes(views: dict, originals) -> dict[str, list[int]]:
    return {t.name: list(views[id(t)].shape) for t in originals if id(t) in views}


def trace_of(schedule) -> str:
    """The JSON trace a record stores: the merge step (if any), then every primitive."""
    steps = json.loads(schedule.trace.to_json())
    if schedule.views:
        shapes = _merged_shapes(schedule.views, schedule.view_originals)
        steps.insert(0, {"stage": "", "primitive": MERGE_STEP, "args": {"shapes": shapes}})
    return json.dumps(steps)


def schedule_from_trace(outputs, text: str):
    """Replay a stored trace onto the program of `outputs` (the caller's tensors)."""
    steps = list(Trace.from_json(text))  # a malformed trace is a ScheduleError naming the step
    if not (steps and steps[0].stage == "" and steps[0].primitive == MERGE_STEP):
        s = create_schedule(outputs)
    else:
        want = steps.pop(0).args.get("shapes")
        merged = merge_contiguous_axes(outputs)
        got = {} if merged is None else _merged_shapes(merged.views, merged.originals)
        if got != want:
            raise ScheduleError(f"the trace was recorded on the program with merged axes {want}, but today's axis "
                                f"merge gives {got or 'no merge'}; it cannot be replayed")
        s = create_schedule(merged.outputs)
        s.views, s.view_originals = dict(merged.views), merged.originals
    return Trace(steps).apply_to(s)  # a step that does not fit is a ScheduleError naming it


__all__ = ["schedule_from_trace", "trace_of"]

"""A tuning record's schedule, rebuilt from its stored trace.

A record stores the trace of primitives that made its schedule, so a build
from records replays exactly those primitives and does not depend on today's
space code. A schedule over a program with merged axes (analysis/axis_merge.py)
stores the merged shapes as a step, `merge_axes`; replay re-runs the merge
and refuses, naming both, when it no longer gives the recorded shapes.

Primitives name stages and tensors, but a workload (and so its records) is the
same whatever its tensors are called: a model's conv layer and the same layer in
another model differ only in names. The first step, `tensor_names`, lists the
program's tensors in canonical order (the workload key's); replay renames the
trace onto the caller's program position by position. Traces without it replay
by name as they were recorded. A schedule over a program the CPU space rewrote for an
embedded intrinsic (space/cpu_embed.py) stores the rewrite as the very first step,
`embed_layout`; replay rebuilds the same program from the caller's before anything else."""

from __future__ import annotations

import json

from ..analysis.axis_merge import merge_contiguous_axes
from ..errors import ScheduleError, TilewrightError
from ..schedule import create_schedule
from ..schedule.trace import Trace
from ..te.program import collect_program

MERGE_STEP = "merge_axes"
NAMES_STEP = "tensor_names"
REWRITE_STEP = "embed_layout"  # the program rewritten for an embedded intrinsic (space/cpu_embed.py)
_NAMED_ARGS = ("tensor", "parent", "readers")  # args that hold stage or tensor names (trace.py's _apply)


def _merged_shapes(views: dict, originals) -> dict[str, list[int]]:
    return {t.name: list(views[id(t)].shape) for t in originals if id(t) in views}


def trace_of(schedule) -> str:
    """The JSON trace a record stores: the merge step (if any), then every primitive."""
    steps = json.loads(schedule.trace.to_json())
    if schedule.views:
        shapes = _merged_shapes(schedule.views, schedule.view_originals)
        steps.insert(0, {"stage": "", "primitive": MERGE_STEP, "args": {"shapes": shapes}})
    names = [t.name for t in collect_program(list(schedule.outputs)).tensors]
    steps.insert(0, {"stage": "", "primitive": NAMES_STEP, "args": {"tensors": names}})
    if schedule.rewrite is not None:
        steps.insert(0, {"stage": "", "primitive": REWRITE_STEP, "args": dict(schedule.rewrite)})
    return json.dumps(steps)


def _renamed(steps: list, recorded: list, outputs) -> list:
    """`steps` with the recorded program's tensor names replaced by those of the program
    of `outputs` at the same canonical positions (a stage made by cache_read/cache_write,
    '<name>.<scope>', follows its tensor)."""
    current = [t.name for t in collect_program(list(outputs)).tensors]
    if len(current) != len(recorded):
        raise ScheduleError(f"the trace was recorded on a program of {len(recorded)} tensors, this one has "
                            f"{len(current)}; it cannot be replayed")
    mapping: dict[str, str] = {}
    for old, new in zip(recorded, current):
        if mapping.setdefault(old, new) != new:
            raise ScheduleError(f"the recorded program names two tensors '{old}'; the trace cannot be renamed")
    if all(k == v for k, v in mapping.items()):
        return steps

    def rename(name: str) -> str:
        head, dot, tail = name.partition(".")
        return mapping.get(name) or (mapping[head] + dot + tail if dot and head in mapping else name)

    out = []
    for st in steps:
        args = dict(st.args)
        for key in _NAMED_ARGS:
            if key in args:
                args[key] = [rename(n) for n in args[key]] if isinstance(args[key], list) else rename(args[key])
        if st.primitive == MERGE_STEP and isinstance(args.get("shapes"), dict):
            args["shapes"] = {rename(k): v for k, v in args["shapes"].items()}
        out.append(type(st)(rename(st.stage) if st.stage else st.stage, st.primitive, args))
    return out


def schedule_from_trace(outputs, text: str):
    """Replay a stored trace onto the program of `outputs` (the caller's tensors)."""
    steps = list(Trace.from_json(text))  # a malformed trace is a ScheduleError naming the step
    rewrite = steps.pop(0).args if steps and steps[0].stage == "" and steps[0].primitive == REWRITE_STEP else None
    program = outputs
    if rewrite is not None:
        rewritten = _rewritten(outputs, rewrite)
        program = rewritten.outputs
    if steps and steps[0].stage == "" and steps[0].primitive == NAMES_STEP:
        steps = _renamed(steps[1:], list(steps.pop(0).args.get("tensors", [])), program)
    if not (steps and steps[0].stage == "" and steps[0].primitive == MERGE_STEP):
        if rewrite is not None:
            raise ScheduleError("the trace rewrites the program's layouts but records no views of the caller's "
                                "tensors; it cannot be replayed")
        s = create_schedule(outputs)
    else:
        want = steps.pop(0).args.get("shapes")
        merged = rewritten.merged if rewrite is not None else merge_contiguous_axes(outputs)
        got = {} if merged is None else _merged_shapes(merged.views, merged.originals)
        if got != want:
            raise ScheduleError(f"the trace was recorded on the program with merged axes {want}, but today's axis "
                                f"merge gives {got or 'no merge'}; it cannot be replayed")
        s = create_schedule(merged.outputs)
        s.views, s.view_originals = dict(merged.views), merged.originals
    from ..intrin import get as intrinsic

    s.rewrite = rewrite
    return Trace(steps).apply_to(s, intrinsic)  # a step that does not fit is a ScheduleError naming it


def _rewritten(outputs, args: dict):
    """The caller's program rewritten as the trace's first step records (space/cpu_embed.py)."""
    from ..intrin import get as intrinsic
    from ..space.cpu_embed import LayoutChoice, rewritten_program

    try:
        choice = LayoutChoice(**args)
        rewritten = rewritten_program(outputs, intrinsic(choice.intrin), choice)
    except (TypeError, TilewrightError) as exc:
        raise ScheduleError(f"the trace's layout rewrite {args} does not apply to this program: {exc}") from None
    if rewritten is None:
        raise ScheduleError(f"the trace's layout rewrite {args} does not apply to this program")
    return rewritten


__all__ = ["schedule_from_trace", "trace_of"]

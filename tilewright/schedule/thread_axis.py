"""GPU thread axes and `bind` (TVM's `te.thread_axis`, `s[C].bind`).

A `ThreadAxis` names one launch dimension (blockIdx.*, threadIdx.*) or a
virtual thread ("vthread"). Binding a stage's loop to it makes the loop's
iterations run on those blocks/threads; the lowered loop is a For of kind
THREAD_BINDING with that `thread_tag`. The checks here are the ones a single
stage can decide; those that need the whole kernel (two extents for one tag,
redundant stores) run at lowering (lower/thread_loops.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..errors import ScheduleError
from ..ir.expr import AxisKind, Reduce
from ..ir.stmt import THREAD_TAGS, ForKind
from .relations import Split

if TYPE_CHECKING:
    from .stage import Stage


@dataclass(frozen=True)
class ThreadAxis:
    tag: str
    name: str

    def __repr__(self) -> str:
        return f"thread_axis({self.tag!r}, name={self.name!r})"


def thread_axis(tag: str, name: str | None = None) -> ThreadAxis:
    """A GPU launch dimension or virtual thread to bind loops to:
    "blockIdx.x|y|z", "threadIdx.x|y|z" or "vthread"."""
    if tag not in THREAD_TAGS:
        raise ScheduleError(f"thread_axis: unknown tag {tag!r}; valid tags are {', '.join(THREAD_TAGS)}")
    return ThreadAxis(tag, name or tag)


def as_thread_axis(value) -> ThreadAxis:
    if isinstance(value, ThreadAxis):
        return value
    if isinstance(value, str):
        return thread_axis(value)
    raise ScheduleError(f"bind needs a tw.thread_axis(tag) or a tag string, got {value!r}")


def is_cross_thread_combiner(stage: Stage) -> bool:
    """A reduction whose partial results threads may combine in any order: every
    tw reducer (sum, max, min, comm_reducer) is commutative and associative."""
    return isinstance(stage.op.body, Reduce)


def bind(stage: Stage, axis, taxis) -> None:
    """Check and record `stage.bind(axis, taxis)`."""
    taxis = as_thread_axis(taxis)
    leaf = stage._leaf(axis, "bind")
    where = f"stage '{stage.name}': bind of loop '{leaf.name}' to {taxis.tag}"
    if id(leaf) in stage.bindings:
        raise ScheduleError(f"{where}: the loop is already bound to {stage.bindings[id(leaf)]}; bind a loop once")
    kind = stage.loop_kinds.get(id(leaf))
    if kind is not None:
        raise ScheduleError(f"{where}: the loop is already marked {kind.value}; a bound loop cannot also be "
                            f"{kind.value} (bind a different loop, e.g. split it first)")
    if taxis.tag != "vthread":
        for other, tag in stage.bindings.items():
            if tag == taxis.tag:
                name = next(a.name for a in stage.all_iter_vars if id(a) == other)
                raise ScheduleError(f"{where}: loop '{name}' of this stage is already bound to {tag}; each "
                                    f"block/thread index can be bound to one loop of a stage (fuse them first)")
    if leaf.kind is AxisKind.REDUCE:
        if not taxis.tag.startswith("threadIdx."):
            raise ScheduleError(f"{where}: a reduce loop can only be bound to threadIdx.x|y|z (a cross-thread "
                                f"reduction); blocks and virtual threads cannot combine partial results")
        if not is_cross_thread_combiner(stage):
            raise ScheduleError(f"{where}: the loop is a reduce loop but the stage is not a reduction; "
                                f"bind its spatial loops instead")
    stage.bindings[id(leaf)] = taxis.tag
    if taxis.tag != "vthread":  # a launch dimension keeps its extent where the stage's region is smaller
        stage.relations = [replace(r, keep_inner=True) if isinstance(r, Split) and r.inner is leaf else r
                           for r in stage.relations]
    stage.loop_kinds[id(leaf)] = ForKind.THREAD_BINDING
    stage._record("bind", axis=leaf.name, tag=taxis.tag, thread=taxis.name)

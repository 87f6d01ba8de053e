"""Schedules: per-stage loop decisions (split, fuse, reorder, tile, parallel,
vectorize, unroll, compute_at/inline/root) and stage-adding primitives
(cache_read, cache_write, rfactor), each recorded in a replayable JSON trace.
Imports `te`, `ir`, `errors`. Public names: create_schedule, Schedule, Stage,
Trace, thread_axis (GPU binding: Stage.bind)."""

from .schedule import Schedule, create_schedule
from .stage import AttachKind, Stage
from .thread_axis import ThreadAxis, thread_axis
from .trace import Step, Trace

__all__ = ["AttachKind", "Schedule", "Stage", "Step", "ThreadAxis", "Trace", "create_schedule", "thread_axis"]

"""The trace: every schedule primitive applied, in order, as plain data that
serialises to JSON and replays onto the same program to the same schedule."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..errors import ScheduleError


@dataclass(frozen=True)
class Step:
    stage: str  # "" for schedule-level primitives (cache_read, cache_write, rfactor, compiler_hint)
    primitive: str
    args: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"stage": self.stage, "primitive": self.primitive, "args": self.args}


class Trace:
    def __init__(self, steps=()):
        self.steps: list[Step] = list(steps)

    def append(self, stage: str, primitive: str, args: dict) -> None:
        self.steps.append(Step(stage, primitive, dict(args)))

    def __len__(self) -> int:
        return len(self.steps)

    def __iter__(self):
        return iter(self.steps)

    def to_json(self) -> str:
        return json.dumps([s.to_json() for s in self.steps])

    @classmethod
    def from_json(cls, text: str) -> Trace:
        """Parse `to_json`'s output; malformed text is a ScheduleError saying which step is wrong."""
        if not isinstance(text, (str, bytes, bytearray)):
            raise ScheduleError(f"Trace.from_json needs a JSON string, got {type(text).__name__}")
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise ScheduleError(f"Trace.from_json: not valid JSON ({exc})") from None
        if not isinstance(data, list):
            raise ScheduleError(f"Trace.from_json: expected a JSON list of steps, got {type(data).__name__}")
        return cls(_step_from_json(n, d) for n, d in enumerate(data))

    def __str__(self) -> str:
        lines = []
        for s in self.steps:
            args = ", ".join(f"{k}={v!r}" for k, v in s.args.items())
            lines.append(f"{s.stage + '.' if s.stage else 's.'}{s.primitive}({args})")
        return "\n".join(lines)

    def replay(self, outputs, intrinsics=None):
        """Apply the steps to a fresh schedule of `outputs`. `intrinsics`: name -> declared
        intrinsic (e.g. `tw.intrin.get`), for traces that tensorize."""
        from .schedule import create_schedule

        return self.apply_to(create_schedule(outputs), intrinsics)

    def apply_to(self, s, intrinsics=None):
        """Apply the steps, in order, to schedule `s` (which records them again); returns `s`."""
        for n, step in enumerate(self.steps):
            try:
                _apply(s, step, intrinsics)
            except (KeyError, TypeError, ValueError, AttributeError, StopIteration) as exc:
                # a step whose args lack a key or hold the wrong type: say which, not a raw traceback
                raise ScheduleError(f"trace replay: step {n} {step.primitive!r} has malformed args "
                                    f"{step.args!r:.120}: {type(exc).__name__}: {exc}") from None
        return s


def _step_from_json(n: int, d) -> Step:
    where = f"Trace.from_json: step {n}"
    if not isinstance(d, dict):
        raise ScheduleError(f"{where} must be an object with 'stage', 'primitive' and 'args', got {d!r:.80}")
    for key in ("stage", "primitive"):
        if key not in d:
            raise ScheduleError(f"{where} has no '{key}' (keys: {sorted(d)})")
        if not isinstance(d[key], str):
            raise ScheduleError(f"{where}: '{key}' must be a string, got {type(d[key]).__name__}")
    args = d.get("args", {})
    if not isinstance(args, dict):
        raise ScheduleError(f"{where}: 'args' must be an object, got {type(args).__name__}")
    return Step(d["stage"], d["primitive"], args)


def _axis(stage, name: str):
    for a in stage.leaf_iter_vars:
        if a.name == name:
            return a
    raise ScheduleError(f"trace replay: stage '{stage.name}' has no loop named '{name}'")


def _tensor(s, name: str):
    for st in s.stages:  # stage names are unique within a schedule
        if st.name == name:
            return st.tensor
    for t in s.program.inputs:
        if t.name == name:
            return t
    raise ScheduleError(f"trace replay: no stage or input named '{name}'")


def _apply(s, step: Step, intrinsics=None) -> None:
    a = step.args
    if not step.stage:
        if step.primitive == "cache_read":
            s.cache_read(_tensor(s, a["tensor"]), a["scope"], [s[r] for r in a["readers"]])
        elif step.primitive == "cache_write":
            s.cache_write(s[a["tensor"]].tensor, a["scope"])
        elif step.primitive == "compiler_hint":
            s.compiler_hint(a["hint"])
        elif step.primitive == "rfactor":
            st = s[a["tensor"]]
            s.rfactor(st.tensor, _axis(st, a["axis"]), a["factor_axis"])
        else:
            raise ScheduleError(f"trace replay: unknown schedule primitive {step.primitive!r}")
        return
    st = s[step.stage]
    p = step.primitive
    if p == "split":
        st.split(_axis(st, a["axis"]), factor=a.get("factor"), nparts=a.get("nparts"))
    elif p == "fuse":
        st.fuse(*[_axis(st, n) for n in a["axes"]])
    elif p == "reorder":
        st.reorder(*[_axis(st, n) for n in a["axes"]])
    elif p in ("parallel", "vectorize", "vectorize_sum", "vectorize_reduce", "unroll", "no_unroll"):
        getattr(st, p)(_axis(st, a["axis"]))
    elif p == "bind":
        from .thread_axis import thread_axis

        st.bind(_axis(st, a["axis"]), thread_axis(a["tag"], a.get("thread")))
    elif p == "compute_at":
        parent = s[a["parent"]]
        st.compute_at(parent, _axis(parent, a["axis"]))
    elif p == "set_scope":
        st.set_scope(a["scope"])
    elif p == "storage_align":
        axis = next(x for x in st.op.axis if x.name == a["axis"])
        st.storage_align(axis, a["factor"], a["offset"])
    elif p == "storage_order":
        st.storage_order(*[next(x for x in st.op.axis if x.name == n) for n in a["axes"]])
    elif p in ("compute_inline", "compute_root"):
        getattr(st, p)()
    elif p == "tensorize":
        if intrinsics is None:
            raise ScheduleError(f"trace replay: stage '{step.stage}' tensorizes with '{a['intrin']}'; pass "
                                f"intrinsics= (e.g. tw.intrin.get) to resolve its name")
        st.tensorize(_axis(st, a["axis"]), intrinsics(a["intrin"]))
    else:
        raise ScheduleError(f"trace replay: unknown primitive {p!r} on stage '{step.stage}'")

"""`create_schedule(outputs)` and the schedule-level primitives that add stages:
cache_read, cache_write and rfactor."""

from __future__ import annotations

from ..errors import ScheduleError
from ..ir import arith
from ..ir.expr import AxisKind, IterVar, Load, Reduce
from ..ir.stmt import Scope
from ..ir.traverse import loaded_tensors, substitute, transform
from ..te.program import as_tensor_list, collect_program
from ..te.tensor import ComputeOp, Tensor
from .relations import Split, pass_down, root_values
from .stage import AttachKind, Stage
from .trace import Trace

_SCOPES = {s.value: s for s in Scope}


def _scope(scope: str, prim: str) -> Scope:
    if scope not in _SCOPES:
        raise ScheduleError(f"{prim}: unknown scope {scope!r}; valid scopes are {', '.join(_SCOPES)}")
    return _SCOPES[scope]


def _new_op(name: str, axis, reduce_axis, body, attrs=None) -> ComputeOp:
    return ComputeOp(name, tuple(axis), tuple(reduce_axis), body, dict(attrs or {}), tuple(loaded_tensors(body)))


def _relation_axis(rel) -> IterVar:
    return rel.parent if isinstance(rel, Split) else rel.fused


def _fresh(axes) -> list[IterVar]:
    return [IterVar(a.name, begin=a.begin, extent=a.extent, kind=a.kind) for a in axes]


COMPILER_HINTS = ("pressure_scheduling",)


class Schedule:
    """The stages of a program and the decisions about them, plus the trace of
    every primitive applied (replayable with `Trace.replay`)."""

    def __init__(self, outputs):
        self.outputs = as_tensor_list(outputs)
        self.program = collect_program(self.outputs)
        self.trace = Trace()
        # id(a caller's tensor) -> the tensor of this program over the same memory with merged
        # dimensions (analysis/axis_merge.py); lowering binds caller arguments through it
        self.views: dict = {}
        self.view_originals: tuple = ()  # keeps the tensors whose ids key `views` alive
        # the layout rewrite of the caller's program this schedule is over (space/cpu_embed.py's
        # LayoutChoice), which a record's trace stores so that replay rebuilds the same program
        self.rewrite: dict | None = None
        self.stages: list[Stage] = []
        self.compiler_hints: list[str] = []  # see compiler_hint
        used: set[str] = {t.name for t in self.program.inputs}
        for t in self.program.stages:
            name, n = t.name, 1
            while name in used:
                name, n = f"{t.name}_{n}", n + 1
            used.add(name)
            self.stages.append(Stage(self, t, t.op, name))

    # ---- lookup ----------------------------------------------------------
    def __getitem__(self, key) -> Stage:
        key = self.views.get(id(key), key)
        for st in self.stages:
            if key is st or key is st.tensor or key is st.op or key is st.tensor.op:
                return st
        if isinstance(key, str):
            for st in self.stages:
                if st.name == key:
                    return st
        name = getattr(key, "name", key)
        if isinstance(key, Tensor) and any(key is t for t in self.program.inputs):
            raise ScheduleError(f"'{name}' is a placeholder (an input); it has no stage to schedule")
        raise ScheduleError(f"no stage for {name!r} in this schedule; stages are {[s.name for s in self.stages]}")

    def stage_of(self, tensor) -> Stage | None:
        tensor = self.views.get(id(tensor), tensor)
        for st in self.stages:
            if tensor is st.tensor:
                return st
        return None

    def owner_of(self, axis: IterVar) -> Stage | None:
        for st in self.stages:
            if any(axis is a for a in st.all_iter_vars):
                return st
        return None

    def reading_stages(self, stage: Stage) -> list[Stage]:
        """Stages that read `stage`'s tensor, looking through inlined readers."""
        out: list[Stage] = []
        for st in self.stages:
            if any(t is stage.tensor for t in st.op.input_tensors):
                if st.attach is AttachKind.INLINE:
                    out.extend(r for r in self.reading_stages(st) if r not in out)
                elif st not in out:
                    out.append(st)
        return out

    def consuming_stages(self, stage: Stage) -> list[Stage]:
        """Stages that use `stage`'s tensor directly or through other stages."""
        out: list[Stage] = []
        frontier = [stage]
        while frontier:
            for r in self.reading_stages(frontier.pop()):
                if r not in out:
                    out.append(r)
                    frontier.append(r)
        return out

    def __repr__(self) -> str:
        return "\n".join(repr(s) for s in self.stages)

    # ---- stage-adding primitives ----------------------------------------
    def cache_read(self, tensor: Tensor, scope: str, readers) -> Tensor:
        """Copy `tensor` into a new `scope` stage that the given readers read
        instead (place it with compute_at to copy only a tile)."""
        sc = _scope(scope, "cache_read")
        readers = [self[r] for r in (readers if isinstance(readers, (list, tuple)) else [readers])]
        if not readers:
            users = [st.name for st in self.stages if any(t is tensor for t in st.op.input_tensors)]
            raise ScheduleError(f"cache_read of '{tensor.name}': give at least one reader stage (stages that read it: "
                                f"{users})")
        for r in readers:
            if not any(t is tensor for t in r.op.input_tensors):
                raise ScheduleError(f"cache_read: stage '{r.name}' does not read '{tensor.name}'")
        axes = [IterVar(f"ax{d}", extent=n) for d, n in enumerate(tensor.shape)]
        cache_name = self._unique(f"{tensor.name}.{scope}")
        cache = Tensor(_new_op(cache_name, axes, (), Load(tensor, tuple(axes), tensor.dtype)), tensor.shape,
                       tensor.dtype)
        for r in readers:
            body = transform(r.op.body, lambda n: Load(cache, n.indices, n.dtype)
                             if isinstance(n, Load) and n.tensor is tensor else None)
            r.op = _new_op(r.op.name, r.op.axis, r.op.reduce_axis, body, r.op.attrs)
        stage = Stage(self, cache, cache.op, cache_name)
        stage.scope = sc
        first = min(self.stages.index(r) for r in readers)
        self.stages.insert(first, stage)
        producer = self.stage_of(tensor)  # stage names are unique; tensor names need not be
        self.trace.append("", "cache_read", {"tensor": producer.name if producer else tensor.name, "scope": scope,
                                             "readers": [r.name for r in readers]})
        return cache

    def cache_write(self, tensor: Tensor, scope: str) -> Tensor:
        """Compute `tensor` into a new `scope` stage, then copy it out; with
        "local" the accumulators of a reduction stay in registers.
        Must come before loop transformations of the stage."""
        sc = _scope(scope, "cache_write")
        st = self[tensor]
        if st.relations or st.loop_kinds or st.leaf_iter_vars != st.root_axes:
            raise ScheduleError(f"cache_write of '{st.name}' must come before split/fuse/reorder/annotations on it")
        old = st.op
        axes = _fresh(old.axis)
        body = substitute(old.body, dict(zip(old.axis, axes)))
        cache_name = self._unique(f"{st.name}.{scope}")
        cache = Tensor(_new_op(cache_name, axes, old.reduce_axis, body, old.attrs), tensor.shape, tensor.dtype)
        st.reset(_new_op(old.name, old.axis, (), Load(cache, tuple(old.axis), tensor.dtype), old.attrs))
        stage = Stage(self, cache, cache.op, cache_name)
        stage.scope = sc
        self.stages.insert(self.stages.index(st), stage)
        self.trace.append("", "cache_write", {"tensor": st.name, "scope": scope})
        return cache

    def rfactor(self, tensor: Tensor, axis: IterVar, factor_axis: int = 0) -> Tensor:
        """Turn reduce loop `axis` of `tensor`'s stage into a spatial axis of a
        new stage of partial results; the stage then reduces over those.
        The stage's own loop transformations are reset."""
        st = self[tensor]
        if not st.is_reduction:
            raise ScheduleError(f"rfactor: stage '{st.name}' is not a reduction")
        axis = st._leaf(axis, "rfactor")
        if axis.kind is not AxisKind.REDUCE:
            raise ScheduleError(f"rfactor: loop '{axis.name}' of stage '{st.name}' is spatial; give a reduce loop")
        old, red = st.op, st.op.body
        nsp = len(old.axis)
        if not 0 <= factor_axis <= nsp:
            raise ScheduleError(f"rfactor: factor_axis must be in [0, {nsp}], got {factor_axis}")
        spatial = _fresh(old.axis)
        rf_axis = IterVar(axis.name, extent=axis.extent)
        reduce_leaves = [a for a in st.leaf_iter_vars if a.kind is AxisKind.REDUCE and a is not axis]
        new_reduce = [IterVar(a.name, extent=a.extent, kind=AxisKind.REDUCE) for a in reduce_leaves]
        leaf_values = {id(a): b for a, b in zip(reduce_leaves, new_reduce)}
        leaf_values[id(axis)] = rf_axis
        reduce_relations = [r for r in st.relations if _relation_axis(r).kind is AxisKind.REDUCE]
        dom = pass_down(list(old.reduce_axis), reduce_relations, {id(a): a.extent for a in old.reduce_axis})
        # the new loops keep their declared extents (a factor past the extent too): guard them
        dom.update({id(v): v.extent for r in reduce_relations for v in ((r.outer, r.inner) if isinstance(r, Split)
                                                                        else (r.fused,))})
        values, guards = root_values(list(old.reduce_axis), reduce_relations, leaf_values, dom)
        mapping = {a: values[id(a)] for a in old.reduce_axis}
        mapping.update(dict(zip(old.axis, spatial)))
        source = substitute(red.source, mapping)
        conds = [substitute(red.condition, mapping)] if red.condition is not None else []
        conds += guards
        cond = None
        for c in conds:
            cond = c if cond is None else arith.binary(arith.BinOp.AND, cond, c)
        rf_spatial = spatial[:factor_axis] + [rf_axis] + spatial[factor_axis:]
        if not new_reduce:  # the whole reduction became spatial: an elementwise stage
            body = source if cond is None else arith.select(cond, source, red.combiner.identity)
        else:
            body = Reduce(red.combiner, source, tuple(new_reduce), cond, red.dtype, red.origin)
        rf_name = self._unique(f"{st.name}.rf")
        rf = Tensor(_new_op(rf_name, rf_spatial, new_reduce, body), tuple(a.extent for a in rf_spatial), red.dtype)
        k = IterVar(f"{axis.name}.v", extent=axis.extent, kind=AxisKind.REDUCE)
        index = list(old.axis[:factor_axis]) + [k] + list(old.axis[factor_axis:])
        outer = Reduce(red.combiner, Load(rf, tuple(index), red.dtype), (k,), None, red.dtype, red.origin)
        st.reset(_new_op(old.name, old.axis, (k,), outer, old.attrs))
        stage = Stage(self, rf, rf.op, rf_name)
        self.stages.insert(self.stages.index(st), stage)
        self.trace.append("", "rfactor", {"tensor": st.name, "axis": axis.name, "factor_axis": factor_axis})
        return rf

    def compiler_hint(self, hint: str) -> None:
        """Ask the C compiler for a code-generation mode on this kernel (one of
        COMPILER_HINTS). "pressure_scheduling": GCC schedules instructions before
        register allocation, pressure-aware; without it GCC turns an operand vector
        shared by a tile's rows into one memory operand per FMA (a reload each),
        with it a tile whose operands spill its registers may spill more."""
        if hint not in COMPILER_HINTS:
            raise ScheduleError(f"compiler_hint: unknown hint {hint!r}; valid: {', '.join(COMPILER_HINTS)}")
        if hint not in self.compiler_hints:
            self.compiler_hints.append(hint)
            self.trace.append("", "compiler_hint", {"hint": hint})

    def _unique(self, name: str) -> str:
        taken = {s.name for s in self.stages} | {t.name for t in self.program.inputs}
        candidate, n = name, 1
        while candidate in taken:
            candidate, n = f"{name}_{n}", n + 1
        return candidate


def create_schedule(outputs) -> Schedule:
    """A schedule with every stage computed at root in its natural loop order."""
    return Schedule(outputs)

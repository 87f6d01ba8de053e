"""A stage: one compute op and the decisions about its loops (TVM's `s[C]`).

Each primitive checks its request, raises ScheduleError naming the stage, the
axis and the reason, and appends itself to the schedule's trace.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from ..errors import ScheduleError
from ..ir.expr import AxisKind, IterVar, Reduce
from ..ir.stmt import ForKind, Scope
from .relations import Fuse, Split

if TYPE_CHECKING:
    from .schedule import Schedule


class AttachKind(enum.Enum):
    ROOT = "root"
    INLINE = "inline"
    AT = "at"


def _positive_int(value, stage: str, prim: str, param: str) -> int:
    if hasattr(value, "__index__") and not isinstance(value, bool):
        value = value.__index__()  # NumPy integers
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ScheduleError(f"stage '{stage}': {prim} {param} must be a positive int, got {value!r}")
    return value


class Stage:
    def __init__(self, schedule: Schedule, tensor, op, name: str):
        self.schedule = schedule
        self.tensor = tensor  # the tensor consumers read: identity of the stage
        self.name = name
        self.scope = Scope.GLOBAL
        self.attach = AttachKind.ROOT
        self.attach_stage: Stage | None = None
        self.attach_axis: IterVar | None = None
        self.align: dict[int, tuple[int, int]] = {}  # root axis position -> (factor, offset)
        self.storage_perm: tuple[int, ...] | None = None  # buffer dimension d holds root axis storage_perm[d]
        self.reset(op)

    def reset(self, op) -> None:
        """(Re)start from `op` with its root axes as the loops, in order."""
        self.op = op
        self.root_axes: list[IterVar] = list(op.axis) + list(op.reduce_axis)
        self.leaf_iter_vars: list[IterVar] = list(self.root_axes)
        self.all_iter_vars: list[IterVar] = list(self.root_axes)
        self.relations: list[Split | Fuse] = []
        self.loop_kinds: dict[int, ForKind] = {}
        self.bindings: dict[int, str] = {}  # id(leaf loop) -> thread tag (schedule/thread_axis.py)
        self.tensorized: tuple[IterVar, object] | None = None  # (loop, intrinsic): lower/tensorize.py

    # ---- queries -------------------------------------------------------
    @property
    def is_output(self) -> bool:
        return any(self.tensor is t for t in self.schedule.outputs)

    @property
    def is_reduction(self) -> bool:
        return isinstance(self.op.body, Reduce)

    def loop_kind(self, axis: IterVar) -> ForKind:
        return self.loop_kinds.get(id(axis), ForKind.SERIAL)

    def thread_tag(self, axis: IterVar) -> str | None:
        return self.bindings.get(id(axis))

    def __repr__(self) -> str:
        loops = ", ".join(f"{a.name}:{a.extent}" for a in self.leaf_iter_vars)
        return f"stage {self.name} [{self.attach.value}] ({loops})"

    def _leaf(self, axis, prim: str) -> IterVar:
        if isinstance(axis, IterVar) and any(axis is a for a in self.leaf_iter_vars):
            return axis
        loops = ", ".join(a.name for a in self.leaf_iter_vars)
        if isinstance(axis, IterVar) and any(axis is a for a in self.all_iter_vars):
            raise ScheduleError(
                f"stage '{self.name}': {prim} of axis '{axis.name}', which was already split or fused; "
                f"its current loops are [{loops}]"
            )
        owner = self.schedule.owner_of(axis) if isinstance(axis, IterVar) else None
        what = f"axis '{axis.name}' of stage '{owner.name}'" if owner else f"{axis!r}"
        raise ScheduleError(f"stage '{self.name}': {prim} got {what}, not one of this stage's loops [{loops}]")

    def _record(self, prim: str, **args) -> None:
        self.schedule.trace.append(self.name, prim, args)

    # ---- loop structure ------------------------------------------------
    def split(self, parent: IterVar, factor: int | None = None, nparts: int | None = None):
        """Split loop `parent` into (outer, inner), inner of extent `factor`
        (or outer of extent `nparts`). A factor that does not divide the
        extent is allowed: lowering guards or partitions the tail.

            for i in 0..10           for i.outer in 0..3
              body(i)          ->      for i.inner in 0..4
                                         if i.outer*4 + i.inner < 10: body(...)
        """
        parent = self._leaf(parent, "split")
        if (factor is None) == (nparts is None):
            raise ScheduleError(
                f"stage '{self.name}': split of '{parent.name}' needs exactly one of factor= or nparts=")
        prim = f"split of '{parent.name}'"
        if factor is not None:
            factor = _positive_int(factor, self.name, prim, "factor")
            outer_extent = -(-parent.extent // factor)
        else:
            nparts = _positive_int(nparts, self.name, prim, "nparts")
            factor = -(-parent.extent // nparts)
            outer_extent = nparts
        outer = IterVar(f"{parent.name}.outer", extent=outer_extent, kind=parent.kind)
        inner = IterVar(f"{parent.name}.inner", extent=factor, kind=parent.kind)
        self._replace_leaf(parent, [outer, inner])
        self.relations.append(Split(parent, outer, inner, factor, nparts))
        if nparts is None:
            self._record("split", axis=parent.name, factor=factor)
        else:
            self._record("split", axis=parent.name, nparts=nparts)
        return outer, inner

    def fuse(self, *axes: IterVar) -> IterVar:
        """Fuse adjacent loops (outermost first) into one.

            for i in 0..4                for i.j.fused in 0..12
              for j in 0..3        ->      body(fused // 3, fused % 3)
        """
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        if len(axes) < 2:
            raise ScheduleError(f"stage '{self.name}': fuse needs at least two loops")
        leaves = [self._leaf(a, "fuse") for a in axes]
        pos = [self._position(a) for a in leaves]
        if pos != list(range(pos[0], pos[0] + len(pos))):
            raise ScheduleError(
                f"stage '{self.name}': fuse needs adjacent loops, outer first; "
                f"[{', '.join(a.name for a in leaves)}] are at positions {pos}; reorder them first"
            )
        kinds = {a.kind for a in leaves}
        if len(kinds) > 1:
            raise ScheduleError(f"stage '{self.name}': cannot fuse spatial and reduce loops "
                                f"[{', '.join(a.name for a in leaves)}]")
        for a in leaves[1:]:
            if id(a) in self.loop_kinds:
                raise ScheduleError(f"stage '{self.name}': loop '{a.name}' is already marked "
                                    f"{self.loop_kinds[id(a)].value}; fuse before annotating")
        fused, names = leaves[0], [leaves[0].name]
        for inner in leaves[1:]:
            names.append(inner.name)
            new = IterVar(".".join(names) + ".fused", extent=fused.extent * inner.extent, kind=inner.kind)
            self._replace_leaf(fused, [new])
            self._remove_leaf(inner)
            self.relations.append(Fuse(fused, inner, new))
            fused = new
        self._record("fuse", axes=[a.name for a in leaves])
        return fused

    def reorder(self, *axes: IterVar) -> None:
        """Put the given loops, in this order, into the positions they occupy."""
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        leaves = [self._leaf(a, "reorder") for a in axes]
        if len({id(a) for a in leaves}) != len(leaves):
            raise ScheduleError(f"stage '{self.name}': reorder lists a loop twice: {[a.name for a in leaves]}")
        slots = sorted(self._position(a) for a in leaves)
        for slot, axis in zip(slots, leaves):
            self.leaf_iter_vars[slot] = axis
        self._record("reorder", axes=[a.name for a in leaves])

    def tile(self, x: IterVar, y: IterVar, x_factor: int, y_factor: int):
        """split x and y, then order (x.outer, y.outer, x.inner, y.inner)."""
        xo, xi = self.split(x, factor=x_factor)
        yo, yi = self.split(y, factor=y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    # ---- loop annotations ------------------------------------------------
    def _annotate(self, axis, kind: ForKind, prim: str) -> None:
        axis = self._leaf(axis, prim)
        self._check_unbound(axis, prim)
        if kind in (ForKind.PARALLEL, ForKind.VECTORIZED) and axis.kind is AxisKind.REDUCE:
            raise ScheduleError(
                f"stage '{self.name}': cannot {prim} reduce loop '{axis.name}' (its iterations all update one "
                f"value); use s.rfactor to make it a spatial loop of a new stage first"
            )
        self.loop_kinds[id(axis)] = kind
        self._record(prim, axis=axis.name)

    def _check_unbound(self, axis: IterVar, prim: str) -> None:
        if id(axis) in self.bindings:
            raise ScheduleError(f"stage '{self.name}': cannot {prim} loop '{axis.name}', which is bound to "
                                f"{self.bindings[id(axis)]} (its iterations already run on GPU blocks/threads); "
                                f"split it and annotate the inner loop")

    def bind(self, axis: IterVar, thread_axis) -> None:
        """Run the iterations of `axis` on GPU blocks or threads: `thread_axis`
        is a `tw.thread_axis("blockIdx.x" | "threadIdx.y" | "vthread" | ...)`.
        A reduce loop may be bound to threadIdx.* (a cross-thread reduction)."""
        from .thread_axis import bind

        bind(self, axis, thread_axis)

    def parallel(self, axis: IterVar) -> None:
        """Run the iterations of `axis` on all cores (OpenMP on CPUs)."""
        self._annotate(axis, ForKind.PARALLEL, "parallel")

    def vectorize(self, axis: IterVar) -> None:
        """Turn the innermost loop `axis` into SIMD vector operations."""
        self._annotate(axis, ForKind.VECTORIZED, "vectorize")

    def vectorize_reduce(self, axis: IterVar) -> None:
        """Vectorize the innermost loop `axis` of a sum's, max's or min's reduction: each
        lane keeps a partial result across the loop around it (unrolled loops between
        them are fine), combined after it (lower/lane_reductions.py). Floating-point
        sums are reassociated, as in any vectorized sum; max and min are exact."""
        self._vectorize_reduce(axis, "vectorize_reduce", lambda c: c.lane_op is not None, "a sum, max or min")

    def vectorize_sum(self, axis: IterVar) -> None:
        """`vectorize_reduce` restricted to sums."""
        self._vectorize_reduce(axis, "vectorize_sum", lambda c: c.is_sum, "a sum")

    def _vectorize_reduce(self, axis: IterVar, prim: str, accepts, what: str) -> None:
        from ..ir.expr import Reduce

        leaf = self._leaf(axis, prim)
        self._check_unbound(leaf, prim)
        body = self.op.body if hasattr(self.op, "body") else None
        if leaf.kind is not AxisKind.REDUCE:
            raise ScheduleError(f"stage '{self.name}': {prim} takes a reduce loop; '{leaf.name}' is spatial "
                                f"(use vectorize)")
        if not (isinstance(body, Reduce) and accepts(body.combiner)):
            raise ScheduleError(f"stage '{self.name}': {prim} needs {what}; this stage reduces with "
                                f"'{getattr(getattr(body, 'combiner', None), 'name', '?')}'")
        self.loop_kinds[id(leaf)] = ForKind.VECTORIZED
        self._record(prim, axis=leaf.name)

    def tensorize(self, axis: IterVar, intrin) -> None:
        """Replace the loops from `axis` inward by one call of `intrin` per iteration
        of the loops outside it (a declaration of intrin/, e.g. `tw.intrin.get("x86.dot_8x4_u8s8")`).
        The loops are matched to the intrinsic's axes by kind and extent in any order;
        lowering checks that the computation and operand addresses agree (lower/tensorize.py)."""
        axis = self._leaf(axis, "tensorize")
        if not all(hasattr(intrin, a) for a in ("name", "output", "inputs", "layouts")):
            raise ScheduleError(f"stage '{self.name}': tensorize needs an intrinsic declared with "
                                f"tw.decl_tensor_intrin (or tw.intrin.get(name)), got {type(intrin).__name__}")
        if self.tensorized is not None and self.tensorized[0] is not axis:
            raise ScheduleError(f"stage '{self.name}': already tensorized at loop '{self.tensorized[0].name}'; "
                                f"one intrinsic per stage")
        self.tensorized = (axis, intrin)
        self._record("tensorize", axis=axis.name, intrin=intrin.name)

    def unroll(self, axis: IterVar) -> None:
        """Replicate the body of `axis` once per iteration in the generated code."""
        self._annotate(axis, ForKind.UNROLLED, "unroll")

    def no_unroll(self, axis: IterVar) -> None:
        """Keep `axis` a rolled loop: the backend compiler may not unroll or
        peel it. Around an unrolled register tile, a compiler that unrolls a
        short reduce loop (a conv's 3-tap kernel window) shares loaded operands
        across its copies and spills the tile's accumulators."""
        self._annotate(axis, ForKind.ROLLED, "no_unroll")

    # ---- placement -----------------------------------------------------
    def compute_at(self, parent: Stage, axis: IterVar) -> None:
        """Compute this stage inside loop `axis` of `parent`, only the region
        that iteration needs (bound inference decides it)."""
        if not isinstance(parent, Stage) or parent.schedule is not self.schedule:
            raise ScheduleError(f"stage '{self.name}': compute_at needs a stage of the same schedule, s[T]")
        axis = parent._leaf(axis, f"compute_at of '{self.name}' at")
        self._check_movable("compute_at")
        if parent is self:
            raise ScheduleError(f"stage '{self.name}': cannot compute_at itself")
        if parent.attach is AttachKind.INLINE:
            raise ScheduleError(f"stage '{self.name}': compute_at stage '{parent.name}', which is inlined and has "
                                f"no loops")
        consumers = self.schedule.consuming_stages(self)
        if not any(parent is r for r in consumers):
            names = ", ".join(r.name for r in consumers) or "(none)"
            raise ScheduleError(
                f"stage '{self.name}': compute_at stage '{parent.name}', which does not use it; "
                f"attach it inside a loop of a stage that reads it (directly or through others): {names}"
            )
        node = parent
        while node is not None:
            if node is self:
                raise ScheduleError(f"stage '{self.name}': compute_at '{parent.name}' would make a cycle")
            node = node.attach_stage
        self.attach, self.attach_stage, self.attach_axis = AttachKind.AT, parent, axis
        self.schedule.trace.append(self.name, "compute_at", {"parent": parent.name, "axis": axis.name})

    def compute_inline(self) -> None:
        """Substitute this stage's formula into its readers; no storage."""
        self._check_movable("compute_inline")
        if self.is_reduction:
            raise ScheduleError(f"stage '{self.name}': a reduction cannot be inlined; use compute_at instead")
        guests = [st.name for st in self.schedule.stages if st.attach_stage is self]
        if guests:
            raise ScheduleError(f"stage '{self.name}' cannot be inlined: {guests} are computed at its loops; "
                                f"move them first (compute_root or compute_at another stage)")
        self.attach, self.attach_stage, self.attach_axis = AttachKind.INLINE, None, None
        self._record("compute_inline")

    def storage_order(self, *axes: IterVar) -> None:
        """Lay out this stage's buffer with its root spatial axes in the given
        order, outermost first (e.g. the axis a consumer vectorizes last, so
        its vector loads are contiguous). Only for intermediate stages."""
        roots = list(self.op.axis)
        names = ", ".join(a.name for a in roots)
        if len(axes) != len(roots) or any(not any(a is r for r in roots) for a in axes) or \
                len({id(a) for a in axes}) != len(axes):
            got = ", ".join(getattr(a, "name", str(a)) for a in axes)
            raise ScheduleError(f"stage '{self.name}': storage_order needs each of its root spatial axes "
                                f"[{names}] once, got [{got}]")
        self.storage_perm = tuple(next(n for n, r in enumerate(roots) if r is a) for a in axes)
        self._record("storage_order", axes=[a.name for a in axes])

    def storage_align(self, axis: IterVar, factor: int, offset: int = 0) -> None:
        """Pad this stage's buffer so that the stride of root axis `axis` is
        `k * factor + offset` elements (aligned vector rows, fewer cache-set
        conflicts). Only for intermediate stages: arguments are dense arrays."""
        if not any(axis is a for a in self.op.axis):
            raise ScheduleError(f"stage '{self.name}': storage_align needs one of its root spatial axes "
                                f"[{', '.join(a.name for a in self.op.axis)}], got {getattr(axis, 'name', axis)!r}")
        factor = _positive_int(factor, self.name, "storage_align", "factor")
        if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset < factor:
            raise ScheduleError(f"stage '{self.name}': storage_align offset must be in [0, {factor}), got {offset!r}")
        dim = next(n for n, a in enumerate(self.op.axis) if a is axis)
        innermost = self.storage_perm[-1] if self.storage_perm else len(self.op.axis) - 1
        if dim == innermost:
            raise ScheduleError(f"stage '{self.name}': storage_align of the innermost axis '{axis.name}' "
                                f"has nothing to pad (its stride is 1); align an outer axis")
        self.align[dim] = (factor, offset)
        self._record("storage_align", axis=axis.name, factor=factor, offset=offset)

    def set_scope(self, scope: str) -> None:
        """Storage scope of this stage's buffer: "global", "local" (registers
        when every access is at a constant offset; one copy per GPU thread),
        "shared" (one copy per GPU thread block), or an accelerator's on-chip
        buffer ("vta.inp", "vta.wgt", "vta.acc")."""
        valid = [s.value for s in Scope]
        if scope not in valid:
            raise ScheduleError(f"stage '{self.name}': unknown scope {scope!r}; valid scopes are {', '.join(valid)}")
        if self.is_output and scope != "global":
            raise ScheduleError(f"stage '{self.name}' is an output; its storage is the caller's array")
        self.scope = Scope(scope)
        self._record("set_scope", scope=scope)

    def compute_root(self) -> None:
        """Compute the whole tensor before its readers (the default)."""
        self.attach, self.attach_stage, self.attach_axis = AttachKind.ROOT, None, None
        self._record("compute_root")

    def _check_movable(self, prim: str) -> None:
        if self.is_output:
            raise ScheduleError(f"stage '{self.name}' is an output of the schedule; it cannot be moved by {prim}")

    # ---- helpers -------------------------------------------------------
    def _position(self, axis: IterVar) -> int:
        return next(n for n, a in enumerate(self.leaf_iter_vars) if a is axis)

    def _replace_leaf(self, old: IterVar, new: list[IterVar]) -> None:
        if self.tensorized is not None and self.tensorized[0] is old:
            raise ScheduleError(f"stage '{self.name}': loop '{old.name}' is tensorized; split or fuse before "
                                f"tensorize")
        kind = self.loop_kinds.get(id(old))
        if kind is not None:
            raise ScheduleError(
                f"stage '{self.name}': loop '{old.name}' is already marked {kind.value}; "
                "split or fuse before annotating"
            )
        pos = self._position(old)
        self.leaf_iter_vars[pos:pos + 1] = new
        self.all_iter_vars.extend(new)

    def _remove_leaf(self, axis: IterVar) -> None:
        if self.tensorized is not None and self.tensorized[0] is axis:
            raise ScheduleError(f"stage '{self.name}': loop '{axis.name}' is tensorized; fuse before tensorize")
        del self.leaf_iter_vars[self._position(axis)]

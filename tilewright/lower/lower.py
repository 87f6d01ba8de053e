"""`lower(schedule, args)`: a schedule becomes one loop-IR function.

Order of work: inline stages marked compute_inline into their readers; give
every tensor a buffer (arguments for `args`, allocations for the rest);
build root stages' nests in dependency order with attached stages nested at
their loops; then run the passes (flatten, simplify, partition, unroll,
vectorize, accumulators, registers, verify: lower/passes.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import LoweringError
from ..ir.expr import Expr, Load
from ..ir.stmt import Allocate, Buffer, Scope, Stmt, seq
from ..ir.traverse import substitute, transform
from ..schedule.relations import Fuse, Split
from ..schedule.schedule import Schedule
from ..schedule.stage import AttachKind, Stage
from ..te.program import as_tensor_list
from ..te.tensor import PlaceholderOp
from .bound import Region
from .nest import LowerContext, infer_region, make_frame, make_nest, stage_buffer
from .passes import run_passes
from .registers import RegisterFile
from .zero_taps import zero_box


@dataclass(frozen=True, eq=False)
class LoweredFunc:
    name: str
    args: tuple[Buffer, ...]
    body: Stmt
    # the shapes callers pass, where an argument is a view with merged dimensions (Schedule.views)
    arg_shapes: tuple[tuple[int, ...], ...] = ()
    compiler_hints: tuple[str, ...] = ()  # Schedule.compiler_hint

    @property
    def caller_shapes(self) -> tuple[tuple[int, ...], ...]:
        return self.arg_shapes or tuple(tuple(b.shape) for b in self.args)

    def __str__(self) -> str:
        from ..ir.stmt_printer import stmt_str

        def arg(b, caller):
            shape = f"{b.dtype}[{', '.join(map(str, b.shape))}]"
            return f"{b.name}: {shape}" + (f" (caller's shape {list(caller)})" if tuple(b.shape) != caller else "")

        sig = ", ".join(arg(b, c) for b, c in zip(self.args, self.caller_shapes))
        return f"def {self.name}({sig}):\n" + stmt_str(self.body, 1)


def _inline_bodies(s: Schedule) -> dict[int, Expr]:
    """Each non-inlined stage's body with inlined producers substituted (transitively)."""
    inlined: dict[int, Stage] = {id(st.tensor): st for st in s.stages if st.attach is AttachKind.INLINE}
    done: dict[int, Expr] = {}

    def body_of(st: Stage) -> Expr:
        if id(st) in done:
            return done[id(st)]

        def fn(n: Expr):
            if isinstance(n, Load) and id(n.tensor) in inlined:
                producer = inlined[id(n.tensor)]
                return substitute(body_of(producer), dict(zip(producer.op.axis, n.indices)))
            return None

        done[id(st)] = transform(st.op.body, fn)
        return done[id(st)]

    return {id(st): body_of(st) for st in s.stages if st.attach is not AttachKind.INLINE}


def _check_args(s: Schedule, args) -> tuple:
    args = as_tensor_list(args, "args")
    arg_ids = {id(t) for t in args}
    needed = [t for t in s.program.inputs if any(t is u for st in s.stages for u in st.op.input_tensors)]
    for t in list(needed) + list(s.outputs):
        if id(t) not in arg_ids:
            kind = "output" if any(t is o for o in s.outputs) else "input"
            raise LoweringError(f"args must include every input and output; {kind} '{t.name}' is missing "
                                f"(args are {[a.name for a in args]})")
    for t in args:
        if not isinstance(t.op, PlaceholderOp) and s.stage_of(t) is None:
            raise LoweringError(f"argument '{t.name}' is not a tensor of this schedule")
        st = s.stage_of(t)
        if st is not None and st.attach is not AttachKind.ROOT:
            raise LoweringError(f"argument '{t.name}' is computed {st.attach.value}; arguments must be at root")
    names = [t.name for t in args]
    if len(set(names)) != len(names):
        raise LoweringError(f"argument names must be unique, got {names}")
    return args


def lower(s: Schedule, args, name: str = "kernel", passes: bool = True,
          registers: RegisterFile | None = None) -> LoweredFunc:
    """`registers`: the register file of the target (default: the host's), which register tiles must fit."""
    args = as_tensor_list(args, "args")
    caller = tuple(tuple(t.shape) for t in args)
    args = _check_args(s, [s.views.get(id(t), t) for t in args])
    ctx = LowerContext(_inline_bodies(s))
    for t in args:
        ctx.buffers[id(t)] = Buffer(t.name, tuple(t.shape), t.dtype, Scope.GLOBAL)
    placement: dict[int, tuple[Stage, object]] = {}
    for st in s.stages:
        if st.attach is AttachKind.AT:
            leaf = _attach_leaf(st.attach_stage, st.attach_axis)
            placement[id(st)] = (st.attach_stage, leaf)
            ctx.attached.setdefault(id(leaf), []).append(st)
    staged = [st for st in s.stages if st.attach is not AttachKind.INLINE]
    allocs = []
    for st in reversed(staged):  # consumers first: a region depends on its readers' loops
        if st.attach is AttachKind.ROOT:
            ctx.regions[id(st.tensor)] = Region(tuple(_zero() for _ in st.tensor.shape), tuple(st.tensor.shape))
            ctx.outer[id(st)] = {}
            if id(st.tensor) not in ctx.buffers:
                ctx.buffers[id(st.tensor)] = stage_buffer(st, st.tensor.shape)
                allocs.append(ctx.buffers[id(st.tensor)])
            elif st.align or st.storage_perm:
                raise LoweringError(f"stage '{st.name}' is an argument (a dense array); storage_align and "
                                    f"storage_order apply only to intermediate stages")
        else:
            parent, leaf = placement[id(st)]
            infer_region(st, parent, leaf, s.reading_stages(st), ctx)
        ctx.frames[id(st)] = make_frame(st, ctx)
    body = seq(*[make_nest(st, ctx) for st in staged if st.attach is AttachKind.ROOT])
    for buf in allocs:
        body = Allocate(buf, body)
    func = LoweredFunc(name, tuple(ctx.buffers[id(t)] for t in args), body, caller, tuple(s.compiler_hints))
    boxes = {}
    for st in staged:  # root padding copies: their buffers are zero outside a box
        buf = ctx.buffers.get(id(st.tensor))
        if st.attach is AttachKind.ROOT and buf is not None and buf.perm is None:
            box = zero_box(st.op, st.tensor.shape)
            if box:
                boxes[id(buf)] = box
    return run_passes(func, boxes, registers) if passes else func


def _attach_leaf(parent: Stage, axis):
    """The loop of `parent` that fixes `axis`: itself if still a loop, else the
    inner part of its split or the loop it was fused into (transitively)."""
    while not any(axis is v for v in parent.leaf_iter_vars):
        for rel in parent.relations:
            if isinstance(rel, Split) and rel.parent is axis:
                axis = rel.inner
                break
            if isinstance(rel, Fuse) and (rel.outer is axis or rel.inner is axis):
                axis = rel.fused
                break
        else:
            raise LoweringError(f"loop '{axis.name}' is not part of stage '{parent.name}'")
    return axis


def _zero() -> Expr:
    from ..ir import arith

    return arith.const(0)

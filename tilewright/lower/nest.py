"""Loop nests: per stage a frame (its loops over the region it computes, the
root-axis values and guards, its body in loop variables), regions of attached
stages by bound inference, then the statement with the nests of attached
stages placed (with their buffers) inside the loops they are attached to."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import LoweringError
from ..ir import arith
from ..ir.expr import AxisKind, BinOp, Expr, IterVar, Load, Reduce
from ..ir.stmt import Allocate, Buffer, For, ForKind, IfThenElse, Scope, Stmt, Store, seq
from ..ir.traverse import substitute, transform
from ..schedule.relations import Split, pass_down, root_values
from ..schedule.stage import Stage
from .bound import Region, required_region
from .simplify import Ranges


@dataclass
class Frame:
    dom: dict[int, int]  # id(loop var) -> extent
    leaves: list[IterVar]
    offsets: list[Expr]  # region-relative index of each spatial root axis
    guards: list[Expr]  # all inexact-split guards
    spatial_guards: list[Expr]
    body: Expr  # the stage body in loop variables
    reads: list[Expr]  # the expressions whose loads bound the producers

    def loop_ranges(self, leaves) -> Ranges:
        return {id(v): (0, self.dom[id(v)] - 1) for v in leaves}


@dataclass
class LowerContext:
    bodies: dict[int, Expr]  # id(stage) -> body with inlined producers substituted
    buffers: dict[int, Buffer] = field(default_factory=dict)  # id(tensor) -> buffer
    regions: dict[int, Region] = field(default_factory=dict)  # id(tensor) -> region its buffer holds
    attached: dict[int, list[Stage]] = field(default_factory=dict)  # id(loop var) -> stages computed there
    frames: dict[int, Frame] = field(default_factory=dict)  # id(stage) -> frame
    outer: dict[int, Ranges] = field(default_factory=dict)  # id(stage) -> ranges of the loops around it
    tags: dict[int, str] = field(default_factory=dict)  # id(loop var) -> thread tag of a bound loop
    bound_vars: dict[int, IterVar] = field(default_factory=dict)  # id(loop var) -> the var, for bound loops


def conj(conds: list[Expr]) -> Expr | None:
    out = None
    for c in conds:
        out = c if out is None else arith.binary(BinOp.AND, out, c)
    return out


def _relation_kind(rel) -> AxisKind:
    return (rel.parent if isinstance(rel, Split) else rel.fused).kind


def make_frame(stage: Stage, ctx: LowerContext) -> Frame:
    op = stage.op
    region = ctx.regions[id(stage.tensor)]
    root_ext = {id(a): e for a, e in zip(op.axis, region.extents)}
    root_ext.update({id(a): a.extent for a in op.reduce_axis})
    dom = pass_down(stage.root_axes, stage.relations, root_ext)
    leaves = list(stage.leaf_iter_vars)
    leaf_map = {id(v): v for v in leaves}
    values, guards = root_values(stage.root_axes, stage.relations, leaf_map, dom)
    spatial_rel = [r for r in stage.relations if _relation_kind(r) is AxisKind.SPATIAL]
    _, spatial_guards = root_values(list(op.axis), spatial_rel, leaf_map, dom)
    offsets = [values[id(a)] for a in op.axis]
    index = {a: arith.binary(BinOp.ADD, off, b) for a, off, b in zip(op.axis, offsets, region.begins)}
    index.update({a: values[id(a)] for a in op.reduce_axis})
    body = substitute(ctx.bodies[id(stage)], index)
    if isinstance(body, Reduce):
        reads = [body.source] + ([body.condition] if body.condition is not None else [])
    else:
        reads = [body]
    ctx.tags.update({id(v): stage.thread_tag(v) for v in leaves if stage.thread_tag(v)})
    ctx.bound_vars.update({id(v): v for v in leaves if stage.thread_tag(v)})
    return Frame(dom, leaves, offsets, guards, spatial_guards, body, reads)


def _subtree(ctx: LowerContext, stage: Stage, leaves) -> list[Stage]:
    """Stages attached at `leaves` of `stage`, and transitively inside them."""
    out: list[Stage] = []
    for v in leaves:
        for child in ctx.attached.get(id(v), []):
            out.append(child)
            out.extend(_subtree(ctx, child, child.leaf_iter_vars))
    return out


def infer_region(stage: Stage, parent: Stage, leaf: IterVar, readers: list[Stage], ctx: LowerContext) -> None:
    """Region of `stage` computed inside loop `leaf` of `parent`: what its readers
    (parent itself, or stages nested inside that loop) read during one iteration."""
    pf = ctx.frames[id(parent)]
    pos = next(n for n, v in enumerate(pf.leaves) if v is leaf)
    fixed = {**ctx.outer[id(parent)], **pf.loop_ranges(pf.leaves[:pos + 1])}
    siblings = [st for st in ctx.attached.get(id(leaf), []) if st is not stage]  # same loop, run after it
    inside = siblings + [d for sib in siblings for d in _subtree(ctx, sib, sib.leaf_iter_vars)]
    inside += _subtree(ctx, parent, pf.leaves[pos + 1:])
    ranged = pf.loop_ranges(pf.leaves[pos + 1:])
    for st in inside:
        if id(st) in ctx.frames:
            ranged.update(ctx.frames[id(st)].loop_ranges(ctx.frames[id(st)].leaves))
    reads: list[Expr] = []
    for r in readers:
        if r is parent:
            reads += pf.reads
        elif any(r is st for st in inside):
            reads += ctx.frames[id(r)].reads
        else:
            raise LoweringError(
                f"stage '{stage.name}' is computed inside loop '{leaf.name}' of '{parent.name}', but its reader "
                f"'{r.name}' runs outside that loop; attach '{stage.name}' at a loop that encloses all its readers"
            )
    scope = kernel_scope(stage, {ctx.tags[v] for v in fixed if v in ctx.tags})
    # a shared tile serves every thread of its block, virtual ones too (TVM): its region spans the
    # threadIdx and vthread loops around it, and it is fetched once per block (lower/vthreads.py)
    relaxed = {v: r for v, r in fixed.items()
               if scope is Scope.SHARED and ctx.tags.get(v, "").startswith(("threadIdx", "vthread"))}
    region = required_region(stage.tensor, reads, {**ranged, **relaxed}, fixed)
    ctx.regions[id(stage.tensor)] = region
    ctx.buffers[id(stage.tensor)] = stage_buffer(stage, region.extents, scope)
    ctx.outer[id(stage)] = fixed


def kernel_scope(stage: Stage, enclosing_tags: set[str]) -> Scope:
    """The storage scope of a stage computed inside loops bound to `enclosing_tags`:
    a global stage inside a GPU kernel cannot be allocated by the host, so (as in
    TVM) it becomes local inside thread loops and shared inside block loops only."""
    if stage.scope is not Scope.GLOBAL or not enclosing_tags:
        return stage.scope
    if any(t.startswith("threadIdx") or t == "vthread" for t in enclosing_tags):
        return Scope.LOCAL
    return Scope.SHARED


def stage_buffer(stage: Stage, extents, scope: Scope | None = None) -> Buffer:
    """The buffer of an intermediate stage: its dimensions in storage order,
    the shape padded for storage_align."""
    perm = stage.storage_perm or tuple(range(len(extents)))
    shape = [extents[p] for p in perm]
    # innermost first: padding dimension d+1 changes the strides of all dimensions outside it, never inside
    for axis, (factor, offset) in sorted(stage.align.items(), key=lambda kv: -perm.index(kv[0])):
        dim = perm.index(axis)
        if dim == len(shape) - 1:
            raise LoweringError(f"stage '{stage.name}': storage_align of axis {axis}, which storage_order "
                                f"puts innermost (stride 1); align an outer axis")
        inner = 1
        for n in shape[dim + 2:]:
            inner *= n
        for _ in range(factor):
            if (shape[dim + 1] * inner) % factor == offset:
                break
            shape[dim + 1] += 1
        else:
            raise LoweringError(f"stage '{stage.name}': no padding of axis {dim + 1} makes the stride of axis "
                                f"{dim} equal to {offset} modulo {factor}")
    identity = perm == tuple(range(len(perm)))
    return Buffer(stage.name, tuple(shape), stage.tensor.dtype, scope or stage.scope, None if identity else perm)


def storage_indices(buf: Buffer, indices) -> tuple:
    """Root-axis-ordered indices -> the buffer's dimension order."""
    perm = buf.perm
    return tuple(indices) if perm is None else tuple(indices[p] for p in perm)


def rewrite_loads(e: Expr, ctx: LowerContext) -> Expr:
    """Tensor reads -> buffer reads in the buffer's own (region-relative) coordinates."""

    def fn(n: Expr):
        if not isinstance(n, Load) or id(n.tensor) not in ctx.buffers:
            return None
        region = ctx.regions.get(id(n.tensor))
        idx = n.indices
        if region is not None:
            idx = tuple(arith.binary(BinOp.SUB, i, b) for i, b in zip(idx, region.begins))
        buf = ctx.buffers[id(n.tensor)]
        return Load(buf, storage_indices(buf, idx), n.dtype)

    return transform(e, fn)


def place_children(loop: IterVar, inner: Stmt, ctx: LowerContext) -> Stmt:
    """`inner` preceded by the nests of the stages attached at `loop`, inside their allocations."""
    children = ctx.attached.get(id(loop), [])
    if children:
        inner = seq(*[make_nest(c, ctx) for c in children], inner)
        for child in reversed(children):
            inner = Allocate(ctx.buffers[id(child.tensor)], inner)
    return inner


def make_loop(stage: Stage, v: IterVar, extent: int, body: Stmt) -> For:
    return For(v, arith.const(0), arith.const(extent), stage.loop_kind(v), body, stage.thread_tag(v))


def make_nest(stage: Stage, ctx: LowerContext) -> Stmt:
    """The statement computing `stage`'s region of its tensor, with the stages
    attached at its loops nested inside."""
    if any(stage.thread_tag(v) and v.kind is AxisKind.REDUCE for v in stage.leaf_iter_vars):
        from .cross_thread import cross_thread_nest

        return cross_thread_nest(stage, ctx)
    f = ctx.frames[id(stage)]
    buf = ctx.buffers[id(stage.tensor)]
    body = f.body
    init: Stmt | None = None
    if isinstance(body, Reduce):
        source = rewrite_loads(body.source, ctx)
        offsets = storage_indices(buf, f.offsets)
        acc = Load(buf, offsets, buf.dtype)
        combined = substitute(body.combiner.result, {body.combiner.lhs: acc, body.combiner.rhs: source})
        conds = f.guards + ([rewrite_loads(body.condition, ctx)] if body.condition is not None else [])
        update: Stmt = Store(buf, offsets, combined)
        init = Store(buf, offsets, body.combiner.identity)
        if f.spatial_guards:
            init = IfThenElse(conj(f.spatial_guards), init)
    else:
        conds = f.guards
        update = Store(buf, storage_indices(buf, f.offsets), rewrite_loads(body, ctx))
    if conds:
        update = IfThenElse(conj(conds), update)

    leaves = f.leaves
    first_reduce = next((n for n, v in enumerate(leaves) if v.kind is AxisKind.REDUCE), None)
    tensorized = stage.tensorized
    nest = update
    for pos in range(len(leaves) - 1, -1, -1):
        v = leaves[pos]
        nest = make_loop(stage, v, f.dom[id(v)], place_children(v, nest, ctx))
        if init is not None and pos == first_reduce:
            nest = seq(_init_nest(stage, f, init, pos), nest)
        if tensorized is not None and v is tensorized[0]:
            from .tensorize import tensorize_nest

            inside = _init_nest(stage, f, init, pos) if init is not None and first_reduce >= pos else None
            if isinstance(body, Reduce) and body.condition is not None:
                raise LoweringError(f"stage '{stage.name}': a reduction with a condition cannot be tensorized")
            source = rewrite_loads(body.source, ctx) if isinstance(body, Reduce) else None
            value = None if isinstance(body, Reduce) else rewrite_loads(body, ctx)
            nest = tensorize_nest(stage, v, tensorized[1], f, buf, storage_indices(buf, f.offsets), source, value,
                                  nest, inside, ctx)
    return nest


def _init_nest(stage: Stage, f: Frame, init: Stmt, pos: int) -> Stmt:
    """The reduction's initialisation over the spatial loops from position `pos` inward;
    those an intrinsic replaces (serial by rule) are unrolled, so that a register tile of
    the intrinsic's outputs is initialised at constant offsets."""
    t = stage.tensorized
    start = next((n for n, v in enumerate(f.leaves) if t is not None and v is t[0]), len(f.leaves))
    for n in range(len(f.leaves) - 1, pos - 1, -1):
        u = f.leaves[n]
        if u.kind is AxisKind.SPATIAL:
            loop = make_loop(stage, u, f.dom[id(u)], init)
            init = replace(loop, kind=ForKind.UNROLLED) if n >= start else loop
    return init

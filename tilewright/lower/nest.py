"""Loop-nest construction for one stage: loops from its leaf variables, the
store (with guards for inexact splits), reduction init/update, and the nests
of stages attached at its loops (with their buffers allocated there)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import arith
from ..ir.expr import AxisKind, BinOp, Expr, Load, Reduce
from ..ir.stmt import Allocate, Buffer, For, IfThenElse, Stmt, Store, seq
from ..ir.traverse import substitute, transform
from ..schedule.relations import Split, pass_down, root_values
from ..schedule.stage import Stage
from .bound import Region, required_region
from .simplify import Ranges


@dataclass
class LowerContext:
    bodies: dict[int, Expr]  # id(stage) -> body with inlined producers substituted
    buffers: dict[int, Buffer] = field(default_factory=dict)  # id(tensor) -> buffer
    regions: dict[int, Region] = field(default_factory=dict)  # id(tensor) -> region its buffer holds
    attached: dict[int, list[Stage]] = field(default_factory=dict)  # id(loop var) -> stages computed there


def _conj(conds: list[Expr]) -> Expr | None:
    out = None
    for c in conds:
        out = c if out is None else arith.binary(BinOp.AND, out, c)
    return out


def _relation_kind(rel) -> AxisKind:
    return (rel.parent if isinstance(rel, Split) else rel.fused).kind


def rewrite_loads(e: Expr, ctx: LowerContext) -> Expr:
    """Tensor reads -> buffer reads in the buffer's own (region-relative) coordinates."""

    def fn(n: Expr):
        if not isinstance(n, Load) or id(n.tensor) not in ctx.buffers:
            return None
        region = ctx.regions.get(id(n.tensor))
        idx = n.indices
        if region is not None:
            idx = tuple(arith.binary(BinOp.SUB, i, b) for i, b in zip(idx, region.begins))
        return Load(ctx.buffers[id(n.tensor)], tuple(idx), n.dtype)

    return transform(e, fn)


def make_nest(stage: Stage, ctx: LowerContext, outer_ranges: Ranges) -> Stmt:
    """The statement computing `stage`'s region (ctx.regions) of its tensor."""
    op = stage.op
    region = ctx.regions[id(stage.tensor)]
    root_ext = {id(a): e for a, e in zip(op.axis, region.extents)}
    root_ext.update({id(a): a.extent for a in op.reduce_axis})
    dom = pass_down(stage.root_axes, stage.relations, root_ext)
    leaves = stage.leaf_iter_vars
    leaf_map = {id(v): v for v in leaves}
    values, guards = root_values(stage.root_axes, stage.relations, leaf_map, dom)
    spatial_rel = [r for r in stage.relations if _relation_kind(r) is AxisKind.SPATIAL]
    _, spatial_guards = root_values(list(op.axis), spatial_rel, leaf_map, dom)

    offsets = [values[id(a)] for a in op.axis]  # region-relative
    global_index = {a: arith.binary(BinOp.ADD, off, b) for a, off, b in zip(op.axis, offsets, region.begins)}
    global_index.update({a: values[id(a)] for a in op.reduce_axis})
    body = substitute(ctx.bodies[id(stage)], global_index)
    reads = [body.source] + ([body.condition] if body.condition is not None else []) \
        if isinstance(body, Reduce) else [body]
    loop_ranges = {id(v): (0, dom[id(v)] - 1) for v in leaves}
    for pos, v in enumerate(leaves):  # regions of attached stages, before loads are rewritten
        for child in ctx.attached.get(id(v), []):
            fixed = {**outer_ranges, **{id(u): loop_ranges[id(u)] for u in leaves[:pos + 1]}}
            ranged = {id(u): loop_ranges[id(u)] for u in leaves[pos + 1:]}
            region_c = required_region(child.tensor, reads, ranged, fixed)
            ctx.regions[id(child.tensor)] = region_c
            ctx.buffers[id(child.tensor)] = Buffer(child.name, region_c.extents, child.tensor.dtype, child.scope)

    buf = ctx.buffers[id(stage.tensor)]
    init: Stmt | None = None
    if isinstance(body, Reduce):
        source = rewrite_loads(body.source, ctx)
        acc = Load(buf, tuple(offsets), buf.dtype)
        combined = substitute(body.combiner.result, {body.combiner.lhs: acc, body.combiner.rhs: source})
        conds = guards + ([rewrite_loads(body.condition, ctx)] if body.condition is not None else [])
        update: Stmt = Store(buf, tuple(offsets), combined)
        init = Store(buf, tuple(offsets), body.combiner.identity)
        if spatial_guards:
            init = IfThenElse(_conj(spatial_guards), init)
    else:
        conds = guards
        update = Store(buf, tuple(offsets), rewrite_loads(body, ctx))
    if conds:
        update = IfThenElse(_conj(conds), update)

    first_reduce = next((n for n, v in enumerate(leaves) if v.kind is AxisKind.REDUCE), None)
    nest = update
    for pos in range(len(leaves) - 1, -1, -1):
        v = leaves[pos]
        children = ctx.attached.get(id(v), [])
        inner = nest
        if children:
            fixed = {**outer_ranges, **{id(u): loop_ranges[id(u)] for u in leaves[:pos + 1]}}
            inner = seq(*[make_nest(c, ctx, fixed) for c in children], inner)
            for child in reversed(children):
                inner = Allocate(ctx.buffers[id(child.tensor)], inner)
        nest = For(v, arith.const(0), arith.const(dom[id(v)]), stage.loop_kind(v), inner)
        if init is not None and pos == first_reduce:
            init_nest = init
            for u in reversed([u for u in leaves[pos:] if u.kind is AxisKind.SPATIAL]):
                init_nest = For(u, arith.const(0), arith.const(dom[id(u)]), stage.loop_kind(u), init_nest)
            nest = seq(init_nest, nest)
    return nest

"""Cross-thread reductions: the nest of a reduction stage whose reduce loops are
(partly) bound to threadIdx.*.

After it, such a stage's statement is, per point of its other loops:

    allocate S.part: T[1] (local)
      S.part[0] = identity
      for <the unbound reduce loops>: S.part[0] = combine(S.part[0], source)   # per thread
      allocate S.red: T[rows..., n] (shared)                                    # n = bound extent
        S.red[row, tid] = S.part[0]
        if tid < n - p: S.red[row, tid] = combine(S.red[row, tid], S.red[row, tid + p])  # n not 2^k
        if tid < s: S.red[row, tid] = combine(S.red[row, tid], S.red[row, tid + s])      # s = p/2, ..., 2
        if tid == 0: S[...] = combine(S.red[row, 0], S.red[row, 1])

with `tid` the flat index of the bound reduce loops, `p` the largest power of
two <= n and `row` the indices of the block's other threadIdx.* dimensions, so
threads reducing different points use different rows. The barriers between
the steps are added by lower/barriers.py. The unbound reduce loops move inside
the other loops (a reduction may be reassociated)."""

from __future__ import annotations

from ..errors import LoweringError
from ..ir import arith
from ..ir.expr import AxisKind, BinOp, CmpOp, Expr, Load, Reduce
from ..ir.stmt import Allocate, Buffer, IfThenElse, Scope, Stmt, Store, seq
from ..ir.traverse import substitute
from ..schedule.stage import Stage
from .nest import LowerContext, conj, make_loop, place_children, rewrite_loads, storage_indices


def _combine(red: Reduce, a: Expr, b: Expr) -> Expr:
    return substitute(red.combiner.result, {red.combiner.lhs: a, red.combiner.rhs: b})


def _rows(stage: Stage, ctx: LowerContext, reduce_tags: set[str]) -> list[tuple[Expr, int]]:
    """(index, extent) of each threadIdx dimension around or of this stage that is not reduced over."""
    f = ctx.frames[id(stage)]
    own = {stage.thread_tag(v): (v, f.dom[id(v)]) for v in f.leaves if stage.thread_tag(v)}
    rows: dict[str, tuple[Expr, int]] = {}
    for vid, (lo, hi) in ctx.outer.get(id(stage), {}).items():
        tag = ctx.tags.get(vid, "")
        if tag in reduce_tags:
            raise LoweringError(
                f"stage '{stage.name}': its reduce loop is bound to {tag}, but it is computed inside a loop "
                f"already bound to {tag}; a cross-thread reduction needs threads that compute the same point "
                f"(attach it outside that loop, or bind its reduce loop to another threadIdx)")
        if tag.startswith("threadIdx"):
            rows[tag] = (ctx.bound_vars[vid], hi - lo + 1)
    for tag, (v, extent) in own.items():
        if tag.startswith("threadIdx") and tag not in reduce_tags:
            rows[tag] = (v, extent)
    return [rows[t] for t in sorted(rows)]


def cross_thread_nest(stage: Stage, ctx: LowerContext) -> Stmt:
    f = ctx.frames[id(stage)]
    body = f.body
    buf = ctx.buffers[id(stage.tensor)]
    leaves = f.leaves
    bound_red = [v for v in leaves if v.kind is AxisKind.REDUCE and stage.thread_tag(v)]
    serial_red = [v for v in leaves if v.kind is AxisKind.REDUCE and not stage.thread_tag(v)]
    outer = [v for v in leaves if not (v.kind is AxisKind.REDUCE and not stage.thread_tag(v))]
    if serial_red:
        first = leaves.index(serial_red[0])
        moved = [v for v in leaves[first:] if v.kind is AxisKind.SPATIAL and ctx.attached.get(id(v))]
        if moved:
            raise LoweringError(
                f"stage '{stage.name}': a cross-thread reduction computes its unbound reduce loops innermost, but "
                f"stages are attached at loop '{moved[0].name}', which lies inside reduce loop "
                f"'{serial_red[0].name}'; reorder the loops so that the reduce loops come last")
    dtype = body.dtype
    # the per-thread partial over the unbound reduce loops
    part = Buffer(f"{stage.name}.part", (1,), dtype, Scope.LOCAL)
    zero = arith.const(0)
    acc = Load(part, (zero,), dtype)
    source = rewrite_loads(body.source, ctx)
    conds = f.guards + ([rewrite_loads(body.condition, ctx)] if body.condition is not None else [])
    update: Stmt = Store(part, (zero,), _combine(body, acc, source))
    if conds:
        update = IfThenElse(conj(conds), update)
    for v in reversed(serial_red):
        update = make_loop(stage, v, f.dom[id(v)], place_children(v, update, ctx))
    # the tree over the bound reduce loops, in shared memory
    tid: Expr | None = None
    n = 1
    for v in bound_red:
        extent = f.dom[id(v)]
        tid = v if tid is None else arith.binary(BinOp.ADD, arith.binary(BinOp.MUL, tid, arith.const(extent)), v)
        n *= extent
    rows = _rows(stage, ctx, {stage.thread_tag(v) for v in bound_red})
    red = Buffer(f"{stage.name}.red", tuple(e for _, e in rows) + (n,), dtype, Scope.SHARED)
    row = tuple(i for i, _ in rows)

    def at(i: Expr) -> Load:
        return Load(red, row + (i,), dtype)

    def step(active: int, stride: int) -> Stmt:
        other = arith.binary(BinOp.ADD, tid, arith.const(stride))
        return IfThenElse(arith.compare(CmpOp.LT, tid, arith.const(active)),
                          Store(red, row + (tid,), _combine(body, at(tid), at(other))))

    p = 1 << (n.bit_length() - 1)
    steps: list[Stmt] = [Store(red, row + (tid,), acc)]
    if n > p:
        steps.append(step(n - p, p))
    s = p // 2
    while s > 1:
        steps.append(step(s, s))
        s //= 2
    result = _combine(body, at(zero), at(arith.const(1))) if p > 1 else at(zero)
    final: Stmt = Store(buf, storage_indices(buf, f.offsets), result)
    first = arith.compare(CmpOp.EQ, tid, zero)
    final = IfThenElse(conj([first] + f.spatial_guards), final)
    inner = Allocate(part, seq(Store(part, (zero,), body.combiner.identity), update,
                               Allocate(red, seq(*steps, final))))
    for v in reversed(outer):
        inner = make_loop(stage, v, f.dom[id(v)], place_children(v, inner, ctx))
    return inner

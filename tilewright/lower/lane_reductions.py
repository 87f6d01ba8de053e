"""Lane reductions: a sum, max or min whose vectorized loop runs along its own reduction.

The schedule (`Stage.vectorize_reduce`; the CPU space's `vec_reduce`, and its reductions
outside the register tile) puts the lanes of a reduce loop innermost under a loop `L` of
the same reduction:

    for L:  for lane (vectorized):  acc[i] = acc[i] op e     (acc[i] the same for every lane)

No lane may store there alone, so after this pass each such statement keeps a vector
of partial results, one per lane, across all of `L`, starting from the operator's
identity, and combines its lanes into `acc[i]` once after it:

    part[0:lanes] = id;  for L: part[0:lanes] = part op e[lanes];  acc[i] = acc[i] op part[0] op ...

`part` is a local buffer at constant offsets, so the C backend keeps it in registers.
A sum's additions change order (as in any vectorized sum); max and min are exact
(a NaN still wins: the vector max/min keep NaN as the scalar ones do)."""

from __future__ import annotations

from dataclasses import replace

from ..ir import arith
from ..ir.expr import Binary, BinOp, Const, Expr, Load, Var
from ..ir.stmt import Allocate, Buffer, For, ForKind, Scope, Seq, Stmt, Store, seq
from ..ir.stmt_functor import map_stmt
from ..ir.traverse import free_vars, structural_key, substitute, walk

LANE_OPS = (BinOp.ADD, BinOp.MAX, BinOp.MIN)


def lane_reductions(stmt: Stmt) -> Stmt:
    counter = [0]

    def fs(s: Stmt):
        if not isinstance(s, For) or s.kind is ForKind.VECTORIZED:
            return None
        parts = s.body.stmts if isinstance(s.body, Seq) else (s.body,)
        matches = [_match(p, s.var) for p in parts]
        if not parts or any(m is None for m in matches):
            return None
        counter[0] += 1
        return _rewrite(s, matches, counter[0])

    return map_stmt(stmt, fs)


def _match(s: Stmt, outer: Var):
    """(lane loop, store, operand) when `s` is `for lane: acc[i] = acc[i] op e` (op in
    LANE_OPS) with `i` free of the lane and of `outer`, and `e` not reading acc."""
    if not (isinstance(s, For) and s.kind is ForKind.VECTORIZED and isinstance(s.begin, Const)
            and s.begin.value == 0 and isinstance(s.extent, Const) and isinstance(s.body, Store)):
        return None
    lanes = int(s.extent.value)
    if lanes < 2 or lanes & (lanes - 1):
        return None
    st = s.body
    (index,) = st.indices
    if any(v is s.var or v is outer for v in free_vars(index)):
        return None
    v = st.value
    if not (isinstance(v, Binary) and v.op in LANE_OPS):
        return None
    key = structural_key(index)
    for acc, e in ((v.a, v.b), (v.b, v.a)):
        if isinstance(acc, Load) and acc.tensor is st.buffer and structural_key(acc.indices[0]) == key:
            if any(isinstance(n, Load) and n.tensor is st.buffer for n in walk(e)):
                return None
            return s, st, e
    return None


def _identity(op: BinOp, dtype) -> Const:
    return arith.const({BinOp.ADD: 0, BinOp.MAX: dtype.lowest, BinOp.MIN: dtype.highest}[op], dtype)


def _rewrite(loop: For, matches: list, n: int) -> Stmt:
    lanes = int(matches[0][0].extent.value)
    first = matches[0][1].buffer
    if first.dtype.is_bool or any(int(m[0].extent.value) != lanes or m[1].buffer.dtype != first.dtype for m in matches):
        return loop  # left to the vectorizer, which runs it serially
    parts = Buffer(f"{first.name}_lanes{n}", (len(matches) * lanes,), first.dtype, Scope.LOCAL)
    init, body, finish = [], [], []
    for j, (lane_loop, st, e) in enumerate(matches):
        op = st.value.op
        lane = lane_loop.var
        at = arith.binary(BinOp.ADD, arith.const(j * lanes, lane.dtype), lane)
        fresh = Var(f"{lane.name}_init", lane.dtype)
        init.append(replace(lane_loop, var=fresh, body=Store(
            parts, (substitute(at, {lane: fresh}),), _identity(op, first.dtype))))
        body.append(replace(lane_loop, body=Store(
            parts, (at,), arith.binary(op, Load(parts, (at,), first.dtype), e))))
        total: Expr = Load(st.buffer, st.indices, st.buffer.dtype)
        for k in range(lanes):
            total = arith.binary(op, total, Load(parts, (arith.const(j * lanes + k, lane.dtype),), first.dtype))
        finish.append(Store(st.buffer, st.indices, total))
    return Allocate(parts, seq(*init, replace(loop, body=seq(*body)), *finish))

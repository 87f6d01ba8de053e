"""64-bit index arithmetic for kernels whose buffers or loops reach past
2**31 - 1: loop and let variables become int64 and every int32 expression
that uses them is promoted, so flattened offsets cannot overflow. Kernels
that fit keep int32 (cheaper address arithmetic, narrower index vectors)."""

from __future__ import annotations

from dataclasses import replace

from ..ir.dtype import int32, int64
from ..ir.expr import Binary, Broadcast, Cast, Compare, Const, Expr, Ramp, Select, Var
from ..ir.stmt import Allocate, For, IfThenElse, LetStmt, Seq, Stmt, Store
from ..ir.stmt_functor import walk_stmt
from ..ir.traverse import children, with_children

INT32_MAX = 2 ** 31 - 1


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def needs_wide_indices(func) -> bool:
    buffers = list(func.args) + [s.buffer for s in walk_stmt(func.body) if isinstance(s, Allocate)]
    if any(_numel(b.shape) > INT32_MAX for b in buffers):
        return True
    return any(isinstance(s, For) and isinstance(s.extent, Const) and int(s.extent.value) > INT32_MAX
               for s in walk_stmt(func.body))


def _is(e: Expr, d) -> bool:
    return e.dtype.scalar == d


def _to64(e: Expr) -> Expr:
    if not _is(e, int32):
        return e
    wide = int64.with_lanes(e.dtype.lanes)
    return Const(e.value, wide) if isinstance(e, Const) else Cast(e, wide)


class _Widen:
    def __init__(self):
        self.vars: dict[int, Var] = {}

    def var(self, v: Var) -> Var:
        if id(v) not in self.vars:
            self.vars[id(v)] = Var(v.name, int64)
        return self.vars[id(v)]

    def expr(self, e: Expr) -> Expr:
        if isinstance(e, Var):
            return self.vars.get(id(e), e)
        new = tuple(self.expr(c) for c in children(e))
        out = with_children(e, new)
        if not any(_is(c, int64) for c in new):
            return out
        lanes = e.dtype.lanes
        if isinstance(out, Binary) and _is(out, int32):
            return replace(out, a=_to64(out.a), b=_to64(out.b), dtype=int64.with_lanes(lanes))
        if isinstance(out, Compare):
            return replace(out, a=_to64(out.a), b=_to64(out.b))
        if isinstance(out, Select) and _is(out, int32):
            return replace(out, t=_to64(out.t), f=_to64(out.f), dtype=int64.with_lanes(lanes))
        if isinstance(out, (Ramp, Broadcast)) and _is(out, int32):
            return replace(out, dtype=int64.with_lanes(lanes))
        return out  # Load, Cast, Call: their own dtype does not change

    def value(self, e: Expr, dtype) -> Expr:
        """A value expression keeps the dtype the IR gave it."""
        w = self.expr(e)
        return w if w.dtype == dtype else Cast(w, dtype)

    def stmt(self, s: Stmt) -> Stmt:
        """Pre-order, so a let variable is renamed before its body is visited."""
        if isinstance(s, For):
            return replace(s, var=self.var(s.var), begin=_to64(self.expr(s.begin)),
                           extent=_to64(self.expr(s.extent)), body=self.stmt(s.body))
        if isinstance(s, LetStmt):
            value = self.expr(s.value)
            if _is(s.var, int32) and _is(value, int64):
                return replace(s, var=self.var(s.var), value=value, body=self.stmt(s.body))
            return replace(s, value=self.value(s.value, s.value.dtype), body=self.stmt(s.body))
        if isinstance(s, Store):
            return replace(s, indices=tuple(self.expr(i) for i in s.indices),
                           value=self.value(s.value, s.value.dtype))
        if isinstance(s, Seq):
            return replace(s, stmts=tuple(self.stmt(c) for c in s.stmts))
        if isinstance(s, IfThenElse):
            return replace(s, cond=self.expr(s.cond), then=self.stmt(s.then),
                           orelse=None if s.orelse is None else self.stmt(s.orelse))
        if isinstance(s, Allocate):
            return replace(s, body=self.stmt(s.body))
        return s


def widen_indices(func):
    if not needs_wide_indices(func):
        return func
    return replace(func, body=_Widen().stmt(func.body))

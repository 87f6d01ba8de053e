"""Loop partitioning: after it, a loop whose body is guarded by a condition
that holds for all but its last iterations (the tail of a non-divisible
split) is two loops: a main part where the guard provably holds, which the
simplifier then removes, and the tail that keeps it. The main body is thus
guard-free and can be vectorized."""

from __future__ import annotations

from dataclasses import replace

from ..ir import arith
from ..ir.expr import Binary, BinOp, CmpOp, Compare, Const, Expr
from ..ir.stmt import For, IfThenElse, Stmt, seq
from ..ir.stmt_functor import walk_stmt
from ..ir.traverse import structural_key
from .simplify import Linear, Ranges, const_bounds, from_linear, simplify, to_linear


def _conjuncts(e: Expr) -> list[Expr]:
    if isinstance(e, Binary) and e.op is BinOp.AND and e.dtype.is_bool:
        return _conjuncts(e.a) + _conjuncts(e.b)
    return [e]


def _guards(body: Stmt) -> list[Expr]:
    out = []
    for s in walk_stmt(body):
        if isinstance(s, IfThenElse):
            out.extend(_conjuncts(s.cond))
    return out


def _inner_ranges(body: Stmt) -> Ranges:
    out: Ranges = {}
    for s in walk_stmt(body):
        if isinstance(s, For) and isinstance(s.begin, Const) and isinstance(s.extent, Const):
            out[id(s.var)] = (int(s.begin.value), int(s.begin.value + s.extent.value - 1))
    return out


def _safe_end(cond: Expr, loop: For, ranges: Ranges) -> int | None:
    """Iterations [begin, end) of `loop` for which `cond` holds whatever the
    other variables are, when `cond` is an upper bound on the loop variable."""
    if not isinstance(cond, Compare) or not cond.a.dtype.is_int:
        return None
    if cond.op in (CmpOp.LT, CmpOp.LE):
        diff = arith.binary(BinOp.SUB, cond.a, cond.b)  # diff < 0 (or <= 0)
    elif cond.op in (CmpOp.GT, CmpOp.GE):
        diff = arith.binary(BinOp.SUB, cond.b, cond.a)
    else:
        return None
    strict = cond.op in (CmpOp.LT, CmpOp.GT)
    lin = to_linear(simplify(diff, ranges))
    key = structural_key(loop.var)
    if key not in lin.terms:
        return None
    coef = lin.terms[key][1]
    if coef <= 0:
        return None
    rest = Linear({k: v for k, v in lin.terms.items() if k != key}, lin.const)
    bounds = const_bounds(from_linear(rest, cond.a.dtype), ranges)
    if bounds is None:
        return None
    limit = -bounds[1] - (1 if strict else 0)  # need coef * v <= limit
    return limit // coef + 1


def partition(stmt: Stmt, ranges: Ranges | None = None) -> Stmt:
    ranges = dict(ranges or {})
    if isinstance(stmt, For):
        if isinstance(stmt.begin, Const) and isinstance(stmt.extent, Const):
            begin, extent = int(stmt.begin.value), int(stmt.extent.value)
            inner = {**ranges, **_inner_ranges(stmt.body), id(stmt.var): (begin, begin + extent - 1)}
            ends = [e for e in (_safe_end(g, stmt, inner) for g in _guards(stmt.body)) if e is not None]
            end = min(ends) if ends else None
            if end is not None and begin < end < begin + extent:
                main = replace(stmt, extent=arith.const(end - begin))
                tail = replace(stmt, begin=arith.const(end), extent=arith.const(begin + extent - end))
                return seq(partition(main, ranges), partition(tail, ranges))
            ranges[id(stmt.var)] = (begin, begin + extent - 1)
        return replace(stmt, body=partition(stmt.body, ranges))
    if isinstance(stmt, IfThenElse):
        return replace(stmt, then=partition(stmt.then, ranges),
                       orelse=partition(stmt.orelse, ranges) if stmt.orelse is not None else None)
    if hasattr(stmt, "stmts"):
        return seq(*[partition(s, ranges) for s in stmt.stmts])
    if hasattr(stmt, "body"):
        return replace(stmt, body=partition(stmt.body, ranges))
    return stmt

"""Loop partitioning: after it, a loop whose body is guarded by a condition
that holds for all but its first or last iterations (the tail of a
non-divisible split; the border of a padding copy, whose select picks zero
there) is up to three loops: a main part where the condition provably
holds, which the simplifier then removes, and the head and tail that keep
it. The main body is thus guard-free and can be vectorized. Select
conditions partition innermost loops only (each split copies the body).
Loops bound to GPU threads are never split (their extent is the launch's)."""

from __future__ import annotations

from dataclasses import replace

from ..ir import arith
from ..ir.expr import Binary, BinOp, CmpOp, Compare, Const, Expr, Select
from ..ir.stmt import For, ForKind, IfThenElse, Stmt, Store, seq
from ..ir.stmt_functor import walk_stmt
from ..ir.traverse import structural_key, walk
from .simplify import Linear, Ranges, const_bounds, from_linear, simplify, to_linear


def conjuncts(e: Expr) -> list[Expr]:
    """The operands of a chain of logical ANDs."""
    if isinstance(e, Binary) and e.op is BinOp.AND and e.dtype.is_bool:
        return conjuncts(e.a) + conjuncts(e.b)
    return [e]


def _guards(body: Stmt) -> list[Expr]:
    out = []
    innermost = not any(isinstance(s, For) for s in walk_stmt(body))
    for s in walk_stmt(body):
        if isinstance(s, IfThenElse):
            out.extend(conjuncts(s.cond))
        elif innermost and isinstance(s, Store):
            out.extend(c for n in walk(s.value) if isinstance(n, Select) for c in conjuncts(n.cond))
    return out


def _inner_ranges(body: Stmt) -> Ranges:
    out: Ranges = {}
    for s in walk_stmt(body):
        if isinstance(s, For) and isinstance(s.begin, Const) and isinstance(s.extent, Const):
            out[id(s.var)] = (int(s.begin.value), int(s.begin.value + s.extent.value - 1))
    return out


def _safe_range(cond: Expr, loop: For, ranges: Ranges) -> tuple[int | None, int | None]:
    """Iterations [start, end) of `loop` for which `cond`, a linear bound on
    the loop variable, holds whatever the other variables are; None for a
    side the condition does not bound."""
    if not isinstance(cond, Compare) or not cond.a.dtype.is_int:
        return None, None
    if cond.op in (CmpOp.LT, CmpOp.LE):  # lin = b - a >= need
        lin_expr = arith.binary(BinOp.SUB, cond.b, cond.a)
    elif cond.op in (CmpOp.GT, CmpOp.GE):
        lin_expr = arith.binary(BinOp.SUB, cond.a, cond.b)
    else:
        return None, None
    need = 1 if cond.op in (CmpOp.LT, CmpOp.GT) else 0
    lin = to_linear(simplify(lin_expr, ranges))
    key = structural_key(loop.var)
    if key not in lin.terms:
        return None, None
    coef = lin.terms[key][1]
    rest = Linear({k: v for k, v in lin.terms.items() if k != key}, lin.const)
    bounds = const_bounds(from_linear(rest, cond.a.dtype), ranges)
    if bounds is None or coef == 0:
        return None, None
    if coef > 0:  # coef * v >= need - rest for every rest: v >= ceil((need - min rest) / coef)
        return -((bounds[0] - need) // coef), None
    return None, (bounds[0] - need) // -coef + 1  # v <= floor((min rest - need) / -coef)


def partition(stmt: Stmt, ranges: Ranges | None = None) -> Stmt:
    ranges = dict(ranges or {})
    if isinstance(stmt, For):
        if stmt.kind is ForKind.THREAD_BINDING and isinstance(stmt.extent, Const):
            ranges[id(stmt.var)] = (0, int(stmt.extent.value) - 1)  # one iteration per thread: never split
        elif isinstance(stmt.begin, Const) and isinstance(stmt.extent, Const):
            begin, extent = int(stmt.begin.value), int(stmt.extent.value)
            inner = {**ranges, **_inner_ranges(stmt.body), id(stmt.var): (begin, begin + extent - 1)}
            safe = [_safe_range(g, stmt, inner) for g in _guards(stmt.body)]
            start = max([begin, *(lo for lo, _ in safe if lo is not None)])
            end = min([begin + extent, *(hi for _, hi in safe if hi is not None)])
            if start < end and (begin < start or end < begin + extent):
                pieces = [replace(stmt, begin=arith.const(lo), extent=arith.const(hi - lo))
                          for lo, hi in ((begin, start), (start, end), (end, begin + extent)) if lo < hi]
                return seq(*[partition(p, ranges) for p in pieces])
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

"""Simplify every expression of a statement with the ranges of the loops
around it; drop loops of extent 1 (not thread-bound ones) and branches decided by the ranges; mark
integer divisions of provably non-negative values as truncating (plain C `/`)."""

from __future__ import annotations

import threading
from dataclasses import replace

from ..ir.expr import Binary, BinOp, Const, Expr
from ..ir.stmt import Allocate, For, ForKind, IfThenElse, IntrinCall, LetStmt, Seq, Stmt, Store, seq
from ..ir.traverse import substitute, transform
from .simplify import Ranges, const_bounds, simplify

_shared = threading.local()  # .memos: ranges key -> (simplify memo, division memo) during one simplify_stmt


def _c_division(e: Expr, ranges: Ranges, memo: dict | None = None) -> Expr:
    def fn(n: Expr):
        if isinstance(n, Binary) and n.op in (BinOp.FLOORDIV, BinOp.FLOORMOD) and n.dtype.is_int:
            a, b = const_bounds(n.a, ranges), const_bounds(n.b, ranges)
            if a and b and a[0] >= 0 and b[0] > 0:
                op = BinOp.TRUNCDIV if n.op is BinOp.FLOORDIV else BinOp.TRUNCMOD
                return Binary(op, n.a, n.b, n.dtype)
        return None

    return transform(e, fn, memo)


def _expr(e: Expr, ranges: Ranges) -> Expr:
    memos = getattr(_shared, "memos", None)
    if memos is None:
        return _c_division(simplify(e, ranges), ranges)
    simplified, divided = memos.setdefault(tuple(sorted(ranges.items())), ({}, {}))
    return _c_division(simplify(e, ranges, simplified), ranges, divided)


def simplify_stmt(stmt: Stmt, ranges: Ranges | None = None) -> Stmt | None:
    """`stmt` simplified; expressions under the same loop ranges share one memo (the stores of an
    unrolled body repeat subtrees: a Winograd tile's partial sums)."""
    outer = getattr(_shared, "memos", None)
    if outer is None:
        _shared.memos = {}
    try:
        return _simplify_stmt(stmt, ranges)
    finally:
        _shared.memos = outer


def _simplify_stmt(stmt: Stmt, ranges: Ranges | None = None) -> Stmt | None:
    ranges = dict(ranges or {})
    if isinstance(stmt, For):
        begin, extent = _expr(stmt.begin, ranges), _expr(stmt.extent, ranges)
        if isinstance(extent, Const) and extent.value <= 0:
            return None
        if isinstance(begin, Const) and isinstance(extent, Const):
            if extent.value == 1 and stmt.kind is not ForKind.THREAD_BINDING:  # a kernel keeps its launch dims
                return _simplify_stmt(substitute_stmt(stmt.body, stmt.var, begin), ranges)
            ranges[id(stmt.var)] = (int(begin.value), int(begin.value + extent.value - 1))
        body = _simplify_stmt(stmt.body, ranges)
        return None if body is None else replace(stmt, begin=begin, extent=extent, body=body)
    if isinstance(stmt, Seq):
        parts = [_simplify_stmt(s, ranges) for s in stmt.stmts]
        parts = [p for p in parts if p is not None]
        return seq(*parts) if parts else None
    if isinstance(stmt, IfThenElse):
        cond = _expr(stmt.cond, ranges)
        if isinstance(cond, Const):
            return _simplify_stmt(stmt.then if cond.value else stmt.orelse, ranges) \
                if (cond.value or stmt.orelse is not None) else None
        then = _simplify_stmt(stmt.then, ranges)
        orelse = _simplify_stmt(stmt.orelse, ranges) if stmt.orelse is not None else None
        if then is None and orelse is None:
            return None
        return IfThenElse(cond, then if then is not None else Seq(()), orelse)
    if isinstance(stmt, Store):
        return replace(stmt, indices=tuple(_expr(i, ranges) for i in stmt.indices), value=_expr(stmt.value, ranges))
    if isinstance(stmt, Allocate):
        body = _simplify_stmt(stmt.body, ranges)
        return None if body is None else replace(stmt, body=body)
    if isinstance(stmt, LetStmt):
        body = _simplify_stmt(stmt.body, ranges)
        return None if body is None else replace(stmt, value=_expr(stmt.value, ranges), body=body)
    if isinstance(stmt, IntrinCall):
        return replace(stmt, operands=tuple(_expr(o, ranges) for o in stmt.operands))
    return stmt


def substitute_stmt(stmt: Stmt, var, value: Expr) -> Stmt:
    from ..ir.stmt_functor import map_stmt

    return map_stmt(stmt, None, lambda e: substitute(e, {var: value}))

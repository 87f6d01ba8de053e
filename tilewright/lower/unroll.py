"""Unrolling: after it, loops marked unrolled with a constant extent up to
MAX_UNROLL are replaced by one copy of their body per iteration (loop
variable bound to the constant); longer ones keep a compiler unroll pragma.
Loops bound to GPU threads are never unrolled (they are not UNROLLED)."""

from __future__ import annotations

from ..ir import arith
from ..ir.expr import Const, Expr, Select
from ..ir.stmt import For, ForKind, Stmt, seq
from ..ir.stmt_functor import map_stmt
from ..ir.traverse import children, with_children
from .simplify import simplify

MAX_UNROLL = 64


def unrolled_copies(loop: For) -> Stmt:
    """One copy of the body of `loop` (constant begin and extent) per iteration."""
    begin = int(loop.begin.value)
    copies = []
    for k in range(int(loop.extent.value)):
        value = arith.const(begin + k, loop.var.dtype)
        memo: dict[int, Expr] = {}  # one per copy: its statements share subtrees (an unrolled tile's partial sums)
        copies.append(map_stmt(loop.body, None, lambda e, v=value, m=memo: bind(e, loop.var, v, m)))
    return seq(*copies)


def bind(e: Expr, var, value: Const, memo: dict | None = None) -> Expr:
    """`e` with `var` replaced by `value`, where a select whose condition becomes a constant keeps
    only its chosen branch (an unrolled dispatch chain shrinks to one branch per copy here, instead
    of copying every branch for simplify to drop). `memo` (id -> result): shared by calls that
    bind the same `var` to the same `value` in expressions that all stay alive meanwhile (one
    loop body's), so no id is reused."""
    memo = {} if memo is None else memo

    def visit(node: Expr) -> Expr:
        key = id(node)
        if key not in memo:
            if node is var:
                memo[key] = value
            elif isinstance(node, Select) and (cond := visit(node.cond)) is not node.cond:  # it reads `var`
                cond = simplify(cond)
                if isinstance(cond, Const):
                    memo[key] = visit(node.t if cond.value else node.f)
                else:
                    memo[key] = Select(cond, visit(node.t), visit(node.f), node.dtype)
            else:  # unchanged nodes are kept (with_children), so a body without `var` is returned as is
                memo[key] = with_children(node, tuple(visit(c) for c in children(node)))
        return memo[key]

    return visit(e)


def unroll(stmt: Stmt) -> Stmt:
    def fs(s: Stmt):
        if not (isinstance(s, For) and s.kind is ForKind.UNROLLED):
            return None
        if not (isinstance(s.begin, Const) and isinstance(s.extent, Const)) or s.extent.value > MAX_UNROLL:
            return None
        return unrolled_copies(s)

    return map_stmt(stmt, fs)

"""Generic rewriting of statements: visit children, rebuild what changed.

A For keeps its kind and thread_tag through a rewrite (dataclass replace);
a Barrier or Fence has no children and no expressions."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

from .expr import Expr
from .stmt import Allocate, For, IfThenElse, IntrinCall, LetStmt, Seq, Stmt, Store, seq
from .traverse import walk


def map_stmt(stmt: Stmt, fstmt: Callable[[Stmt], Stmt | None] | None = None,
             fexpr: Callable[[Expr], Expr] | None = None) -> Stmt:
    """Post-order rewrite: children first, then `fstmt(node)` (None keeps it).
    `fexpr` rewrites every expression held by a statement."""
    fx = fexpr or (lambda e: e)

    def visit(s: Stmt) -> Stmt:
        if isinstance(s, For):
            new = replace(s, begin=fx(s.begin), extent=fx(s.extent), body=visit(s.body))
        elif isinstance(s, Seq):
            new = seq(*[visit(c) for c in s.stmts])
        elif isinstance(s, IfThenElse):
            new = replace(s, cond=fx(s.cond), then=visit(s.then),
                          orelse=visit(s.orelse) if s.orelse is not None else None)
        elif isinstance(s, Store):
            new = replace(s, indices=tuple(fx(i) for i in s.indices), value=fx(s.value))
        elif isinstance(s, Allocate):
            new = replace(s, body=visit(s.body))
        elif isinstance(s, LetStmt):
            new = replace(s, value=fx(s.value), body=visit(s.body))
        elif isinstance(s, IntrinCall):
            new = replace(s, operands=tuple(fx(o) for o in s.operands))
        else:  # Barrier, Fence: leaves
            new = s
        out = fstmt(new) if fstmt else None
        return new if out is None else out

    return visit(stmt)


def walk_stmt(stmt: Stmt) -> Iterator[Stmt]:
    stack = [stmt]
    while stack:
        s = stack.pop()
        yield s
        if isinstance(s, (For, Allocate, LetStmt)):
            stack.append(s.body)
        elif isinstance(s, Seq):
            stack.extend(reversed(s.stmts))
        elif isinstance(s, IfThenElse):
            if s.orelse is not None:
                stack.append(s.orelse)
            stack.append(s.then)


def stmt_exprs(s: Stmt) -> list[Expr]:
    """The expressions a statement holds directly (not those of nested statements)."""
    if isinstance(s, For):
        return [s.begin, s.extent]
    if isinstance(s, IfThenElse):
        return [s.cond]
    if isinstance(s, Store):
        return [*s.indices, s.value]
    if isinstance(s, LetStmt):
        return [s.value]
    if isinstance(s, IntrinCall):
        return list(s.operands)
    return []


def all_expr_nodes(stmt: Stmt) -> Iterator[Expr]:
    for s in walk_stmt(stmt):
        for e in stmt_exprs(s):
            yield from walk(e)

"""Where a loop's body reads and writes a buffer: each access with its index and
whether it is guarded, the index as an L-invariant base plus a constant offset,
and the short spatial loops to unroll so that every access has one. Shared by
accumulator promotion (accumulators.py) and tile splitting (tile_split.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.expr import AxisKind, Const, Expr, IterVar, Load, Ramp
from ..ir.stmt import Allocate, Buffer, For, ForKind, IfThenElse, LetStmt, Seq, Stmt, Store
from ..ir.stmt_functor import map_stmt, stmt_exprs, walk_stmt
from ..ir.traverse import free_vars, walk
from .registers import MAX_REGISTER_SLOTS
from .simplify import simplify, to_linear
from .unroll import unrolled_copies

UNROLLABLE = (ForKind.SERIAL, ForKind.UNROLLED)  # kinds of the spatial loops inside L that may be unrolled


@dataclass(frozen=True)
class Access:
    index: Expr  # as written: a scalar, or a Ramp of stride 1
    is_store: bool
    guarded: bool  # under a branch, or a loop that may not run, inside L


def loops_to_unroll(loop: For, buf: Buffer) -> set[int] | None:
    """ids of the variables of the loops inside `loop` that index `buf` (all short,
    serial, spatial, constant: to be unrolled), or None where one cannot be."""
    out: set[int] = set()
    ok = True

    def visit(s: Stmt, copies: int) -> None:
        nonlocal ok
        if isinstance(s, For):
            if any(v is s.var for a in accesses(s.body, buf) for v in free_vars(a.index)):
                if not (s.kind in UNROLLABLE and isinstance(s.var, IterVar) and s.var.kind is AxisKind.SPATIAL
                        and isinstance(s.begin, Const) and isinstance(s.extent, Const)):
                    ok = False
                    return
                copies *= int(s.extent.value)
                if copies > MAX_REGISTER_SLOTS:
                    ok = False
                    return
                out.add(id(s.var))
            visit(s.body, copies)
        elif isinstance(s, Seq):
            for c in s.stmts:
                visit(c, copies)
        elif isinstance(s, IfThenElse):
            visit(s.then, copies)
            if s.orelse is not None:
                visit(s.orelse, copies)
        elif isinstance(s, (Allocate, LetStmt)):
            visit(s.body, copies)

    visit(loop.body, 1)
    return out if ok else None


def unroll_vars(body: Stmt, var_ids: set[int]) -> Stmt:
    if not var_ids:
        return body
    return map_stmt(body, lambda s: unrolled_copies(s) if isinstance(s, For) and id(s.var) in var_ids else None)


def constant_offset(index: Expr):
    """(L-invariant base, constant offset, lanes) of an index, None if it reads memory or strides."""
    lanes = 1
    if isinstance(index, Ramp):
        if index.stride != 1:
            return None
        index, lanes = index.base, index.lanes
    if any(isinstance(n, Load) for n in walk(index)):
        return None  # data-dependent: the data may change inside L
    lin = to_linear(simplify(index))
    return frozenset((k, c) for k, (_, c) in lin.terms.items()), lin.const, lanes


def accesses(stmt: Stmt, buf: Buffer, guarded: bool = False) -> list[Access]:
    out: list[Access] = []
    for e in stmt_exprs(stmt):
        out += [Access(n.indices[0], False, guarded) for n in walk(e) if isinstance(n, Load) and n.tensor is buf]
    if isinstance(stmt, Store) and stmt.buffer is buf:
        out.append(Access(stmt.indices[0], True, guarded))
    elif isinstance(stmt, Seq):
        for c in stmt.stmts:
            out += accesses(c, buf, guarded)
    elif isinstance(stmt, IfThenElse):
        out += accesses(stmt.then, buf, True)
        if stmt.orelse is not None:
            out += accesses(stmt.orelse, buf, True)
    elif isinstance(stmt, For):
        runs = isinstance(stmt.extent, Const) and stmt.extent.value >= 1
        out += accesses(stmt.body, buf, guarded or not runs)
    elif isinstance(stmt, (Allocate, LetStmt)):
        out += accesses(stmt.body, buf, guarded)
    return out


def written_buffers(loop: For) -> list[Buffer]:
    """Buffers stored inside `loop` and not allocated there, in order of first store."""
    allocated = {id(s.buffer) for s in walk_stmt(loop.body) if isinstance(s, Allocate)}
    out: dict[int, Buffer] = {}
    for s in walk_stmt(loop.body):
        if isinstance(s, Store) and id(s.buffer) not in allocated:
            out.setdefault(id(s.buffer), s.buffer)
    return list(out.values())


def invariant_accesses(loop: For, body: Stmt, buf: Buffer) -> list[tuple[Access, tuple]] | None:
    """Each access to `buf` in `body` (the unrolled body of `loop`, or a part of it) with its (base,
    offset, lanes): None unless every index is a constant offset from a base that no loop or let
    inside `loop`, nor `loop` itself, changes."""
    inner = {id(loop.var)} | {id(s.var) for s in walk_stmt(body) if isinstance(s, (For, LetStmt))}
    out = []
    for a in accesses(body, buf):
        key = constant_offset(a.index)
        if key is None or any(id(v) in inner for v in free_vars(a.index)):
            return None
        out.append((a, key))
    return out


__all__ = ["UNROLLABLE", "Access", "accesses", "constant_offset", "invariant_accesses", "loops_to_unroll",
           "unroll_vars", "written_buffers"]

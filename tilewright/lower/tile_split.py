"""Splitting a register tile too large for the register file: where a reduce
loop's body is a sequence of statements that each write their own part of the
tile (the unrolled rows of a hand schedule's block), the loop is distributed
over groups of consecutive statements whose parts fit together, and strip-mined
so that each strip's operands stay in the L1 cache while every group runs
through it; each group's part is then promoted across its strip."""

from __future__ import annotations

from dataclasses import replace

from ..ir import arith
from ..ir.expr import AxisKind, Const, IterVar, Load
from ..ir.stmt import Allocate, Buffer, Fence, For, ForKind, IfThenElse, LetStmt, Seq, Stmt, seq
from ..ir.stmt_functor import stmt_exprs
from ..ir.traverse import walk
from .registers import RegisterFile
from .simplify import simplify
from .simplify_stmt import substitute_stmt
from .tile_access import invariant_accesses, loops_to_unroll, unroll_vars, written_buffers

# registers a tile leaves to the statements accumulating into it: a broadcast, loaded vectors, temporaries
RESERVED_REGISTERS = 4


def distributed(loop: For, regs: RegisterFile, promote_loop) -> tuple[Stmt, int, int] | None:
    """Where the whole tile of `loop` does not fit but the statements of its body each write their own
    part of it (the unrolled rows of a hand schedule's block), `loop` split into one loop per group of
    consecutive statements whose parts fit together, each group's part promoted across the whole
    reduction, fenced from the next; as `_promote_loop` returns. Legal because the groups touch disjoint
    elements of every buffer written in `loop` (checked) and only read the rest, so running all
    iterations of one group before the next computes the same values. None where that does not hold
    or nothing would be promoted."""
    stmts = loop.body.stmts if isinstance(loop.body, Seq) else ()
    if len(stmts) < 2:
        return None
    written = written_buffers(loop)
    if not written:
        return None
    needs, seen = [], {id(b): set() for b in written}
    for st in stmts:
        need = 0
        for buf in written:
            got = _footprint(loop, st, buf, regs)
            if got is None:
                return None
            elements, n = got
            if elements & seen[id(buf)]:
                return None  # two statements touch one element: their order matters
            seen[id(buf)] |= elements
            need += n
        needs.append(need)
    budget = regs.count - RESERVED_REGISTERS
    if max(needs) > budget or sum(needs) <= budget:
        return None  # a part alone does not fit (nothing gained), or the whole tile would have
    groups: list[list[Stmt]] = [[]]
    room = budget
    for st, need in zip(stmts, needs):
        if need > room and groups[-1]:
            groups.append([])
            room = budget
        groups[-1].append(st)
        room -= need
    strip = _strip(loop, stmts, written, regs)
    outer = inner = None
    if strip < int(loop.extent.value):
        v = loop.var
        outer = IterVar(f"{v.name}.strip", v.dtype, extent=int(loop.extent.value) // strip, kind=AxisKind.REDUCE)
        inner = IterVar(f"{v.name}.in", v.dtype, extent=strip, kind=AxisKind.REDUCE)
        value = simplify(loop.begin + outer * strip + inner)
        groups = [[substitute_stmt(st, v, value) for st in group] for group in groups]
    out, used = [], 0
    for n, group in enumerate(groups):
        part = replace(loop, body=seq(*group))
        if inner is not None:
            part = replace(part, var=inner, begin=arith.const(0, inner.dtype), extent=arith.const(strip, inner.dtype))
        promoted, _, got = promote_loop(part, [], regs)
        used = max(used, got)
        out += [Fence(), promoted] if n else [promoted]  # else the C compiler shares their loads, spilling all
    if not used:
        return None
    body = seq(*out)
    if outer is not None:  # each strip's operands stay in L1 while every group runs through it
        body = For(outer, arith.const(0, outer.dtype), arith.const(outer.extent, outer.dtype), ForKind.SERIAL, body)
    return body, 0, used


def _strip(loop: For, stmts, written: list[Buffer], regs: RegisterFile) -> int:
    """Iterations of `loop` per strip: the most (a divisor of its extent) whose reads of the buffers it does
    not write, by the statement that reads most, fill at most one way of the L1 cache. One way, not the
    whole cache: a hand schedule's operand rows often lie a power of two apart and share cache sets
    (the tutorial GEMM's rows of B, 2 KB apart: a strip of 16 of them ran 0.37x NumPy, of 8 0.46x)."""
    extent = int(loop.extent.value)
    mine = {id(b) for b in written}
    per_iteration = max(_bytes_read(st, mine) for st in stmts)
    fits = max(1, (regs.l1_bytes // max(regs.l1_ways, 1)) // max(per_iteration, 1))
    return max(d for d in range(1, extent + 1) if extent % d == 0 and d <= fits)


def _bytes_read(stmt: Stmt, skip: set[int], repeat: int = 1) -> int:
    """Bytes `stmt` loads from buffers other than `skip` (ids), loads in loops counted once per iteration."""
    if isinstance(stmt, For):
        n = int(stmt.extent.value) if isinstance(stmt.extent, Const) else 1
        return _bytes_read(stmt.body, skip, repeat * n)
    total = sum(n.dtype.bytes * n.dtype.lanes for e in stmt_exprs(stmt) for n in walk(e)
                if isinstance(n, Load) and id(n.tensor) not in skip) * repeat
    if isinstance(stmt, Seq):
        return total + sum(_bytes_read(c, skip, repeat) for c in stmt.stmts)
    if isinstance(stmt, (Allocate, LetStmt)):
        return total + _bytes_read(stmt.body, skip, repeat)
    if isinstance(stmt, IfThenElse):
        return total + _bytes_read(stmt.then, skip, repeat) + (
            _bytes_read(stmt.orelse, skip, repeat) if stmt.orelse is not None else 0)
    return total


def _footprint(loop: For, stmt: Stmt, buf: Buffer, regs: RegisterFile) -> tuple[set, int] | None:
    """The elements of `buf` that `stmt` (in `loop`'s body) reads or writes, as (L-invariant base,
    element offset) pairs, and the registers the ones it writes would take; None where an access is
    not at a constant offset from a base that does not change in `loop`."""
    alone = replace(loop, body=stmt)
    unroll = loops_to_unroll(alone, buf)
    if unroll is None:
        return None
    found = invariant_accesses(loop, unroll_vars(stmt, unroll), buf)
    if found is None:
        return None
    elements, slots = set(), set()
    for a, (base, off, lanes) in found:
        elements |= {(base, off + k) for k in range(lanes)}
        if a.is_store:
            slots.add((base, off, lanes))
    return elements, sum(-(-lanes // regs.lanes(buf.dtype)) for _, _, lanes in slots)


__all__ = ["RESERVED_REGISTERS", "distributed"]

"""Accumulator promotion: a reduction that a schedule leaves accumulating in a
global buffer (no cache_write) across a reduce loop gets its tile in a local
buffer, which register promotion (registers.py) then turns into variables.

After this pass, for every reduce loop L (serial, constant extent, no
parallel or GPU-thread loop and no barrier inside) and every global buffer X
stored inside L and not allocated there, where every access to X inside L is
unconditional and, once the short serial spatial loops inside L whose
variables index X are unrolled, is at the same L-invariant base plus a
constant offset (vectors of one width, not overlapping, every element read
also written): those loops are unrolled, the accesses read and write a local
buffer `X.acc` holding the tile, which is loaded from X before L (or set to
the constants that init stores right before L gave X, which are then
dropped) and stored to X after L. A tile is promoted only where it fits in
the target's registers, RESERVED_REGISTERS left for operands (and
registers.py accepts it); the outermost such loop wins. Elsewhere nothing
changes. The spatial loops are unrolled here, not required to be unrolled by
the schedule, because the tutorial-style schedule vectorizes the inner
columns and unrolls rows but leaves the short loop of vectors between them.

Legal because nothing else touches X while L runs: kernel arguments are
distinct, non-overlapping arrays (restrict; the runtime computes an output
that overlaps an input through a copy), intermediate buffers are distinct
allocations, and no other thread runs inside L. Every slot is written in L,
so storing the tile back writes only what L wrote, and every slot is
accessed unconditionally in L, so loading it before L reads only what L
would have read (in bounds: a guarded tail of a non-divisible split keeps
its accesses in memory)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..ir import arith
from ..ir.expr import AxisKind, Broadcast, Const, Expr, IterVar, Load, Ramp
from ..ir.stmt import Allocate, Barrier, Buffer, Fence, For, ForKind, IfThenElse, LetStmt, Scope, Seq, Stmt, Store, seq
from ..ir.stmt_functor import map_stmt, walk_stmt
from ..ir.traverse import transform
from .registers import MAX_REGISTER_SLOTS, RegisterFile, register_lanes
from .tile_access import UNROLLABLE, constant_offset, invariant_accesses, loops_to_unroll, unroll_vars, written_buffers
from .tile_split import RESERVED_REGISTERS, distributed

_SEQUENTIAL = (ForKind.SERIAL, ForKind.UNROLLED, ForKind.ROLLED)  # kinds a reduce loop L may have



def promote_accumulators(stmt: Stmt, regs: RegisterFile) -> Stmt:
    if isinstance(stmt, Seq):
        out: list[Stmt] = []
        last = 0  # registers of the tile promoted by the statement just before, 0 if none
        for child in stmt.stmts:
            if _is_reduce_loop(child):
                new, consumed, used = _promote_loop(child, out, regs)
                del out[len(out) - consumed:]
                if used and last and consumed == 0 and used + last > regs.count - RESERVED_REGISTERS:
                    # sibling tiles (rows of an unrolled loop) that do not fit together: unfenced, the C
                    # compiler shares their operand loads, keeps them all live and spills every tile
                    out.append(Fence())
                out.append(new)
                last = used
            else:
                out.append(promote_accumulators(child, regs))
                last = 0
        return seq(*out)
    if _is_reduce_loop(stmt):
        return _promote_loop(stmt, [], regs)[0]
    if isinstance(stmt, (For, Allocate, LetStmt)):
        return replace(stmt, body=promote_accumulators(stmt.body, regs))
    if isinstance(stmt, IfThenElse):
        orelse = promote_accumulators(stmt.orelse, regs) if stmt.orelse is not None else None
        return replace(stmt, then=promote_accumulators(stmt.then, regs), orelse=orelse)
    return stmt


def _is_reduce_loop(s: Stmt) -> bool:
    return (isinstance(s, For) and s.kind in _SEQUENTIAL and isinstance(s.var, IterVar)
            and s.var.kind is AxisKind.REDUCE and isinstance(s.extent, Const) and s.extent.value >= 1)


def _promote_loop(loop: For, before: list[Stmt], regs: RegisterFile) -> tuple[Stmt, int, int]:
    """`loop` with the buffers it accumulates promoted (inner reduce loops tried for
    the rest), how many statements at the end of `before` it absorbed (folded inits),
    and how many registers its promoted tiles take (0: none promoted at this level)."""
    layers, consumed, used = [], 0, 0
    if _runs_alone(loop):
        for buf in _stored_globals(loop):
            got = _promote(loop, buf, before[:len(before) - consumed], regs)
            if got is not None:
                loop, layer, n, need = got
                layers.append(layer)
                consumed += n
                used += need
        if not layers:
            split = distributed(loop, regs, _promote_loop)
            if split is not None:
                return split
    out: Stmt = replace(loop, body=promote_accumulators(loop.body, regs))
    for local, inits, backs in reversed(layers):
        out = Allocate(local, seq(*inits, out, *backs))
    return out, consumed, used


def _runs_alone(loop: For) -> bool:
    """No other thread runs inside `loop`, and no barrier waits there."""
    return not any(isinstance(s, Barrier) or (isinstance(s, For) and s.kind in (ForKind.PARALLEL,
                   ForKind.THREAD_BINDING)) for s in walk_stmt(loop.body))


def _stored_globals(loop: For) -> list[Buffer]:
    return [b for b in written_buffers(loop) if b.scope is Scope.GLOBAL]


# ---- one buffer in one loop ---------------------------------------------------------------------------

@dataclass(frozen=True)
class _Tile:
    base: frozenset  # the L-invariant part of every index: (structural key, coefficient) pairs
    lanes: int
    slots: dict  # constant offset -> index expression of X there (valid outside L)


def _promote(loop: For, buf: Buffer, before: list[Stmt], regs: RegisterFile):
    """(L rewritten, (local buffer, stores before L, stores after L), init statements absorbed,
    registers the tile takes), or None."""
    unroll = loops_to_unroll(loop, buf)
    if unroll is None:
        return None
    body = unroll_vars(loop.body, unroll)
    tile = _tile(loop, body, buf)
    if tile is None:
        return None
    need = len(tile.slots) * -(-tile.lanes // regs.lanes(buf.dtype))  # a slot wider than a register takes several
    if need > regs.count - RESERVED_REGISTERS:
        return None
    local = Buffer(f"{buf.name}.acc", (len(tile.slots) * tile.lanes,), buf.dtype, Scope.LOCAL)
    position = {off: n * tile.lanes for n, off in enumerate(sorted(tile.slots))}
    dtype = buf.dtype.with_lanes(tile.lanes)

    def local_index(index: Expr) -> Expr:
        at = position[constant_offset(index)[1]]
        scalar = index.base.dtype if isinstance(index, Ramp) else index.dtype
        return Ramp(arith.const(at, scalar), 1, tile.lanes, index.dtype) if tile.lanes > 1 else arith.const(at, scalar)

    def load(e: Expr):
        return Load(local, (local_index(e.indices[0]),), e.dtype) if isinstance(e, Load) and e.tensor is buf else None

    def store(s: Stmt):
        return Store(local, (local_index(s.indices[0]),), s.value) if isinstance(s, Store) and s.buffer is buf else None

    body = map_stmt(body, store, lambda e: transform(e, load))
    folded, consumed = _folded_init(before, buf, tile)
    inits, backs = [], []
    for off, index in sorted(tile.slots.items()):
        mine = local_index(index)
        inits.append(Store(local, (mine,), folded[off] if folded else Load(buf, (index,), dtype)))
        backs.append(Store(buf, (index,), Load(local, (mine,), dtype)))
    new_loop = replace(loop, body=body)
    if not register_lanes(Allocate(local, seq(*inits, new_loop, *backs))):
        return None  # it would stay in memory: no better than X itself
    return new_loop, (local, inits, backs), consumed, need


def _tile(loop: For, body: Stmt, buf: Buffer) -> _Tile | None:
    """The tile `buf` is accessed at in `body` (the loop's unrolled body), if it is one."""
    found = invariant_accesses(loop, body, buf)
    if not found or not any(a.is_store for a, _ in found) or any(a.guarded for a, _ in found):
        return None
    slots: dict[int, Expr] = {}
    read: set[int] = set()
    shape = None
    for a, (base, off, lanes) in found:
        if shape is None:
            shape = (base, lanes)
        elif shape != (base, lanes):
            return None
        if a.is_store:
            slots.setdefault(off, a.index)
        else:
            read.add(off)
    starts = sorted(slots)
    if not read <= set(starts) or any(b - a < shape[1] for a, b in zip(starts, starts[1:])):
        return None
    return _Tile(shape[0], shape[1], slots)


# ---- folding the init stores right before L ---------------------------------------------------------

def _folded_init(before: list[Stmt], buf: Buffer, tile: _Tile) -> tuple[dict | None, int]:
    """The constant each slot gets from init stores to exactly the tile, made by the
    statements at the end of `before`, and how many those are; (None, 0) if none do."""
    values: dict[int, Expr] = {}
    for n in range(1, len(before) + 1):
        stores = _constant_stores(before[-n], buf)
        if stores is None:
            return None, 0
        for s in stores:
            key = constant_offset(s.indices[0])
            if key is None or key[0] != tile.base or key[2] != tile.lanes or key[1] not in tile.slots \
                    or key[1] in values:
                return None, 0
            values[key[1]] = s.value
        if len(values) == len(tile.slots):
            return values, n
    return None, 0


def _constant_stores(stmt: Stmt, buf: Buffer) -> list[Store] | None:
    """The stores of `stmt` once its loops are unrolled, if it is a nest of short
    serial spatial loops around stores of constants to `buf` and nothing else."""
    copies = 1
    for s in walk_stmt(stmt):
        if isinstance(s, For):
            if not (s.kind in UNROLLABLE and isinstance(s.var, IterVar) and s.var.kind is AxisKind.SPATIAL
                    and isinstance(s.begin, Const) and isinstance(s.extent, Const)):
                return None
            copies *= int(s.extent.value)
        elif isinstance(s, Store):
            value = s.value.value if isinstance(s.value, Broadcast) else s.value
            if s.buffer is not buf or not isinstance(value, Const):
                return None
        elif not isinstance(s, Seq):
            return None
    if copies > MAX_REGISTER_SLOTS:
        return None
    flat = unroll_vars(stmt, {id(s.var) for s in walk_stmt(stmt) if isinstance(s, For)})
    return [s for s in walk_stmt(flat) if isinstance(s, Store)]


__all__ = ["RESERVED_REGISTERS", "promote_accumulators"]

"""Register promotion, for every target: a local buffer that is read and
written only at constant offsets (after unrolling) is marked to live in
registers, one variable per slot (Allocate.register_lanes), instead of in
memory that the backend compiler may or may not promote. After this pass,
every Allocate whose register_lanes is L > 0 is accessed only at constant
offsets: vector accesses of L lanes at multiples of L, scalar ones anywhere."""

from __future__ import annotations

from dataclasses import replace

from ..ir.expr import Const, Load, Ramp
from ..ir.stmt import Allocate, Scope, Stmt, Store
from ..ir.stmt_functor import map_stmt, stmt_exprs, walk_stmt
from ..ir.traverse import walk


def promote_registers(body: Stmt) -> Stmt:
    def mark(s):
        if isinstance(s, Allocate):
            lanes = register_lanes(s)
            if lanes:
                return replace(s, register_lanes=lanes)
        return None

    return map_stmt(body, mark)


MAX_REGISTER_SLOTS = 32


def register_lanes(alloc: Allocate) -> int | None:
    """Lanes L if every access to the local buffer is at a constant offset,
    vector accesses all with L lanes at multiples of L (scalar ones pick a lane
    of a slot), and there are few enough slots."""
    b = alloc.buffer
    if b.scope is not Scope.LOCAL or b.dtype.name in ("bfloat16", "bool"):
        return None
    vector_lanes: set[int] = set()
    vector_offsets: list[int] = []
    for st in walk_stmt(alloc.body):
        accesses = [st.indices[0]] if isinstance(st, Store) and st.buffer is b else []
        for e in stmt_exprs(st):
            accesses += [n.indices[0] for n in walk(e) if isinstance(n, Load) and n.tensor is b]
        for index in accesses:
            if isinstance(index, Const):
                continue
            if isinstance(index, Ramp) and index.stride == 1 and isinstance(index.base, Const):
                vector_lanes.add(index.lanes)
                vector_offsets.append(int(index.base.value))
            else:
                return None
    if len(vector_lanes) > 1:
        return None
    lanes = vector_lanes.pop() if vector_lanes else 1
    if any(o % lanes for o in vector_offsets) or b.size % lanes or b.size // lanes > MAX_REGISTER_SLOTS:
        return None
    if lanes > 1 and b.dtype.name not in ("float32", "float64", "int8", "int16", "int32", "int64", "uint8"):
        return None
    return lanes



__all__ = ["MAX_REGISTER_SLOTS", "promote_registers", "register_lanes"]

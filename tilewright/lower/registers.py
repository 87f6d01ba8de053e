"""Register promotion, for every target: a local buffer that is read and
written only at constant offsets (after unrolling) is marked to live in
registers, one variable per slot (Allocate.register_lanes), instead of in
memory that the backend compiler may or may not promote.

A slot is at most one machine vector (`vector_bytes`): a statement on such a
buffer that is wider (a schedule vectorized by 16 floats on AVX2) is first
split into one statement per machine vector, because GCC keeps a vector
variable wider than its registers in memory and moves it through general
registers on every use (measured: the TVM tutorial GEMM's 16-lane
accumulators ran slower as variables than in the output array).

After this pass, every Allocate whose register_lanes is L > 0 is accessed
only at constant offsets: vector accesses of L lanes at multiples of L,
scalar ones anywhere; and L elements fit in `vector_bytes` where a split
could make them."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..ir import arith
from ..ir.expr import BinOp, Broadcast, Const, Expr, Load, Ramp
from ..ir.stmt import Allocate, IntrinCall, Scope, Stmt, Store, seq
from ..ir.stmt_functor import map_stmt, stmt_exprs, walk_stmt
from ..ir.traverse import children, structural_key, walk, walk_unique, with_children
from .simplify import simplify


@dataclass(frozen=True)
class RegisterFile:
    """What a register tile must fit in: `count` vector registers of `vector_bytes` (0: scalars only);
    and the L1 data cache (`l1_bytes`, `l1_ways`) a split tile's operands are kept in (tile_split.py)."""

    vector_bytes: int
    count: int
    l1_bytes: int = 32 * 1024
    l1_ways: int = 8
    pin_constraint: str = ""  # asm register class of a vector register, where operands may be pinned


    def lanes(self, dtype) -> int:
        """Elements of `dtype` one register holds."""
        return max(1, self.vector_bytes // dtype.scalar.bytes)

    @classmethod
    def of(cls, target) -> RegisterFile:
        """A CPU target's own register file (an AVX2 target on an AVX-512 host: 16 of 32 bytes); for GPU
        kernels float4, the widest vector their renderers emit, and 16 slots, so GPU code does not
        depend on the host."""
        if target.is_gpu:
            return cls(16, 16)
        pin = "x" if target.arch == "x86_64" and target.vector_bytes >= 16 else ""
        return cls(target.vector_bytes, target.vector_registers, target.cache_bytes(1) or 32 * 1024, target.l1_ways,
                   pin)


def host_register_file() -> RegisterFile:
    from ..targets import host_target

    return RegisterFile.of(host_target())


def promote_registers(body: Stmt, vector_bytes: int = 0) -> Stmt:
    if vector_bytes:
        body = _split_wide_statements(body, RegisterFile(vector_bytes, 0))

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
        if isinstance(st, IntrinCall):  # its output tile may be one slot; anything else needs an address
            *ins, out = st.operands
            if any(op.tensor is b for op in ins):
                return None
            if out.tensor is b:
                width = _contiguous_tile(st)
                if width is None or not isinstance(out.indices[0], Const):
                    return None
                vector_lanes.add(width)
                vector_offsets.append(int(out.indices[0].value))
            continue
        accesses = [st.indices[0]] if isinstance(st, Store) and st.buffer is b else []
        for e in stmt_exprs(st):
            accesses += [n.indices[0] for n in walk_unique(e) if isinstance(n, Load) and n.tensor is b]
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


def _contiguous_tile(call: IntrinCall) -> int | None:
    """Elements of the intrinsic's output if they are contiguous (one vector slot), else None."""
    shape = call.intrin.output.shape
    n, expect = 1, 1
    for extent, stride in reversed(list(zip(shape, call.strides[-1]))):
        if extent > 1 and stride != expect:
            return None
        expect *= extent
        n *= extent
    return n


# ---- statements wider than a register -------------------------------------------------------------------

def _split_wide_statements(body: Stmt, regs: RegisterFile) -> Stmt:
    """Each vector store wider than a machine vector that touches a buffer bound for
    registers (with vector slots) -> one store per machine vector, in lane order."""
    wide = {id(s.buffer) for s in walk_stmt(body) if isinstance(s, Allocate) and (register_lanes(s) or 1) > 1}
    if not wide:
        return body

    def split(s: Stmt):
        if not isinstance(s, Store) or s.value.dtype.lanes == 1:
            return None
        lanes = s.value.dtype.lanes
        slots = [b for b in _buffers(s) if id(b) in wide]
        if not slots:
            return None
        width = min(regs.lanes(b.dtype) for b in slots)  # pieces as wide as one register of the tile
        if width >= lanes or lanes % width or not _pieces_independent(s):
            return None
        return seq(*[Store(s.buffer, tuple(_piece(i, n, width) for i in s.indices), _piece(s.value, n, width))
                     for n in range(lanes // width)])

    return map_stmt(body, split)


def _buffers(s: Store) -> list:
    return [s.buffer] + [n.tensor for e in (*s.indices, s.value) for n in walk(e) if isinstance(n, Load)]


def _pieces_independent(s: Store) -> bool:
    """Storing one piece cannot change what a later piece reads: the value reads the
    stored buffer, if at all, only at the stored index (the elements of its own piece)."""
    key = structural_key(s.indices[0])
    return all(structural_key(n.indices[0]) == key for n in walk(s.value)
               if isinstance(n, Load) and n.tensor is s.buffer)


def _piece(e: Expr, n: int, width: int) -> Expr:
    """Lanes [n * width, (n + 1) * width) of the elementwise vector expression `e`."""
    if e.dtype.lanes == 1:
        return e
    if isinstance(e, Ramp):
        base = e.base if n == 0 else simplify(arith.binary(BinOp.ADD, e.base, n * width * e.stride))
        return Ramp(base, e.stride, width, e.dtype.with_lanes(width))
    if isinstance(e, Broadcast):
        return Broadcast(e.value, width, e.dtype.with_lanes(width))
    new = with_children(e, tuple(_piece(c, n, width) for c in children(e)))
    return replace(new, dtype=e.dtype.with_lanes(width))


__all__ = ["MAX_REGISTER_SLOTS", "RegisterFile", "host_register_file", "promote_registers", "register_lanes"]

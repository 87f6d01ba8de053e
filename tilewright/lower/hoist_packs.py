"""Packs of constant inputs, moved out of the kernel: run once, reused by every call.

A schedule that packs a weight (`cache_read` at the root, per outer block or per
tile) copies it on every call, although the weight never changes in a deployed
model. Here, after lowering, each allocated buffer whose first statement fills
it from constant arguments only (a pack) becomes a new kernel argument holding
every copy the kernel would make: one slot per value of the enclosing loops the
pack depends on. The kernel reads its slot in place of the allocation; a second
function, the pack function, fills all slots once (the model does so when it is
built). Loops the pack does not depend on (a pack repeated per row block) need
no slot of their own, so the repetition goes too.

Only what is safe moves: the pack nest writes nothing else, reads only constant
arguments, is not under a condition, and depends only on loops of constant
bounds; the rest of the allocation's body never writes the buffer; the slots
take at most four times the constants they copy."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..ir import arith
from ..ir.expr import BinOp, Broadcast, Const, Expr, Load, Ramp, Var
from ..ir.stmt import Allocate, Buffer, For, ForKind, IfThenElse, LetStmt, Scope, Seq, Stmt, Store, seq
from ..ir.stmt_functor import all_expr_nodes, map_stmt, stmt_exprs, walk_stmt
from ..ir.traverse import free_vars, transform

SLOT_ALIGN = 16  # elements: every slot starts 64-byte aligned for 4-byte types
MAX_BLOWUP = 4  # slots may hold at most this many times the constant elements they copy


@dataclass(frozen=True)
class HoistedPack:
    """A packed buffer now passed in: `buffer` holds `slots` copies of `slot` elements each."""
    buffer: Buffer
    original: str  # the allocation it replaces
    slots: int
    slot: int
    sources: tuple[str, ...]  # the constant arguments it is filled from


@dataclass(frozen=True)
class Hoisted:
    """The kernel without its constant packs, and the function that fills them.
    Both take `kernel.args` (the pack function's `args` are positions into them)."""
    kernel: object  # LoweredFunc: the original arguments, then one per pack
    pack: object  # LoweredFunc taking the original arguments it reads, then the packs
    pack_args: tuple[int, ...]  # for each argument of `pack`, its position in `kernel.args`
    packs: tuple[HoistedPack, ...]


def hoist_constant_packs(func, constants: set[str]) -> Hoisted | None:
    """Move the packs of the arguments named in `constants` out of `func` (a lowered
    CPU function); None where there is nothing to move."""
    const_bufs = {id(b): b for b in func.args if b.name in constants}
    if not const_bufs:
        return None
    found: list[tuple[Allocate, tuple, Stmt]] = []  # (allocation, its enclosing frames, the pack nest)
    func = replace(func, body=_from_first_use(func.body))
    _collect(func.body, (), found)
    packs, fills, replaced = [], [], {}
    taken = {b.name for b in func.args}
    seen: dict[int, int] = {}
    for alloc, _, _ in found:
        seen[id(alloc.buffer)] = seen.get(id(alloc.buffer), 0) + 1
    for alloc, frames, nest in found:
        if seen[id(alloc.buffer)] > 1:  # one allocation copied into several nests (a partitioned loop)
            continue
        plan = _slots(alloc, frames, nest, const_bufs)
        if plan is None:
            continue
        loops, frames_needed = plan
        buf = alloc.buffer
        slot = -(-buf.size // SLOT_ALIGN) * SLOT_ALIGN
        slots = 1
        for f in loops:
            slots *= f.extent.value
        sources = tuple(sorted({n.tensor.name for n in all_expr_nodes(nest) if isinstance(n, Load)}))
        copied = sum(b.size for b in const_bufs.values() if b.name in sources)
        if slots * slot > MAX_BLOWUP * max(copied, 1):
            continue
        name = _fresh(f"{buf.name}_packed", taken)
        packed = Buffer(name, (slots * slot,), buf.dtype, Scope.GLOBAL)
        offset = _slot_offset(loops, slot)
        packs.append(HoistedPack(packed, buf.name, slots, slot, sources))
        fills.append(_fill_nest(loops, frames_needed, _retarget(nest, buf, packed, offset)))
        replaced[id(buf)] = (packed, offset)
    if not packs:
        return None

    def drop(s: Stmt):  # the allocation and its pack nest go; the rest reads the slot
        if isinstance(s, Allocate) and id(s.buffer) in replaced:
            rest = s.body.stmts[1:] if isinstance(s.body, Seq) else ()
            return _retarget(seq(*rest) if rest else Seq(()), s.buffer, *replaced[id(s.buffer)])
        return None

    kernel = replace(func, args=func.args + tuple(p.buffer for p in packs), body=map_stmt(func.body, drop),
                     arg_shapes=func.caller_shapes + tuple(p.buffer.shape for p in packs))
    read = {n.tensor.name for f in fills for n in all_expr_nodes(f) if isinstance(n, Load)}
    pack_args = tuple(i for i, b in enumerate(func.args) if b.name in read) + \
        tuple(len(func.args) + i for i in range(len(packs)))
    pack = replace(func, name=f"{func.name}_pack", args=tuple(kernel.args[i] for i in pack_args),
                   body=seq(*fills), arg_shapes=tuple(kernel.caller_shapes[i] for i in pack_args))
    return Hoisted(kernel, pack, pack_args, tuple(packs))


def _from_first_use(body: Stmt) -> Stmt:
    """The kernel's top-level allocations (lowering wraps them all around its whole body) each
    moved down to the first top-level statement that uses its buffer, so that a pack stage at the
    root is its allocation's first statement."""
    allocs = []
    while isinstance(body, Allocate) and body.buffer.scope is Scope.GLOBAL and not body.register_lanes:
        allocs.append(body.buffer)
        body = body.body
    if not allocs:
        return body
    stmts = list(body.stmts) if isinstance(body, Seq) else [body]
    used = [{id(n.tensor) for n in all_expr_nodes(x) if isinstance(n, Load)}
            | {id(y.buffer) for y in walk_stmt(x) if isinstance(y, Store)} for x in stmts]
    first = {id(b): next((k for k, u in enumerate(used) if id(b) in u), 0) for b in allocs}
    out: Stmt | None = None
    for k in range(len(stmts) - 1, -1, -1):
        out = stmts[k] if out is None else seq(stmts[k], out)
        for b in allocs:
            if first[id(b)] == k:
                out = Allocate(b, out)
    return out


def _collect(s: Stmt, frames: tuple, found: list) -> None:
    """Allocations whose first statement is a candidate pack, with their enclosing frames
    (For and LetStmt; an IfThenElse frame is recorded too, which disqualifies)."""
    if isinstance(s, Allocate):
        body = s.body.stmts if isinstance(s.body, Seq) else (s.body,)
        if not s.register_lanes and s.buffer.scope is Scope.GLOBAL and body:
            found.append((s, frames, body[0]))
        _collect(s.body, frames, found)
    elif isinstance(s, (For, LetStmt)):
        _collect(s.body, frames + (s,), found)
    elif isinstance(s, Seq):
        for c in s.stmts:
            _collect(c, frames, found)
    elif isinstance(s, IfThenElse):
        _collect(s.then, frames + (s,), found)
        if s.orelse is not None:
            _collect(s.orelse, frames + (s,), found)


def _slots(alloc: Allocate, frames: tuple, nest: Stmt, const_bufs: dict):
    """(the loops the pack depends on, the lets it needs, their vars) if the nest is a
    pack of constants that can move, else None."""
    buf = alloc.buffer
    for s in walk_stmt(nest):
        if isinstance(s, Allocate) or (isinstance(s, Store) and s.buffer is not buf):
            return None
    loads = [n for n in all_expr_nodes(nest) if isinstance(n, Load)]
    if not loads or any(id(n.tensor) not in const_bufs for n in loads):
        return None
    rest = alloc.body.stmts[1:] if isinstance(alloc.body, Seq) else ()
    if any(isinstance(s, Store) and s.buffer is buf for r in rest for s in walk_stmt(r)):
        return None
    bound_inside = {id(s.var) for s in walk_stmt(nest) if isinstance(s, (For, LetStmt))}
    needed = {id(v) for v in _stmt_free_vars(nest) if id(v) not in bound_inside}
    keep = []
    for f in reversed(frames):
        if isinstance(f, IfThenElse):
            return None
        if id(f.var) not in needed:
            continue
        if isinstance(f, For):
            if not (isinstance(f.begin, Const) and isinstance(f.extent, Const)):
                return None
        else:
            needed |= {id(v) for v in free_vars(f.value)}
        keep.append(f)
    if needed - {id(f.var) for f in keep}:
        return None
    keep.reverse()
    loops = [f for f in keep if isinstance(f, For)]
    if loops and any(isinstance(s, For) and s.kind is ForKind.PARALLEL for s in walk_stmt(nest)):
        return None  # a nest that is parallel itself runs once, at the root
    return loops, keep


def _stmt_free_vars(s: Stmt) -> list[Var]:
    return list({id(v): v for x in walk_stmt(s) for e in stmt_exprs(x) for v in free_vars(e)}.values())


def _slot_offset(loops: list[For], slot: int) -> Expr:
    """Element offset of the current slot: the loops' positions, row-major, times the slot size."""
    index: Expr | None = None
    for f in loops:
        at = f.var if f.begin.value == 0 else arith.binary(BinOp.SUB, f.var, f.begin)
        index = at if index is None else arith.binary(BinOp.ADD, arith.binary(BinOp.MUL, index, f.extent), at)
    return arith.const(0) if index is None else arith.binary(BinOp.MUL, index, arith.const(slot))


def _shifted(index: Expr, offset: Expr) -> Expr:
    if isinstance(index, Ramp):
        return replace(index, base=arith.binary(BinOp.ADD, index.base, offset))
    if isinstance(index, Broadcast):
        return replace(index, value=arith.binary(BinOp.ADD, index.value, offset))
    return arith.binary(BinOp.ADD, index, offset)


def _retarget(s: Stmt, old: Buffer, new: Buffer, offset: Expr) -> Stmt:
    """Accesses of `old` become accesses of `new` at `offset` (flat indices)."""

    def fexpr(e: Expr) -> Expr:
        return transform(e, lambda n: replace(n, tensor=new, indices=(_shifted(n.indices[0], offset),))
                         if isinstance(n, Load) and n.tensor is old else None)

    def fstmt(st: Stmt):
        if isinstance(st, Store) and st.buffer is old:
            return replace(st, buffer=new, indices=(_shifted(st.indices[0], offset),))
        return None

    return map_stmt(s, fstmt, fexpr)


def _fill_nest(loops: list[For], frames: list, nest: Stmt) -> Stmt:
    """The pack nest under the frames it depends on; the outermost loop runs in parallel."""
    body = nest
    for f in reversed(frames):
        if isinstance(f, For):
            kind = ForKind.PARALLEL if f is loops[0] else ForKind.SERIAL  # one slot per iteration: no races
            body = For(f.var, f.begin, f.extent, kind, body)
        else:
            body = LetStmt(f.var, f.value, body)
    return body


def _fresh(name: str, taken: set) -> str:
    out, n = name, 1
    while out in taken:
        n += 1
        out = f"{name}{n}"
    taken.add(out)
    return out


__all__ = ["Hoisted", "HoistedPack", "hoist_constant_packs"]

"""Operand vectors a register tile reuses, loaded once into registers.

In a register tile's body (an innermost loop's statements, one per accumulator
vector) an operand vector is read by every row of the tile: a conv's packed
weights by each of its pixels. GCC keeps such a load as the memory operand of
every FMA that uses it when registers look scarce, so each FMA issues a load
too: a 3-vector x 4-pixel tile then needs 16 loads per 12 FMAs and is bound by
the load ports (measured on Zen 3, one core, an L1-resident 3 x 4 kernel: 50
GFLOP/s with memory operands, 69 with the 3 weights in registers; 2 x 4: 45 ->
50). In loops the compiler keeps rolled, this pass binds each such vector, read at least twice in the body, to a
variable before the body, and marks it pinned: the C renderer follows its load
with an empty asm that claims to modify the register, which GCC cannot fold
into a memory operand. Only as many are pinned as fit beside the body's
accumulators and one register for a broadcast; the rest stay as they are. Only
contiguous loads are pinned: they are what GCC folds into memory operands (a
strided read is assembled in a register anyway; pinned, MobileNet-v2's
depthwise layers ran 5% slower).

Legal because a pinned vector's buffer is not written in the body (the loads
it replaces all happen after the same stores as before)."""

from __future__ import annotations

from dataclasses import replace

from ..ir.expr import Const, Load, Ramp, Var
from ..ir.stmt import For, ForKind, LetStmt, Seq, Stmt, Store
from ..ir.stmt_functor import map_stmt, stmt_exprs, walk_stmt
from ..ir.traverse import structural_key, transform, walk
from .registers import RegisterFile

FREE_FOR_BROADCAST = 1  # a register left for the row operand (a broadcast input) beside the pins
MAX_PEELED_ITERATIONS = 16  # GCC's max-completely-peel-times


def pin_operands(body: Stmt, regs: RegisterFile) -> Stmt:
    if not regs.pin_constraint or not regs.count:
        return body
    counter = [0]

    def visit(s: Stmt):
        if isinstance(s, For) and _stays_a_loop(s) and not any(isinstance(n, For) for n in walk_stmt(s.body)):
            pinned = _pin_body(s.body, regs, counter)
            return replace(s, body=pinned) if pinned is not s.body else None
        return None

    return map_stmt(body, visit)


def _stays_a_loop(loop: For) -> bool:
    """Whether the C compiler keeps `loop` a loop: rolled by the schedule, or too long to peel.
    A loop it unrolls completely (GCC peels up to 16 iterations) runs its copies' pinned loads
    back to back, and they all stay live: measured on Zen 3, YOLO conv8's 2 x 4 tile with its
    3-tap loop unrolled ran 16% slower with its 2 weight vectors pinned per tap."""
    if loop.kind is ForKind.ROLLED:
        return True
    extent = loop.extent.value if isinstance(loop.extent, Const) else None
    return extent is None or extent > MAX_PEELED_ITERATIONS


def _pin_body(body: Stmt, regs: RegisterFile, counter: list) -> Stmt:
    stmts = body.stmts if isinstance(body, Seq) else (body,)
    if len(stmts) < 2 or not all(isinstance(s, Store) for s in stmts):
        return body
    written = {id(s.buffer) for s in stmts}
    targets = {(id(s.buffer), structural_key(s.indices[0])) for s in stmts if s.value.dtype.lanes > 1}
    if len(targets) < 2:
        return body
    uses: dict[int, list[Load]] = {}
    for s in stmts:
        for e in stmt_exprs(s):
            for n in walk(e):
                if (isinstance(n, Load) and n.dtype.lanes > 1 and id(n.tensor) not in written
                        and len(n.indices) == 1 and isinstance(n.indices[0], Ramp) and n.indices[0].stride == 1):
                    uses.setdefault(structural_key(n), []).append(n)
    room = regs.count - len(targets) - FREE_FOR_BROADCAST
    chosen = sorted((k for k, loads in uses.items() if len(loads) > 1), key=lambda k: -len(uses[k]))[:max(room, 0)]
    if not chosen:
        return body
    variables = {}
    for k in chosen:
        counter[0] += 1
        variables[k] = Var(f"operand{counter[0]}", uses[k][0].dtype)

    def swap(e):
        if isinstance(e, Load):
            v = variables.get(structural_key(e))
            return v
        return None

    new = Seq(tuple(replace(s, value=transform(s.value, swap)) for s in stmts))
    for k in reversed(chosen):
        new = LetStmt(variables[k], uses[k][0], new, pin=regs.pin_constraint)
    return new

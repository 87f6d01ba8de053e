"""Unrolling: after it, loops marked unrolled with a constant extent up to
MAX_UNROLL are replaced by one copy of their body per iteration (loop
variable bound to the constant); longer ones keep a compiler unroll pragma.
Loops bound to GPU threads are never unrolled (they are not UNROLLED)."""

from __future__ import annotations

from ..ir import arith
from ..ir.expr import Const
from ..ir.stmt import For, ForKind, Stmt, seq
from ..ir.stmt_functor import map_stmt
from ..ir.traverse import substitute

MAX_UNROLL = 64


def unrolled_copies(loop: For) -> Stmt:
    """One copy of the body of `loop` (constant begin and extent) per iteration."""
    begin = int(loop.begin.value)
    copies = []
    for k in range(int(loop.extent.value)):
        value = arith.const(begin + k, loop.var.dtype)
        copies.append(map_stmt(loop.body, None, lambda e, v=value: substitute(e, {loop.var: v})))
    return seq(*copies)


def unroll(stmt: Stmt) -> Stmt:
    def fs(s: Stmt):
        if not (isinstance(s, For) and s.kind is ForKind.UNROLLED):
            return None
        if not (isinstance(s.begin, Const) and isinstance(s.extent, Const)) or s.extent.value > MAX_UNROLL:
            return None
        return unrolled_copies(s)

    return map_stmt(stmt, fs)

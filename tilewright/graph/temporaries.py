"""How much memory a kernel allocates for itself while it runs: every buffer it
allocates, summed, and counted once per core when allocated inside a parallel
loop. An upper bound of what it holds at once; a model's peak adds the largest
one to its arena, as only one kernel runs at a time. In a model that is what
stays on the stack or per thread: larger temporaries made once per call lie in
the arena (lower/workspace.py)."""

from __future__ import annotations

from ..ir.stmt import Allocate, For, ForKind, IfThenElse, LetStmt, Seq


def temporary_bytes(func, cores: int) -> int:
    """Bytes the lowered function `func` allocates (registers excluded)."""

    def walk(s, copies: int) -> int:
        if isinstance(s, Allocate):
            own = 0 if s.register_lanes else s.buffer.size * s.buffer.dtype.bytes * copies
            return own + walk(s.body, copies)
        if isinstance(s, For):
            return walk(s.body, copies * cores if s.kind == ForKind.PARALLEL and copies == 1 else copies)
        if isinstance(s, LetStmt):
            return walk(s.body, copies)
        if isinstance(s, Seq):
            return sum(walk(x, copies) for x in s.stmts)
        if isinstance(s, IfThenElse):
            return walk(s.then, copies) + (walk(s.orelse, copies) if s.orelse is not None else 0)
        return 0

    return walk(func.body, 1)

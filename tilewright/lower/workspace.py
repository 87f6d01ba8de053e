"""A kernel's large temporaries passed in rather than allocated on every call.

A CPU kernel allocates what its schedule stages outside its outputs (a padded
copy of its input, a packed tile, partial sums) with `aligned_alloc` while it
runs. In a model that memory sits on top of the arena: YOLO-v1's peak was its
arena plus a Winograd input transform's 3.4 MB padded input. Passed in instead,
each such buffer becomes a value of the memory plan live for that one kernel,
placed in arena bytes no activation needs at that step (TVM plans its
workspaces the same way).

Only buffers allocated once per call move: an allocation under a parallel loop
is one copy per thread and stays. Small ones stay too: they live on the stack."""

from __future__ import annotations

from dataclasses import replace

from ..ir.stmt import Allocate, For, ForKind, IfThenElse, LetStmt, Seq, Stmt, seq


def lift_workspace(func, min_bytes: int):
    """`func` (a lowered function) with every allocation of more than `min_bytes`
    outside parallel loops turned into an argument, appended after `func.args`;
    and the lifted buffers, in that order."""
    lifted = []

    def walk(s: Stmt, parallel: bool) -> Stmt:
        if isinstance(s, Allocate):
            body = walk(s.body, parallel)
            b = s.buffer
            if not parallel and not s.register_lanes and b.size * b.dtype.bytes > min_bytes:
                if all(x is not b for x in lifted):  # an unrolled loop allocates the same buffer in each copy
                    lifted.append(b)
                return body
            return replace(s, body=body)
        if isinstance(s, For):
            return replace(s, body=walk(s.body, parallel or s.kind is ForKind.PARALLEL))
        if isinstance(s, Seq):
            return seq(*[walk(c, parallel) for c in s.stmts])
        if isinstance(s, IfThenElse):
            return replace(s, then=walk(s.then, parallel),
                           orelse=walk(s.orelse, parallel) if s.orelse is not None else None)
        if isinstance(s, LetStmt):
            return replace(s, body=walk(s.body, parallel))
        return s

    body = walk(func.body, False)
    if not lifted:
        return func, ()
    shapes = func.caller_shapes + tuple(tuple(b.shape) for b in lifted) if func.arg_shapes else ()
    return replace(func, args=tuple(func.args) + tuple(lifted), body=body, arg_shapes=shapes), tuple(lifted)


__all__ = ["lift_workspace"]

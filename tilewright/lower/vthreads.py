"""Virtual threads: after `lower_vthreads`, no loop is bound to "vthread"; each
such loop is an unrolled serial loop in place, inside the real thread (its
copies are interleaved in one instruction stream, TVM's latency hiding in its
simplest form). Buffers of stages computed inside it stay per thread and are
reused by each virtual thread in turn. Without vthread loops it returns its input."""

from __future__ import annotations

from dataclasses import replace

from ..ir.stmt import For, ForKind, Stmt
from ..ir.stmt_functor import map_stmt, walk_stmt


def _is_vthread(s: Stmt) -> bool:
    return isinstance(s, For) and s.kind is ForKind.THREAD_BINDING and s.thread_tag == "vthread"


def lower_vthreads(stmt: Stmt) -> Stmt:
    if not any(_is_vthread(s) for s in walk_stmt(stmt)):
        return stmt
    return map_stmt(stmt, lambda s: replace(s, kind=ForKind.UNROLLED, thread_tag=None) if _is_vthread(s) else None)

"""Virtual threads: after `lower_vthreads`, no loop is bound to "vthread"; each
such loop is an unrolled serial loop inside the real thread (its copies are
interleaved in one instruction stream, TVM's latency hiding in its simplest
form). Loops bound to blocks/threads directly inside a chain of vthread loops
move outside it (all of them are parallel loops, so they commute), so a
kernel's thread loops are not copied. Buffers of stages computed inside a
vthread loop stay per thread and are reused by each virtual thread in turn.
Without vthread loops it returns its input."""

from __future__ import annotations

from dataclasses import replace

from ..ir.stmt import For, ForKind, Stmt
from ..ir.stmt_functor import map_stmt, walk_stmt


def _is_vthread(s: Stmt) -> bool:
    return isinstance(s, For) and s.kind is ForKind.THREAD_BINDING and s.thread_tag == "vthread"


def _hoist_threads(s: Stmt):
    """A vthread loop whose perfectly nested chain holds real thread loops: the
    chain with the real ones first (each group in its order); None otherwise."""
    if not _is_vthread(s):
        return None
    chain, body = [], s
    while isinstance(body, For) and body.kind is ForKind.THREAD_BINDING:
        chain.append(body)
        body = body.body
    real = [f for f in chain if not _is_vthread(f)]
    if not real:
        return None
    for f in reversed(real + [f for f in chain if _is_vthread(f)]):
        body = replace(f, body=body)
    return body


def lower_vthreads(stmt: Stmt) -> Stmt:
    if not any(_is_vthread(s) for s in walk_stmt(stmt)):
        return stmt
    stmt = map_stmt(stmt, _hoist_threads)
    return map_stmt(stmt, lambda s: replace(s, kind=ForKind.UNROLLED, thread_tag=None) if _is_vthread(s) else None)

"""Thread loops of GPU kernels: merging and the checks that need a whole kernel.

A stage attached inside a loop bound to a tag may bind its own loops to the
same tag (a cooperative fetch of a shared tile); both loops denote the same
hardware index. After `thread_loops`, every top-level statement with bound
loops (a kernel, see gpu_checks.py) has:
- along any path at most one loop per tag: a nested loop of a tag already
  bound around it is removed and its variable replaced by the outer one;
- one extent per tag;
- no parallel loops;
- every store to a global buffer indexed (or guarded) by every launch
  dimension, and every store to a shared buffer by every threadIdx dimension,
  so no two threads or blocks redundantly write the same element.
Violations are LoweringErrors naming the stage. Vthread loops must already
be lowered (lower/vthreads.py). Without bound loops it returns its input."""

from __future__ import annotations

from dataclasses import replace

from ..errors import LoweringError
from ..ir.stmt import Allocate, For, ForKind, IfThenElse, LetStmt, Scope, Seq, Stmt, Store, seq
from ..ir.stmt_functor import map_stmt, walk_stmt
from ..ir.traverse import free_vars, substitute
from .gpu_checks import has_bound_loops, is_bound, launch_extents, map_top_level, stage_names


def _merge(s: Stmt, env: dict) -> Stmt:
    if isinstance(s, For):
        if is_bound(s) and s.thread_tag in env:
            outer = env[s.thread_tag]
            if int(outer.extent.value) != int(s.extent.value):
                raise LoweringError(
                    f"loop '{s.var.name}' (stages {stage_names(s)}) is bound to {s.thread_tag} with extent "
                    f"{s.extent}, inside loop '{outer.var.name}' bound to it with extent {outer.extent}; a block/"
                    f"thread index bound twice in one kernel needs the same extent")
            body = map_stmt(s.body, None, lambda e: substitute(e, {s.var: outer.var}))
            return _merge(body, env)
        inner = {**env, s.thread_tag: s} if is_bound(s) else env
        return replace(s, body=_merge(s.body, inner))
    if isinstance(s, Seq):
        return seq(*[_merge(c, env) for c in s.stmts])
    if isinstance(s, IfThenElse):
        return replace(s, then=_merge(s.then, env), orelse=_merge(s.orelse, env) if s.orelse is not None else None)
    if isinstance(s, (Allocate, LetStmt)):
        return replace(s, body=_merge(s.body, env))
    return s


def _needed(scope: Scope, launch: dict[str, int]) -> list[str]:
    if scope is Scope.LOCAL:
        return []
    return [t for t, e in launch.items() if e > 1 and (scope is Scope.GLOBAL or t.startswith("threadIdx"))]


def _check_writes(s: Stmt, launch: dict[str, int], env: dict, conds: list) -> None:
    if isinstance(s, Store):
        for tag in _needed(s.buffer.scope, launch):
            loop = env.get(tag)
            used = loop is not None and any(v is loop.var for e in (*s.indices, *conds) for v in free_vars(e))
            if not used:
                who = "thread" if tag.startswith("threadIdx") else "block"
                raise LoweringError(
                    f"stage '{s.buffer.name}' ({s.buffer.scope.value}) would be written redundantly by every "
                    f"{tag} {who} (extent {launch[tag]}): none of its loops is bound to {tag}; bind one of its "
                    f"loops to {tag} (for a shared tile: split its loops and bind them to the block's threadIdx "
                    f"tags, with the same extents) or compute it inside a loop bound to {tag}")
        return
    if isinstance(s, For):
        _check_writes(s.body, launch, {**env, s.thread_tag: s} if is_bound(s) else env, conds)
    elif isinstance(s, IfThenElse):
        _check_writes(s.then, launch, env, conds + [s.cond])
        if s.orelse is not None:
            _check_writes(s.orelse, launch, env, conds + [s.cond])
    elif isinstance(s, Seq):
        for c in s.stmts:
            _check_writes(c, launch, env, conds)
    elif isinstance(s, (Allocate, LetStmt)):
        _check_writes(s.body, launch, env, conds)


def _kernel(s: Stmt) -> Stmt:
    if not has_bound_loops(s):
        raise LoweringError(f"stages {stage_names(s)} have no loop bound to blockIdx/threadIdx while other stages "
                            f"of this function run on a GPU; bind their loops too, or inline them or compute them "
                            f"at a bound stage")
    s = _merge(s, {})
    for n in walk_stmt(s):
        if isinstance(n, For) and n.kind is ForKind.PARALLEL:
            raise LoweringError(f"loop '{n.var.name}' (stages {stage_names(n)}) is parallel inside a GPU kernel; "
                                f"GPU stages run in parallel on blocks and threads: bind it instead")
    _check_writes(s, launch_extents(s), {}, [])
    return s


def thread_loops(body: Stmt) -> Stmt:
    if not has_bound_loops(body):
        return body
    return map_top_level(body, _kernel)

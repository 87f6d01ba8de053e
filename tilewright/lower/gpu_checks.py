"""GPU kernels in a lowered function: how to find them, their launch extents,
and the checks a GPU backend runs before rendering.

The shape a GPU renderer sees (after `lower`): the function body is a chain
of top-level `Allocate`s of GLOBAL intermediate buffers (the host allocates
them) around a sequence of top-level statements; each top-level statement is
one kernel. Inside a kernel, the loops bound to blockIdx.*/threadIdx.* are the
launch dimensions (every loop of one tag has the same extent; along any path
a tag is bound at most once); SHARED and LOCAL allocations sit inside, under
the loops they belong to (a SHARED one is per block: declare it at kernel
scope); `Barrier` statements never sit under a branch or loop whose condition
or bounds depend on a threadIdx variable. No "vthread" loops are left."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..errors import LoweringError
from ..ir.expr import Const, Var
from ..ir.stmt import Allocate, Barrier, For, ForKind, IfThenElse, Scope, Seq, Stmt, Store, seq
from ..ir.stmt_functor import stmt_exprs, walk_stmt
from ..ir.traverse import free_vars


def is_bound(s: Stmt) -> bool:
    return isinstance(s, For) and s.kind is ForKind.THREAD_BINDING


def has_bound_loops(stmt: Stmt) -> bool:
    return any(is_bound(s) for s in walk_stmt(stmt))


def map_top_level(body: Stmt, fn: Callable[[Stmt], Stmt]) -> Stmt:
    """`body` with `fn` applied to each top-level statement (below the top-level
    allocations and sequences)."""
    if isinstance(body, Allocate):
        return replace(body, body=map_top_level(body.body, fn))
    if isinstance(body, Seq):
        return seq(*[map_top_level(s, fn) for s in body.stmts])
    return fn(body)


def top_level(body: Stmt) -> list[Stmt]:
    out: list[Stmt] = []
    map_top_level(body, lambda s: out.append(s) or s)
    return out


def kernels(func) -> list[Stmt]:
    """The top-level statements of `func` that hold bound loops: one kernel each."""
    return [s for s in top_level(func.body) if has_bound_loops(s)]


def stage_names(stmt: Stmt) -> list[str]:
    """Names of the buffers `stmt` writes (the stages it computes), in order."""
    names: list[str] = []
    for s in walk_stmt(stmt):
        if isinstance(s, Store) and s.buffer.name not in names:
            names.append(s.buffer.name)
    return names


def launch_extents(kernel: Stmt, largest: bool = False) -> dict[str, int]:
    """{tag: extent} of the blockIdx.*/threadIdx.* loops of one kernel (tags
    not bound are absent: extent 1). Raises LoweringError if a tag has two,
    unless `largest` (a renderer of IR built by hand: the launch takes the
    largest, and shorter loops are guarded)."""
    out: dict[str, int] = {}
    for s in walk_stmt(kernel):
        if is_bound(s):
            if not isinstance(s.extent, Const):
                raise LoweringError(f"loop '{s.var.name}' bound to {s.thread_tag} has a non-constant extent "
                                    f"{s.extent}; launch extents must be constants")
            extent = int(s.extent.value)
            if largest:
                out[s.thread_tag] = max(out.get(s.thread_tag, 0), extent)
            elif out.setdefault(s.thread_tag, extent) != extent:
                raise LoweringError(
                    f"{s.thread_tag} is bound with extents {out[s.thread_tag]} and {extent} (loop '{s.var.name}', "
                    f"stages {stage_names(s)}) in one kernel; every loop bound to one tag in a kernel needs the "
                    f"same extent")
    return out


def shared_bytes(kernel: Stmt) -> int:
    return sum(s.buffer.size * s.buffer.dtype.bytes for s in walk_stmt(kernel)
               if isinstance(s, Allocate) and s.buffer.scope is Scope.SHARED)


def check_launch_limits(func, max_threads_per_block: int, max_shared_bytes: int,
                        max_block_dims: tuple[int, int, int] | None = None,
                        max_grid_dims: tuple[int, int, int] | None = None) -> None:
    """Raise LoweringError if a kernel of `func` launches more threads per block, more
    threads or blocks along one dimension (CUDA: blockDim.z <= 64, gridDim.y/z <= 65535),
    or allocates more shared memory per block, than the target allows."""
    for k in kernels(func):
        ext = launch_extents(k)
        for kind, limits in (("threadIdx", max_block_dims), ("blockIdx", max_grid_dims)):
            for d, most in zip("xyz", limits or ()):
                n = ext.get(f"{kind}.{d}", 1)
                if n > most:
                    other = "threadIdx.x" if kind == "threadIdx" else "blockIdx.x"
                    raise LoweringError(f"the kernel of stages {stage_names(k)} binds {n} to {kind}.{d}; this "
                                        f"target allows at most {most} along {d}: bind the longer loop to "
                                        f"{other} or split it")
        threads = 1
        for tag in ("threadIdx.x", "threadIdx.y", "threadIdx.z"):
            threads *= ext.get(tag, 1)
        if threads > max_threads_per_block:
            dims = " x ".join(f"{t}={e}" for t, e in ext.items() if t.startswith("threadIdx"))
            raise LoweringError(f"the kernel of stages {stage_names(k)} has {threads} threads per block ({dims}); "
                                f"this target allows at most {max_threads_per_block}: bind smaller thread loops")
        nbytes = shared_bytes(k)
        if nbytes > max_shared_bytes:
            bufs = [f"{s.buffer.name} ({s.buffer.size * s.buffer.dtype.bytes} B)" for s in walk_stmt(k)
                    if isinstance(s, Allocate) and s.buffer.scope is Scope.SHARED]
            raise LoweringError(f"the kernel of stages {stage_names(k)} allocates {nbytes} bytes of shared memory "
                                f"({', '.join(bufs)}); this target allows at most {max_shared_bytes} per block: "
                                f"use smaller tiles")


def _thread_vars(kernel: Stmt) -> set[int]:
    return {id(s.var) for s in walk_stmt(kernel) if is_bound(s) and s.thread_tag.startswith("threadIdx")}


def _depends(exprs, var_ids: set[int]) -> bool:
    return any(id(v) in var_ids for e in exprs for v in free_vars(e) if isinstance(v, Var))


def _check_barriers(s: Stmt, tvars: set[int], divergent: str | None) -> None:
    if isinstance(s, Barrier):
        if divergent:
            raise LoweringError(f"a barrier sits under {divergent}, which depends on a thread index: not every "
                                f"thread of the block would reach it")
        return
    if isinstance(s, IfThenElse):
        why = divergent or (f"the branch 'if {s.cond}'" if _depends([s.cond], tvars) else None)
        _check_barriers(s.then, tvars, why)
        if s.orelse is not None:
            _check_barriers(s.orelse, tvars, why)
        return
    if isinstance(s, For):
        why = divergent or (f"loop '{s.var.name}'" if _depends(stmt_exprs(s), tvars) else None)
        _check_barriers(s.body, tvars, why)
        return
    for c in (s.stmts if isinstance(s, Seq) else [s.body] if hasattr(s, "body") else []):
        _check_barriers(c, tvars, divergent)


def validate_gpu_func(func) -> None:
    """Check that `func` has the shape described in this module's docstring;
    raise LoweringError naming the stage otherwise."""
    for s in top_level(func.body):
        if not has_bound_loops(s):
            raise LoweringError(f"stages {stage_names(s)} have no loop bound to blockIdx/threadIdx; on a GPU every "
                                f"root stage must be bound (s[T].bind(axis, tw.thread_axis('blockIdx.x')), ...) or "
                                f"be inlined or computed at a bound stage")
        launch_extents(s)
        for n in walk_stmt(s):
            if is_bound(n) and n.thread_tag == "vthread":
                raise LoweringError(f"loop '{n.var.name}' is still bound to vthread; lower it first")
        _check_barriers(s, _thread_vars(s), None)
    body = func.body
    while isinstance(body, Allocate):
        if body.buffer.scope is not Scope.GLOBAL:
            raise LoweringError(f"buffer '{body.buffer.name}' ({body.buffer.scope.value}) is allocated outside every "
                                f"kernel; only global buffers can live across kernels: compute_at it inside one")
        body = body.body

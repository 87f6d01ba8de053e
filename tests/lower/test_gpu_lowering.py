"""Lowering of GPU schedules: the IR a renderer sees (bound loops, shared tiles fetched cooperatively,
barriers where and only where shared memory is written then read, vthreads, cross-thread reductions),
that CPU schedules are unchanged, every kernel-wide error, and results on OpenCL (PoCL) against the
reference where pyopencl is installed."""

from __future__ import annotations

import importlib.util
import re

import pytest
from oracle import check_kernel

import tilewright as tw
from tilewright.ir import arith
from tilewright.ir.expr import BinOp, CmpOp, Load, Var
from tilewright.ir.stmt import Allocate, Barrier, Buffer, For, ForKind, IfThenElse, Scope, Store, seq
from tilewright.ir.stmt_functor import walk_stmt
from tilewright.lower.barriers import insert_barriers
from tilewright.lower.gpu_checks import check_launch_limits, kernels, launch_extents, validate_gpu_func
from tilewright.lower.lower import lower

BX, BY = tw.thread_axis("blockIdx.x"), tw.thread_axis("blockIdx.y")
TX, TY = tw.thread_axis("threadIdx.x"), tw.thread_axis("threadIdx.y")


def gemm(m=64, n=64, k=32, tile=32, nt=8, kf=8, vthread=False):
    """TVM's GPU GEMM: shared tiles fetched cooperatively, local register tiles, optional vthreads."""
    A = tw.placeholder((m, k), "float32", name="A")
    B = tw.placeholder((k, n), "float32", name="B")
    r = tw.reduce_axis(k, name="k")
    C = tw.compute((m, n), lambda i, j: tw.sum(A[i, r] * B[r, j], axis=r), name="C")
    s = tw.create_schedule(C)
    AA, BB = s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])
    AL, BL = s.cache_read(AA, "local", [C]), s.cache_read(BB, "local", [C])
    CL = s.cache_write(C, "local")
    bi, ii = s[C].split(C.op.axis[0], factor=tile)
    bj, jj = s[C].split(C.op.axis[1], factor=tile)
    s[C].reorder(bi, bj, ii, jj)
    s[C].bind(bi, BY)
    s[C].bind(bj, BX)
    if vthread:
        vy, ii = s[C].split(ii, nparts=2)
        vx, jj = s[C].split(jj, nparts=2)
    ti, ri = s[C].split(ii, nparts=nt)
    tj, rj = s[C].split(jj, nparts=nt)
    if vthread:
        s[C].reorder(vy, vx, ti, tj, ri, rj)
        s[C].bind(vy, tw.thread_axis("vthread", "vy"))
        s[C].bind(vx, tw.thread_axis("vthread", "vx"))
    else:
        s[C].reorder(ti, tj, ri, rj)
    s[C].bind(ti, TY)
    s[C].bind(tj, TX)
    s[CL].compute_at(s[C], tj)
    ko, ki = s[CL].split(CL.op.reduce_axis[0], factor=kf)
    s[CL].reorder(ko, ki, *CL.op.axis)
    for T in (AA, BB):
        s[T].compute_at(s[CL], ko)
        t0, _ = s[T].split(T.op.axis[0], nparts=nt)
        t1, _ = s[T].split(T.op.axis[1], nparts=nt)
        s[T].reorder(t0, t1, *[a for a in s[T].leaf_iter_vars if a is not t0 and a is not t1])
        s[T].bind(t0, TY)
        s[T].bind(t1, TX)
    for T in (AL, BL):
        s[T].compute_at(s[CL], ki)
    return s, [A, B, C]


def rowsum(n=6, m=100, nt=32, rfactor=True, reducer="sum"):
    """A cross-thread reduction of each row: with rfactor (TVM's spelling) or by binding the reduce loop."""
    A = tw.placeholder((n, m), "float32", name="A")
    k = tw.reduce_axis(m, name="k")
    B = tw.compute((n,), lambda i: getattr(tw, reducer)(A[i, k], axis=k), name="B")
    s = tw.create_schedule(B)
    ko, _ = s[B].split(k, nparts=nt)
    if rfactor:
        BF = s.rfactor(B, ko)
        tx = s[B].op.reduce_axis[0]
        s[B].bind(tx, TX)
        s[BF].compute_at(s[B], tx)
    else:
        s[B].bind(ko, TX)
    s[B].bind(s[B].op.axis[0], BX)
    return s, [A, B]


def barriers(stmt):
    return [s for s in walk_stmt(stmt) if isinstance(s, Barrier)]


def loops(stmt, tag=None):
    return [s for s in walk_stmt(stmt) if isinstance(s, For) and (tag is None or s.thread_tag == tag)]


def raises(pattern: str, exc=tw.LoweringError):
    return pytest.raises(exc, match=re.escape(pattern))


# ---- CPU schedules are untouched ---------------------------------------------------------------------

def test_cpu_schedule_has_no_gpu_constructs():
    s, args = gemm()
    s2 = tw.create_schedule(args[2])
    f = lower(s2, args)
    assert not barriers(f.body) and not any(s.kind is ForKind.THREAD_BINDING for s in loops(f.body))
    assert kernels(f) == []


# ---- the GEMM's IR ------------------------------------------------------------------------------------

def _k_outer(f):
    return next(s for s in loops(f.body) if s.var.name == "k.outer")


@pytest.mark.parametrize("vthread", [False, True])
def test_gemm_shape(vthread):
    s, args = gemm(vthread=vthread)
    f = lower(s, args)
    validate_gpu_func(f)
    (kernel,) = kernels(f)
    assert launch_extents(kernel) == {"blockIdx.y": 2, "blockIdx.x": 2, "threadIdx.y": 8, "threadIdx.x": 8}
    # the fetch's thread loops are the parent's: one loop per tag along every path, no vthread left
    for tag in ("threadIdx.x", "threadIdx.y"):
        assert len(loops(kernel, tag)) == 1
    assert not loops(kernel, "vthread")
    shared = [s.buffer for s in walk_stmt(kernel) if isinstance(s, Allocate) and s.buffer.scope is Scope.SHARED]
    # the block's tiles, fetched once whatever the vthreads (TVM 3.5): not one per thread or virtual thread
    assert sorted(b.name for b in shared) == ["A.shared", "B.shared"]
    assert {b.shape for b in shared} == {(32, 8), (8, 32)}
    # two barriers per k.outer iteration: before the fetch (the last iteration's reads) and after it
    ko = _k_outer(f)
    body = ko.body.stmts
    assert isinstance(body[0], Barrier)
    assert len(barriers(ko)) == 2
    assert len(barriers(f.body)) == 2
    text = str(f)
    assert "barrier(shared)" in text and "bound to threadIdx.x: for j.inner" in text


def test_gemm_fetch_is_distributed_over_threads():
    s, args = gemm()
    f = lower(s, args)
    tx = loops(f.body, "threadIdx.x")[0].var
    ty = loops(f.body, "threadIdx.y")[0].var
    stores = [s for s in walk_stmt(f.body) if isinstance(s, Store) and s.buffer.scope is Scope.SHARED]
    for st in stores:
        used = {id(n) for i in st.indices for n in _vars(i)}
        assert id(tx) in used and id(ty) in used


def _vars(e):
    from tilewright.ir.traverse import walk

    return [n for n in walk(e) if isinstance(n, Var)]


def test_gemm_with_guards_keeps_barriers_out_of_thread_branches():
    s, args = gemm(m=60, n=50, k=30, tile=32, nt=8, kf=8)
    f = lower(s, args)
    validate_gpu_func(f)  # raises if a barrier sits under a branch on a thread index
    assert len(barriers(_k_outer(f))) == 2


# ---- cross-thread reductions ----------------------------------------------------------------------------

@pytest.mark.parametrize("nt,steps", [(32, 4), (12, 3), (7, 2), (2, 0)])
def test_cross_thread_reduction_shape(nt, steps):
    s, args = rowsum(nt=nt)
    f = lower(s, args)
    validate_gpu_func(f)
    (kernel,) = kernels(f)
    assert launch_extents(kernel) == {"blockIdx.x": 6, "threadIdx.x": nt}
    red = [s.buffer for s in walk_stmt(kernel) if isinstance(s, Allocate) and s.buffer.scope is Scope.SHARED]
    assert [(b.name, b.shape) for b in red] == [("B.red", (nt,))]
    # one barrier after the partials are stored, one before each tree step and before the final combine
    assert len(barriers(kernel)) == steps + 1
    final = [s for s in walk_stmt(kernel) if isinstance(s, Store) and s.buffer.name == "B"]
    assert len(final) == 1
    assert "if k.outer.v == 0:" in str(f)


def test_cross_thread_reduction_by_binding_the_reduce_loop():
    s, args = rowsum(nt=8, rfactor=False)
    f = lower(s, args)
    validate_gpu_func(f)
    assert "B.part[0] = B.part[0] + A[" in str(f) and len(barriers(f.body)) == 3


def test_cross_thread_reduction_rows_per_thread_row():
    """threadIdx.y binds the rows, threadIdx.x the reduction: each row of threads has its own tree."""
    A = tw.placeholder((8, 64), "float32", name="A")
    k = tw.reduce_axis(64, name="k")
    B = tw.compute((8,), lambda i: tw.max(A[i, k], axis=k), name="B")
    s = tw.create_schedule(B)
    io, ii = s[B].split(B.op.axis[0], factor=4)
    ko, _ = s[B].split(k, nparts=16)
    s[B].reorder(io, ii, ko)
    s[B].bind(io, BX)
    s[B].bind(ii, TY)
    s[B].bind(ko, TX)
    f = lower(s, [A, B])
    validate_gpu_func(f)
    red = next(s.buffer for s in walk_stmt(f.body) if isinstance(s, Allocate) and s.buffer.name == "B.red")
    assert red.shape == (4, 16)


# ---- barrier insertion alone ----------------------------------------------------------------------------

def _thread_loop(body, extent=4):
    tx = Var("tx", tw.as_dtype("int32"))
    return tx, For(tx, arith.const(0), arith.const(extent), ForKind.THREAD_BINDING, body(tx), "threadIdx.x")


def test_barrier_is_hoisted_out_of_a_thread_branch():
    S = Buffer("S", (4,), tw.as_dtype("float32"), Scope.SHARED)
    T = Buffer("T", (4,), tw.as_dtype("float32"), Scope.SHARED)
    f32 = tw.as_dtype("float32")

    def body(tx):
        cond = arith.compare(CmpOp.LT, tx, arith.const(3))
        return IfThenElse(cond, seq(Store(S, (tx,), arith.const(1.0, f32)),
                                    Store(T, (tx,), Load(S, (arith.binary(BinOp.SUB, arith.const(2), tx),),
                                                         f32))))

    _, loop = _thread_loop(body)
    out = insert_barriers(Allocate(S, Allocate(T, loop)))
    inner = out.body.body.body
    assert [type(s).__name__ for s in inner.stmts] == ["IfThenElse", "Barrier", "IfThenElse"]


def test_no_barrier_without_a_read_after_write():
    S = Buffer("S", (4,), tw.as_dtype("float32"), Scope.SHARED)
    _, loop = _thread_loop(lambda tx: seq(Store(S, (tx,), arith.const(1.0, S.dtype)),
                                          Store(S, (tx,), arith.const(2.0, S.dtype))))
    assert not barriers(insert_barriers(Allocate(S, loop)))


# ---- kernel-wide errors -----------------------------------------------------------------------------------

def test_one_tag_two_extents_in_a_kernel():
    with raises("is bound to threadIdx.x with extent 4, inside loop 'i.inner' bound to it with extent 8"):
        _fetch_with_threads(4)


def _fetch_with_threads(n):
    A = tw.placeholder((64, 64), "float32", name="A")
    C = tw.compute((64, 64), lambda i, j: A[i, j] * 2, name="C")
    s = tw.create_schedule(C)
    AA = s.cache_read(A, "shared", [C])
    bo, bi = s[C].split(C.op.axis[0], factor=8)
    s[C].bind(bo, BX)
    s[C].bind(bi, TX)
    s[AA].compute_at(s[C], bi)
    t, _ = s[AA].split(AA.op.axis[0], nparts=n)
    s[AA].bind(t, TX)
    return lower(s, [A, C])


def test_fetch_with_the_parents_extent_is_fine():
    f = _fetch_with_threads(8)
    validate_gpu_func(f)
    assert len(barriers(f.body)) == 1


def test_output_written_from_every_thread():
    A = tw.placeholder((64, 64), "float32", name="A")
    C = tw.compute((64, 64), lambda i, j: A[i, j] * 2, name="C")
    s = tw.create_schedule(C)
    AA = s.cache_read(A, "shared", [C])
    s[C].bind(C.op.axis[0], BX)
    s[AA].compute_at(s[C], C.op.axis[0])
    s[AA].bind(AA.op.axis[1], TX)
    with raises("stage 'C' (global) would be written redundantly by every threadIdx.x thread (extent 64)"):
        lower(s, [A, C])


def test_shared_tile_not_distributed_over_a_thread_dimension():
    A = tw.placeholder((64, 64), "float32", name="A")
    C = tw.compute((64, 64), lambda i, j: A[i, j] * 2, name="C")
    s = tw.create_schedule(C)
    AA = s.cache_read(A, "shared", [C])
    bo, bi = s[C].split(C.op.axis[0], factor=8)
    s[C].bind(bo, BX)
    s[C].bind(bi, TY)
    s[C].bind(C.op.axis[1], TX)
    s[AA].compute_at(s[C], bo)
    s[AA].bind(AA.op.axis[1], TX)  # nothing bound to threadIdx.y
    with raises("stage 'A.shared' (shared) would be written redundantly by every threadIdx.y thread (extent 8)"):
        lower(s, [A, C])


def test_parallel_loop_inside_a_kernel():
    A = tw.placeholder((64, 8), "float32", name="A")
    C = tw.compute((64, 8), lambda i, j: A[i, j] * 2, name="C")
    s = tw.create_schedule(C)
    s[C].bind(C.op.axis[0], TX)
    s[C].parallel(C.op.axis[1])
    with raises("loop 'j' (stages ['C']) is parallel inside a GPU kernel"):
        lower(s, [A, C])


def test_unbound_root_stage_beside_a_kernel():
    A = tw.placeholder((64,), "float32", name="A")
    B = tw.compute((64,), lambda i: A[i] + 1, name="B")
    C = tw.compute((64,), lambda i: B[i] * 2, name="C")
    s = tw.create_schedule(C)
    s[C].bind(C.op.axis[0], TX)
    with raises("stages ['B'] have no loop bound to blockIdx/threadIdx while other stages"):
        lower(s, [A, C])


def test_cross_thread_reduction_inside_a_loop_bound_to_its_tag():
    A = tw.placeholder((8, 16), "float32", name="A")
    k = tw.reduce_axis(16, name="k")
    B = tw.compute((8,), lambda i: tw.sum(A[i, k], axis=k), name="B")
    C = tw.compute((8,), lambda i: B[i] + 1, name="C")
    s = tw.create_schedule(C)
    s[C].bind(C.op.axis[0], TX)
    s[B].compute_at(s[C], C.op.axis[0])
    s[B].bind(B.op.reduce_axis[0], TX)
    with raises("stage 'B': its reduce loop is bound to threadIdx.x, but it is computed inside a loop already "
                "bound to threadIdx.x"):
        lower(s, [A, C])


def test_launch_limits():
    s, args = gemm()
    f = lower(s, args)
    check_launch_limits(f, 1024, 48 * 1024)
    with raises("the kernel of stages ['C.local', 'A.shared', 'B.shared', 'A.shared.local', 'B.shared.local', "
                "'C'] has 64 threads per block (threadIdx.y=8 x threadIdx.x=8); this target allows at most 32"):
        check_launch_limits(f, 32, 48 * 1024)
    with raises("allocates 2048 bytes of shared memory (A.shared (1024 B), B.shared (1024 B)); this target "
                "allows at most 1024 per block"):
        check_launch_limits(f, 1024, 1024)


def test_validate_rejects_an_unbound_function():
    A = tw.placeholder((8,), "float32", name="A")
    C = tw.compute((8,), lambda i: A[i] + 1, name="C")
    with raises("stages ['C'] have no loop bound to blockIdx/threadIdx; on a GPU every root stage must be bound"):
        validate_gpu_func(lower(tw.create_schedule(C), [A, C]))


# ---- results on OpenCL (PoCL) ----------------------------------------------------------------------------

needs_opencl = pytest.mark.skipif(importlib.util.find_spec("pyopencl") is None,
                                  reason="pyopencl is not installed (make test installs it with PoCL)")


def _opencl_kernel(s, args):
    try:
        return tw.build(s, args, target="opencl")
    except tw.TilewrightError as exc:
        if "no backend" not in str(exc):
            raise
    from tilewright.codegen.opencl import generate_opencl
    from tilewright.runtime.opencl import OpenCLKernel

    return OpenCLKernel(generate_opencl(lower(s, args)))


CASES = {
    "gemm": lambda: gemm(),
    "gemm-vthread": lambda: gemm(vthread=True),
    "gemm-guards": lambda: gemm(m=60, n=50, k=30),
    "rowsum-rfactor-32": lambda: rowsum(nt=32),
    "rowsum-rfactor-12": lambda: rowsum(nt=12),
    "rowsum-bound-7": lambda: rowsum(nt=7, rfactor=False),
    "rowmax-bound-8": lambda: rowsum(nt=8, rfactor=False, reducer="max"),
    "rowmin-rfactor-5": lambda: rowsum(nt=5, reducer="min"),
    "fetch": lambda: _fetch_schedule(8),
}


def _fetch_schedule(n):
    A = tw.placeholder((64, 64), "float32", name="A")
    C = tw.compute((64, 64), lambda i, j: A[i, j] * 2, name="C")
    s = tw.create_schedule(C)
    AA = s.cache_read(A, "shared", [C])
    bo, bi = s[C].split(C.op.axis[0], factor=8)
    s[C].bind(bo, BX)
    s[C].bind(bi, TX)
    s[AA].compute_at(s[C], bi)
    t, _ = s[AA].split(AA.op.axis[0], nparts=n)
    s[AA].bind(t, TX)
    return s, [A, C]


@needs_opencl
@pytest.mark.parametrize("case", sorted(CASES))
def test_opencl_matches_reference(case, rng):
    s, args = CASES[case]()
    check_kernel(s, args, rng, kernel=_opencl_kernel(s, args))

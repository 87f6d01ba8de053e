"""Hand-built GPU loop IR for the renderer and runtime tests (fixed, so golden sources stay put while the
schedule primitives evolve): each program is (LoweredFunc, inputs maker, NumPy reference)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

import tilewright as tw
from tilewright.ir import arith
from tilewright.ir.dtype import as_dtype
from tilewright.ir.expr import Load, Var
from tilewright.ir.stmt import Allocate, Barrier, Buffer, For, ForKind, Scope, Store, seq
from tilewright.ir.stmt_functor import map_stmt
from tilewright.lower.lower import LoweredFunc


def c(v, dtype="int32"):
    return arith.const(v, dtype)


def loop(var, n, body, tag=None, kind=ForKind.SERIAL):
    return For(var, c(0), c(n), ForKind.THREAD_BINDING if tag else kind, body, thread_tag=tag)


def ld(buf, idx):
    return Load(buf, (idx,), buf.dtype)


def bind(func, tags: dict[str, str]):
    """`func` with the loops named in `tags` bound to those thread tags."""
    def f(s):
        if isinstance(s, For) and s.var.name in tags:
            return replace(s, kind=ForKind.THREAD_BINDING, thread_tag=tags[s.var.name])
        return None
    return replace(func, body=map_stmt(func.body, f))


def elementwise_two_kernels():
    """exp(A) + 2B into a global intermediate (vectorized by 4), then minus 1: two kernels."""
    A = tw.placeholder((64, 32), "float32", name="A")
    B = tw.placeholder((64, 32), "float32", name="B")
    C = tw.compute((64, 32), lambda i, j: tw.exp(A[i, j]) + B[i, j] * 2, name="C")
    D = tw.compute((64, 32), lambda i, j: C[i, j] - 1, name="D")
    s = tw.create_schedule(D)
    jo, ji = s[C].split(C.op.axis[1], factor=4)
    s[C].vectorize(ji)
    f = bind(tw.lower(s, [A, B, D]), {"i": "blockIdx.x", "j.outer": "threadIdx.x", "j": "threadIdx.x"})

    def inputs(rng):
        return [rng.standard_normal((64, 32)).astype("float32") for _ in range(2)] + [np.zeros((64, 32), "float32")]

    def ref(a, b, d):
        return [a, b, np.exp(a) + 2 * b - 1]
    return f, inputs, ref


def tiled_matmul(n=32, t=8):
    """C = A @ B with t x t shared tiles fetched cooperatively, barriers, and a per-thread accumulator."""
    f32 = as_dtype("float32")
    A, B, C = (Buffer(x, (n, n), f32) for x in "ABC")
    As = Buffer("A.shared", (t * t,), f32, Scope.SHARED)
    Bs = Buffer("B.shared", (t * t,), f32, Scope.SHARED)
    acc = Buffer("C.local", (1,), f32, Scope.LOCAL)
    bx, by, tx, ty, ko, ki = (Var(x) for x in ("bx", "by", "tx", "ty", "k.outer", "k.inner"))
    step = seq(
        Store(As, (tx * t + ty,), ld(A, (bx * t + tx) * n + ko * t + ty)),
        Store(Bs, (tx * t + ty,), ld(B, (ko * t + tx) * n + by * t + ty)),
        Barrier(Scope.SHARED),
        loop(ki, t, Store(acc, (c(0),), ld(acc, c(0)) + ld(As, tx * t + ki) * ld(Bs, ki * t + ty)),
             kind=ForKind.UNROLLED),
        Barrier(Scope.SHARED),
    )
    body = Allocate(acc, seq(Store(acc, (c(0),), c(0.0, "float32")), loop(ko, n // t, step),
                             Store(C, ((bx * t + tx) * n + by * t + ty,), ld(acc, c(0)))))
    body = Allocate(As, Allocate(Bs, body))
    nest = loop(bx, n // t, loop(by, n // t, loop(tx, t, loop(ty, t, body, "threadIdx.y"), "threadIdx.x"),
                                 "blockIdx.y"), "blockIdx.x")
    f = LoweredFunc("matmul", (A, B, C), nest)

    def inputs(rng):
        return [rng.standard_normal((n, n)).astype("float32") for _ in range(2)] + [np.zeros((n, n), "float32")]

    def ref(a, b, out):
        return [a, b, a @ b]
    return f, inputs, ref


def guarded_threads():
    """One block whose 16 threads all load, and only 8 store: the shorter bound loop gets a guard."""
    f32 = as_dtype("float32")
    X, Y = Buffer("X", (16,), f32), Buffer("Y", (8,), f32)
    t1, t2 = Var("t1"), Var("t2")
    S = Buffer("S", (16,), f32, Scope.SHARED)
    body = Allocate(S, seq(loop(t1, 16, Store(S, (t1,), ld(X, t1) * 2), "threadIdx.x"),
                           Barrier(Scope.SHARED),
                           loop(t2, 8, Store(Y, (t2,), ld(S, t2) + ld(S, t2 + 8)), "threadIdx.x")))
    f = LoweredFunc("guarded", (X, Y), loop(Var("b"), 1, body, "blockIdx.x"))
    # the guard may not enclose a barrier, so the barrier sits between the loops

    def inputs(rng):
        return [rng.standard_normal(16).astype("float32"), np.zeros(8, "float32")]

    def ref(x, y):
        return [x, x[:8] * 2 + x[8:] * 2]
    return f, inputs, ref


def integer_and_dtypes():
    """floordiv/floormod/min/max/select on int32, an int64 and a float64 output, a bool input."""
    A = tw.placeholder((4, 16), "int32", name="A")
    M = tw.placeholder((4, 16), "bool", name="M")
    X = tw.placeholder((4, 16), "float64", name="X")
    B = tw.compute((4, 16), lambda i, j: tw.if_then_else(
        M[i, j], tw.floordiv(A[i, j], 3) + tw.floormod(A[i, j], 5), tw.min(A[i, j], 7) * tw.max(A[i, j], -2)),
        name="B")
    L = tw.compute((4, 16), lambda i, j: tw.cast(A[i, j], "int64") * 3000000000, name="L")
    Y = tw.compute((4, 16), lambda i, j: tw.sqrt(tw.abs(X[i, j])) + tw.cast(A[i, j], "float64"), name="Y")
    s = tw.create_schedule([B, L, Y])
    f = bind(tw.lower(s, [A, M, X, B, L, Y]), {"i": "blockIdx.x", "j": "threadIdx.x"})

    def inputs(rng):
        a = rng.integers(-50, 50, (4, 16)).astype("int32")
        return [a, rng.random((4, 16)) < 0.5, rng.standard_normal((4, 16)),
                np.zeros((4, 16), "int32"), np.zeros((4, 16), "int64"), np.zeros((4, 16), "float64")]

    def ref(a, m, x, b, la, y):
        b = np.where(m, a // 3 + a % 5, np.minimum(a, 7) * np.maximum(a, -2)).astype("int32")
        return [a, m, x, b, a.astype("int64") * 3000000000, np.sqrt(np.abs(x)) + a]
    return f, inputs, ref


PROGRAMS = {"elementwise_two_kernels": elementwise_two_kernels, "tiled_matmul": tiled_matmul,
            "guarded_threads": guarded_threads, "integer_and_dtypes": integer_and_dtypes}


def has_bind() -> bool:
    from tilewright.schedule.stage import Stage

    return hasattr(tw, "thread_axis") and hasattr(Stage, "bind")


def scheduled_shared_matmul(n=64, t=8):
    """A real schedule: C = A @ B, blocks of t x t threads, A and B tiles cached in shared memory at k.outer."""
    A = tw.placeholder((n, n), "float32", name="A")
    B = tw.placeholder((n, n), "float32", name="B")
    k = tw.reduce_axis(n, name="k")
    C = tw.compute((n, n), lambda i, j: tw.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = tw.create_schedule(C)
    AS, BS = s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])
    bi, ti = s[C].split(C.op.axis[0], factor=t)
    bj, tj = s[C].split(C.op.axis[1], factor=t)
    s[C].reorder(bi, bj, ti, tj)
    for ax, tag in ((bi, "blockIdx.y"), (bj, "blockIdx.x"), (ti, "threadIdx.y"), (tj, "threadIdx.x")):
        s[C].bind(ax, tw.thread_axis(tag))
    ko, _ = s[C].split(k, factor=t)
    for T in (AS, BS):
        s[T].compute_at(s[C], ko)
        x, y = s[T].op.axis
        s[T].bind(x, tw.thread_axis("threadIdx.y"))
        s[T].bind(y, tw.thread_axis("threadIdx.x"))
    return s, [A, B, C]


def scheduled_vector_relu(n=256):
    """A real schedule: relu(x) * 2 with 4-lane vectors per thread."""
    X = tw.placeholder((n,), "float32", name="X")
    Y = tw.compute((n,), lambda i: tw.max(X[i], 0.0) * 2, name="Y")
    s = tw.create_schedule(Y)
    b, r = s[Y].split(Y.op.axis[0], factor=64)
    tx, v = s[Y].split(r, factor=4)
    s[Y].bind(b, tw.thread_axis("blockIdx.x"))
    s[Y].bind(tx, tw.thread_axis("threadIdx.x"))
    s[Y].vectorize(v)
    return s, [X, Y]


SCHEDULES = {"shared_matmul": scheduled_shared_matmul, "vector_relu": scheduled_vector_relu}

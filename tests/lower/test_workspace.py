"""A kernel's large temporaries become arguments (lower/workspace.py): one
allocated once per call moves, one per thread (under a parallel loop) or small
enough for the stack stays, and the kernel computes the same with the buffer
passed in."""

from __future__ import annotations

import numpy as np

import tilewright as tw
from tilewright.backends import backend_for
from tilewright.ir.stmt import Allocate
from tilewright.ir.stmt_functor import walk_stmt
from tilewright.lower.workspace import lift_workspace
from tilewright.targets import as_target


def padded_sum(rows=64, cols=256, per_row: bool = False, parallel: bool = False):
    """B[i, j] = P[i, j] + P[i, j + 2], P = A padded by one on each side of j, made at the
    root (`per_row`: per row i, inside the loop over rows)."""
    A = tw.placeholder((rows, cols), "float32", name="A")
    P = tw.compute((rows, cols + 2), lambda i, j: tw.if_then_else(tw.all(j >= 1, j <= cols),
                                                                  A[i, j - 1], tw.const(0.0, "float32")), name="P")
    B = tw.compute((rows, cols), lambda i, j: P[i, j] + P[i, j + 2], name="B")
    s = tw.create_schedule(B)
    if per_row:
        s[P].compute_at(s[B], B.op.axis[0])
    if parallel:
        s[B].parallel(B.op.axis[0])
    return s, [A, B]


def lowered(s, args):
    target = as_target("cpu")
    return backend_for(target).lower(s, args, "padded_sum", target)


def allocated(func) -> set[str]:
    return {a.buffer.name for a in walk_stmt(func.body) if isinstance(a, Allocate)}


def test_root_temporary_becomes_the_last_argument_and_results_match():
    s, args = padded_sum()
    func = lowered(s, args)
    assert "P" in allocated(func)
    lifted_func, lifted = lift_workspace(func, 1024)
    assert [b.name for b in lifted] == ["P"] and "P" not in allocated(lifted_func)
    assert [b.name for b in lifted_func.args] == ["A", "B", "P"]
    kernel = backend_for(as_target("cpu")).build_func(lifted_func, as_target("cpu"))
    assert "aligned_alloc" not in kernel.source
    a = np.random.default_rng(0).standard_normal((64, 256), dtype=np.float32)
    b = np.zeros_like(a)
    kernel(a, b, np.full((64, 258), np.nan, np.float32))  # the kernel may not rely on what the buffer held
    p = np.pad(a, ((0, 0), (1, 1)))
    np.testing.assert_allclose(b, p[:, :-2] + p[:, 2:], rtol=1e-6)


def test_per_thread_and_small_temporaries_stay():
    s, args = padded_sum(per_row=True, parallel=True)  # one copy of a row per thread
    func = lowered(s, args)
    assert lift_workspace(func, 0) == (func, ())
    s, args = padded_sum(per_row=True)  # a serial loop: one buffer serves every row
    func = lowered(s, args)
    assert [b.name for b in lift_workspace(func, 0)[1]] == ["P"]
    assert lift_workspace(func, 258 * 4) == (func, ())  # not more than the limit: it stays on the stack


def test_a_buffer_allocated_twice_is_one_argument():
    """The copies of an unrolled loop allocate the same buffer one after another: one argument serves both."""
    from tilewright.ir import arith
    from tilewright.ir.dtype import float32
    from tilewright.ir.expr import Load
    from tilewright.ir.stmt import Buffer, Store, seq
    from tilewright.lower.lower import LoweredFunc

    A, T = Buffer("A", (4096,), float32), Buffer("T", (4096,), float32)

    def copy(dst, src):
        return Store(dst, (arith.const(0),), Load(src, (arith.const(0),), float32))

    body = seq(Allocate(T, seq(copy(T, A), copy(A, T))), Allocate(T, seq(copy(T, A), copy(A, T))))
    func, lifted = lift_workspace(LoweredFunc("twice", (A,), body), 1024)
    assert lifted == (T,) and func.args == (A, T) and not allocated(func)

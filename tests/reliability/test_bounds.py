"""Accesses are proven in bounds at build time (issue 13): an access that can leave its tensor is a
LoweringError naming the tensor, the index and its range, exactly where `tw.evaluate` rejects the
program too; guarded reads (if_then_else), non-divisible splits and clamped compute_at regions are legal.
Today `tw.build` compiles the out-of-bounds programs unchecked (garbage or SIGSEGV)."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import check_kernel

import tilewright as tw


def _offset():
    A = tw.placeholder((16,), "float32", name="A")
    return A, tw.compute((16,), lambda i: A[i - 3], name="C")


def _long_reduce():
    A = tw.placeholder((16,), "float32", name="A")
    k = tw.reduce_axis(20, name="k")
    return A, tw.compute((4,), lambda i: tw.sum(A[k], axis=k), name="S")


def _past_end_2d():
    A = tw.placeholder((8, 6), "float32", name="A")
    return A, tw.compute((8, 6), lambda i, j: A[i, j + 1] * 2, name="C")


@pytest.mark.parametrize("make, message", [
    (_offset, r"compute 'C' reads 'A' out of bounds: axis 0 index `i - 3` can take values in \[-3, 12\], "
              r"outside the valid \[0, 16\)"),
    (_long_reduce, r"compute 'S' reads 'A' out of bounds: axis 0 index `k` can take values in \[0, 19\], "
                   r"outside the valid \[0, 16\)"),
    (_past_end_2d, r"compute 'C' reads 'A' out of bounds: axis 1 index `j \+ 1` can take values in \[1, 6\]"),
])
@pytest.mark.parametrize("scheduled", [False, True])
def test_out_of_bounds_is_rejected_by_build_and_evaluate(make, message, scheduled):
    A, C = make()
    s = tw.create_schedule(C)
    if scheduled:  # the schedule does not change which elements are read
        s[C].split(C.op.axis[0], factor=3)
    if scheduled:  # the index is then written in the split loops
        message = message.replace(r"`i - 3`", "`[^`]*`").replace("`k`", "`[^`]*`").replace(r"`j \+ 1`", "`[^`]*`")
    with pytest.raises(tw.LoweringError, match=message):
        tw.build(s, [A, C])
    with pytest.raises(tw.EvaluationError, match=f"compute '{C.name}' reads 'A' out of bounds"):
        tw.evaluate(C, {A: np.zeros(A.shape, np.float32)})


def test_out_of_bounds_read_of_an_intermediate():
    A = tw.placeholder((16,), "float32", name="A")
    P = tw.compute((16,), lambda i: A[i] + 1, name="P")
    C = tw.compute((16,), lambda i: P[i + 1], name="C")
    s = tw.create_schedule(C)
    s[C].split(C.op.axis[0], factor=4)
    with pytest.raises(tw.LoweringError, match=r"compute 'C' reads 'P' out of bounds: .*\[1, 16\]"):
        tw.build(s, [A, C])


@pytest.mark.parametrize("factor", [3, 4, 5, 16])
def test_guarded_reads_and_guarded_splits_are_legal(factor, rng):
    A = tw.placeholder((16,), "float32", name="A")
    G = tw.compute((16,), lambda i: tw.if_then_else(i >= 3, A[i - 3], 0.0)
                   + tw.if_then_else(tw.all(i + 2 < 16, i >= 1) if hasattr(tw, "all") else (i + 2 < 16) & (i >= 1),
                                     A[i + 2] - A[i - 1], 0.0), name="G")
    s = tw.create_schedule(G)
    s[G].split(G.op.axis[0], factor=factor)
    check_kernel(s, [A, G], rng)


def test_window_read_through_a_clamped_compute_at_region(rng):
    A = tw.placeholder((18,), "float32", name="A")
    P = tw.compute((20,), lambda i: tw.if_then_else((i >= 1) & (i < 19), A[i - 1], 0.0), name="P")
    C = tw.compute((18,), lambda i: P[i] + P[i + 2], name="C")
    s = tw.create_schedule(C)
    io, _ = s[C].split(C.op.axis[0], factor=4)
    s[P].compute_at(s[C], io)
    check_kernel(s, [A, C], rng)


def test_guard_that_never_holds_makes_its_read_dead(rng):
    A = tw.placeholder((5, 1), "int32", name="A")
    C = tw.compute((5, 1), lambda i, j: tw.if_then_else(j + 3 < 1, A[i, j + 3], 0), name="C")
    s = tw.create_schedule(C)
    s[C].fuse(*s[C].op.axis)
    check_kernel(s, [A, C], rng)

"""Regressions found by the random GPU schedules (test_random_gpu_schedules.py), each reduced to a minimal
schedule and checked on OpenCL (PoCL) against the reference, or lowered where the bug was in lowering."""

from __future__ import annotations

import pytest
from oracle import check_kernel

import tilewright as tw
from tilewright.build.opencl import opencl_available

NO_OPENCL = opencl_available()
needs_opencl = pytest.mark.skipif(NO_OPENCL is not None, reason=f"no OpenCL: {NO_OPENCL}")
BX, BY = tw.thread_axis("blockIdx.x"), tw.thread_axis("blockIdx.y")
TX, TY = tw.thread_axis("threadIdx.x"), tw.thread_axis("threadIdx.y")


@needs_opencl
def test_launch_dims_of_extent_one_are_kept(rng):
    """Loops bound with extent 1 were simplified away: the kernel had no bound loop left ('no loop bound
    to blockIdx/threadIdx')."""
    A = tw.placeholder((6, 29), "float32", name="A")
    Y = tw.compute((6, 29), lambda i, j: A[i, j] * 2, name="O")
    s = tw.create_schedule(Y)
    bo, r = s[Y].split(Y.op.axis[1], nparts=1)
    v, r = s[Y].split(r, nparts=2)
    t, r = s[Y].split(r, nparts=1)
    s[Y].bind(bo, BX)
    s[Y].bind(v, tw.thread_axis("vthread"))
    s[Y].bind(t, TX)
    check_kernel(s, [A, Y], rng, target="opencl")


@needs_opencl
def test_bound_split_keeps_its_factor_in_a_smaller_tile(rng):
    """A cooperative fetch split by the thread count (8) of a tile narrower than it (4 columns): the
    bound loop shrank to 4 while the block has 8 threads ('bound with extents 4 and 8')."""
    A = tw.placeholder((20, 12), "float32", name="A")
    B = tw.placeholder((12, 36), "float32", name="B")
    k = tw.reduce_axis(12, name="k")
    C = tw.compute((20, 36), lambda i, j: tw.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = tw.create_schedule(C)
    AS = s.cache_read(A, "shared", [C])
    bi, ti = s[C].split(C.op.axis[0], factor=8)
    bj, tj = s[C].split(C.op.axis[1], factor=8)
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(bi, bj, ti, tj, ko, ki)
    for ax, tag in ((bi, BY), (bj, BX), (ti, TY), (tj, TX)):
        s[C].bind(ax, tag)
    s[AS].compute_at(s[C], ko)
    r, c = AS.op.axis
    _, cx = s[AS].split(c, factor=8)  # the tile is 8 x 4: 4 columns for 8 threads
    s[AS].bind(r, TY)
    s[AS].bind(cx, TX)
    check_kernel(s, [A, B, C], rng, target="opencl", rtol=1e-4, atol=1e-4)


def _rowmax_rfactor_past_extent():
    A = tw.placeholder((5, 37), "float32", name="A")
    k = tw.reduce_axis(37, name="k")
    B = tw.compute((5,), lambda i: tw.max(A[i, k], axis=k), name="B")
    s = tw.create_schedule(B)
    _, ki = s[B].split(k, factor=64)  # a factor past the extent
    BF = s.rfactor(B, ki)
    return s, [A, B], BF


def test_rfactor_of_a_split_past_the_extent_is_guarded(rng):
    """rfactor read its loop values with the loop shrunk to the extent (37) but made the partial
    axis 64 long, unguarded: 'reads A out of bounds'."""
    s, args, _ = _rowmax_rfactor_past_extent()
    check_kernel(s, args, rng)


@needs_opencl
def test_rfactor_past_the_extent_across_threads(rng):
    s, (A, B), BF = _rowmax_rfactor_past_extent()
    red = s[B].op.reduce_axis[0]
    s[B].bind(s[B].op.axis[0], BX)
    s[B].bind(red, TX)
    s[BF].compute_at(s[B], red)
    check_kernel(s, [A, B], rng, target="opencl")


@needs_opencl
def test_copies_of_a_bound_loop_in_one_scope(rng):
    """A serial loop split around a bound loop (a fetch of 15 elements by 8 threads) left two
    declarations of its index in one C scope: 'redefinition of ax0_inner'."""
    A = tw.placeholder((19, 26), "float32", name="A")
    B = tw.placeholder((26,), "float32", name="B")
    C = tw.compute((19, 26), lambda i, j: A[i, j] * B[j] + 1, name="C")
    s = tw.create_schedule(C)
    BS = s.cache_read(B, "shared", [C])
    bo, r = s[C].split(C.op.axis[1], nparts=2)
    v, r = s[C].split(r, nparts=2)
    t, r = s[C].split(r, nparts=8)
    s[C].bind(bo, BX)
    s[C].bind(v, tw.thread_axis("vthread"))
    s[C].bind(t, TX)
    s[BS].compute_at(s[C], bo)
    _, ti = s[BS].split(BS.op.axis[0], factor=8)
    s[BS].bind(ti, TX)
    kernel = check_kernel(s, [A, B, C], rng, target="opencl")
    assert kernel.source.count("const int ax0_inner = ") == 2

"""vectorize_sum: a sum vectorized along its own reduction keeps one vector of
partial sums per unrolled row across the loop around it (lower/lane_sums.py);
where that structure is missing the loop runs serially, never as a racing
`omp simd` loop; reductions that are not sums and spatial loops are refused."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import check_kernel

import tilewright as tw
from tilewright.errors import ScheduleError
from tilewright.ir.stmt import For, ForKind, Scope, Store
from tilewright.ir.stmt_functor import walk_stmt


def gemv(m=20, k=64, reducer=tw.sum):
    A = tw.placeholder((m, k), "float32", name="A")
    x = tw.placeholder((k,), "float32", name="x")
    r = tw.reduce_axis(k, name="k")
    y = tw.compute((m,), lambda i: reducer(A[i, r] * x[r], axis=r), name="y")
    return A, x, y


def lane_schedule(unroll_rows: bool, k=64):
    A, x, y = gemv(k=k)
    s = tw.create_schedule(y)
    io, ii = s[y].split(y.op.axis[0], factor=4)
    ko, kv = s[y].split(y.op.reduce_axis[0], factor=8)
    s[y].reorder(io, ko, ii, kv)
    if unroll_rows:
        s[y].unroll(ii)
    s[y].vectorize_sum(kv)
    return s, [A, x, y]


def test_rows_keep_vector_partial_sums_across_the_reduction():
    s, args = lane_schedule(unroll_rows=True)
    check_kernel(s, args, np.random.default_rng(0), rtol=1e-5, atol=1e-5)
    body = tw.lower(s, args).body
    sums = [st for st in walk_stmt(body) if isinstance(st, Store) and st.buffer.scope is Scope.LOCAL]
    assert len({st.buffer.name for st in sums}) == 1 and all(st.value.dtype.lanes == 8 for st in sums)
    assert not any(isinstance(st, For) and st.kind is ForKind.VECTORIZED for st in walk_stmt(body))


@pytest.mark.parametrize("k", [64, 60])  # 60: the lane loop has a guarded tail
def test_without_unrolled_rows_the_lane_loop_runs_serially(k):
    s, args = lane_schedule(unroll_rows=False, k=k)
    check_kernel(s, args, np.random.default_rng(1), rtol=1e-5, atol=1e-5)
    source = tw.build(s, args).source
    assert "omp simd" not in source


def test_vectorize_sum_needs_a_sum_and_a_reduce_loop():
    A, x, y = gemv(reducer=tw.max)
    s = tw.create_schedule(y)
    with pytest.raises(ScheduleError, match="needs a sum"):
        s[y].vectorize_sum(y.op.reduce_axis[0])
    A, x, y = gemv()
    s = tw.create_schedule(y)
    with pytest.raises(ScheduleError, match="spatial"):
        s[y].vectorize_sum(y.op.axis[0])

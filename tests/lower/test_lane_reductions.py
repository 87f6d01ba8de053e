"""vectorize_sum / vectorize_reduce: a sum, max or min vectorized along its own
reduction keeps one vector of partial results per unrolled row across the loop
around it (lower/lane_reductions.py); where that structure is missing the loop runs
serially, never as a racing `omp simd` loop; other reducers and spatial loops are
refused. The CPU space vectorizes a softmax's row max this way."""

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


def lane_schedule(unroll_rows: bool, k=64, reducer=tw.sum):
    A, x, y = gemv(k=k, reducer=reducer)
    s = tw.create_schedule(y)
    io, ii = s[y].split(y.op.axis[0], factor=4)
    ko, kv = s[y].split(y.op.reduce_axis[0], factor=8)
    s[y].reorder(io, ko, ii, kv)
    if unroll_rows:
        s[y].unroll(ii)
    (s[y].vectorize_sum if reducer is tw.sum else s[y].vectorize_reduce)(kv)
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


@pytest.mark.parametrize("reducer", [tw.max, tw.min])
def test_max_and_min_keep_vector_partial_results(reducer):
    s, args = lane_schedule(unroll_rows=True, reducer=reducer)
    kernel = check_kernel(s, args, np.random.default_rng(2), rtol=0, atol=0)  # exact: no reassociation error
    body = tw.lower(s, args).body
    parts = [st for st in walk_stmt(body) if isinstance(st, Store) and st.buffer.scope is Scope.LOCAL
             and st.value.dtype.lanes == 8]
    assert parts, "no vector of partial results"
    a = np.random.default_rng(3).standard_normal((20, 64)).astype("float32")
    v = np.ones(64, "float32")
    a[5, 17] = np.nan  # a NaN anywhere in a row wins, as in NumPy
    out = np.empty(20, "float32")
    kernel(a, v, out)
    want = (np.max if reducer is tw.max else np.min)(a * v, axis=1)
    np.testing.assert_array_equal(out, want)


def test_vectorize_reduce_refuses_other_reducers():
    prod = tw.comm_reducer(lambda a, b: a * b, lambda t: 1, name="prod")
    A, x, y = gemv(reducer=prod)
    s = tw.create_schedule(y)
    with pytest.raises(ScheduleError, match="needs a sum, max or min"):
        s[y].vectorize_reduce(y.op.reduce_axis[0])


def test_cpu_default_vectorizes_a_softmax_row_max():
    from synthetic_targets import AVX2, host_runs

    from tilewright.space.cpu import apply_cpu, cpu_space
    from tilewright.space.cpu_default import default_point

    X = tw.placeholder((6, 64), "float32", name="X")
    Y = tw.ops.softmax(X, 1, name="sm")
    space, plan = cpu_space([Y], AVX2)
    s = apply_cpu([Y], plan, default_point(space, plan))
    if host_runs(AVX2):
        check_kernel(s, [X, Y], np.random.default_rng(4), rtol=1e-5, atol=1e-6, target=AVX2)
    body = tw.lower(s, [X, Y]).body
    assert any(isinstance(st, Store) and st.buffer.name.startswith("sm_max_lanes") and st.value.dtype.lanes > 1
               for st in walk_stmt(body))

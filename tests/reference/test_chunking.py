"""Bounded memory: the chunk planner's bound, and that results do not depend on it."""

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tilewright as tw
from tilewright.reference.stage_eval import plan_chunks


def test_plan_keeps_the_working_set_under_budget():
    # GEMM 4096^3 as terms A[i,k], B[k,j] over dims (i, j, k).
    extents = [4096, 4096, 4096]
    terms = [{0, 2}, {2, 1}]
    budget = 1 << 22
    chunk = plan_chunks(extents, terms, 2, budget)
    size = sum(math.prod(chunk[d] for d in t) for t in terms) * 2 + chunk[0] * chunk[1]
    assert size <= budget
    assert chunk != extents


def test_plan_takes_everything_when_it_fits():
    assert plan_chunks([32, 32, 32], [{0, 2}, {1, 2}], 2, 1 << 20) == [32, 32, 32]


def conv1d_program(n, c, length, f, kernel, stride, dilation):
    X = tw.placeholder((n, c, length), "float64", name="X")
    W = tw.placeholder((f, c, kernel), "float64", name="W")
    out = (length - dilation * (kernel - 1) - 1) // stride + 1
    rc, rk = tw.reduce_axis(c, "rc"), tw.reduce_axis(kernel, "rk")
    Y = tw.compute((n, f, out), lambda b, o, x: tw.sum(X[b, rc, x * stride + rk * dilation] * W[o, rc, rk],
                                                      axis=[rc, rk]), name="Y")
    return X, W, Y, out


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 2), c=st.integers(1, 5), length=st.integers(8, 20), f=st.integers(1, 4),
    kernel=st.integers(1, 3), stride=st.integers(1, 3), dilation=st.integers(1, 2),
    budget=st.sampled_from([1, 7, 50, 400]),
)
def test_contraction_is_independent_of_chunking(n, c, length, f, kernel, stride, dilation, budget):
    X, W, Y, out = conv1d_program(n, c, length, f, kernel, stride, dilation)
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((n, c, length)), rng.standard_normal((f, c, kernel))
    want = np.zeros((n, f, out))
    for r in range(kernel):
        xs = x[:, :, r * dilation: r * dilation + stride * (out - 1) + 1: stride]
        want += np.einsum("bcx,oc->box", xs, w[:, :, r])
    np.testing.assert_allclose(tw.evaluate(Y, {X: x, W: w}, budget=budget), want, rtol=1e-12, atol=1e-12)


@settings(max_examples=20, deadline=None)
@given(rows=st.integers(1, 9), cols=st.integers(1, 9), budget=st.sampled_from([1, 5, 30, 1000]))
def test_general_reduction_and_elementwise_are_independent_of_chunking(rows, cols, budget):
    X = tw.placeholder((rows, cols), "float32", name="X")
    k = tw.reduce_axis(cols, "k")
    M = tw.compute((rows,), lambda i: tw.max(X[i, k] - X[i, 0], axis=k), name="M")
    k2 = tw.reduce_axis(cols, "k2")
    S = tw.compute((rows,), lambda i: tw.sum(tw.exp(X[i, k2] - M[i]), axis=k2), name="S")
    E = tw.compute((rows, cols), lambda i, j: tw.exp(X[i, j] - M[i]) / S[i], name="E")
    x = np.random.default_rng(2).standard_normal((rows, cols)).astype("float32")
    got = tw.evaluate([M, E], {X: x}, budget=budget)
    np.testing.assert_allclose(got[0], (x - x[:, :1]).max(1), rtol=1e-6)
    e = np.exp(x - got[0][:, None])
    np.testing.assert_allclose(got[1], e / e.sum(1, keepdims=True), rtol=1e-5)


def test_reduce_axis_absent_from_factors_counts_its_extent():
    X = tw.placeholder((3,), "float64", name="X")
    k = tw.reduce_axis(5, "k")
    S = tw.compute((3,), lambda i: tw.sum(X[i] * 2.0, axis=k), name="S")
    np.testing.assert_allclose(tw.evaluate(S, {X: np.array([1.0, 2.0, 3.0])}, budget=4), [10.0, 20.0, 30.0])

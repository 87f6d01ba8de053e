"""Kernels and the reference agree where C's own rules differ from them: narrow
integers wrap at every operation (C computes them in int), and a NaN on either
side of max/min wins (as NumPy's maximum/minimum), scalar, vector and reduction."""

import numpy as np
import pytest

import tilewright as tw


@pytest.mark.parametrize("dtype", ["int8", "int16", "uint8"])
def test_narrow_integer_arithmetic_wraps_like_the_reference(dtype):
    A, B, C = (tw.placeholder((64,), dtype, name=n) for n in "ABC")
    D = tw.compute((64,), lambda i: tw.if_then_else(A[i] + B[i] > C[i], tw.const(1, dtype), tw.const(0, dtype)),
                   name="D")
    E = tw.compute((64,), lambda i: -(A[i] * B[i]), name="E")
    rng = np.random.default_rng(0)
    info = np.iinfo(dtype)
    a, b, c = (rng.integers(info.min, info.max, 64, endpoint=True).astype(dtype) for _ in range(3))
    for out, ins, arrays in ((D, [A, B, C], [a, b, c]), (E, [A, B], [a, b])):
        got = np.zeros(64, dtype)
        tw.build(tw.create_schedule(out), [*ins, out])(*arrays, got)
        np.testing.assert_array_equal(got, tw.evaluate(out, dict(zip(ins, arrays))))


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("vector", [False, True])
def test_a_nan_on_either_side_of_max_and_min_wins(op, vector):
    A, B = tw.placeholder((64,), "float32", name="A"), tw.placeholder((64,), "float32", name="B")
    E = tw.compute((64,), lambda i: getattr(tw, op)(A[i], B[i]), name="E")
    s = tw.create_schedule(E)
    if vector:
        _, inner = s[E].split(E.op.axis[0], factor=8)
        s[E].vectorize(inner)
    a, b = np.arange(64, dtype="float32"), np.zeros(64, "float32")
    a[3], b[5] = np.nan, np.nan
    got = np.zeros(64, "float32")
    tw.build(s, [A, B, E])(a, b, got)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(tw.evaluate(E, {A: a, B: b})))
    assert np.isnan(got[[3, 5]]).all()


def test_a_max_reduction_over_a_nan_is_nan():
    A = tw.placeholder((64,), "float32", name="A")
    k = tw.reduce_axis(64, name="k")
    R = tw.compute((1,), lambda i: tw.max(A[k], axis=k), name="R")
    a = np.arange(64, dtype="float32")
    a[3] = np.nan
    got = np.zeros(1, "float32")
    tw.build(tw.create_schedule(R), [A, R])(a, got)
    assert np.isnan(got[0]) and np.isnan(tw.evaluate(R, {A: a})[0])


def test_a_float32_round_trip_inside_float64_code_rounds():
    """GCC 12's SLP vectorizer dropped (double)(float)x in this loop (found by the fuzzer)."""
    A = tw.placeholder((6,), "float64", name="A")
    S = tw.compute((6,), lambda i: A[5 - i] * tw.cast(tw.cast(A[i], "float32"), "float64"), name="S")
    a = np.array([0.1, 0.7, -0.3, 0.123456789, 0.5, -0.9])
    got = np.zeros(6)
    tw.build(tw.create_schedule(S), [A, S])(a, got)
    np.testing.assert_array_equal(got, a[::-1] * a.astype(np.float32).astype(np.float64))

"""Scalar semantics of the reference evaluator (C-like where it matters)."""

import math

import numpy as np
import pytest

import tilewright as tw
from tilewright.reference.values import round_to_bfloat16


def unary_program(dtype, fn, n=None):
    X = tw.placeholder((n,), dtype, name="X")
    return X, tw.compute((n,), lambda i: fn(X[i]), name="Y")


def run(fn, x, dtype=None):
    x = np.asarray(x)
    X, Y = unary_program(dtype or x.dtype.name, fn, x.shape[0])
    return tw.evaluate(Y, {X: x})


def test_integer_arithmetic_wraps_like_c():
    got = run(lambda v: v + 100, np.array([100, -100, 27], "int8"))
    np.testing.assert_array_equal(got, np.array([-56, 0, 127], "int8"))
    assert got.dtype == np.int8


def test_floor_division_and_modulo_follow_python():
    x = np.array([7, -7, 7, -7], "int32")
    d = np.array([2, 2, -2, -2], "int32")
    X, D = tw.placeholder((4,), "int32", name="X"), tw.placeholder((4,), "int32", name="D")
    q = tw.compute((4,), lambda i: X[i] // D[i], name="q")
    r = tw.compute((4,), lambda i: X[i] % D[i], name="r")
    tq = tw.compute((4,), lambda i: tw.truncdiv(X[i], D[i]), name="tq")
    tr = tw.compute((4,), lambda i: tw.truncmod(X[i], D[i]), name="tr")
    got = tw.evaluate([q, r, tq, tr], {X: x, D: d})
    np.testing.assert_array_equal(got[0], [7 // 2, -7 // 2, 7 // -2, -7 // -2])
    np.testing.assert_array_equal(got[1], [7 % 2, -7 % 2, 7 % -2, -7 % -2])
    np.testing.assert_array_equal(got[2], [3, -3, -3, 3])  # C truncation
    np.testing.assert_array_equal(got[3], [1, -1, 1, -1])


def test_float_to_int_cast_truncates():
    got = run(lambda v: tw.cast(v, "int32"), np.array([1.7, -1.7, 2.5], "float32"))
    np.testing.assert_array_equal(got, [1, -1, 2])


def test_bfloat16_rounds_to_nearest_even():
    x = np.array([1.0 + 2**-8, 1.0 + 3 * 2**-8, 3.14159, -2.71828], "float32")
    got = run(lambda v: tw.cast(v, "bfloat16"), x)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, [1.0, 1.0 + 2**-6, 3.140625, -2.71875])
    np.testing.assert_array_equal(round_to_bfloat16(got), got)


def test_bfloat16_arithmetic_rounds_each_result():
    x = round_to_bfloat16(np.array([1.0, 3.0], "float32"))
    got = run(lambda v: v / 3.0, x, "bfloat16")
    np.testing.assert_array_equal(got, round_to_bfloat16(x / 3.0))


def test_float16_arithmetic_stays_float16():
    got = run(lambda v: v * 3.0 + 1.0, np.array([0.1, 1000.0], "float16"))
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, np.array([0.1, 1000.0], "float16") * np.float16(3) + np.float16(1))


@pytest.mark.parametrize(
    "fn, ref",
    [
        (tw.exp, np.exp), (tw.log, np.log), (tw.sqrt, np.sqrt), (tw.tanh, np.tanh), (tw.floor, np.floor),
        (tw.ceil, np.ceil), (tw.abs, np.abs), (tw.sin, np.sin), (tw.cos, np.cos), (tw.round, np.rint),
        (tw.rsqrt, lambda x: 1 / np.sqrt(x)), (tw.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
        (tw.erf, np.vectorize(math.erf)), (lambda v: tw.pow(v, 1.5), lambda x: x**1.5),
    ],
)
def test_math_intrinsics(fn, ref):
    x = np.array([0.25, 0.5, 1.5, 2.5, 7.0], "float64")
    np.testing.assert_allclose(run(fn, x), ref(x), rtol=1e-12)


def test_sigmoid_is_stable_for_large_magnitudes():
    got = run(tw.sigmoid, np.array([-1000.0, 1000.0], "float32"))
    np.testing.assert_array_equal(got, [0.0, 1.0])


def test_guarded_out_of_bounds_read_is_not_evaluated():
    X = tw.placeholder((4,), "float32", name="X")
    Y = tw.compute((6,), lambda i: tw.if_then_else(i < 4, X[i], -1.0), name="Y")
    np.testing.assert_array_equal(tw.evaluate(Y, {X: np.arange(4, dtype="float32")}), [0, 1, 2, 3, -1, -1])


def test_nested_guards_combine():
    X = tw.placeholder((4,), "float32", name="X")
    Y = tw.compute(
        (8,), lambda i: tw.if_then_else(i >= 2, tw.if_then_else(i < 6, X[i - 2], 9.0), 7.0), name="Y"
    )
    np.testing.assert_array_equal(tw.evaluate(Y, {X: np.arange(4, dtype="float32")}), [7, 7, 0, 1, 2, 3, 9, 9])


def test_unguarded_out_of_bounds_read_is_an_error():
    X = tw.placeholder((4,), "float32", name="X")
    Y = tw.compute((5,), lambda i: X[i + 1] * 2.0, name="Y")
    with pytest.raises(tw.EvaluationError, match=r"compute 'Y' reads 'X' out of bounds: axis 0 index 4 .*\[0, 4\)"):
        tw.evaluate(Y, {X: np.zeros(4, "float32")})


def test_input_validation_messages():
    X = tw.placeholder((2, 3), "float32", name="X")
    Y = tw.compute((2, 3), lambda i, j: X[i, j] + 1.0, name="Y")
    with pytest.raises(tw.EvaluationError, match=r"missing input\(s\) \['X'\]"):
        tw.evaluate(Y, {})
    with pytest.raises(tw.EvaluationError, match="'Z', which is not a placeholder.*placeholders are: X"):
        tw.evaluate(Y, {"X": np.zeros((2, 3)), "Z": 1})
    with pytest.raises(tw.EvaluationError, match=r"input 'X' has shape \[3, 2\], expected \[2, 3\]"):
        tw.evaluate(Y, {"X": np.zeros((3, 2))})
    with pytest.raises(tw.EvaluationError, match="input 'X' has dtype complex128"):
        tw.evaluate(Y, {"X": np.zeros((2, 3), complex)})
    with pytest.raises(tw.EvaluationError, match="'Y' is computed by the program, not an input"):
        tw.evaluate(Y, {"X": np.zeros((2, 3)), "Y": np.zeros((2, 3))})
    ints = tw.placeholder((2,), "int32", name="I")
    J = tw.compute((2,), lambda i: ints[i] + 1, name="J")
    with pytest.raises(tw.EvaluationError, match="input 'I' has dtype float64, which does not convert to int32"):
        tw.evaluate(J, {ints: np.zeros(2)})


def test_float64_input_converts_to_float32_placeholder():
    X = tw.placeholder((2,), "float32", name="X")
    Y = tw.compute((2,), lambda i: X[i], name="Y")
    assert tw.evaluate(Y, {X: np.array([0.1, 0.2])}).dtype == np.float32


def test_multiple_outputs_come_back_as_a_list():
    X = tw.placeholder((2,), "int32", name="X")
    Y = tw.compute((2,), lambda i: X[i] + 1, name="Y")
    Z = tw.compute((2,), lambda i: Y[i] * 2, name="Z")
    y, z = tw.evaluate([Y, Z], {X: np.array([1, 2], "int32")})
    np.testing.assert_array_equal(y, [2, 3])
    np.testing.assert_array_equal(z, [4, 6])


def test_integer_sum_is_exact_then_wraps():
    X = tw.placeholder((1, 4), "int32", name="X")
    k = tw.reduce_axis(4, name="k")
    S = tw.compute((1,), lambda i: tw.sum(X[i, k] * X[i, k], axis=k), name="S")
    x = np.array([[50000, 50000, 3, -4]], "int32")
    want = np.array([(2 * 50000**2 + 9 + 16) % 2**32], "int64")
    want = np.where(want >= 2**31, want - 2**32, want).astype("int32")
    np.testing.assert_array_equal(tw.evaluate(S, {X: x}), want)


def test_float_sum_accumulates_in_higher_precision():
    X = tw.placeholder((1, 3), "float32", name="X")
    k = tw.reduce_axis(3, name="k")
    S = tw.compute((1,), lambda i: tw.sum(X[i, k], axis=k), name="S")
    got = tw.evaluate(S, {X: np.array([[1e8, 1.0, -1e8]], "float32")})
    np.testing.assert_array_equal(got, [1.0])

"""Dtype promotion rules and literal conversion."""

import numpy as np
import pytest

import tilewright as tw
from tilewright.ir import dtype as dt


@pytest.mark.parametrize(
    "a, b, want",
    [
        ("int8", "int32", "int32"),
        ("int16", "int64", "int64"),
        ("uint8", "int16", "int16"),
        ("uint8", "int32", "int32"),
        ("float16", "float32", "float32"),
        ("bfloat16", "float32", "float32"),
        ("bfloat16", "float64", "float64"),
        ("float32", "float64", "float64"),
        ("int32", "int32", "int32"),
    ],
)
def test_lossless_promotions(a, b, want):
    A = tw.placeholder((2,), a, name="A")
    B = tw.placeholder((2,), b, name="B")
    C = tw.compute((2,), lambda i: A[i] + B[i], name="C")
    assert C.dtype.name == want
    assert dt.promote(dt.as_dtype(b), dt.as_dtype(a)).name == want


@pytest.mark.parametrize(
    "a, b",
    [("int32", "float32"), ("int8", "uint8"), ("float16", "bfloat16"), ("bool", "int32"), ("uint8", "float16")],
)
def test_mixes_that_need_a_cast(a, b):
    A = tw.placeholder((2,), a, name="A")
    B = tw.placeholder((2,), b, name="B")
    with pytest.raises(tw.DTypeError, match=rf"{a} and {b}.*explicit cast"):
        tw.compute((2,), lambda i: A[i] * B[i], name="C")


def test_cast_resolves_a_mix():
    A = tw.placeholder((2,), "int32", name="A")
    B = tw.placeholder((2,), "float32", name="B")
    C = tw.compute((2,), lambda i: tw.cast(A[i], "float32") * B[i], name="C")
    assert C.dtype.name == "float32"


def test_literals_take_the_other_operand_dtype():
    A = tw.placeholder((2,), "int8", name="A")
    F = tw.placeholder((2,), "float16", name="F")
    assert tw.compute((2,), lambda i: A[i] + 3, name="C").dtype.name == "int8"
    assert tw.compute((2,), lambda i: F[i] * 2, name="D").dtype.name == "float16"
    assert tw.compute((2,), lambda i: F[i] * 0.5, name="E").dtype.name == "float16"
    with pytest.raises(tw.DTypeError, match="literal 300 does not fit int8"):
        tw.compute((2,), lambda i: A[i] + 300, name="G")
    with pytest.raises(tw.DTypeError, match="literal 0.5 cannot take dtype int8"):
        tw.compute((2,), lambda i: A[i] * 0.5, name="H")


def test_integer_true_division_is_rejected():
    A = tw.placeholder((2,), "int32", name="A")
    with pytest.raises(tw.DTypeError, match=r"use // \(floor division\)"):
        tw.compute((2,), lambda i: A[i] / 2, name="C")


def test_bool_arithmetic_and_float_bitwise_are_rejected():
    A = tw.placeholder((2,), "float32", name="A")
    with pytest.raises(tw.DTypeError, match="not defined on bool"):
        tw.compute((2,), lambda i: (A[i] > 0) + (A[i] < 1), name="C")
    with pytest.raises(tw.DTypeError, match="bool .*or integer"):
        tw.compute((2,), lambda i: A[i] & A[i], name="D")


def test_math_intrinsics_need_floats():
    A = tw.placeholder((2,), "int32", name="A")
    with pytest.raises(tw.DTypeError, match="exp needs a floating-point argument"):
        tw.compute((2,), lambda i: tw.exp(A[i]), name="C")
    assert tw.compute((2,), lambda i: tw.abs(A[i]), name="D").dtype.name == "int32"


def test_unknown_dtype_lists_valid_ones():
    with pytest.raises(tw.DTypeError, match="unknown dtype of placeholder 'A' 'float8'.*float32"):
        tw.placeholder((2,), "float8", name="A")


def test_dtype_accepts_numpy_spellings():
    assert tw.placeholder((2,), np.float64, name="A").dtype.name == "float64"
    assert tw.placeholder((2,), np.dtype("uint8"), name="B").dtype.name == "uint8"


def test_select_condition_must_be_bool():
    A = tw.placeholder((2,), "int32", name="A")
    with pytest.raises(tw.DTypeError, match="condition must be bool"):
        tw.compute((2,), lambda i: tw.if_then_else(A[i], 1, 0), name="C")


def test_const_defaults_and_range():
    assert tw.const(3).dtype.name == "int32"
    assert tw.const(1 << 40).dtype.name == "int64"
    assert tw.const(1.5).dtype.name == "float32"
    assert tw.const(True).dtype.name == "bool"
    with pytest.raises(tw.DTypeError, match="does not fit"):
        tw.const(256, "uint8")

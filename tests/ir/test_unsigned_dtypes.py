"""uint16/uint32/uint64: promotion (two unsigned -> the wider, unsigned into a wider signed int, anything
else an explicit cast), literals beyond int64, bitwise operators on integers only."""

import numpy as np
import pytest

import tilewright as tw
from tilewright.ir import dtype as dt


@pytest.mark.parametrize("a, b, want", [
    ("uint8", "uint16", "uint16"), ("uint16", "uint32", "uint32"), ("uint8", "uint64", "uint64"),
    ("uint32", "uint64", "uint64"), ("uint16", "int32", "int32"), ("uint32", "int64", "int64"),
    ("uint16", "int64", "int64"), ("uint64", "uint64", "uint64"),
])
def test_unsigned_promotions(a, b, want):
    A = tw.placeholder((2,), a, name="A")
    B = tw.placeholder((2,), b, name="B")
    assert tw.compute((2,), lambda i: A[i] + B[i], name="C").dtype.name == want
    assert dt.promote(dt.as_dtype(b), dt.as_dtype(a)).name == want


@pytest.mark.parametrize("a, b", [("uint16", "int16"), ("uint32", "int32"), ("uint32", "int16"),
                                  ("uint64", "int64"), ("uint64", "int8"), ("uint32", "float32"),
                                  ("uint16", "bool")])
def test_unsigned_mixes_that_need_a_cast(a, b):
    A = tw.placeholder((2,), a, name="A")
    B = tw.placeholder((2,), b, name="B")
    assert dt.promote(dt.as_dtype(a), dt.as_dtype(b)) is None
    with pytest.raises(tw.DTypeError, match=rf"{a} and {b}.*explicit cast"):
        tw.compute((2,), lambda i: A[i] < B[i], name="C")


def test_unsigned_dtypes_come_from_names_and_numpy():
    for name in ("uint16", "uint32", "uint64"):
        d = dt.as_dtype(name)
        assert (d.kind, d.bits, d.numpy) == (dt.Kind.UINT, int(name[4:]), np.dtype(name))
        assert dt.as_dtype(np.dtype(name)) is d
        assert d.int_range == (0, (1 << d.bits) - 1)
        assert (d.lowest, d.highest) == d.int_range


def test_literals_on_unsigned_operands():
    A = tw.placeholder((2,), "uint64", name="A")
    B = tw.placeholder((2,), "uint32", name="B")
    assert tw.compute((2,), lambda i: A[i] + (2 ** 64 - 1), name="C").dtype.name == "uint64"
    with pytest.raises(tw.DTypeError, match="literal -1 does not fit uint32"):
        tw.compute((2,), lambda i: B[i] + (-1), name="D")
    with pytest.raises(tw.DTypeError, match="does not fit uint32"):
        tw.compute((2,), lambda i: B[i] * (2 ** 32), name="E")
    assert tw.const(2 ** 63).dtype.name == "uint64"
    assert tw.const(2 ** 63 - 1).dtype.name == "int64"
    with pytest.raises(tw.DTypeError, match="does not fit"):
        tw.const(2 ** 64)


def test_bitwise_operators_need_integers_or_bool():
    A = tw.placeholder((2,), "uint32", name="A")
    F = tw.placeholder((2,), "float32", name="F")
    assert tw.compute((2,), lambda i: (A[i] << 3) ^ ~A[i], name="C").dtype.name == "uint32"
    with pytest.raises(tw.DTypeError, match="<< needs integer operands"):
        tw.compute((2,), lambda i: F[i] << 1, name="D")
    with pytest.raises(tw.DTypeError, match="~ needs a bool or integer operand"):
        tw.compute((2,), lambda i: ~F[i], name="E")

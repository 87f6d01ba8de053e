"""An output that overlaps an input is computed correctly through a copy; two
outputs that overlap, or overlapping arguments of a timing, are a MeasureError
naming both arguments."""

import numpy as np
import pytest

import tilewright as tw
from tilewright.errors import MeasureError


def transpose(n=64):
    A = tw.placeholder((n, n), "float32", name="A")
    B = tw.compute((n, n), lambda i, j: A[j, i], name="B")
    s = tw.create_schedule(B)
    io, jo, ii, ji = s[B].tile(B.op.axis[0], B.op.axis[1], 8, 8)
    return tw.build(s, [A, B], target="cpu")


def test_an_output_that_is_its_input_is_computed_through_a_copy():
    kernel = transpose()
    a = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    want = a.T.copy()
    kernel(a, a)
    assert np.array_equal(a, want)


def test_an_output_overlapping_a_view_of_its_input():
    A = tw.placeholder((64,), "float32", name="A")
    B = tw.compute((64,), lambda i: A[63 - i] + 1.0, name="B")
    kernel = tw.build(tw.create_schedule(B), [A, B], target="cpu")
    buf = np.arange(96, dtype=np.float32)
    a, b = buf[:64], buf[32:]
    want = a[::-1] + 1.0
    kernel(a, b)
    assert np.array_equal(b, want)


def test_two_overlapping_outputs_are_an_error_naming_both():
    A = tw.placeholder((16,), "float32", name="A")
    B = tw.compute((16,), lambda i: A[i] + 1.0, name="B")
    C = tw.compute((16,), lambda i: B[i] * 2.0, name="C")
    kernel = tw.build(tw.create_schedule(C), [A, B, C], target="cpu")
    a, out = np.ones(16, np.float32), np.zeros(16, np.float32)
    with pytest.raises(MeasureError, match="'B' and 'C'.*overlap"):
        kernel(a, out, out)


def test_timing_overlapping_arguments_is_an_error():
    kernel = transpose(16)
    a = np.ones((16, 16), np.float32)
    with pytest.raises(MeasureError, match="'A' and 'B'.*overlap"):
        kernel.time(a, a, repeat=1)

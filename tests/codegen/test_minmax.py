"""Scalar max/min (codegen helper_minmax) keep NumPy's NaN rule in either operand
position, and are written so that the compiler selects rather than branches on
the comparison (a ReLU epilogue of scalar stores mispredicted half its branches
on inputs of either sign)."""

from __future__ import annotations

import numpy as np
import pytest

import tilewright as tw


@pytest.mark.parametrize("which", ["max", "min"])
def test_scalar_max_min_propagate_nan_from_either_side(which):
    n = 8
    A = tw.placeholder((n,), "float32", name="A")
    B = tw.placeholder((n,), "float32", name="B")
    f = tw.max if which == "max" else tw.min
    C = tw.compute((n,), lambda i: f(A[i], B[i]), name="C")
    s = tw.create_schedule(C)  # no vectorize: the scalar helper
    kernel = tw.build(s, [A, B, C], target="cpu")
    assert f"tw_{which}_float32" in kernel.source and "||" not in kernel.source.split(f"tw_{which}_float32")[1][:80]
    a = np.array([1, -1, np.nan, 2, np.nan, -0.5, np.inf, -np.inf], np.float32)
    b = np.array([-1, 1, 3, np.nan, np.nan, -0.25, 1, np.inf], np.float32)
    c = np.empty(n, np.float32)
    kernel(a, b, c)
    np.testing.assert_array_equal(c, (np.maximum if which == "max" else np.minimum)(a, b))

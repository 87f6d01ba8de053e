"""Unsigned and shift arithmetic in generated kernels equals NumPy's: uint32/uint64 values above
INT32_MAX/INT64_MAX (C literals, comparisons, division and modulo without sign tricks), narrow unsigned
values that C promotes to int (uint16 products, ~uint8), shifts by counts outside [0, bits), and
simplification that must not pull constants out of wrapping unsigned sums."""

from __future__ import annotations

import numpy as np
import pytest

import tilewright as tw
from tilewright.build.opencl import opencl_available

N = 64
TARGETS = ["cpu", pytest.param("opencl", marks=pytest.mark.skipif(opencl_available() is not None,
                                                                    reason=f"no OpenCL: {opencl_available()}"))]


def _values(dtype: str, rng) -> tuple[np.ndarray, np.ndarray]:
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, N, dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, N, dtype=dtype, endpoint=True)
    edges = np.array([info.max, info.max - 1, info.max // 2 + 1, info.max // 2, 1, 0], dtype)
    a[:6], b[6:12] = edges, edges
    a[12:18], b[12:18] = edges, edges[::-1]
    b[18] = 0
    return a, b


def _run(outs, a, b, A, B, target="cpu", schedule=None):
    kernel = tw.build(schedule or [A, B, *outs], [A, B, *outs], target=target) if schedule else \
        tw.build([A, B, *outs], target=target)
    got = [np.zeros(t.shape, t.dtype.numpy) for t in outs]
    kernel(a, b, *got)
    reference = tw.evaluate(outs, {A: a, B: b})
    for t, g, r in zip(outs, got, reference, strict=True):
        np.testing.assert_array_equal(r, g, err_msg=f"reference vs kernel, '{t.name}'")
    return got, kernel


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["uint16", "uint32", "uint64"])
def test_unsigned_arithmetic_division_and_comparisons_match_numpy(dtype, target, rng):
    A = tw.placeholder((N,), dtype, name="A")
    B = tw.placeholder((N,), dtype, name="B")
    top = int(np.iinfo(dtype).max)
    outs = [
        tw.compute((N,), lambda i: A[i] + B[i] * 3 - (top - 4), name="wrap"),
        tw.compute((N,), lambda i: A[i] * B[i], name="product"),
        tw.compute((N,), lambda i: A[i] // B[i], name="quotient"),
        tw.compute((N,), lambda i: A[i] % B[i], name="remainder"),
        tw.compute((N,), lambda i: tw.truncdiv(A[i], B[i]) + tw.truncmod(A[i], B[i]), name="trunc"),
        tw.compute((N,), lambda i: tw.if_then_else(A[i] > B[i], A[i], B[i] ^ top), name="greater"),
        tw.compute((N,), lambda i: tw.if_then_else(A[i] >= top // 2 + 1, ~A[i], -B[i]), name="high_half"),
        tw.compute((N,), lambda i: tw.max(A[i], B[i]) - tw.min(A[i], B[i]), name="spread"),
    ]
    a, b = _values(dtype, rng)
    got, _ = _run(outs, a, b, A, B, target)
    safe = np.where(b == 0, 1, b)
    with np.errstate(over="ignore"):
        want = [a + b * np.array(3, dtype) - np.array(top - 4, dtype), a * b,
                np.where(b == 0, 0, a // safe), np.where(b == 0, a, a % safe),
                np.where(b == 0, 0, a // safe) + np.where(b == 0, a, a % safe),
                np.where(a > b, a, b ^ np.array(top, dtype)),
                np.where(a >= np.array(top // 2 + 1, dtype), ~a, -b), np.maximum(a, b) - np.minimum(a, b)]
    for t, g, w in zip(outs, got, want, strict=True):
        np.testing.assert_array_equal(g, w.astype(dtype), err_msg=t.name)


def test_large_unsigned_literals_are_typed_in_c():
    A = tw.placeholder((N,), "uint64", name="A")
    B = tw.placeholder((N,), "uint32", name="B")
    outs = [tw.compute((N,), lambda i: tw.if_then_else(A[i] > 2 ** 63 + 7, A[i] - (2 ** 64 - 3), A[i]), name="C"),
            tw.compute((N,), lambda i: tw.if_then_else(B[i] < 3_000_000_000, B[i] + 4_000_000_000, B[i]), name="D")]
    a = np.array([2 ** 63 + 8, 2 ** 63 + 7, 5, 2 ** 64 - 1] * (N // 4), np.uint64)
    b = np.array([2_999_999_999, 3_000_000_000, 7, 2 ** 32 - 1] * (N // 4), np.uint32)
    kernel = tw.build([A, B, *outs], target="cpu")
    assert "UINT64_C(18446744073709551613)" in kernel.source and "3000000000u" in kernel.source
    c, d = np.zeros(N, np.uint64), np.zeros(N, np.uint32)
    kernel(a, b, c, d)
    np.testing.assert_array_equal(c, np.where(a > 2 ** 63 + 7, a + np.uint64(3), a))
    np.testing.assert_array_equal(d, np.where(b < 3_000_000_000, b + np.uint32(4_000_000_000), b))


def test_narrow_unsigned_values_wrap_as_numpy_does():
    A = tw.placeholder((N,), "uint16", name="A")
    B = tw.placeholder((N,), "uint8", name="B")
    outs = [tw.compute((N,), lambda i: A[i] * A[i], name="square"),
            tw.compute((N,), lambda i: tw.if_then_else(~B[i] > 200, ~B[i] // 3, B[i]), name="not")]
    a = np.array([65535, 65534, 40000, 1] * (N // 4), np.uint16)
    b = np.array([0, 37, 200, 255] * (N // 4), np.uint8)
    kernel = tw.build([A, B, *outs], target="cpu")
    sq, nb = np.zeros(N, np.uint16), np.zeros(N, np.uint8)
    kernel(a, b, sq, nb)
    np.testing.assert_array_equal(sq, a * a)
    np.testing.assert_array_equal(nb, np.where(~b > 200, ~b // 3, b))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64"])
def test_shifts_by_any_count_match_numpy(dtype, target, rng):
    """NumPy's and ONNX's rule: a count outside [0, bits) leaves 0, or -1 right-shifting a negative value."""
    A = tw.placeholder((N,), dtype, name="A")
    B = tw.placeholder((N,), dtype, name="B")
    outs = [tw.compute((N,), lambda i: A[i] << B[i], name="left"),
            tw.compute((N,), lambda i: A[i] >> B[i], name="right"),
            tw.compute((N,), lambda i: (A[i] << 1) | (A[i] >> 3), name="constant")]
    a, _ = _values(dtype, rng)
    bits = np.iinfo(dtype).bits
    counts = np.arange(N) % (bits + 8)  # every valid count and some past the width
    if dtype.startswith("int"):
        counts[::7] = -counts[::7] - 1
    b = counts.astype(dtype)
    left, right, constant = _run(outs, a, b, A, B, target)[0]
    valid = (counts >= 0) & (counts < bits)
    with np.errstate(over="ignore"):
        unsigned = np.dtype(f"uint{bits}")
        want_left = (a.astype(unsigned) << np.where(valid, counts, 0).astype(unsigned)).astype(dtype)
    np.testing.assert_array_equal(left, np.where(valid, want_left, 0).astype(dtype))
    fill = np.where(a < 0, -1, 0) if dtype.startswith("int") else 0
    np.testing.assert_array_equal(right, np.where(valid, a >> np.where(valid, counts, 0).astype(dtype), fill))
    np.testing.assert_array_equal(constant, (a.astype(unsigned) << 1).astype(dtype) | (a >> 3))


@pytest.mark.parametrize("dtype", ["uint32", "uint64"])
def test_vectorized_unsigned_loops_stay_correct(dtype, rng):
    A = tw.placeholder((N,), dtype, name="A")
    B = tw.placeholder((N,), dtype, name="B")
    C = tw.compute((N,), lambda i: tw.if_then_else(A[i] < B[i], A[i] - B[i], (A[i] >> 1) % (B[i] | 1)), name="C")
    s = tw.create_schedule(C)
    _, inner = s[C].split(C.op.axis[0], factor=8)
    s[C].vectorize(inner)
    a, b = _values(dtype, rng)
    (c,), _ = _run([C], a, b, A, B, schedule=s)
    np.testing.assert_array_equal(c, np.where(a < b, a - b, (a >> 1) % (b | 1)))


def test_constants_stay_inside_wrapping_unsigned_sums():
    """(a + 4) // 2 is not a // 2 + 2 when a + 4 wraps; (a - 1) % 4 is not (a + 3) % 4 then either."""
    A = tw.placeholder((N,), "uint32", name="A")
    B = tw.placeholder((N,), "uint32", name="B")
    outs = [tw.compute((N,), lambda i: (A[i] + 4) // 2, name="q"),
            tw.compute((N,), lambda i: (A[i] - 1) % 6 + B[i] * 0, name="r")]
    a = np.array([2 ** 32 - 2, 2 ** 32 - 1, 0, 1] * (N // 4), np.uint32)
    b = np.zeros(N, np.uint32)
    q, r = _run(outs, a, b, A, B)[0]
    np.testing.assert_array_equal(q, (a + np.uint32(4)) // 2)
    np.testing.assert_array_equal(r, (a - np.uint32(1)) % 6)

"""Integer division and modulo have one meaning everywhere (issue 13): a constant zero divisor is an
ExprError at construction; a zero in the data gives x // 0 == 0 and x % 0 == x (floordiv, floormod,
truncdiv, truncmod; so a == (a // b) * b + a % b still holds), MIN // -1 wraps to MIN, in `tw.evaluate`
and in kernels alike, and no kernel raises a signal (today: SIGFPE/SIGILL). Kernels run in a child
process so that a trap fails the test instead of killing the run."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tilewright as tw

OPS = {"floordiv": lambda a, b: a // b, "floormod": lambda a, b: a % b,
       "truncdiv": tw.truncdiv, "truncmod": tw.truncmod}


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("dtype", ["int32", "int8", "int64"])
def test_constant_zero_divisor_is_rejected_at_construction(op, dtype):
    A = tw.placeholder((4,), dtype, name="A")
    with pytest.raises(tw.ExprError, match="by the constant 0"):
        tw.compute((4,), lambda i: OPS[op](A[i], 0), name="Q")


def test_float_division_by_zero_stays_ieee():
    A = tw.placeholder((2,), "float32", name="A")
    Q = tw.compute((2,), lambda i: A[i] // 0.0, name="Q")
    got = tw.evaluate(Q, {A: np.array([1.0, -1.0], np.float32)})
    assert np.isinf(got).all()


def test_reference_division_by_a_data_zero():
    A = tw.placeholder((4,), "int32", name="A")
    B = tw.placeholder((4,), "int32", name="B")
    outs = [_stage(n, f, A, B) for n, f in sorted(OPS.items())]
    a = np.array([7, -7, 0, 5], np.int32)
    b = np.zeros(4, np.int32)
    fd, fm, td, tm = tw.evaluate(outs, {A: a, B: b})
    np.testing.assert_array_equal(fd, 0)
    np.testing.assert_array_equal(td, 0)
    np.testing.assert_array_equal(fm, a)
    np.testing.assert_array_equal(tm, a)


def _stage(name, f, A, B):
    return tw.compute(A.shape, lambda i: f(A[i], B[i]), name=name)


_KERNEL_SCRIPT = textwrap.dedent("""
    import numpy as np, tilewright as tw
    dt, vector = {dtype!r}, {vector!r}
    A = tw.placeholder((16,), dt, name="A"); B = tw.placeholder((16,), dt, name="B")
    ops = [("fd", lambda a, b: a // b), ("fm", lambda a, b: a % b), ("td", tw.truncdiv), ("tm", tw.truncmod)]
    def stage(n, f):
        return tw.compute((16,), lambda i: f(A[i], B[i]), name=n)
    outs = [stage(n, f) for n, f in ops]
    s = tw.create_schedule(outs)
    if vector:
        for t in outs:
            o, i = s[t].split(t.op.axis[0], factor=8)
            s[t].vectorize(i)
    k = tw.build(s, [A, B] + outs)
    lo, hi = np.iinfo(dt).min, np.iinfo(dt).max
    a = np.array([lo, 7, -7, lo, 5, hi, 3, 0, lo, hi, -1, 1, 100, -100, 9, -9], dt)
    b = np.array([-1, 0, 2, 0, -2, -1, 0, 0, 1, 1, -1, -1, 7, 7, -4, -4], dt)
    res = [np.zeros(16, dt) for _ in outs]
    k(a, b, *res)
    want = tw.evaluate(outs, {{A: a, B: b}})
    for (n, _), r, w in zip(ops, res, want):
        assert (r == w).all(), (n, r, w)
    assert (want[0] * b + want[1] == a).all()  # the identity holds for floordiv/floormod
    assert want[0][1] == 0 and want[1][1] == 7 and want[0][0] == lo
    print("ok")
""")


@pytest.mark.parametrize("vector", [False, True])
@pytest.mark.parametrize("dtype", ["int32", "int64", "int8", "int16"])
def test_kernel_division_by_zero_and_min_by_minus_one_never_traps(dtype, vector):
    script = _KERNEL_SCRIPT.format(dtype=dtype, vector=vector)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "ok" in proc.stdout, \
        f"child exited with {proc.returncode} (a negative code is a signal)\n{proc.stdout}\n{proc.stderr[-3000:]}"

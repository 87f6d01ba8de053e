"""Vector min/max and round-then-convert rendered as one x86 instruction (codegen/x86_vector_ops.py)
give the values of the portable spelling on every ISA level: NumPy's NaN rule in either operand,
the first operand's sign of zero where the portable form keeps it, integer lanes of every width and
signedness, and float32 -> int32 rounding half to even."""

from __future__ import annotations

import numpy as np
import pytest
from synthetic_targets import host_runs

import tilewright as tw
from tilewright.targets import Target, as_target

ISAS = ("scalar", "sse4.2", "avx2", "avx512")


def _target(isa: str) -> Target:
    t = as_target("cpu", isa=isa) if isa != "avx512" or "avx512f" in as_target("cpu").features else None
    if t is None or not host_runs(t):
        pytest.skip(f"this host cannot run {isa} code")
    return t


def _vector_kernel(fn, dtypes, n, lanes, target):
    ins = [tw.placeholder((n,), d, name=f"X{k}") for k, d in enumerate(dtypes)]
    out = tw.compute((n,), lambda i: fn(*[x[i] for x in ins]), name="Y")
    s = tw.create_schedule(out)
    _, inner = s[out].split(out.op.axis[0], factor=lanes)
    s[out].vectorize(inner)
    return tw.build(s, [*ins, out], target=target)


def _portable(which: str, a, b):
    """The portable spelling's rule: `a` where it is NaN or strictly on the chosen side of `b`, else `b`."""
    keep = (a < b) if which == "min" else (a > b)
    if a.dtype.kind == "f":
        keep |= np.isnan(a)
    return np.where(keep, a, b)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("dtype,lanes", [("float32", 4), ("float32", 8), ("float32", 16), ("float64", 4),
                                         ("float64", 8), ("int8", 64), ("uint8", 32), ("int16", 16),
                                         ("int16", 8), ("int32", 16), ("int32", 4), ("uint8", 16), ("int64", 4),
                                         ("int64", 8), ("int32", 64), ("float32", 32)])
@pytest.mark.parametrize("which", ["min", "max"])
def test_vector_min_max_match_the_portable_rule(isa, dtype, lanes, which):
    target = _target(isa)
    n = 4 * lanes
    f = tw.min if which == "min" else tw.max
    k = _vector_kernel(lambda x, y: f(x, y), [dtype, dtype], n, lanes, target)
    rng = np.random.default_rng(lanes)
    if np.dtype(dtype).kind == "f":
        special = np.array([np.nan, 1, np.nan, -0.0, 0.0, np.inf, -np.inf, 2], dtype)
        a = rng.standard_normal(n).astype(dtype)
        b = rng.standard_normal(n).astype(dtype)
        a[:8], b[:8] = special, special[::-1]
        a[8:10], b[8:10] = [0.0, -0.0], [-0.0, 0.0]
    else:
        info = np.iinfo(dtype)
        a = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        b = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        a[:4], b[:4] = [info.min, info.max, info.min, 0], [info.max, info.min, info.min, 0]
    y = np.empty(n, dtype)
    k(a, b, y)
    want = _portable(which, a, b)
    np.testing.assert_array_equal(y, want)
    assert np.array_equal(np.signbit(y), np.signbit(want)) if np.dtype(dtype).kind == "f" else True


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("lanes", [4, 8, 16, 64])
def test_round_then_convert_rounds_half_to_even(isa, lanes):
    target = _target(isa)
    n = 8 * lanes
    k = _vector_kernel(lambda x: tw.round(x).astype("int32"), ["float32"], n, lanes, target)
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.49999976, -3.5000002, 1e9, -1e9, 2.0 ** 30, 7.0] * n,
                 np.float32)[:n]
    x[12:] += np.random.default_rng(0).standard_normal(n - 12).astype(np.float32) * 100
    y = np.empty(n, np.int32)
    k(x, y)
    np.testing.assert_array_equal(y, np.rint(x).astype(np.int32))
    if isa in ("sse4.2", "avx2", "avx512") and lanes * 32 <= {"sse4.2": 128, "avx2": 256, "avx512": 512}[isa]:
        assert "_cvtps_epi32" in k.source


def test_native_min_is_one_instruction_in_the_source():
    target = _target("avx512")
    k = _vector_kernel(lambda x, y: tw.min(x, y), ["int32", "int32"], 64, 16, target)
    assert "_mm512_min_epi32" in k.source and "#else" in k.source  # the portable form stays for other ISAs


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("src,dst,lanes", [("int32", "uint8", 16), ("int32", "uint8", 64), ("int32", "int8", 32),
                                           ("int16", "uint8", 64), ("int64", "int32", 16)])
def test_narrowing_keeps_the_low_part_of_every_lane(isa, src, dst, lanes):
    """Vectors wider than one register are narrowed a register at a time: the same low parts as C's."""
    target = _target(isa)
    n = 2 * lanes
    k = _vector_kernel(lambda x: x.astype(dst), [src], n, lanes, target)
    info = np.iinfo(src)
    x = np.random.default_rng(lanes).integers(info.min, info.max, n, dtype=src, endpoint=True)
    y = np.empty(n, dst)
    k(x, y)
    np.testing.assert_array_equal(y, x.astype(dst))

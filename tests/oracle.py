"""Shared helpers for tests: random inputs and dtype-aware comparison."""

from __future__ import annotations

import numpy as np
import pytest

TOLERANCE = {  # (rtol, atol) against an independent oracle
    "float64": (1e-10, 1e-10),
    "float32": (2e-5, 2e-5),
    "float16": (2e-2, 2e-2),
    "bfloat16": (5e-2, 5e-2),
}


def torch_or_skip():
    return pytest.importorskip("torch")


def random_array(rng: np.random.Generator, shape, dtype: str = "float32") -> np.ndarray:
    if dtype in ("float16", "float32", "float64"):
        return rng.uniform(-1, 1, size=shape).astype(dtype)
    if dtype == "bfloat16":
        from tilewright.reference.values import round_to_bfloat16

        return round_to_bfloat16(rng.uniform(-1, 1, size=shape).astype("float32"))
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -100), min(info.max, 100)
    return rng.integers(lo, hi + 1, size=shape).astype(dtype)


def assert_close(got, want, dtype: str = "float32", scale: float = 1.0) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    if dtype not in TOLERANCE:
        np.testing.assert_array_equal(got, want)
        return
    rtol, atol = TOLERANCE[dtype]
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol * scale)

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


def full_range_inputs(args, rng: np.random.Generator) -> list[np.ndarray]:
    """An array per input of `args` (all but the last): integers over their declared value range
    (else the dtype's, capped at 2**20), floats small and positive (a requantize's multipliers)."""
    out = []
    for t in args[:-1]:
        if t.dtype.name == "float32":
            out.append((rng.random(t.shape) * 1e-3).astype(np.float32))
        else:
            lo, hi = t.op.value_range or t.dtype.int_range
            out.append(rng.integers(lo, min(hi, 2**20) + 1, t.shape).astype(t.dtype.numpy))
    return out


def assert_close(got, want, dtype: str = "float32", scale: float = 1.0) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    if dtype not in TOLERANCE:
        np.testing.assert_array_equal(got, want)
        return
    rtol, atol = TOLERANCE[dtype]
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol * scale)


# ---- schedules: build a kernel and compare it with the reference evaluator ----------------------------

def _storage(dtype: str) -> str:
    return "uint16" if dtype == "bfloat16" else dtype


def sentinel_array(shape, dtype: str) -> np.ndarray:
    """An output buffer pre-filled with a value a correct kernel overwrites (NaN for floats), so that
    elements a kernel forgets to write are caught."""
    if dtype in ("float16", "float32", "float64"):
        return np.full(shape, np.nan, dtype=dtype)
    if dtype == "bool":
        return np.zeros(shape, dtype=bool)
    info = np.iinfo(_storage(dtype))
    return np.full(shape, info.min + 7, dtype=_storage(dtype))


def check_kernel(s, args, rng: np.random.Generator, *, target="cpu", rtol: float | None = None,
                 atol: float | None = None, name: str = "kernel", kernel=None):
    """Build `s` (unless `kernel` is given), run it on random inputs and compare every output of the
    schedule with `tw.evaluate`. Returns the kernel. Float outputs use (rtol, atol) when given, else
    the dtype's TOLERANCE; integer outputs must be exact."""
    import tilewright as tw

    if kernel is None:
        kernel = tw.build(s, args, target=target, name=name)
    # the caller's output tensors (a schedule over merged axes holds views of them: Schedule.views)
    outputs = [t for t in args if any(s.views.get(id(t), t) is o for o in s.outputs)]
    inputs, arrays = {}, []
    for t in args:
        dtype = t.dtype.name
        if any(t is o for o in outputs):
            arrays.append(sentinel_array(t.shape, dtype))
        else:
            a = random_array(rng, t.shape, dtype)
            inputs[t] = a
            arrays.append(a)
    kernel(*arrays)
    want = tw.evaluate(outputs, inputs)
    for t, w in zip(outputs, want):
        got = arrays[next(n for n, a in enumerate(args) if a is t)]
        dtype = t.dtype.name
        if dtype in TOLERANCE and (rtol is not None or atol is not None):
            r0, a0 = TOLERANCE[dtype]
            np.testing.assert_allclose(got.astype(np.float64), np.asarray(w, np.float64),
                                       rtol=r0 if rtol is None else rtol, atol=a0 if atol is None else atol,
                                       err_msg=f"output '{t.name}'")
        else:
            assert_close(got, w, dtype)
    return kernel


def leaf_names(stage) -> list[str]:
    return [a.name for a in stage.leaf_iter_vars]


def leaf_extents(stage) -> list[int]:
    return [a.extent for a in stage.leaf_iter_vars]

"""Array values of tensors in the reference evaluator: storage dtypes, bfloat16
rounding, and the checks on user-supplied inputs."""

from __future__ import annotations

import numpy as np

from ..errors import EvaluationError
from ..ir.dtype import DType, bfloat16


def round_to_bfloat16(x: np.ndarray) -> np.ndarray:
    """Round float32 values to the nearest bfloat16 (ties to even); a NaN becomes the quiet NaN of its
    high half (sign and payload kept, as the kernels' conversion does), so its bfloat16 bits are a NaN too."""
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32)
    bias = ((bits >> np.uint32(16)) & np.uint32(1)) + np.uint32(0x7FFF)
    rounded = ((bits + bias) & np.uint32(0xFFFF0000)).view(np.float32)
    quiet = ((bits | np.uint32(0x00400000)) & np.uint32(0xFFFF0000)).view(np.float32)
    return np.where(np.isnan(x), quiet, rounded)


def to_storage(value: np.ndarray, dtype: DType) -> np.ndarray:
    """Convert an array computed in any dtype to `dtype`'s storage (C semantics:
    float -> int truncates; ints wrap)."""
    value = np.asarray(value)
    if dtype == bfloat16:
        return round_to_bfloat16(value.astype(np.float32))
    target = dtype.numpy
    if value.dtype == target:
        return value
    if target.kind in "iu" and value.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            value = np.trunc(value)
            # Out-of-range float -> int is undefined in C; we wrap through int64.
            return value.astype(np.int64).astype(target)
    if target.kind == "b":
        return value != 0
    return value.astype(target)


def check_input(name: str, shape: tuple[int, ...], dtype: DType, value) -> np.ndarray:
    """Validate an input array for placeholder `name` and convert it to storage."""
    try:
        array = np.asarray(value)
    except Exception as exc:  # pragma: no cover - exotic array-likes
        raise EvaluationError(f"input '{name}' is not an array: {exc}") from None
    if array.dtype.name == "bfloat16":  # ml_dtypes arrays
        array = array.astype(np.float32)
    if tuple(array.shape) != tuple(shape):
        raise EvaluationError(f"input '{name}' has shape {list(array.shape)}, expected {list(shape)}")
    storage = dtype.numpy
    if array.dtype.kind in "OUSV" or (
        not np.can_cast(array.dtype, storage, casting="same_kind") and array.dtype != storage
    ):
        raise EvaluationError(
            f"input '{name}' has dtype {array.dtype}, which does not convert to {dtype} without changing kind; "
            f"pass a {dtype} array (or cast it yourself)"
        )
    return np.ascontiguousarray(to_storage(array, dtype))

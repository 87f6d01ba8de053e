"""Host arrays for device kernels: checking them against a module's argument
descriptors, and the storage a device sees (bfloat16 travels as uint16: a
caller passes float32 values, or the raw uint16 bits as the measurer stores
them; bool as one byte)."""

from __future__ import annotations

import numpy as np

from ..errors import MeasureError
from ..ir.dtype import as_dtype


def host_dtype(dtype: str) -> np.dtype:
    return as_dtype(dtype).numpy


def device_dtype(dtype: str) -> np.dtype:
    return np.dtype("uint16") if dtype == "bfloat16" else host_dtype(dtype)


def check_array(arr: np.ndarray, b, func_name: str) -> None:
    want = host_dtype(b.dtype)
    if arr.dtype != want and not (b.dtype == "bfloat16" and arr.dtype == np.uint16):
        also = " (or uint16 holding the bfloat16 bits)" if b.dtype == "bfloat16" else ""
        raise MeasureError(f"{func_name}: argument '{b.name}' must have dtype {want}{also}, got {arr.dtype}")
    if tuple(arr.shape) != tuple(b.caller_shape) and tuple(arr.shape) != tuple(b.shape):
        raise MeasureError(f"{func_name}: argument '{b.name}' must have shape {tuple(b.caller_shape)}, "
                           f"got {tuple(arr.shape)}")


def to_device_layout(arr: np.ndarray, dtype: str) -> np.ndarray:
    """A C-contiguous array of the device's storage type holding `arr`'s values."""
    arr = np.ascontiguousarray(arr)
    if dtype == "bfloat16" and arr.dtype == np.uint16:  # already the bits
        return arr
    if dtype == "bfloat16":  # float32 values exactly representable in bfloat16: the top half of the bits
        return (arr.view(np.uint32) >> 16).astype(np.uint16)
    return arr


def from_device_layout(dev: np.ndarray, out: np.ndarray, dtype: str) -> None:
    """Write device storage `dev` back into the caller's array `out`."""
    if dtype == "bfloat16" and out.dtype != np.uint16:
        dev = (dev.astype(np.uint32) << 16).view(np.float32)
    out[...] = dev.reshape(out.shape)


__all__ = ["check_array", "device_dtype", "from_device_layout", "host_dtype", "to_device_layout"]

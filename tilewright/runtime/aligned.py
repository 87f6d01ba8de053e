"""Arrays that start on a 64-byte boundary: a cache line and an AVX-512 vector. NumPy places a
large array 16 bytes past one (malloc's alignment), so every 64-byte load of it, and every other
32-byte one, spans two cache lines; PyTorch's tensors and a compiled model's arena start on one.
Kernels are measured on such arrays (the tuner's runner, the benchmarks), like their baselines."""

from __future__ import annotations

import numpy as np

ALIGN = 64


def aligned_empty(shape, dtype) -> np.ndarray:
    """An uninitialised C-contiguous array of `shape` whose data starts on an ALIGN-byte boundary."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + ALIGN, np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def aligned_zeros(shape, dtype) -> np.ndarray:
    """`aligned_empty`, filled with zeros."""
    out = aligned_empty(shape, dtype)
    out.fill(0)
    return out


def aligned_copy(a: np.ndarray) -> np.ndarray:
    """`a`'s values in a C-contiguous array that starts on an ALIGN-byte boundary (`a` itself where it
    already is one)."""
    if a.flags.c_contiguous and a.ctypes.data % ALIGN == 0:
        return a
    out = aligned_empty(a.shape, a.dtype)
    np.copyto(out, a)
    return out

"""Arrays kernels are measured on start on 64-byte boundaries (NumPy's large arrays start 16 bytes
past one), in the tuner's runner as in a model's arena."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from tilewright.runtime.aligned import ALIGN, aligned_copy, aligned_empty, aligned_zeros
from tilewright.runtime.runner import load_data


@pytest.mark.parametrize("shape, dtype", [((3,), "float32"), ((7, 13), "float64"), ((1, 64, 56, 56), "float32"),
                                          ((5,), "int8")])
def test_aligned_arrays_start_on_a_boundary(shape, dtype):
    for make in (aligned_empty, aligned_zeros):
        a = make(shape, dtype)
        assert a.shape == shape and a.dtype == np.dtype(dtype) and a.flags.c_contiguous
        assert a.ctypes.data % ALIGN == 0
    assert not aligned_zeros(shape, dtype).any()


def test_aligned_copy_keeps_values_and_reuses_aligned_arrays():
    big = np.arange(300_000, dtype=np.float32).reshape(600, 500)  # malloc'd: 16 bytes off a boundary
    copy = aligned_copy(big)
    assert copy.ctypes.data % ALIGN == 0 and np.array_equal(copy, big)
    assert aligned_copy(copy) is copy
    view = aligned_copy(big[:, ::2])  # a strided view becomes a dense copy
    assert view.flags.c_contiguous and np.array_equal(view, big[:, ::2])


def test_runner_loads_measured_arrays_aligned(tmp_path):
    for n, a in enumerate([np.ones((300, 301), np.float32), np.zeros((1000,), np.float32)]):
        np.save(os.path.join(tmp_path, f"arg{n}.npy"), a)
    np.save(os.path.join(tmp_path, "ref0.npy"), np.zeros((1000,), np.float32))
    config = json.loads(json.dumps({"data_dir": str(tmp_path), "n_inputs": 1, "tolerances": [[1e-5, 1e-5]]}))
    arrays, refs = load_data(config)
    assert [a.ctypes.data % ALIGN for a in arrays] == [0, 0]
    assert np.array_equal(arrays[0], np.ones((300, 301), np.float32)) and refs[0].shape == (1000,)

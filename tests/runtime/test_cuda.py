"""CUDA: compiling and exporting work without a GPU (nvcc), kernels run against NumPy references where a
GPU is present, and constructing a kernel without one is a MeasureError saying so."""

from __future__ import annotations

import json

import numpy as np
import pytest
from gpu_programs import PROGRAMS

from tilewright.build.nvcc import compile_cuda, compiler_available
from tilewright.codegen.cuda import generate_cuda
from tilewright.errors import BuildError, MeasureError
from tilewright.targets.gpu import cuda_preset, detect_cuda

NO_NVCC = compiler_available() is None
GPU = detect_cuda()
needs_nvcc = pytest.mark.skipif(NO_NVCC, reason="no CUDA compiler: nvcc is not on PATH and NVRTC cannot be loaded")
needs_gpu = pytest.mark.skipif(GPU is None, reason="no CUDA device (cuda-bindings, driver or GPU missing)")


@needs_nvcc
def test_export_writes_source_binaries_and_descriptor(tmp_path):
    from tilewright.runtime.cuda import export_cuda

    func, _, _ = PROGRAMS["tiled_matmul"]()
    module = generate_cuda(func)
    export_cuda(tmp_path, module, compile_cuda(module.source, "sm_80"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kernel.cu", "kernel.cubin", "kernel.ptx", "launch.json"]
    desc = json.loads((tmp_path / "launch.json").read_text())
    assert desc["arch"] == "sm_80" and desc["kernels"][0]["block"] == [8, 8, 1]
    assert [p["name"] for p in desc["kernels"][0]["params"]] == ["A", "B", "C"]


@needs_nvcc
def test_compile_is_cached_and_errors_carry_the_message():
    func, _, _ = PROGRAMS["guarded_threads"]()
    source = generate_cuda(func).source
    compile_cuda(source, "sm_90")
    assert compile_cuda(source, "sm_90").cached
    with pytest.raises(BuildError, match="no_such_function"):
        compile_cuda(source.replace("__syncthreads()", "no_such_function()"), "sm_90")
    with pytest.raises(BuildError, match="unknown CUDA arch"):
        compile_cuda(source, "ampere")


def test_presets():
    h100, a100 = cuda_preset("sm_90"), cuda_preset("sm_80")
    assert (h100.sm_count, h100.shared_mem_per_block_optin, h100.l2_bytes) == (132, 227 * 1024, 50 << 20)
    assert (a100.sm_count, a100.shared_mem_per_block_optin, a100.l2_bytes) == (108, 163 * 1024, 40 << 20)
    assert a100.shared_mem_per_block == 48 * 1024 and a100.max_threads_per_block == 1024
    assert h100.fingerprint != a100.fingerprint


@pytest.mark.skipif(GPU is not None, reason="a CUDA device is present")
def test_without_a_gpu_constructing_a_kernel_says_so():
    from tilewright.runtime.cuda import CudaKernel

    func, _, _ = PROGRAMS["guarded_threads"]()
    with pytest.raises(MeasureError, match="no CUDA device"):
        CudaKernel(generate_cuda(func))


@needs_gpu
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_matches_reference_on_gpu(name, rng, tmp_path):
    from tilewright.runtime.cuda import CudaKernel, load_exported

    func, inputs, ref = PROGRAMS[name]()
    kernel = CudaKernel(generate_cuda(func))
    arrays = inputs(rng)
    kernel(*arrays)
    for got, want in zip(arrays, ref(*[a.copy() for a in arrays])):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert kernel.time(*inputs(rng), number=2, repeat=2).median > 0
    kernel.export(tmp_path)
    again = inputs(rng)
    load_exported(tmp_path)(*again)
    for got, want in zip(again, ref(*[a.copy() for a in again])):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

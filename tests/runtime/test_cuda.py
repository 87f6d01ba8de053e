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
from tilewright.targets.gpu import cuda_preset, detect_cuda, nvidia_gpus_listed

NO_NVCC = compiler_available() is None
needs_nvcc = pytest.mark.skipif(NO_NVCC, reason="no CUDA compiler: nvcc is not on PATH and NVRTC cannot be loaded")


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


@pytest.mark.skipif(bool(nvidia_gpus_listed()) or detect_cuda() is not None, reason="a CUDA device is present")
def test_without_a_gpu_constructing_a_kernel_says_so():
    from tilewright.runtime.cuda import CudaKernel

    func, _, _ = PROGRAMS["guarded_threads"]()
    with pytest.raises(MeasureError, match="no CUDA device"):
        CudaKernel(generate_cuda(func))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_matches_reference_on_gpu(name, rng, tmp_path, cuda_gpu):
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


@needs_nvcc
def test_the_tuners_artefact_names_its_arch_compiler_and_device(tmp_path):
    """The measuring process loads candidates from the build cache: launch.json must say which binary it holds."""
    import tilewright as tw
    from tilewright.build.device_artefact import compile_cuda_artefact

    func, _, _ = PROGRAMS["tiled_matmul"]()
    artefact = compile_cuda_artefact(generate_cuda(func), tw.Target("cuda -arch=sm_90 -device=0"))
    desc = json.loads((artefact.path / "launch.json").read_text())
    assert desc["arch"] == "sm_90" and desc["compiler"].startswith(("nvcc", "nvrtc")) and desc["device"] == 0


@needs_nvcc
def test_kernels_declare_their_block_size_and_report_registers_and_spills():
    import tilewright as tw

    A = tw.placeholder((4096,), "float32", name="A")
    B = tw.compute((4096,), lambda i: A[i] * 2, name="B")
    s = tw.create_schedule(B)
    bo, bi = s[B].split(B.op.axis[0], factor=512)
    s[B].bind(bo, tw.thread_axis("blockIdx.x"))
    s[B].bind(bi, tw.thread_axis("threadIdx.x"))
    big = tw.build(s, [A, B], target="cuda -arch=sm_90")
    assert '__global__ void __launch_bounds__(512) ' in big.source  # could need more than 65536 registers
    func, _, _ = PROGRAMS["tiled_matmul"]()
    module = generate_cuda(func)
    assert "__launch_bounds__" not in module.source  # 8 x 8 threads launch with any register count
    binary = compile_cuda(module.source, "sm_90")
    (report,) = binary.resources
    assert report["name"] == module.kernels[0].name and 0 < report["registers"] <= 255
    assert binary.spills == 0


def test_ptxas_reports_are_read_per_kernel():
    from tilewright.build.nvcc import parse_ptxas_report

    text = """ptxas info    : Compiling entry function 'k_0' for 'sm_90'
ptxas info    : Function properties for k_0
    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers
ptxas info    : Compiling entry function 'k_1' for 'sm_90'
ptxas info    : Function properties for k_1
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers"""
    assert parse_ptxas_report(text) == [
        {"name": "k_0", "registers": 255, "spill_stores": 8, "spill_loads": 12, "stack": 16},
        {"name": "k_1", "registers": 40, "spill_stores": 0, "spill_loads": 0, "stack": 0}]


def test_launch_shapes_are_checked_per_dimension():
    """CUDA refuses blockDim.z > 64 and gridDim.y > 65535 (PoCL accepts both): the build says so first."""
    import tilewright as tw

    target = tw.Target("cuda -arch=sm_90")
    A = tw.placeholder((70000, 2), "float32", name="A")
    B = tw.compute((70000, 2), lambda i, j: A[i, j] * 2, name="B")
    s = tw.create_schedule(B)
    s[B].bind(B.op.axis[0], tw.thread_axis("blockIdx.y"))
    s[B].bind(B.op.axis[1], tw.thread_axis("threadIdx.x"))
    with pytest.raises(tw.LoweringError, match="70000 to blockIdx.y.*at most 65535"):
        tw.build(s, [A, B], target=target)
    C = tw.placeholder((2, 128), "float32", name="C")
    D = tw.compute((2, 128), lambda i, j: C[i, j] + 1, name="D")
    s = tw.create_schedule(D)
    s[D].bind(D.op.axis[0], tw.thread_axis("blockIdx.x"))
    s[D].bind(D.op.axis[1], tw.thread_axis("threadIdx.z"))
    with pytest.raises(tw.LoweringError, match="128 to threadIdx.z.*at most 64"):
        tw.build(s, [C, D], target=target)

"""GPU templates without a GPU: the OpenCL dialect of the same template runs on PoCL and matches the
reference for odd shapes, every tile and epilogue; every CUDA instance the rules propose compiles for
sm_80 and sm_90 with 0 spilled bytes and issues mma.sync and cp.async; tiles over the GPU's limits are
refused naming the limit."""

import dataclasses

import numpy as np
import pytest

from tilewright.build.nvcc import compiler_available
from tilewright.build.opencl import opencl_available
from tilewright.errors import ScheduleError
from tilewright.kernels import ConvProblem, Epilogue, GemmProblem
from tilewright.kernels.gpu_kernel import build_gpu_gemm, compile_check
from tilewright.kernels.gpu_tiles import GpuTile, check_gpu_tile, gpu_tiles
from tilewright.targets.gpu import cuda_preset

needs_opencl = pytest.mark.skipif(opencl_available() is not None, reason=f"no OpenCL: {opencl_available()}")
needs_nvcc = pytest.mark.skipif(compiler_available() is None, reason="no CUDA compiler")
SMALL = [GpuTile(32, 32, 32, 16, 16, 2, 1), GpuTile(64, 32, 32, 32, 16, 3, 1), GpuTile(32, 64, 64, 16, 32, 4, 1)]


def _opencl_facts():
    from tilewright.targets.gpu import detect_opencl

    return detect_opencl()


@needs_opencl
@pytest.mark.parametrize("tile", SMALL, ids=str)
@pytest.mark.parametrize("shape", [(37, 50, 40), (128, 64, 96), (70, 33, 17), (1, 8, 16)])
def test_opencl_dialect_matches_the_reference(shape, tile, rng):
    M, N, K = shape
    ep = Epilogue(("bias", "residual", "gelu"))
    kernel = build_gpu_gemm(GemmProblem(M, N, K), _opencl_facts(), tile, ep)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((N, K)).astype(np.float32)
    bias, res = rng.standard_normal(N).astype(np.float32), rng.standard_normal((M, N)).astype(np.float32)
    out = np.full((M, N), np.nan, np.float32)
    kernel(a, b, bias, res, out)
    ref = ep.apply(a.astype(np.float64) @ b.T.astype(np.float64), bias, res)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@needs_opencl
@pytest.mark.parametrize("steps", [("relu",), ("bias", "hardswish"), ("softplus",), ("silu",), ("gelu_tanh",)])
def test_opencl_epilogues(steps, rng):
    M, N, K = 40, 24, 32
    ep = Epilogue(steps)
    kernel = build_gpu_gemm(GemmProblem(M, N, K), _opencl_facts(), SMALL[0], ep)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((N, K)).astype(np.float32)
    bias, res = rng.standard_normal(N).astype(np.float32), np.zeros((M, N), np.float32)
    out = np.zeros((M, N), np.float32)
    kernel(a, b, bias, res, out)
    np.testing.assert_allclose(out, ep.apply(a.astype(np.float64) @ b.T.astype(np.float64), bias), rtol=1e-4,
                               atol=1e-4)


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_every_proposed_cuda_tile_compiles_without_spills(arch):
    gpu = cuda_preset(arch)
    for m, n, k in ((1280, 3072, 768),):  # every tile the rules propose for BERT's FFN GEMM
        checks = compile_check(GemmProblem(m, n, k), gpu, Epilogue(("bias", "gelu")))
        assert len(checks) >= 10
        for c in checks:
            assert c.spill_bytes == 0 and c.stack_bytes == 0, c
            assert c.mma and c.cp_async, c
            assert c.registers <= 255


def test_tiles_over_the_limits_are_refused():
    gpu = cuda_preset("sm_80")
    rules = gpu_tiles(gpu, 1280, 3072, 768)
    assert all(4 <= t.warps <= 8 and t.smem_bytes <= gpu.shared_mem_per_block for t in rules)
    with pytest.raises(ScheduleError, match="shared memory"):
        check_gpu_tile(GpuTile(128, 128, 64, 64, 64, 4), gpu)
    with pytest.raises(ScheduleError, match="registers per thread"):
        check_gpu_tile(GpuTile(128, 256, 32, 128, 128, 2), gpu)
    with pytest.raises(ScheduleError, match="whole warp tiles"):
        check_gpu_tile(GpuTile(96, 64, 32, 64, 32, 2), gpu)
    with pytest.raises(ScheduleError, match="pad K"):
        check_gpu_tile(dataclasses.replace(rules[0], align=8), gpu, k=46)
    assert gpu_tiles(gpu, 1280, 46, 46)[0].align == 2  # odd channel counts: narrower copies


B2B_CASES = [((96, 64, 40), 16), ((50, 24, 33), 96), ((130, 40, 16), 40)]  # (M, N0, K0), N1


@needs_opencl
@pytest.mark.parametrize("shape,n1", B2B_CASES, ids=str)
def test_opencl_b2b_matches_the_reference(shape, n1, rng):
    from tilewright.kernels import B2BProblem
    from tilewright.kernels.gpu_b2b import b2b_module, gpu_b2b_tiles
    from tilewright.runtime.opencl import OpenCLKernel

    M, N0, K0 = shape
    problem = B2BProblem(GemmProblem(M, N0, K0), GemmProblem(M, n1, N0),
                         (Epilogue(("bias", "relu")), Epilogue(("bias", "residual"))))
    gpu = _opencl_facts()
    a = rng.standard_normal((M, K0)).astype(np.float32)
    b0 = rng.standard_normal((N0, K0)).astype(np.float32)
    b1 = rng.standard_normal((n1, N0)).astype(np.float32)
    bias0, bias1 = rng.standard_normal(N0).astype(np.float32), rng.standard_normal(n1).astype(np.float32)
    res = rng.standard_normal((M, n1)).astype(np.float32)
    ref = problem.reference(a, b0.T.copy(), b1.T.copy(), bias0, bias1, res)
    tiles = gpu_b2b_tiles(problem, dataclasses.replace(gpu, shared_mem_per_block=48 * 1024, regs_per_thread=255))
    for bt in tiles[:3]:
        out = np.full((M, n1), np.nan, np.float32)
        OpenCLKernel(b2b_module("opencl", problem, bt, dataclasses.replace(gpu, shared_mem_per_block=48 * 1024)))(
            a, b0, bias0, b1, bias1, res, out)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(ref).max()))


B2B_CONV_CASES = [(ConvProblem(1, 9, 8, 16, 24, 3, 3, 1, 1), 40), (ConvProblem(2, 11, 10, 6, 16, 3, 3, 2, 1), 8),
                  (ConvProblem(1, 7, 7, 46, 32, 3, 3, 1, 1), 32)]  # RepVGG-like: 3x3 conv -> 1x1 conv of n1 channels


@needs_opencl
@pytest.mark.parametrize("first,n1", B2B_CONV_CASES, ids=lambda c: getattr(c, "name", str(c)))
def test_opencl_b2b_conv_pair_matches_the_reference(first, n1, rng):
    from tilewright.kernels import B2BProblem
    from tilewright.kernels.gpu_b2b import b2b_module, gpu_b2b_tiles
    from tilewright.runtime.opencl import OpenCLKernel

    second = ConvProblem(first.batch, first.OH, first.OW, first.OC, n1, 1, 1)
    problem = B2BProblem(first, second, (Epilogue(("bias", "relu")), Epilogue(("bias", "residual", "relu"))))
    gpu = dataclasses.replace(_opencl_facts(), shared_mem_per_block=48 * 1024, regs_per_thread=255)
    x = rng.standard_normal(first.input_shape).astype(np.float32)
    w0 = rng.standard_normal((first.OC, first.KH, first.KW, first.IC)).astype(np.float32)  # OHWI
    w1 = rng.standard_normal((n1, first.OC)).astype(np.float32)
    bias0, bias1 = rng.standard_normal(first.OC).astype(np.float32), rng.standard_normal(n1).astype(np.float32)
    res = rng.standard_normal(second.output_shape).astype(np.float32)
    ref = problem.reference(x, w0.transpose(1, 2, 3, 0), w1.T.copy(), bias0, bias1, res)
    for bt in gpu_b2b_tiles(problem, gpu)[:3]:
        assert bt.tile.align == np.gcd(first.IC, 8)
        out = np.full(second.output_shape, np.nan, np.float32)
        OpenCLKernel(b2b_module("opencl", problem, bt, gpu))(x, w0.reshape(first.OC, -1), bias0, w1, bias1, res, out)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(ref).max()))


@needs_nvcc
def test_cuda_b2b_compiles_without_spills():
    from tilewright.build.nvcc import compile_cuda
    from tilewright.kernels import B2BProblem
    from tilewright.kernels.gpu_b2b import b2b_module, gpu_b2b_tiles

    relu = Epilogue(("relu",))
    for arch in ("sm_80", "sm_90"):
        gpu = cuda_preset(arch)
        for m, n0, k0, n1 in ((16384, 64, 256, 16), (32768, 128, 576, 64), (128320, 32, 96, 96)):
            problem = B2BProblem(GemmProblem(m, n0, k0), GemmProblem(m, n1, n0), (relu, relu))
            for bt in gpu_b2b_tiles(problem, gpu)[:3]:
                binary = compile_cuda(b2b_module("cuda", problem, bt, gpu).source, arch)
                assert binary.spills == 0 and all(r["stack"] == 0 for r in binary.resources), (arch, str(bt))
                assert "mma.sync" in binary.ptx
        for hw, ic, oc, s in ((112, 48, 48, 2), (56, 64, 64, 1)):  # Bolt's Table 2 RepVGG pairs, batch 32
            c0 = ConvProblem(32, hw, hw, ic, oc, 3, 3, s, 1)
            problem = B2BProblem(c0, ConvProblem(32, c0.OH, c0.OW, oc, oc, 1, 1), (relu, relu))
            for bt in gpu_b2b_tiles(problem, gpu)[:2]:
                binary = compile_cuda(b2b_module("cuda", problem, bt, gpu).source, arch)
                assert binary.spills == 0 and "mma.sync" in binary.ptx and "cp.async" in binary.ptx, (arch, str(bt))


def test_gpu_residency_violations_are_refused():
    from tilewright.kernels import B2BProblem
    from tilewright.kernels.gpu_b2b import GpuB2BTile, check_gpu_residency, gpu_b2b_tiles

    gpu = cuda_preset("sm_80")
    problem = B2BProblem(GemmProblem(4096, 128, 64), GemmProblem(4096, 512, 128))
    good = gpu_b2b_tiles(problem, gpu)[0]
    check_gpu_residency(problem, good, gpu)
    half = GpuB2BTile(dataclasses.replace(good.tile, bn=64, wn=64 // good.warps_n), good.wn1)
    with pytest.raises(ScheduleError, match="threadblock residence fails"):  # NVIDIA/cutlass#461's configuration
        check_gpu_residency(problem, half, gpu)
    wide = B2BProblem(GemmProblem(4096, 1024, 64), GemmProblem(4096, 64, 1024))
    with pytest.raises(ScheduleError, match="no block keeps N0 = 1024"):
        gpu_b2b_tiles(wide, gpu)


CONV_CASES = [ConvProblem(1, 9, 8, 16, 24, 3, 3, 1, 1), ConvProblem(2, 11, 10, 6, 20, 3, 3, 2, 1),
              ConvProblem(1, 10, 9, 8, 16, 3, 2, 1, 2, dilation=2), ConvProblem(1, 7, 7, 46, 32, 5, 5, 1, 2)]


@needs_opencl
@pytest.mark.parametrize("problem", CONV_CASES, ids=lambda p: p.name)
def test_opencl_implicit_gemm_conv_matches_the_reference(problem, rng):
    from tilewright.kernels.gpu_kernel import build_gpu_conv

    p = problem
    x = rng.standard_normal(p.input_shape).astype(np.float32)
    w = rng.standard_normal((p.OC, p.KH, p.KW, p.IC)).astype(np.float32)  # OHWI
    bias, res = rng.standard_normal(p.OC).astype(np.float32), rng.standard_normal(p.output_shape).astype(np.float32)
    ep = Epilogue(("bias", "residual", "relu"))
    ref = ep.apply(p.reference(x, w.transpose(1, 2, 3, 0)).reshape(p.M, p.N), bias,
                   res.reshape(p.M, p.N)).reshape(p.output_shape)
    for tile in (GpuTile(32, 32, 32, 16, 16, 2, np.gcd(p.IC, 8)), GpuTile(64, 32, 32, 32, 16, 3, np.gcd(p.IC, 2))):
        out = np.full(p.output_shape, np.nan, np.float32)
        build_gpu_conv(p, _opencl_facts(), tile, ep)(x, w, bias, res, out)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(ref).max()))


@needs_nvcc
def test_cuda_conv_tiles_compile_and_odd_channels_need_padding():
    from tilewright.build.nvcc import compile_cuda
    from tilewright.kernels.gpu_kernel import conv_module, conv_tiles

    gpu = cuda_preset("sm_90")
    for p in (ConvProblem(32, 56, 56, 64, 64, 3, 3, 1, 1), ConvProblem(32, 20, 26, 46, 32, 3, 3, 1, 1)):
        tiles = conv_tiles(gpu, p)
        assert tiles[0].align == (8 if p.IC % 8 == 0 else 2)
        for tile in tiles[:4]:
            binary = compile_cuda(conv_module("cuda", p, tile).source, gpu.arch)
            assert binary.spills == 0 and "cp.async" in binary.ptx and "mma.sync" in binary.ptx
    with pytest.raises(ScheduleError, match="not a multiple of the 8-half copy"):
        conv_module("cuda", ConvProblem(1, 8, 8, 46, 32, 3, 3, 1, 1), GpuTile(64, 64, 32, 32, 32, 2, 8))


def test_the_device_benchmark_says_when_there_is_no_gpu(monkeypatch, tmp_path):
    import tilewright.bench.gpu_templates as bench

    monkeypatch.setattr(bench, "detect_cuda", lambda: None)
    with pytest.raises(SystemExit, match="no CUDA GPU here"):
        bench.main(["--out", str(tmp_path)])

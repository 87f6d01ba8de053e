"""A GPU template instance as a DeviceModule, run by the runtime every GPU kernel uses
(runtime/cuda.py on CUDA, runtime/opencl.py on OpenCL: PoCL's CPU device in CI), and the
compile check that every tile the rules may pick builds with nvcc for an architecture
without spilling registers."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..build.nvcc import compile_cuda
from ..codegen.device import DeviceBuffer, DeviceModule, KernelLaunch
from ..errors import ScheduleError
from ..targets.gpu import GpuFacts
from .epilogue import NO_EPILOGUE, Epilogue
from .gpu_source import gemm_source, grid
from .gpu_tiles import GpuTile, check_gpu_tile, gpu_tiles
from .problem import ConvProblem, GemmProblem

NAME = "tw_gemm"


def gemm_module(dialect: str, problem: GemmProblem, tile: GpuTile, epilogue: Epilogue = NO_EPILOGUE) -> DeviceModule:
    """Arguments A [M, K], B [N, K], bias [N] (float32), residual [M, N], C [M, N]; float16 on CUDA, float32
    on OpenCL (PoCL's CPU device has no half arithmetic)."""
    if dialect not in ("cuda", "opencl"):
        raise ScheduleError(f"GPU templates render 'cuda' or 'opencl', not {dialect!r}")
    M, N, K = problem.M, problem.N, problem.K
    io = "float16" if dialect == "cuda" else "float32"
    shapes = [("A", io, (M, K)), ("B", io, (N, K)), ("bias", "float32", (N,)), ("res", io, (M, N)),
              ("C", io, (M, N))]
    args = tuple(DeviceBuffer(n, dt, s, s, "arg", i) for i, (n, dt, s) in enumerate(shapes))
    gx, gy = grid(M, N, tile)
    launch = KernelLaunch(NAME, (gx, gy, 1), (tile.threads, 1, 1), tile.smem_bytes, 0, args)
    return DeviceModule(gemm_source(dialect, M, N, K, tile, epilogue, NAME), dialect, NAME, (launch,), args, (),
                        outputs=(4,))


def conv_module(dialect: str, problem: ConvProblem, tile: GpuTile, epilogue: Epilogue = NO_EPILOGUE) -> DeviceModule:
    """The implicit-GEMM convolution: x [batch, H, W, IC] (NHWC), w [OC, KH, KW, IC], bias [OC], residual and
    output [batch, OH, OW, OC]."""
    p = problem
    io = "float16" if dialect == "cuda" else "float32"
    shapes = [("x", io, p.input_shape), ("w", io, (p.OC, p.KH, p.KW, p.IC)), ("bias", "float32", (p.OC,)),
              ("res", io, p.output_shape), ("C", io, p.output_shape)]
    args = tuple(DeviceBuffer(n, dt, s, s, "arg", i) for i, (n, dt, s) in enumerate(shapes))
    gx, gy = grid(p.M, p.N, tile)
    launch = KernelLaunch(NAME, (gx, gy, 1), (tile.threads, 1, 1), tile.smem_bytes, 0, args)
    return DeviceModule(gemm_source(dialect, p.M, p.N, p.K, tile, epilogue, NAME, conv=p), dialect, NAME,
                        (launch,), args, (), outputs=(4,))


def conv_tiles(gpu: GpuFacts, problem: ConvProblem, limit: int = 24) -> list[GpuTile]:
    return gpu_tiles(gpu, problem.M, problem.N, problem.K, limit, align=math.gcd(problem.IC, 8))


def build_gpu_conv(problem: ConvProblem, gpu: GpuFacts, tile: GpuTile | None = None,
                   epilogue: Epilogue = NO_EPILOGUE):
    tile = tile or conv_tiles(gpu, problem)[0]
    check_gpu_tile(tile, gpu)
    return _runnable(conv_module(gpu.api, problem, tile, epilogue), gpu)


def build_gpu_gemm(problem: GemmProblem, gpu: GpuFacts, tile: GpuTile | None = None,
                   epilogue: Epilogue = NO_EPILOGUE):
    """The template for `problem` on `gpu` (its api picks the dialect), as a runnable kernel:
    `kernel(A, B, bias, res, C)` on NumPy arrays, `kernel.time(...)`."""
    tile = tile or gpu_tiles(gpu, problem.M, problem.N, problem.K)[0]
    check_gpu_tile(tile, gpu, problem.K)
    return _runnable(gemm_module(gpu.api, problem, tile, epilogue), gpu)


def _runnable(module: DeviceModule, gpu: GpuFacts):
    if gpu.api == "cuda":
        from ..runtime.cuda import CudaKernel

        return CudaKernel(module, device=gpu.device)
    from ..runtime.opencl import OpenCLKernel

    return OpenCLKernel(module)


@dataclass(frozen=True)
class CompileCheck:
    tile: GpuTile
    arch: str
    registers: int
    spill_bytes: int
    stack_bytes: int  # 0: the accumulators stay in registers (dynamic indexing would put them on the stack)
    mma: bool  # the PTX issues mma.sync
    cp_async: bool


def compile_check(problem: GemmProblem, gpu: GpuFacts, epilogue: Epilogue = NO_EPILOGUE,
                  tiles: list[GpuTile] | None = None) -> list[CompileCheck]:
    """nvcc + ptxas on every tile the rules propose for `problem` (or `tiles`) for gpu.arch."""
    out = []
    for tile in tiles or gpu_tiles(gpu, problem.M, problem.N, problem.K):
        binary = compile_cuda(gemm_module("cuda", problem, tile, epilogue).source, gpu.arch)
        regs = max((r["registers"] for r in binary.resources), default=0)
        stack = max((r["stack"] for r in binary.resources), default=0)
        out.append(CompileCheck(tile, gpu.arch, regs, binary.spills, stack, "mma.sync.aligned.m16n8k16" in binary.ptx,
                                "cp.async" in binary.ptx))
    return out

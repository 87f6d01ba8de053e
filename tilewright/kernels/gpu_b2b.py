"""Persistent back-to-back GEMM on the GPU (Bolt 3.2, shared-memory resident): a block owns bm rows
and every one of GEMM0's N0 columns (threadblock residence, TB_N = N0); GEMM0 (or an NHWC
convolution as an implicit GEMM, followed by a 1x1 convolution) runs through the shared ring into
registers, its epilogue writes the block's rows of the intermediate to shared memory, and GEMM1
reads them from there for each chunk of N1 columns (so N1 may differ from N0,
NVIDIA/cutlass#2604). `check_gpu_residency` proves the constraints before anything is built and
refuses what would not fit (NVIDIA/cutlass#461 computed wrong results instead)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..codegen.device import DeviceBuffer, DeviceModule, KernelLaunch
from ..errors import ScheduleError
from ..targets.gpu import GpuFacts
from .b2b import B2BProblem
from .gpu_source import CUDA_HELPERS, DIALECT, indent, main_loop, mma_block, store_epilogue
from .gpu_tiles import MMA_K, MMA_M, MMA_N, PAD, REGS_OVERHEAD, GpuTile, check_gpu_tile
from .problem import ConvProblem, GemmProblem

NAME = "tw_b2b"
MAX_ACCUMULATORS = 128  # fp32 registers per thread a warp's share of the resident rows may take


@dataclass(frozen=True)
class GpuB2BTile:
    """Stage 0: `tile` with bn = N0 padded (one block covers every column); stage 1: warp tile wm x wn1."""
    tile: GpuTile
    wn1: int

    @property
    def warps_n(self) -> int:
        return self.tile.bn // self.tile.wn

    @property
    def bn1(self) -> int:
        return self.warps_n * self.wn1

    def smem_bytes(self) -> int:
        t = self.tile
        return t.smem_bytes + (t.bm + self.bn1) * (t.bn + PAD) * 2  # ring + resident rows + GEMM1's weights

    def __str__(self) -> str:
        return f"{self.tile}; stage 1 warp {self.tile.wm}x{self.wn1} ({self.bn1} columns a pass)"


def n0_padded(n0: int, warps_n: int) -> int:
    """N0 rounded up so each of warps_n warps gets whole 8-column instructions and k-steps of 16."""
    return math.ceil(n0 / math.lcm(warps_n * MMA_N, MMA_K)) * math.lcm(warps_n * MMA_N, MMA_K)


def check_gpu_residency(problem: B2BProblem, bt: GpuB2BTile, gpu: GpuFacts) -> None:
    """The static proof of a fused pair on the GPU: the block covers all N0 columns (TB_N = N0), its threads
    hold their share of the resident rows in registers, and the rows, GEMM1's weight tile and the ring fit
    the block's shared memory. A ScheduleError names the first that fails."""
    f = problem.first
    t = bt.tile
    check_gpu_tile(t, gpu, f.K)
    n0p = n0_padded(f.N, bt.warps_n)
    if t.bn != n0p:
        raise ScheduleError(f"{problem.name}: threadblock residence fails: the block's {t.bn} columns must be all of "
                            f"N0 = {f.N} ({n0p} padded); the second GEMM would read rows other blocks compute")
    if t.accumulators > MAX_ACCUMULATORS:
        raise ScheduleError(f"{problem.name}: each thread would hold {t.accumulators} accumulators of the resident "
                            f"rows (warp tile {t.wm}x{t.wn}); at most {MAX_ACCUMULATORS}: fewer rows per block or "
                            "more warps across N0")
    acc1 = (t.wm // MMA_M) * (bt.wn1 // MMA_N) * 4
    if t.accumulators + acc1 + REGS_OVERHEAD > 255:
        raise ScheduleError(f"{problem.name}: {t.accumulators} + {acc1} accumulators exceed the register file")
    if bt.smem_bytes() > gpu.shared_mem_per_block:
        raise ScheduleError(f"{problem.name}: the resident rows ({t.bm} x {n0p}), GEMM1's weight tile and the "
                            f"{t.stages}-stage ring need {bt.smem_bytes()} bytes of shared memory; a block gets "
                            f"{gpu.shared_mem_per_block}")
    if bt.wn1 % MMA_N:
        raise ScheduleError(f"{problem.name}: the stage-1 warp tile's {bt.wn1} columns are not whole instructions")


def gpu_b2b_tiles(problem: B2BProblem, gpu: GpuFacts, limit: int = 16) -> list[GpuB2BTile]:
    f, g = problem.first, problem.gemm1
    align = math.gcd(f.K if isinstance(f, GemmProblem) else f.IC, 8)  # a conv's copies stay inside one tap
    out = []
    for bm in (16, 32, 64, 128):
        for wm in (16, 32, 64):
            for warps_n in (1, 2, 4):
                if bm % wm or not 2 <= (bm // wm) * warps_n <= 8:
                    continue
                n0p = n0_padded(f.N, warps_n)
                for wn1 in (8, 16, 32):
                    for bk, stages in ((32, 2), (32, 3), (16, 2), (64, 2)):
                        bt = GpuB2BTile(GpuTile(bm, n0p, bk, wm, n0p // warps_n, stages, align), wn1)
                        try:
                            check_gpu_residency(problem, bt, gpu)
                        except ScheduleError:
                            continue
                        blocks = math.ceil(f.M / bm)
                        fill = min(1.0, blocks / gpu.sm_count)
                        waste = math.ceil(g.N / bt.bn1) * bt.bn1 / g.N
                        out.append((bm * fill / waste * (1 + 0.05 * stages), str(bt), bt))
    if not out:
        raise ScheduleError(f"{problem.name}: no block keeps N0 = {f.N} columns of its rows resident on {gpu.name}; "
                            "run the two GEMMs unfused")
    out.sort(key=lambda x: (-x[0], x[1]))
    return [bt for _, _, bt in out[:limit]]


def b2b_source(dialect: str, problem: B2BProblem, bt: GpuB2BTile) -> str:
    f, g = problem.first, problem.gemm1
    e0, e1 = problem.epilogues
    t, d = bt.tile, DIALECT[dialect]
    M, K0, N0, N1, n0p = f.M, f.K, f.N, g.N, bt.tile.bn
    mi, ni0, ni1 = t.wm // MMA_M, t.wn // MMA_N, bt.wn1 // MMA_N
    stage0 = main_loop(dialect, t, M, N0, K0, b="B0", conv=f if isinstance(f, ConvProblem) else None)
    stage1_store = indent(store_epilogue(mi, ni1, e1, M, N1, acc="acc1", col0="nb + wn1", bias="bias1"), 2)
    body = f"""  TW_LOCAL tw_in As[{t.stages}][{t.bm}][{t.bk + PAD}];
  TW_LOCAL tw_in Bs[{t.stages}][{t.bn}][{t.bk + PAD}];
  TW_LOCAL tw_in T[{t.bm}][{n0p + PAD}];
  TW_LOCAL tw_in W1[{bt.bn1}][{n0p + PAD}];
  const int tid = {d['tid']}, warp = tid / 32, lane = tid % 32, group = lane >> 2, tig = lane & 3;
  const int wm0 = (warp / {bt.warps_n}) * {t.wm}, wn0 = (warp % {bt.warps_n}) * {t.wn};
  const int m0 = {d['by']} * {t.bm}, n0 = 0;
  (void)bias0; (void)bias1; (void)res;
  float acc[{mi}][{ni0}][4];
  TW_UNROLL for (int i = 0; i < {mi}; ++i) TW_UNROLL for (int j = 0; j < {ni0}; ++j)
    TW_UNROLL for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
{stage0}  TW_UNROLL
  for (int i = 0; i < {mi}; ++i)
    TW_UNROLL
    for (int j = 0; j < {ni0}; ++j)
      TW_UNROLL
      for (int e = 0; e < 4; ++e) {{
        int r = wm0 + i * {MMA_M} + group + (e >= 2 ? 8 : 0), n = wn0 + j * {MMA_N} + tig * 2 + (e & 1);
        float v = acc[i][j][e], bv = {"n < " + str(N0) + " ? bias0[n] : 0.0f" if e0.bias else "0.0f"}, rv = 0.0f;
        (void)bv; (void)rv;
        {e0.c_scalar_body()}
        T[r][n] = n < {N0} ? TW_FROM_FLOAT(v) : TW_ZERO;
      }}
  for (int nb = 0; nb < {N1}; nb += {bt.bn1}) {{
    TW_BARRIER();
    for (int c = tid; c < {bt.bn1 * n0p}; c += {t.threads}) {{
      int n = c / {n0p}, k = c % {n0p}, gn = nb + n;
      W1[n][k] = gn < {N1} && k < {N0} ? B1[(long)gn * {N0} + k] : TW_ZERO;
    }}
    TW_BARRIER();
    float acc1[{mi}][{ni1}][4];
    TW_UNROLL for (int i = 0; i < {mi}; ++i) TW_UNROLL for (int j = 0; j < {ni1}; ++j)
      TW_UNROLL for (int e = 0; e < 4; ++e) acc1[i][j][e] = 0.0f;
    const int wn1 = (warp % {bt.warps_n}) * {bt.wn1};
{indent(mma_block(dialect, mi, ni1, n0p, "T[{r}][{c}]", "W1[{r}][{c}]", acc="acc1", col0="wn1"), 2)}{stage1_store}  }}
}}
"""
    sig = (d["signature"].format(threads=t.threads, name=NAME)
           + "const TW_GLOBAL tw_in *restrict A, const TW_GLOBAL tw_in *restrict B0, const TW_GLOBAL float *restrict "
             "bias0, const TW_GLOBAL tw_in *restrict B1, const TW_GLOBAL float *restrict bias1, "
             "const TW_GLOBAL tw_in *restrict res, TW_GLOBAL tw_in *restrict C) {")
    src = "\n".join([d["head"], CUDA_HELPERS if dialect == "cuda" else "", sig, body])
    return src.replace("restrict", "__restrict__") if dialect == "cuda" else src


def b2b_module(dialect: str, problem: B2BProblem, bt: GpuB2BTile, gpu: GpuFacts) -> DeviceModule:
    """Arguments A [M, K0], B0 [N0, K0], bias0 [N0], B1 [N1, N0], bias1 [N1], residual [M, N1], C [M, N1]; for a
    convolution pair A is the NHWC input, B0 the first weight as OHWI ([N0, K0]), B1 the 1x1 conv's [N1, N0], and
    the residual and C the NHWC output."""
    check_gpu_residency(problem, bt, gpu)
    f, g = problem.first, problem.gemm1
    io = "float16" if dialect == "cuda" else "float32"
    out = problem.output_shape
    shapes = [("A", io, f.input_shape), ("B0", io, (f.N, f.K)), ("bias0", "float32", (f.N,)), ("B1", io, (g.N, f.N)),
              ("bias1", "float32", (g.N,)), ("res", io, out), ("C", io, out)]
    args = tuple(DeviceBuffer(n, dt, s, s, "arg", i) for i, (n, dt, s) in enumerate(shapes))
    launch = KernelLaunch(NAME, (1, math.ceil(f.M / bt.tile.bm), 1), (bt.tile.threads, 1, 1), bt.smem_bytes(), 0,
                          args)
    return DeviceModule(b2b_source(dialect, problem, bt), dialect, NAME, (launch,), args, (), outputs=(6,))

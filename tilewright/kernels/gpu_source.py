"""CUDA and OpenCL from one GPU GEMM template: a block owns a bm x bn tile of C, its warps
wm x wn tiles, each warp a grid of m16n8k16 instructions; A [M, K] and B [N, K] (a linear layer's
weight) pass through a `stages`-deep shared-memory ring, filled by cp.async on CUDA; each
accumulator is finished by the epilogue in registers and stored once.

The OpenCL dialect is the same kernel with plain copies and each mma's result computed from the
shared tiles at the accumulator positions the instruction defines (PTX ISA, "Matrix fragments for
mma.m16n8k16": c0, c1 at row groupID, columns 2 * threadID_in_group + 0/1; c2, c3 eight rows
lower), so running it on PoCL checks every index of the template but the A/B register fragments,
which only a GPU executes."""

from __future__ import annotations

import math

from ..errors import ScheduleError
from .epilogue import NO_EPILOGUE, Epilogue
from .gpu_tiles import MMA_K, MMA_M, MMA_N, PAD, GpuTile
from .problem import ConvProblem

DIALECT = {
    "cuda": {
        "head": "#include <cuda_fp16.h>\ntypedef half tw_in;\n"
                "#define TW_ERF erff\n#define TW_TANH tanhf\n#define TW_EXP expf\n#define TW_LOG logf\n"
                "#define TW_FMIN fminf\n#define TW_FMAX fmaxf\n"
                "#define TW_TO_FLOAT(x) __half2float(x)\n#define TW_FROM_FLOAT(x) __float2half(x)\n"
                "#define TW_ZERO __float2half(0.0f)\n"
                "#define TW_BARRIER() __syncthreads()\n#define TW_GLOBAL\n#define TW_LOCAL __shared__ __align__(16)\n"
                "#define TW_UNROLL _Pragma(\"unroll\")\n",
        "signature": 'extern "C" __global__ void __launch_bounds__({threads}, 1) {name}(',
        "tid": "threadIdx.x", "bx": "blockIdx.x", "by": "blockIdx.y",
    },
    "opencl": {
        "head": "typedef float tw_in;\n"
                "#define TW_ERF erf\n#define TW_TANH tanh\n#define TW_EXP exp\n#define TW_LOG log\n"
                "#define TW_FMIN fmin\n#define TW_FMAX fmax\n"
                "#define TW_TO_FLOAT(x) (x)\n#define TW_FROM_FLOAT(x) (x)\n#define TW_ZERO 0.0f\n"
                "#define TW_BARRIER() barrier(CLK_LOCAL_MEM_FENCE)\n#define TW_GLOBAL __global\n"
                "#define TW_LOCAL __local\n#define TW_UNROLL\n",
        "signature": "__kernel __attribute__((reqd_work_group_size({threads}, 1, 1))) void {name}(",
        "tid": "(int)get_local_id(0)", "bx": "(int)get_group_id(0)", "by": "(int)get_group_id(1)",
    },
}

CUDA_HELPERS = r"""
__device__ __forceinline__ void tw_cp_async(void *smem, const void *gmem, int bytes, int valid) {
  unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  if (bytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(s), "l"(gmem), "r"(valid));
  else if (bytes == 8)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" :: "r"(s), "l"(gmem), "r"(valid));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" :: "r"(s), "l"(gmem), "r"(valid));
}
__device__ __forceinline__ void tw_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void tw_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }
__device__ __forceinline__ void tw_mma(float *c, const unsigned *a, const unsigned *b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
               "{%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
"""


def _load_tile(dialect: str, smem: str, src: str, rows_total: str, row0: str, k_total: int, tile_rows: int,
               t: GpuTile, conv: ConvProblem | None = None) -> str:
    """Copy a tile_rows x bk tile of `src` ([rows_total, k_total] row-major) into smem[stage], zeros outside;
    with `conv`, `src` is the NHWC input and row r, column k the implicit GEMM's: output pixel r, (kh, kw, ic) k."""
    per_row = t.bk // t.align
    head = (f"  for (int c = tid; c < {tile_rows * per_row}; c += {t.threads}) {{\n"
            f"    int r = c / {per_row}, col = (c % {per_row}) * {t.align};\n"
            f"    int gr = {row0} + r, gk = k0 + col;\n"
            f"    int ok = gr < {rows_total} && gk < {k_total};\n")
    if conv is None:
        head += f"    const TW_GLOBAL tw_in *p = {src} + (ok ? (long)gr * {k_total} + gk : 0);\n"
    else:
        cv = conv
        head += (f"    int pix = ok ? gr : 0, tap = gk / {cv.IC}, ic = gk % {cv.IC};\n"
                 f"    int n = pix / {cv.OH * cv.OW}, oh = pix / {cv.OW} % {cv.OH}, ow = pix % {cv.OW};\n"
                 f"    int ih = oh * {cv.stride} - {cv.pad} + tap / {cv.KW} * {cv.dilation};\n"
                 f"    int iw = ow * {cv.stride} - {cv.pad} + tap % {cv.KW} * {cv.dilation};\n"
                 f"    ok = ok && ih >= 0 && ih < {cv.H} && iw >= 0 && iw < {cv.W};\n"
                 f"    const TW_GLOBAL tw_in *p = {src} + (ok ? (((long)n * {cv.H} + ih) * {cv.W} + iw) * {cv.IC} + ic "
                 ": 0);\n")
    if dialect == "cuda" and t.align >= 2:
        body = f"    tw_cp_async(&{smem}[stage][r][col], p, {2 * t.align}, ok ? {2 * t.align} : 0);\n"
    else:
        body = (f"    for (int e = 0; e < {t.align}; ++e) {smem}[stage][r][col + e] = ok ? p[e] : TW_ZERO;\n")
    return head + body + "  }\n"


def mma_block(dialect: str, mi: int, ni: int, k_extent: int, a_at: str, b_at: str, acc: str = "acc",
              row0: str = "wm0", col0: str = "wn0") -> str:
    """acc[i][j] += A[row0 + 16 i .., k] B[col0 + 8 j .., k] over k < k_extent, with A's element at row r,
    column c being `a_at`.format(r=, c=) (and B's, n-major, `b_at`): m16n8k16 mma.sync on CUDA, its
    result at the same accumulator positions on OpenCL."""
    a = [a_at.format(r=r, c=c) for r, c in (("r", "c"), ("r + 8", "c"), ("r", "c + 8"), ("r + 8", "c + 8"))]
    b = [b_at.format(r="n", c=c) for c in ("c", "c + 8")]
    if dialect == "cuda":
        return f"""  #pragma unroll
  for (int kk = 0; kk < {k_extent}; kk += {MMA_K}) {{
    unsigned a[{mi}][4], b[{ni}][2];
    #pragma unroll
    for (int i = 0; i < {mi}; ++i) {{
      int r = {row0} + i * {MMA_M} + group, c = kk + tig * 2;
""" + "".join(f"      a[i][{q}] = *(const unsigned *)&{a[q]};\n" for q in range(4)) + f"""    }}
    #pragma unroll
    for (int j = 0; j < {ni}; ++j) {{
      int n = {col0} + j * {MMA_N} + group, c = kk + tig * 2;
""" + "".join(f"      b[j][{q}] = *(const unsigned *)&{b[q]};\n" for q in range(2)) + f"""    }}
    #pragma unroll
    for (int i = 0; i < {mi}; ++i)
      #pragma unroll
      for (int j = 0; j < {ni}; ++j) tw_mma({acc}[i][j], a[i], b[j]);
  }}
"""
    return f"""  for (int kk = 0; kk < {k_extent}; kk += {MMA_K})
    for (int i = 0; i < {mi}; ++i)
      for (int j = 0; j < {ni}; ++j)
        for (int e = 0; e < 4; ++e) {{
          int r = {row0} + i * {MMA_M} + group + (e >= 2 ? 8 : 0), n = {col0} + j * {MMA_N} + tig * 2 + (e & 1);
          float s = 0.0f;
          for (int k = 0; k < {MMA_K}; ++k) s += {a_at.format(r="r", c="kk + k")} * {b_at.format(r="n", c="kk + k")};
          {acc}[i][j][e] += s;
        }}
"""


def _compute(dialect: str, t: GpuTile) -> str:
    return mma_block(dialect, t.wm // MMA_M, t.wn // MMA_N, t.bk, "As[stage][{r}][{c}]", "Bs[stage][{r}][{c}]")


def main_loop(dialect: str, t: GpuTile, M: int, N: int, K: int, b: str = "B", compute: str | None = None,
              conv: ConvProblem | None = None) -> str:
    """The k loop over a bm x bn block of A [M, K] (or `conv`'s implicit GEMM) times `b` [N, K] through the
    shared ring."""
    kt = math.ceil(K / t.bk)
    load = (_load_tile(dialect, "As", "A", str(M), "m0", K, t.bm, t, conv)
            + _load_tile(dialect, "Bs", b, str(N), "n0", K, t.bn, t))
    compute = compute or _compute(dialect, t)
    if dialect == "cuda":
        return f"""  for (int s = 0; s < {t.stages - 1}; ++s) {{
    if (s < {kt}) {{
      int stage = s, k0 = s * {t.bk};
{indent(load, 4)}    }}
    tw_commit();
  }}
  for (int kt = 0; kt < {kt}; ++kt) {{
    tw_wait<{t.stages - 2}>();
    __syncthreads();
    {{
      int nt = kt + {t.stages - 1};
      if (nt < {kt}) {{
        int stage = nt % {t.stages}, k0 = nt * {t.bk};
{indent(load, 8)}      }}
      tw_commit();
    }}
    int stage = kt % {t.stages};
{indent(compute, 2)}  }}
"""
    return f"""  for (int kt = 0; kt < {kt}; ++kt) {{
    int stage = kt % {t.stages}, k0 = kt * {t.bk};
    TW_BARRIER();
{indent(load, 2)}    TW_BARRIER();
{indent(compute, 2)}  }}
"""


def indent(text: str, n: int) -> str:
    return "".join((" " * n + line if line else line) for line in text.splitlines(True))


def store_epilogue(mi: int, ni: int, ep: Epilogue, M: int, N: int, acc: str = "acc", col0: str = "n0 + wn0",
                   bias: str = "bias") -> str:
    """Each accumulator of a warp's mi x ni grid of m16n8 tiles through `ep`, stored to C [M, N] where in
    bounds; columns start at `col0`, the bias is read from `bias`."""
    return f"""  TW_UNROLL
  for (int i = 0; i < {mi}; ++i)
    TW_UNROLL
    for (int j = 0; j < {ni}; ++j)
      TW_UNROLL
      for (int e = 0; e < 4; ++e) {{
        int r = m0 + wm0 + i * {MMA_M} + group + (e >= 2 ? 8 : 0);
        int n = {col0} + j * {MMA_N} + tig * 2 + (e & 1);
        if (r < {M} && n < {N}) {{
          float v = {acc}[i][j][e], bv = {f"{bias}[n]" if ep.bias else "0.0f"};
          float rv = {f"TW_TO_FLOAT(res[(long)r * {N} + n])" if ep.residual else "0.0f"};
          (void)bv; (void)rv;
          {ep.c_scalar_body()}
          C[(long)r * {N} + n] = TW_FROM_FLOAT(v);
        }}
      }}
"""


def gemm_source(dialect: str, M: int, N: int, K: int, tile: GpuTile, epilogue: Epilogue = NO_EPILOGUE,
                name: str = "tw_gemm", conv: ConvProblem | None = None) -> str:
    """`name`(A [M, K], B [N, K], bias [N] fp32, residual [M, N], C [M, N]); grid (ceil(N / bn), ceil(M / bm))
    blocks of tile.threads threads. Inputs and outputs are half on CUDA, float on OpenCL. With `conv`
    (M, N, K its implicit GEMM's), A is the NHWC input and B the OHWI weight: the output is NHWC."""
    if conv is not None and conv.IC % tile.align:
        raise ScheduleError(f"{conv.name}: {conv.IC} input channels are not a multiple of the {tile.align}-half "
                            f"copy (a copy must not straddle two kernel taps); pad the channels or use align "
                            f"{math.gcd(conv.IC, 8)}")
    d = DIALECT[dialect]
    t = tile
    mi, ni = t.wm // MMA_M, t.wn // MMA_N
    parts = [d["head"], CUDA_HELPERS if dialect == "cuda" else "",
             d["signature"].format(threads=t.threads, name=name)
             + "const TW_GLOBAL tw_in *restrict A, const TW_GLOBAL tw_in *restrict B, "
               "const TW_GLOBAL float *restrict bias, const TW_GLOBAL tw_in *restrict res, "
               "TW_GLOBAL tw_in *restrict C) {",
             f"  TW_LOCAL tw_in As[{t.stages}][{t.bm}][{t.bk + PAD}];",
             f"  TW_LOCAL tw_in Bs[{t.stages}][{t.bn}][{t.bk + PAD}];",
             f"  const int tid = {d['tid']}, warp = tid / 32, lane = tid % 32, group = lane >> 2, tig = lane & 3;",
             f"  const int wm0 = (warp / {t.bn // t.wn}) * {t.wm}, wn0 = (warp % {t.bn // t.wn}) * {t.wn};",
             f"  const int m0 = {d['by']} * {t.bm}, n0 = {d['bx']} * {t.bn};",
             f"  float acc[{mi}][{ni}][4];",
             f"  TW_UNROLL for (int i = 0; i < {mi}; ++i) TW_UNROLL for (int j = 0; j < {ni}; ++j) "
             "TW_UNROLL for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;",
             "  (void)bias; (void)res;",
             main_loop(dialect, t, M, N, K, conv=conv) + store_epilogue(mi, ni, epilogue, M, N) + "}"]
    src = "\n".join(p for p in parts if p)
    return src.replace("restrict", "__restrict__") if dialect == "cuda" else src


def grid(M: int, N: int, tile: GpuTile) -> tuple[int, int]:
    return math.ceil(N / tile.bn), math.ceil(M / tile.bm)

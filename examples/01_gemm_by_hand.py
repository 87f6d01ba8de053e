"""Lesson 1: schedule a GEMM by hand, as in TVM, and compare it with NumPy and PyTorch.

The schedule, for C[M, N] = A[M, K] @ B[K, N] in fp32:
- tile C into (rows x cols) blocks, column blocks outermost and parallel over cores; the
  block is the largest that keeps its accumulators, one B row and an A broadcast in
  the target's vector registers (6 x 16 with AVX2's 16 registers, 6 x 64 with AVX-512's 32);
- pack the B panel of a column block (K x cols) into a contiguous buffer once per
  column block (`cache_read` + `compute_at`), so the inner loop streams it;
- accumulate each (rows x cols) tile in registers (`cache_write(..., "local")` +
  `compute_at`), rows unrolled, columns in vectors of the target's width;
- copy the tile out with vector stores.

Run: python examples/01_gemm_by_hand.py [--size 1024] [--rows R] [--cols C]
"""

from __future__ import annotations

import argparse

import numpy as np

import tilewright as tw
from tilewright.bench.timing import median_seconds, settle
from tilewright.runtime.peak import fp32_peak_gflops


def gemm(m: int, n: int, k: int):
    A = tw.placeholder((m, k), "float32", name="A")
    B = tw.placeholder((k, n), "float32", name="B")
    r = tw.reduce_axis(k, name="k")
    C = tw.compute((m, n), lambda i, j: tw.sum(A[i, r] * B[r, j], axis=r), name="C")
    return A, B, C


def register_block(target) -> tuple[int, int]:
    """(rows, cols) of C accumulated in registers: cols spans 2 vectors (4 with 32
    registers), rows as many as fit beside those B vectors and one A broadcast."""
    lanes = target.vector_lanes(4)
    vectors = 4 if target.vector_registers >= 32 else 2
    rows = (target.vector_registers - vectors - 1) // vectors
    return rows, vectors * lanes


def schedule_gemm(A, B, C, rows: int | None = None, cols: int | None = None, target=None):
    target = tw.as_target(target)
    lanes = target.vector_lanes(4)
    auto_rows, auto_cols = register_block(target)
    rows, cols = rows or auto_rows, cols or auto_cols
    if cols % lanes:
        raise ValueError(f"cols={cols} must be a multiple of the vector width ({lanes} floats)")
    s = tw.create_schedule(C)
    CC = s.cache_write(C, "local")
    BB = s.cache_read(B, "global", [CC])
    i, j = C.op.axis
    io, ii = s[C].split(i, factor=rows)
    jo, ji = s[C].split(j, factor=cols)
    s[C].reorder(jo, io, ii, ji)
    s[C].parallel(jo)
    jio, jii = s[C].split(ji, factor=lanes)
    s[C].unroll(ii)
    s[C].unroll(jio)
    s[C].vectorize(jii)

    s[BB].compute_at(s[C], jo)
    bo, bi = s[BB].split(s[BB].op.axis[1], factor=lanes)
    s[BB].vectorize(bi)

    s[CC].compute_at(s[C], io)
    ci, cj = s[CC].op.axis
    (ck,) = s[CC].op.reduce_axis
    cjo, cji = s[CC].split(cj, factor=lanes)
    s[CC].reorder(ck, ci, cjo, cji)
    s[CC].unroll(ci)
    s[CC].unroll(cjo)
    s[CC].vectorize(cji)
    return s


def run(size: int = 1024, rows: int | None = None, cols: int | None = None, repeat: int = 7) -> dict:
    target = tw.as_target("cpu")
    auto_rows, auto_cols = register_block(target)
    rows, cols = rows or auto_rows, cols or auto_cols
    A, B, C = gemm(size, size, size)
    s = schedule_gemm(A, B, C, rows, cols, target)
    kernel = tw.build(s, [A, B, C], target=target)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    c = np.empty((size, size), np.float32)
    kernel(a, b, c)
    want = tw.evaluate(C, {A: a, B: b})
    err = float(np.abs(c - want).max() / np.abs(want).max())
    if err > 1e-5:
        raise SystemExit(f"generated kernel is wrong: max relative error {err:.2e}")
    flop = 2.0 * size**3
    settle()  # the reference evaluator's BLAS threads spin for a while; wait until they idle
    ours = kernel.time(a, b, c, repeat=repeat).median
    result = {"size": size, "threads": target.cores, "rows": rows, "cols": cols, "max_rel_error": err,
              "tilewright_s": ours, "numpy_s": median_seconds(lambda: a @ b, repeat)}
    try:
        import torch

        torch.set_num_threads(target.cores)
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        result["torch_s"] = median_seconds(lambda: torch.matmul(ta, tb), repeat)
    except ImportError:
        result["torch_s"] = None
    result["peak_gflops"] = fp32_peak_gflops(target)
    for key in ("tilewright", "numpy", "torch"):
        secs = result[f"{key}_s"]
        result[f"{key}_gflops"] = flop / secs / 1e9 if secs else None
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rows", type=int, default=None, help="register block rows (default: from the target)")
    parser.add_argument("--cols", type=int, default=None, help="register block columns (default: from the target)")
    args = parser.parse_args()
    r = run(args.size, args.rows, args.cols)
    peak = r["peak_gflops"]
    print(f"fp32 GEMM {r['size']}^3 on {r['threads']} cores (measured fp32 FMA peak {peak:.0f} GFLOP/s), "
          f"checked against the reference (max rel. error {r['max_rel_error']:.1e})")
    print(f"{'':12} {'ms':>8} {'GFLOP/s':>8} {'% peak':>7}")
    for key in ("tilewright", "numpy", "torch"):
        secs = r[f"{key}_s"]
        if secs is None:
            print(f"{key:12} {'n/a':>8}")
            continue
        g = r[f"{key}_gflops"]
        print(f"{key:12} {secs * 1e3:8.2f} {g:8.1f} {100 * g / peak:6.1f}%")
    if r["torch_s"]:
        print(f"tilewright / torch speed: {r['torch_s'] / r['tilewright_s']:.2f}x")


if __name__ == "__main__":
    main()

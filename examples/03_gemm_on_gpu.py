"""Lesson 3: schedule an fp32 GEMM for a GPU by hand, as in TVM, and compare it with cuBLAS.

The schedule, for C[N, N] = A[N, K] @ B[K, N] (TVM paper, sections 3.3 and 3.5):
- each thread block computes a `block` x `block` tile of C (blockIdx.y, blockIdx.x);
- its threads form a `threads` x `threads` grid (threadIdx.y, threadIdx.x), and each
  thread accumulates a register tile of C (`cache_write(C, "local")` at the thread loop);
- the reduction runs in steps of `step`: per step, the block's A and B panels are
  fetched into shared memory cooperatively, every thread copying its share with
  vector loads (`cache_read(..., "shared")` + `compute_at` + bind), barriers around it;
- per k, each thread reads its row of A and column of B from shared memory into
  registers (`cache_read(..., "local")`) and does register-tile FMAs;
- virtual threads (`vthread`) split the tile into strided sub-tiles, so the threads of a
  warp touch neighbouring columns (coalesced stores, fewer shared-memory bank conflicts).

Run: python examples/03_gemm_on_gpu.py [--target cuda|opencl] [--n 4096]
On a CUDA GPU it prints the kernel's time beside torch.matmul (cuBLAS, TF32 off) in the
same process; on OpenCL (PoCL's CPU device in CI) it runs and checks a small size.
"""

from __future__ import annotations

import argparse

import numpy as np

import tilewright as tw


def gemm(m: int, n: int | None = None, k: int | None = None):
    n, k = n or m, k or m
    A = tw.placeholder((m, k), "float32", name="A")
    B = tw.placeholder((k, n), "float32", name="B")
    r = tw.reduce_axis(k, name="k")
    C = tw.compute((m, n), lambda i, j: tw.sum(A[i, r] * B[r, j], axis=r), name="C")
    return A, B, C


def schedule_gemm(A, B, C, block: int = 128, threads: int = 16, vthreads: int | tuple = 2, step: int = 8,
                  vector: int = 4):
    """`vthreads`: virtual threads per axis (an int for both, or (rows, cols); 1 = none)."""
    vy_n, vx_n = (vthreads, vthreads) if isinstance(vthreads, int) else vthreads
    s = tw.create_schedule(C)
    AA, BB = s.cache_read(A, "shared", [s[C]]), s.cache_read(B, "shared", [s[C]])
    AL, BL = s.cache_read(AA, "local", [s[C]]), s.cache_read(BB, "local", [s[C]])
    CC = s.cache_write(C, "local")
    tx, ty = tw.thread_axis("threadIdx.x"), tw.thread_axis("threadIdx.y")

    by, yi = s[C].split(C.op.axis[0], factor=block)
    bx, xi = s[C].split(C.op.axis[1], factor=block)
    s[C].reorder(by, bx, yi, xi)
    vy, yi = s[C].split(yi, nparts=vy_n)
    ty_c, yi = s[C].split(yi, nparts=threads)
    vx, xi = s[C].split(xi, nparts=vx_n)
    tx_c, xi = s[C].split(xi, nparts=threads)
    s[C].reorder(vy, vx, ty_c, tx_c, yi, xi)
    s[C].bind(by, tw.thread_axis("blockIdx.y"))
    s[C].bind(bx, tw.thread_axis("blockIdx.x"))
    if vy_n > 1:
        s[C].bind(vy, tw.thread_axis("vthread", name="vy"))
    if vx_n > 1:
        s[C].bind(vx, tw.thread_axis("vthread", name="vx"))
    s[C].bind(ty_c, ty)
    s[C].bind(tx_c, tx)

    s[CC].compute_at(s[C], tx_c)
    ko, ki = s[CC].split(s[CC].op.reduce_axis[0], factor=step)
    s[CC].reorder(ko, ki, *s[CC].op.axis)
    for T in (AA, BB):
        s[T].compute_at(s[CC], ko)
    for T in (AL, BL):
        s[T].compute_at(s[CC], ki)
    for T in (AA, BB):  # cooperative fetch: all threads of the block, `vector` floats each
        rows, cols = s[T].op.axis
        fused = s[T].fuse(rows, cols)
        rest, vec = s[T].split(fused, factor=vector)
        rest, t_x = s[T].split(rest, factor=threads)
        _, t_y = s[T].split(rest, factor=threads)
        s[T].bind(t_y, ty)
        s[T].bind(t_x, tx)
        if vector > 1:
            s[T].vectorize(vec)
    return s


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", default=None, help="cuda or opencl (default: cuda if a GPU is present)")
    p.add_argument("--n", type=int, default=None, help="matrix size (default 4096 on CUDA, 256 on OpenCL)")
    args = p.parse_args(argv)
    target = tw.Target(args.target or ("cuda" if _has_cuda() else "opencl"))
    n = args.n or (4096 if target.kind == "cuda" else 256)
    small = n < 1024
    A, B, C = gemm(n)
    s = schedule_gemm(A, B, C, block=32 if small else 128, threads=4 if small else 16)
    kernel = tw.build(s, [A, B, C], target=target)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    c = np.zeros((n, n), np.float32)
    kernel(a, b, c)
    want = a.astype(np.float64) @ b.astype(np.float64)
    err = float(np.abs(c - want).max() / np.abs(want).max())
    if not err < 1e-4:
        raise SystemExit(f"wrong result: max relative error {err:.2e}")
    print(f"{target}: GEMM {n}^3 fp32, checked against NumPy (max relative error {err:.1e})")
    flops = 2.0 * n ** 3
    if target.kind == "cuda":
        _beside_cublas(kernel, a, b, flops)
    else:
        t = kernel.time(a, b, c, number=2, repeat=5)
        print(f"  tilewright: {t.median * 1e3:8.3f} ms  {flops / t.median / 1e12:6.2f} TFLOP/s")
    return 0


def _has_cuda() -> bool:
    try:
        tw.Target("cuda")
        return True
    except tw.TilewrightError:
        return False


def _beside_cublas(kernel, a, b, flops: float) -> None:
    """Both sides on the same CUDA tensors, timed alike (CUDA events around calls queued behind a spin
    kernel, bench/gpu_timing.py), in alternating rounds; TF32 off, so both compute in fp32."""
    import torch

    from tilewright.bench.gpu_timing import alternating, device_median_seconds, kernel_median_seconds

    torch.backends.cuda.matmul.allow_tf32 = False
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    ours_c, theirs_c = torch.empty_like(ta), torch.empty_like(ta)
    times = alternating({
        "tilewright": lambda: kernel_median_seconds(kernel, [ta, tb, ours_c]),
        "cuBLAS": lambda: device_median_seconds(lambda: torch.matmul(ta, tb, out=theirs_c)),
    })
    for name, t in times.items():
        print(f"  {name + ':':<12}{t * 1e3:8.3f} ms  {flops / t / 1e12:6.2f} TFLOP/s")
    print(f"  tilewright / cuBLAS: {times['cuBLAS'] / times['tilewright']:.2f}x cuBLAS's speed (TF32 off)")


if __name__ == "__main__":
    raise SystemExit(main())

"""The TVM tutorial's hand schedule of fp32 GEMM, timed beside NumPy's `A @ B`.

The schedule (issue 14): blocked 8 x 64, the reduction split by 4 with the
block's rows inside it, columns vectorized by 16, rows unrolled, the outer
loop parallel, and no cache_write: the accumulators are the output C itself
unless lowering keeps them in registers (lower/accumulators.py).

Both sides run with the same thread count (OpenBLAS's is fixed through
OPENBLAS_NUM_THREADS before NumPy loads), alternating rounds, each after the
other's thread pool has gone idle (bench/timing.py).

Run: python benchmarks/tutorial_gemm.py [--size 512] [--threads T] [--rounds 5] [--source]
"""

from __future__ import annotations

import argparse
import os
import sys


def tutorial_schedule(tw, n: int):
    A = tw.placeholder((n, n), "float32", name="A")
    B = tw.placeholder((n, n), "float32", name="B")
    k = tw.reduce_axis(n, name="k")
    C = tw.compute((n, n), lambda i, j: tw.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = tw.create_schedule(C)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 64)
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(xo, yo, ko, xi, ki, yi)
    yio, yii = s[C].split(yi, factor=16)
    s[C].vectorize(yii)
    s[C].unroll(xi)
    s[C].parallel(xo)
    return s, (A, B, C)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--threads", type=int, default=None, help="default: the host's cores")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--source", action="store_true", help="print the generated C")
    args = parser.parse_args()
    if "numpy" in sys.modules:
        raise SystemExit("NumPy is already loaded: its OpenBLAS thread count can no longer be set")
    threads = args.threads or os.cpu_count() or 1
    os.environ["OPENBLAS_NUM_THREADS"] = str(threads)

    import numpy as np

    import tilewright as tw
    from tilewright.bench.timing import alternating_medians, median_seconds

    s, (A, B, C) = tutorial_schedule(tw, args.size)
    kernel = tw.build(s, [A, B, C], target="cpu")
    kernel.set_num_threads(threads)
    if args.source:
        print(kernel.source)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((args.size, args.size), dtype=np.float32)
    b = rng.standard_normal((args.size, args.size), dtype=np.float32)
    c = np.empty((args.size, args.size), np.float32)
    kernel(a, b, c)
    want = a @ b
    if not np.allclose(c, want, rtol=1e-4, atol=1e-3):
        raise SystemExit(f"the kernel is wrong: max abs error {float(np.abs(c - want).max()):.2e}")
    rounds: dict[str, list[float]] = {"tilewright": [], "numpy": []}

    def recorded(name, timed):
        def run() -> float:
            rounds[name].append(timed())
            return rounds[name][-1]
        return run

    times = alternating_medians({
        "tilewright": recorded("tilewright", lambda: kernel.time(a, b, c, repeat=3).median),
        "numpy": recorded("numpy", lambda: median_seconds(lambda: a @ b, repeat=3)),
    }, rounds=args.rounds)
    best = {name: min(v) for name, v in rounds.items()}  # the least disturbed round, on a shared host
    flop = 2.0 * args.size**3
    print(f"fp32 GEMM {args.size}^3, TVM tutorial schedule, {threads} threads (OpenBLAS {threads}), "
          f"{args.rounds} alternating rounds")
    print(f"  {'':10s} {'median ms':>10s} {'GFLOP/s':>8s} {'best ms':>9s} {'GFLOP/s':>8s}")
    for name in times:
        print(f"  {name:10s} {times[name] * 1e3:10.3f} {flop / times[name] / 1e9:8.1f} "
              f"{best[name] * 1e3:9.3f} {flop / best[name] / 1e9:8.1f}")
    print(f"  tilewright / numpy speed: {times['numpy'] / times['tilewright']:.2f}x (medians), "
          f"{best['numpy'] / best['tilewright']:.2f}x (best rounds)")


if __name__ == "__main__":
    main()

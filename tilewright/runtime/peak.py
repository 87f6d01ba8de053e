"""Measured peak fp32 FMA throughput of the host, so kernel speeds read as a
fraction of what the machine can do. A C loop keeps enough independent FMA
chains in vector registers to hide the FMA latency on every core."""

from __future__ import annotations

import ctypes
import functools

from ..targets import Target, host_target

_SOURCE = r"""
#include <stdint.h>
#include <time.h>
#include <omp.h>
typedef float vf __attribute__((vector_size(%(bytes)d)));
#define CHAINS 12
static double run(int64_t iters) {
  double total = 0.0;
  #pragma omp parallel reduction(+:total)
  {
    vf acc[CHAINS];
    vf a = (vf){0} + 1.0000001f, b = (vf){0} + 0.9999999f;
    for (int c = 0; c < CHAINS; ++c) acc[c] = (vf){0} + (float)c;
    for (int64_t n = 0; n < iters; ++n) {
      #pragma GCC unroll 12
      for (int c = 0; c < CHAINS; ++c) acc[c] = acc[c] * a + b;
      __asm__ volatile("" : "+x"(a));
    }
    float s = 0.0f;
    for (int c = 0; c < CHAINS; ++c) for (int l = 0; l < (int)(sizeof(vf) / 4); ++l) s += acc[c][l];
    total += s;
  }
  return total;
}
double tw_peak_gflops(int64_t iters, int32_t threads) {
  struct timespec t0, t1;
  omp_set_num_threads(threads);
  run(iters / 10);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  volatile double sink = run(iters);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  (void)sink;
  double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  return 2.0 * CHAINS * (sizeof(vf) / 4) * (double)iters * threads / secs / 1e9;
}
"""


@functools.cache
def fp32_peak_gflops(target: Target | None = None, threads: int | None = None) -> float:
    """Best of three measurements of fp32 FMA GFLOP/s on `threads` cores (once per process)."""
    return measure_fp32_peak_gflops(target, threads)


def measure_fp32_peak_gflops(target: Target | None = None, threads: int | None = None) -> float:
    """Best of three measurements of fp32 FMA GFLOP/s on `threads` cores, measured now
    (a long benchmark re-measures: a shared machine's speed drifts)."""
    from ..build import build_library

    target = target or host_target()
    threads = threads or target.cores
    vbytes = max(target.vector_bytes, 16)
    lib = ctypes.CDLL(str(build_library(_SOURCE % {"bytes": vbytes}, target).library))
    lib.tw_peak_gflops.restype = ctypes.c_double
    lib.tw_peak_gflops.argtypes = [ctypes.c_int64, ctypes.c_int32]
    return max(lib.tw_peak_gflops(20_000_000, threads) for _ in range(3))

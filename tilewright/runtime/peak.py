"""Measured peak fp32 FMA throughput of the host, so kernel speeds read as a
fraction of what the machine can do. A C loop keeps enough independent FMA
chains in vector registers to hide the FMA latency on every core. The same
for the AVX-512 dot-product instructions (`vpdpbusd`, `vdpbf16ps`) where the
host has them: the peak an int8 or bf16 kernel is measured against."""

from __future__ import annotations

import ctypes
import functools

from ..targets import Target, host_target

# run(iters) on every core, timed after a warm-up; MACS: multiply-adds per chain step
_TIMER = r"""
double tw_peak(int64_t iters, int32_t threads) {
  struct timespec t0, t1;
  omp_set_num_threads(threads);
  run(iters / 10);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  volatile double sink = run(iters);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  (void)sink;
  double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  return 2.0 * CHAINS * MACS * (double)iters * threads / secs / 1e9;
}
"""

_SOURCE = r"""
#include <stdint.h>
#include <time.h>
#include <omp.h>
typedef float vf __attribute__((vector_size(%(bytes)d)));
#define CHAINS 12
#define MACS (sizeof(vf) / 4)
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
"""


@functools.cache
def fp32_peak_gflops(target: Target | None = None, threads: int | None = None) -> float:
    """Best of three measurements of fp32 FMA GFLOP/s on `threads` cores (once per process)."""
    return measure_fp32_peak_gflops(target, threads)


def measure_fp32_peak_gflops(target: Target | None = None, threads: int | None = None) -> float:
    """Best of three measurements of fp32 FMA GFLOP/s on `threads` cores, measured now
    (a long benchmark re-measures: a shared machine's speed drifts)."""

    target = target or host_target()
    threads = threads or target.cores
    vbytes = max(target.vector_bytes, 16)
    return _best_of_three(_SOURCE % {"bytes": vbytes} + _TIMER, target, threads)


def _best_of_three(source: str, target: Target, threads: int) -> float:
    from ..build import build_library

    lib = ctypes.CDLL(str(build_library(source, target).library))
    lib.tw_peak.restype = ctypes.c_double
    lib.tw_peak.argtypes = [ctypes.c_int64, ctypes.c_int32]
    return max(lib.tw_peak(20_000_000, threads) for _ in range(3))


_DOT_SOURCE = r"""
#include <stdint.h>
#include <time.h>
#include <omp.h>
#include <immintrin.h>
#define CHAINS 12
#define MACS %(macs)d
static double run(int64_t iters) {
  double total = 0.0;
  #pragma omp parallel reduction(+:total)
  {
    __m512i a = _mm512_set1_epi32(0x01010101), b = _mm512_set1_epi32(0x01020102);
    %(decl)s
    for (int64_t n = 0; n < iters; ++n) {
      %(steps)s
      __asm__ volatile("" : "+v"(a));
    }
    %(acc)s s = acc0;
    %(sums)s
    total += (double)%(lane0)s;
  }
  return total;
}
"""

# per kind: the host feature, the accumulator type, chain c's start (distinct, or the compiler merges the
# chains), one instruction, a sum, lane 0, multiply-adds per op
_DOT_KINDS = {
    "int8": ("avx512_vnni", "__m512i", "_mm512_set1_epi32({c})", "_mm512_dpbusd_epi32(acc[c], a, b)",
             "_mm512_add_epi32(s, acc[c])", "_mm_cvtsi128_si32(_mm512_castsi512_si128(s))", 64),
    "bf16": ("avx512_bf16", "__m512", "_mm512_set1_ps({c}.0f)",
             "_mm512_dpbf16_ps(acc[c], (__m512bh)a, (__m512bh)b)", "_mm512_add_ps(s, acc[c])",
             "_mm512_cvtss_f32(s)", 32),
}


@functools.cache
def dot_peak_gops(kind: str, target: Target | None = None, threads: int | None = None) -> float:
    """Best of three measurements of the giga-operations per second (2 per multiply-add) that the
    AVX-512 dot-product instruction of `kind` ("int8": vpdpbusd, "bf16": vdpbf16ps) sustains on
    `threads` cores; a TilewrightError where the host lacks it."""
    from ..errors import TilewrightError

    target = target or host_target()
    if kind not in _DOT_KINDS:
        raise TilewrightError(f"dot_peak_gops: kind must be one of {', '.join(_DOT_KINDS)}, got {kind!r}")
    feature, acc, zero, op, add, lane0, macs = _DOT_KINDS[kind]
    if feature not in target.features:
        raise TilewrightError(f"dot_peak_gops({kind!r}): the host has no {feature}")
    chains = range(12)  # named accumulators: an array of them may live on the stack, bound by store forwarding
    source = _DOT_SOURCE % {
        "acc": acc, "lane0": lane0, "macs": macs,
        "decl": " ".join(f"{acc} acc{c} = {zero.format(c=c)};" for c in chains),
        "steps": " ".join(f"acc{c} = {op.replace('acc[c]', f'acc{c}')};" for c in chains),
        "sums": " ".join(f"s = {add.replace('acc[c]', f'acc{c}')};" for c in chains[1:])}
    return _best_of_three(source + _TIMER, target, threads or target.cores)

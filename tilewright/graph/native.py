"""One native entry for a whole model: a tiny C runner, compiled once per target,
that takes an array of kernel entry points (`tw_call` of each kernel library)
and their argument-pointer arrays and calls them in order, so running a model
costs one ctypes call instead of one per kernel. `dispatch_overhead` measures
what a call costs each way with an empty kernel."""

from __future__ import annotations

import ctypes
import functools
import time

from ..build.cc import build_library
from ..targets import Target

RUNNER_SOURCE = r"""
#include <stdint.h>
#include <time.h>
typedef int32_t (*tw_kernel_fn)(void **);

static double tw_seconds(const struct timespec *t0, const struct timespec *t1) {
  return (double)(t1->tv_sec - t0->tv_sec) + 1e-9 * (double)(t1->tv_nsec - t0->tv_nsec);
}

/* 0 on success, else 1 + the index of the kernel that failed. */
int32_t tw_run_all(int32_t n, tw_kernel_fn *fns, void ***args) {
  for (int32_t i = 0; i < n; ++i) {
    if (fns[i](args[i]) != 0) return i + 1;
  }
  return 0;
}

/* Seconds per run of the whole sequence, `number` runs back to back. */
double tw_time_all(int32_t n, tw_kernel_fn *fns, void ***args, int32_t number) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int32_t r = 0; r < number; ++r) {
    for (int32_t i = 0; i < n; ++i) fns[i](args[i]);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return tw_seconds(&t0, &t1) / number;
}

/* Adds to seconds[i] the time of kernel i summed over `number` runs of the whole
   sequence back to back: each kernel timed where it runs in the model, caches as the
   kernels before it left them. */
void tw_profile_all(int32_t n, tw_kernel_fn *fns, void ***args, int32_t number, double *seconds) {
  struct timespec t0, t1;
  for (int32_t r = 0; r < number; ++r) {
    for (int32_t i = 0; i < n; ++i) {
      clock_gettime(CLOCK_MONOTONIC, &t0);
      fns[i](args[i]);
      clock_gettime(CLOCK_MONOTONIC, &t1);
      seconds[i] += tw_seconds(&t0, &t1);
    }
  }
}

int32_t tw_noop(void **args) { (void)args; return 0; }
"""

_PP = ctypes.POINTER(ctypes.c_void_p)


@functools.lru_cache(maxsize=8)
def _runner(target: Target) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(build_library(RUNNER_SOURCE, target).library))
    lib.tw_run_all.restype = ctypes.c_int32
    lib.tw_run_all.argtypes = [ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p]
    lib.tw_time_all.restype = ctypes.c_double
    lib.tw_time_all.argtypes = [ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32]
    lib.tw_profile_all.restype = None
    lib.tw_profile_all.argtypes = [ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32,
                                   ctypes.c_void_p]
    lib.tw_noop.restype = ctypes.c_int32
    lib.tw_noop.argtypes = [_PP]
    return lib


def entry_point(lib: ctypes.CDLL) -> int:
    """The address of a kernel library's `int32_t tw_call(void **args)`."""
    return ctypes.cast(lib.tw_call, ctypes.c_void_p).value


class Sequence:
    """Kernels to call in order: their entry points and argument-pointer arrays
    (`ctypes.c_void_p` arrays, which the caller may patch between runs)."""

    def __init__(self, target: Target, entries: list[int], args: list[ctypes.Array]):
        self.lib = _runner(target)
        self.n = len(entries)
        self.args = args  # kept alive: the C side holds their addresses
        self._fns = (ctypes.c_void_p * max(self.n, 1))(*entries)
        self._argv = (ctypes.c_void_p * max(self.n, 1))(*(ctypes.addressof(a) for a in args))

    def run(self) -> int:
        """0, or 1 + the index of the first kernel that returned an error."""
        return self.lib.tw_run_all(self.n, self._fns, self._argv)

    def time(self, number: int) -> float:
        return self.lib.tw_time_all(self.n, self._fns, self._argv, int(number))

    def profile(self, number: int) -> list[float]:
        """Seconds per run of each kernel, timed in place over `number` runs back to back."""
        seconds = (ctypes.c_double * max(self.n, 1))()
        self.lib.tw_profile_all(self.n, self._fns, self._argv, int(number), seconds)
        return [s / number for s in seconds[:self.n]]


def dispatch_overhead(target: Target, calls: int = 2000) -> dict[str, float]:
    """Seconds per kernel call spent outside kernels: through the native runner, and
    through one ctypes call per kernel from Python (an empty kernel each time)."""
    lib = _runner(target)
    noop = ctypes.cast(lib.tw_noop, ctypes.c_void_p).value
    argv = (ctypes.c_void_p * 1)()
    seq = Sequence(target, [noop] * calls, [argv] * calls)
    seq.time(1)
    native = min(seq.time(5) for _ in range(3)) / calls
    fn = lib.tw_noop
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(argv)
        best = min(best, time.perf_counter() - t0)
    return {"native_s": native, "python_s": best / calls}

"""Measurement isolation: crashing, hanging, wrong and uncompilable candidates
are recorded with their error kind and measurement goes on."""

import numpy as np
import pytest

import tilewright as tw
from tilewright.backends import backend_for
from tilewright.build import build_library
from tilewright.runtime.measure import ErrorKind, Measurer

TEMPLATE = r"""
#include <stdint.h>
#include <string.h>
int32_t tw_set_num_threads(int32_t n) { return n; }
static int32_t body(float *A, float *B) { %s }
int32_t tw_call(void **args) { return body((float *)args[0], (float *)args[1]); }
double tw_time(void **args, int32_t number) { for (int32_t n = 0; n < number; ++n) tw_call(args); return 1e-6; }
"""


@pytest.fixture(scope="module")
def measurer():
    A = tw.placeholder((64,), "float32", name="A")
    B = tw.compute((64,), lambda i: A[i] * 2.0, name="B")
    cpu = tw.as_target("cpu")
    m = Measurer([B], [A, B], cpu, backend_for(cpu), timeout=2.0, repeat=2, min_repeat_ms=1)
    yield m, A, B
    m.close()


def library(code: str) -> str:
    return str(build_library(TEMPLATE % code, tw.as_target("cpu")).library)


def test_correct_kernel_is_timed(measurer):
    m, A, B = measurer
    r = m.run(library("for (int i = 0; i < 64; ++i) B[i] = A[i] * 2.0f; return 0;"))
    assert r.ok and len(r.costs) == 2 and r.cost > 0


def test_wrong_result_is_caught_before_timing(measurer):
    m, *_ = measurer
    r = m.run(library("for (int i = 0; i < 64; ++i) B[i] = A[i] * 3.0f; return 0;"))
    assert r.error_kind is ErrorKind.WRONG_RESULT and "max abs error" in r.error_msg and not r.costs


def test_unwritten_output_is_wrong(measurer):
    m, *_ = measurer
    r = m.run(library("return 0;"))
    assert r.error_kind is ErrorKind.WRONG_RESULT and "non-finite" in r.error_msg


def test_crash_is_recorded_and_the_runner_restarts(measurer):
    m, *_ = measurer
    r = m.run(library("*(volatile int *)0 = 1; return 0;"))
    assert r.error_kind is ErrorKind.RUNTIME and "crashed" in r.error_msg
    ok = m.run(library("for (int i = 0; i < 64; ++i) B[i] = 2.0f * A[i]; return 0;"))
    assert ok.ok


def test_hang_times_out_and_measurement_goes_on(measurer):
    m, *_ = measurer
    r = m.run(library("for (volatile int x = 0;; ++x) {} return 0;"))
    assert r.error_kind is ErrorKind.TIMEOUT
    assert m.run(library("for (int i = 0; i < 64; ++i) B[i] = A[i] + A[i]; return 0;")).ok


def test_error_code_is_a_runtime_error(measurer):
    m, *_ = measurer
    r = m.run(library("return -1;"))
    assert r.error_kind is ErrorKind.RUNTIME and "error code -1" in r.error_msg


def test_compile_and_instantiate_errors(measurer):
    from dataclasses import replace

    m, A, B = measurer
    results = m.measure([tw.ScheduleError("stage 'B': bad split")])
    assert results[0].error_kind is ErrorKind.INSTANTIATE and "bad split" in results[0].error_msg

    class Broken:
        text = "this is not C"

    m.backend = replace(m.backend, render=lambda func, target: Broken())
    results = m.measure([tw.create_schedule(B)])
    assert results[0].error_kind is ErrorKind.COMPILE and "compilation failed" in results[0].error_msg
    assert np.isinf(results[0].cost)


def test_flushed_measurement_times_single_calls_after_evicting_the_caches():
    """flush_cache: FLUSHED_SAMPLES single calls (at least `repeat`), each after the runner writes a
    buffer of at least twice the last-level cache and 64 MiB."""
    from tilewright.runtime.runner import FLUSHED_SAMPLES

    A = tw.placeholder((64,), "float32", name="A")
    B = tw.compute((64,), lambda i: A[i] * 2.0, name="B")
    cpu = tw.as_target("cpu")
    with Measurer([B], [A, B], cpu, backend_for(cpu), timeout=5.0, repeat=2, min_repeat_ms=1,
                  flush_cache=True) as m:
        assert m.runner.flush_bytes >= 2 * (cpu.cache_bytes(3) or 0) and m.runner.flush_bytes >= 1 << 26
        r = m.run(library("for (int i = 0; i < 64; ++i) B[i] = A[i] * 2.0f; return 0;"))
        assert r.ok and len(r.costs) == max(2, FLUSHED_SAMPLES)

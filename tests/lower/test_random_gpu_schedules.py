"""Random legal GPU schedules of several programs (tests/gpu_schedule_draws.py draws them: splits, block
and thread binds, vthreads, local register tiles, cooperative shared tiles, local copies, cross-thread
reductions, inlined and attached producers, vectorize, unroll, storage_align), built for OpenCL and run
on PoCL against `tw.evaluate` (float32 within 1e-4 times the outputs' scale); a second, smaller test
compiles drawn schedules with nvcc for sm_80. The trace is printed on failure (replay it with
`Trace.from_json`).

Examples are derandomized (reruns hit the kernel cache); TW_RANDOM_GPU_SCHEDULE_EXAMPLES sets the count
per program (TW_RANDOM_CUDA_SCHEDULE_EXAMPLES for nvcc), TW_HYPOTHESIS_RANDOM=1 explores new ones."""

from __future__ import annotations

import os
import shutil

import gpu_schedule_draws as draws
import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from oracle import random_array, sentinel_array

import tilewright as tw
from tilewright.build.opencl import opencl_available

EXAMPLES = int(os.environ.get("TW_RANDOM_GPU_SCHEDULE_EXAMPLES", "10"))
CUDA_EXAMPLES = int(os.environ.get("TW_RANDOM_CUDA_SCHEDULE_EXAMPLES", "2"))
RANDOM = os.environ.get("TW_HYPOTHESIS_RANDOM") == "1"
NO_OPENCL = opencl_available()


def _settings(n):
    return settings(max_examples=n, deadline=None, derandomize=not RANDOM, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


# ---- programs at small, mostly non-divisible shapes: (args, outputs, schedule(data, s, outputs)) ------

def p_broadcast():
    A = tw.placeholder((19, 26), "float32", name="A")
    B = tw.placeholder((26,), "float32", name="B")
    C = tw.compute((19, 26), lambda i, j: A[i, j] * B[j] + 1, name="C")
    return [A, B, C], [C], lambda data, s: draws.schedule_injective(data, s, C)


def p_transpose():
    A = tw.placeholder((17, 24), "float32", name="A")
    T = tw.compute((24, 17), lambda i, j: A[j, i], name="T")
    return [A, T], [T], lambda data, s: draws.schedule_injective(data, s, T)


def p_matmul():
    A = tw.placeholder((20, 12), "float32", name="A")
    B = tw.placeholder((12, 36), "float32", name="B")
    k = tw.reduce_axis(12, name="k")
    C = tw.compute((20, 36), lambda i, j: tw.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C], [C], lambda data, s: draws.schedule_tiled_reduction(data, s, C)


def p_conv2d():
    X = tw.placeholder((1, 4, 7, 7), "float32", name="X")
    W = tw.placeholder((6, 4, 3, 3), "float32", name="W")
    out = tw.ops.conv2d(X, W, padding=1, name="conv")
    return [X, W, out], [out], lambda data, s: draws.schedule_tiled_reduction(data, s, out)


def p_depthwise():
    X = tw.placeholder((1, 3, 8, 7), "float32", name="X")
    W = tw.placeholder((6, 1, 3, 3), "float32", name="W")
    out = tw.ops.depthwise_conv2d(X, W, padding=1, name="dw")
    return [X, W, out], [out], lambda data, s: draws.schedule_tiled_reduction(data, s, out)


def p_row(reducer):
    def make():
        A = tw.placeholder((5, 37), "float32", name="A")
        k = tw.reduce_axis(37, name="k")
        B = tw.compute((5,), lambda i: getattr(tw, reducer)(A[i, k], axis=k), name="B")
        return [A, B], [B], lambda data, s: draws.row_reduction(data, s, B)
    return make


def p_softmax():
    X = tw.placeholder((6, 29), "float32", name="X")
    k1, k2 = tw.reduce_axis(29, name="k1"), tw.reduce_axis(29, name="k2")
    M = tw.compute((6,), lambda i: tw.max(X[i, k1], axis=k1), name="M")
    E = tw.compute((6,), lambda i: tw.sum(tw.exp(X[i, k2] - M[i]), axis=k2), name="E")
    S = tw.compute((6, 29), lambda i, j: tw.exp(X[i, j] - M[i]) / E[i], name="O")

    def schedule(data, s):
        if data.draw(st.booleans(), label="one kernel"):
            draws.softmax_fused(data, s, M, E, S)
            return
        draws.row_reduction(data, s, M)
        draws.row_reduction(data, s, E)
        t = draws.tile_spatial(data, s[S], S.op.axis)
        s[S].reorder(*t.order())
        draws.annotate(data, s[S], t.inner)
    return [X, S], [S], schedule


def p_producer():
    """An injective producer read with a halo (j + 1), inlined, at a thread or block loop, or root."""
    A = tw.placeholder((14, 23), "float32", name="A")
    B = tw.placeholder((22,), "float32", name="B")
    P = tw.compute((14, 23), lambda i, j: tw.max(A[i, j] * 2 - 1, 0.0), name="P")
    Q = tw.compute((14, 22), lambda i, j: P[i, j] * 0.5 + P[i, j + 1] - B[j], name="Q")

    def schedule(data, s):
        tile = draws.tile_spatial(data, s[Q], Q.op.axis)
        s[Q].reorder(*tile.order())
        draws.place_producer(data, s, P, Q, tile)
        draws.annotate(data, s[Q], tile.inner)
    return [A, B, Q], [Q], schedule


PROGRAMS = {"broadcast": p_broadcast, "transpose": p_transpose, "matmul": p_matmul, "conv2d": p_conv2d,
            "depthwise": p_depthwise, "rowsum": p_row("sum"), "rowmax": p_row("max"), "softmax": p_softmax,
            "producer": p_producer}
SCALE = {"matmul": 4.0, "conv2d": 6.0, "depthwise": 3.0, "rowsum": 4.0}  # about the outputs' magnitude

_REFERENCE: dict[str, tuple] = {}  # program -> (inputs by name, expected outputs): drawn once


def draw_schedule(data, program):
    args, outputs, schedule = PROGRAMS[program]()
    s = tw.create_schedule(outputs)
    try:
        schedule(data, s)
    finally:
        note(f"trace: {s.trace.to_json()}")
        note(str(s.trace))
    return s, args, outputs


def run_against_reference(program, kernel, args, outputs):
    if program not in _REFERENCE:
        rng = np.random.default_rng(0)
        ins = {t.name: random_array(rng, t.shape, t.dtype.name) for t in args if not any(t is o for o in outputs)}
        _REFERENCE[program] = ins, tw.evaluate(outputs, {t: ins[t.name] for t in args if t.name in ins})
    ins, want = _REFERENCE[program]
    arrays = [ins[t.name].copy() if t.name in ins else sentinel_array(t.shape, t.dtype.name) for t in args]
    kernel(*arrays)
    for t, w in zip(outputs, want):
        got = arrays[next(n for n, a in enumerate(args) if a is t)]
        np.testing.assert_allclose(got.astype(np.float64), np.asarray(w, np.float64), rtol=1e-4,
                                   atol=1e-4 * SCALE.get(program, 1.0), err_msg=f"output '{t.name}'")


@pytest.mark.skipif(NO_OPENCL is not None, reason=f"no OpenCL: {NO_OPENCL}")
@pytest.mark.parametrize("program", sorted(PROGRAMS))
@_settings(EXAMPLES)
@given(data=st.data())
def test_random_gpu_schedule_matches_reference(program, data):
    s, args, outputs = draw_schedule(data, program)
    kernel = tw.build(s, args, target="opencl")
    note(kernel.source)
    run_against_reference(program, kernel, args, outputs)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize("program", ["matmul", "conv2d", "rowsum", "softmax", "producer"])
@_settings(CUDA_EXAMPLES)
@given(data=st.data())
def test_random_gpu_schedule_compiles_for_cuda(program, data):
    s, args, _ = draw_schedule(data, program)
    kernel = tw.build(s, args, target="cuda -arch=sm_80")  # compile only without a GPU
    assert "__global__" in kernel.source

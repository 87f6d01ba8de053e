"""Tensorized points of the CPU space: an int8 program whose operands are in a layout a registered
intrinsic reads gets a space built around it; its default point is exact (interpreter check on
any host, run where the host can) and the tuner searches it."""

import warnings

import numpy as np
import pytest
from oracle import full_range_inputs
from synthetic_targets import AVX2, host_runs

import tilewright as tw
from tilewright.backends import backend_for
from tilewright.intrin import run_lowered
from tilewright.space.cpu_tensorize import TensorizedPlan


def _packed_gemm(M=8, N=32, K=32, a_range=None):
    A = tw.placeholder((M, K), "uint8", name="A", value_range=a_range)
    Bp = tw.placeholder((N // 8, K // 4, 8, 4), "int8", name="Bp")
    k = tw.reduce_axis(K, name="k")
    C = tw.compute((M, N), lambda i, j: tw.sum(
        A[i, k].astype("int32") * Bp[j // 8, k // 4, j % 8, k % 4].astype("int32"), axis=k), name="C")
    return [A, Bp, C]


def _int8_conv(a_range=(0, 127)):
    X = tw.placeholder((1, 4, 6, 6, 4), "uint8", name="X", value_range=a_range)
    W = tw.placeholder((2, 4, 3, 3, 8, 4), "int8", name="W")
    mult = tw.placeholder((2, 8), "float32", name="mult")
    bias = tw.placeholder((2, 8), "int32", name="bias")
    acc = tw.ops.conv2d_nchwc(X, W, stride=1, padding=1, out_dtype="int32", weight_layout="oi")
    return [X, W, mult, bias, tw.ops.requantize(acc, mult, bias, zero_point=2, channel_axes=(1, 4))]


def _default(args, target=AVX2):
    backend = backend_for(target)
    space, plan = backend.space([args[-1]], target)
    point = backend.default_point(space, plan)
    return backend, plan, backend.apply([args[-1]], plan, point)


def _inputs(args, rng):
    return full_range_inputs(args, rng)


@pytest.mark.parametrize("build", [_packed_gemm, _int8_conv, lambda: _packed_gemm(M=13)],
                         ids=["packed-gemm", "nchwc-conv-requantize", "prime-rows"])
def test_default_point_is_tensorized_and_exact(build, rng):
    """A row count no tile divides (13) takes a guarded last tile: still exact."""
    args = build()
    backend, plan, s = _default(args)
    assert isinstance(plan, TensorizedPlan)
    func = backend.lower(s, args, "kernel", AVX2)
    ins = _inputs(args, rng)
    want = tw.evaluate(args[-1], dict(zip(args[:-1], ins)))
    out = np.zeros(args[-1].shape, args[-1].dtype.numpy)
    assert run_lowered(func, *ins, out) > 0
    np.testing.assert_array_equal(out, want)
    if host_runs(AVX2):
        out[...] = 0
        backend.build_func(func, AVX2)(*ins, out)
        np.testing.assert_array_equal(out, want)


def test_seven_bit_activations_take_the_saturating_spelling_only_when_proven():
    assert _default(_int8_conv((0, 127)))[1].intrin.name == "x86.dot_8x4_u7s8"
    assert _default(_int8_conv(None))[1].intrin.name == "x86.dot_8x4_u8s8"


def test_a_target_without_intrinsics_gets_the_plain_space_and_its_own_records(rng):
    """`with_intrinsics(False)` ("cpu -intrinsics=off"): the comparison point of what tensorizing
    gains; the same program keeps the plain space, still exact, filed under another key."""
    plain = AVX2.with_intrinsics(False)
    assert tw.intrin.registered(plain) == [] and plain.key != AVX2.key and "no intrinsics" in str(plain)
    args = _packed_gemm()
    backend, plan, s = _default(args, plain)
    assert not isinstance(plan, TensorizedPlan)
    func = backend.lower(s, args, "kernel", plain)
    ins = _inputs(args, rng)
    out = np.zeros(args[-1].shape, args[-1].dtype.numpy)
    run_lowered(func, *ins, out)
    np.testing.assert_array_equal(out, tw.evaluate(args[-1], dict(zip(args[:-1], ins))))
    with pytest.raises(tw.TilewrightError, match="-intrinsics must be 'on' or 'off', got 'no'"):
        tw.Target("cpu -intrinsics=no")


def test_operands_in_the_callers_layout_get_the_plain_space():
    """NCHW activations put the input channels a plane apart: nothing embeds without a layout change,
    and the program keeps the ordinary space (still exact)."""
    X = tw.placeholder((1, 8, 5, 5), "uint8", name="X")
    W = tw.placeholder((8, 8, 3, 3), "uint8", name="W")
    Y = tw.ops.conv2d(X, W)
    backend = backend_for(AVX2)
    _, plan = backend.space([Y], AVX2)
    assert not isinstance(plan, TensorizedPlan)


def test_tuner_searches_the_tensorized_space(tmp_path):
    if not host_runs(AVX2):
        pytest.skip("the host cannot run AVX2 kernels")
    args = _packed_gemm(16, 32, 64)
    result = tw.tune(args, target=AVX2, trials=4, seed=0, progress=False, records=tmp_path / "r.sqlite")
    assert isinstance(result.plan, TensorizedPlan) and 0 < result.best_cost < float("inf")
    assert len(result.history) == 4
    kernel = result.build()
    ins = [np.ones(t.shape, t.dtype.numpy) for t in args[:-1]]
    out = np.zeros(args[-1].shape, np.int32)
    kernel(*ins, out)
    np.testing.assert_array_equal(out, np.full(out.shape, 64, np.int32))
    # a compiled model builds from the store: the tensorizing trace must replay there (it once fell
    # back to the default schedule for want of the intrinsic registry)
    from tilewright.records import Records
    from tilewright.search.best import best_schedule

    with Records(tmp_path / "r.sqlite"), warnings.catch_warnings():
        warnings.simplefilter("error")
        s = best_schedule(backend_for(AVX2), args, AVX2)
    assert any(step.primitive == "tensorize" for step in s.trace.steps)

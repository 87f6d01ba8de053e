"""The CPU space asks the embedder where an int8 program's operands are not in an intrinsic's layout:
the rewritten program (operands packed, output blocked, unpacked to the caller's layout) is exact,
its packs run in the kernel (a constant weight's moved out), and a tuned record replays."""

import warnings

import numpy as np
import pytest
from oracle import full_range_inputs
from synthetic_targets import AVX2, host_runs

import tilewright as tw
from tilewright.backends import backend_for
from tilewright.intrin import run_lowered
from tilewright.space.cpu_tensorize import TensorizedPlan

pytest.importorskip("ortools")


def _nchw_conv(cin=6, k=16, hw=5, r=3, pad=1, epilogue=True):
    X = tw.placeholder((1, cin, hw, hw), "uint8", name="X")
    W = tw.placeholder((k, cin, r, r), "int8", name="W")
    acc = tw.ops.conv2d(X, W, None, stride=1, padding=pad, out_dtype="int32", name="acc")
    if not epilogue:
        return [X, W, acc]
    mult = tw.placeholder((k,), "float32", name="mult")
    bias = tw.placeholder((k,), "int32", name="bias")
    return [X, W, mult, bias, tw.ops.requantize(acc, mult, bias, zero_point=3, channel_axes=(1,), relu=True)]


def _gemm_kn(M=8, K=32, N=24):
    A = tw.placeholder((M, K), "uint8", name="A")
    B = tw.placeholder((K, N), "int8", name="B")
    k = tw.reduce_axis(K, "k")
    C = tw.compute((M, N), lambda i, j: tw.sum(A[i, k].astype("int32") * B[k, j].astype("int32"), axis=k),
                   name="C")
    return [A, B, C]


def _inputs(args, rng):
    return full_range_inputs(args, rng)


def _check_default(args, rng, constants=()):
    backend = backend_for(AVX2)
    space, plan = backend.space([args[-1]], AVX2, constants)
    assert isinstance(plan, TensorizedPlan) and plan.relaid
    s = backend.apply([args[-1]], plan, backend.default_point(space, plan))
    func = backend.lower(s, args, "kernel", AVX2)
    ins = _inputs(args, rng)
    want = tw.evaluate(args[-1], dict(zip(args[:-1], ins)))
    out = np.zeros(args[-1].shape, args[-1].dtype.numpy)
    assert run_lowered(func, *ins, out) > 0  # the interpreter counts intrinsic calls
    np.testing.assert_array_equal(out, want)
    if host_runs(AVX2):
        out[...] = 0
        backend.build_func(func, AVX2)(*ins, out)
        np.testing.assert_array_equal(out, want)
    return plan, func


@pytest.mark.parametrize("cin,k,epilogue", [(8, 16, True), (3, 16, True), (6, 12, False)],
                         ids=["nchw-requantize", "three-channels-padded", "lanes-padded"])
def test_nchw_int8_conv_is_tensorized_through_a_layout_rewrite(cin, k, epilogue, rng):
    plan, func = _check_default(_nchw_conv(cin, k, epilogue=epilogue), rng)
    choice = plan.relaid[0].rewritten.choice
    assert (choice.lanes, choice.columns, choice.L, choice.C) == (1, 0, 8, 4)  # o -> lanes, rc -> columns
    text = str(func)
    assert "x86.dot_8x4" in text and "W_8x4" in text  # the weight packed [o/8, c/4, r, s, 8, 4]


def test_an_operand_already_in_place_is_a_view_not_a_copy(rng):
    """A[i, k] is A[i, k/4, 4] in memory and C[i, j] is C[i, j/8, 8]: only B is packed."""
    _, func = _check_default(_gemm_kn(), rng)
    allocated = {b.name for b in _allocations(func)}
    assert allocated & {"B_8x4"} and not allocated & {"A_c4", "C_b8"}
    assert [list(b.shape) for b in func.args] == [[8, 8, 4], [32, 24], [8, 3, 8]]
    assert [list(x) for x in func.caller_shapes] == [[8, 32], [32, 24], [8, 24]]


def _allocations(func):
    from tilewright.ir.stmt import Allocate
    from tilewright.ir.stmt_functor import walk_stmt

    return [x.buffer for x in walk_stmt(func.body) if isinstance(x, Allocate)]


def test_padded_lanes_under_an_epilogue_reading_per_channel_tensors_are_not_rewritten():
    """12 output channels padded to 16 lanes would read mult[12..15]: that embedding is refused, and
    with it the program keeps the plain space."""
    args = _nchw_conv(8, 12, epilogue=True)
    _, plan = backend_for(AVX2).space([args[-1]], AVX2)
    assert not isinstance(plan, TensorizedPlan)


def test_a_tuned_rewrite_replays_from_its_record_and_hoists_the_constant_weight_pack(tmp_path):
    if not host_runs(AVX2):
        pytest.skip("the host cannot run AVX2 kernels")
    args = _nchw_conv(8, 16, hw=6)
    W = args[1]
    records = tmp_path / "r.sqlite"
    result = tw.tune(args, target=AVX2, trials=3, seed=0, progress=False, records=records, constants=[W])
    assert isinstance(result.plan, TensorizedPlan) and 0 < result.best_cost < float("inf")
    from tilewright.records import Records
    from tilewright.search.best import best_schedule

    with Records(records), warnings.catch_warnings():
        warnings.simplefilter("error")
        s = best_schedule(backend_for(AVX2), args, AVX2)
    assert s.rewrite is not None and any(step.primitive == "tensorize" for step in s.trace.steps)
    from tilewright.lower.hoist_packs import hoist_constant_packs

    hoisted = hoist_constant_packs(backend_for(AVX2).lower(s, args, "kernel", AVX2), {"W"})
    assert hoisted is not None and [p.original for p in hoisted.packs] == ["W_8x4"]
    rng = np.random.default_rng(1)
    ins = _inputs(args, rng)
    want = tw.evaluate(args[-1], dict(zip(args[:-1], ins)))
    out = np.zeros(args[-1].shape, np.uint8)
    tw.build(s, args, target=AVX2)(*ins, out)
    np.testing.assert_array_equal(out, want)
    kernel = result.build()
    out[...] = 0
    kernel(*ins, out)
    np.testing.assert_array_equal(out, want)

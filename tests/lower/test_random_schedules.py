"""Random legal schedules of several operators, built and compared with the reference evaluator.

Each example draws, in this order:
1. structural primitives: cache_read of an input, cache_write(local) of a reduction, rfactor of a (possibly
   split) reduce loop;
2. loop transformations of every stage: splits (divisible or not, by factor or nparts), fuses of
   adjacent loops of one kind, reorders of the leaf loops;
3. placement of every intermediate stage, consumers first: root, inline (not for reductions) or
   compute_at a loop of its only reader;
4. annotations: parallel of an outermost spatial loop, vectorize of an innermost spatial loop, unroll of
   one short loop.
The kernel must equal `tw.evaluate` (float32 within 1e-4, integers exactly). The schedule's trace is
printed on failure, so a failing example can be replayed with `Trace.from_json`.

Examples are derandomized (so reruns hit the kernel cache); TW_HYPOTHESIS_RANDOM=1 explores new ones."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from oracle import check_kernel

import tilewright as tw
from tilewright.ir.expr import AxisKind

EXAMPLES = int(os.environ.get("TW_RANDOM_SCHEDULE_EXAMPLES", "14"))
RANDOM = os.environ.get("TW_HYPOTHESIS_RANDOM") == "1"

SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=not RANDOM, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


# ---- operators at small shapes: (args, outputs) -----------------------------------------------------

def op_gemm(dtype="float32"):
    A = tw.placeholder((7, 6), dtype, name="A")
    B = tw.placeholder((6, 10), dtype, name="B")
    k = tw.reduce_axis(6, name="k")
    C = tw.compute((7, 10), lambda i, j: tw.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C], [C]


def op_conv2d():
    X = tw.placeholder((1, 3, 6, 5), "float32", name="X")
    W = tw.placeholder((4, 3, 3, 3), "float32", name="W")
    bias = tw.placeholder((4,), "float32", name="bias")
    out = tw.ops.relu(tw.ops.conv2d(X, W, bias, padding=1, name="conv"), name="out")
    return [X, W, bias, out], [out]


def op_conv2d_strided():
    X = tw.placeholder((1, 2, 7, 6), "float32", name="X")
    W = tw.placeholder((3, 2, 3, 2), "float32", name="W")
    bias = tw.placeholder((3,), "float32", name="bias")
    out = tw.ops.relu(tw.ops.conv2d(X, W, bias, stride=2, padding=(1, 2), name="conv"), name="out")
    return [X, W, bias, out], [out]


def op_depthwise():
    X = tw.placeholder((1, 3, 6, 6), "float32", name="X")
    W = tw.placeholder((6, 1, 3, 3), "float32", name="W")
    out = tw.ops.depthwise_conv2d(X, W, padding=1, name="dw")
    return [X, W, out], [out]


def op_max_pool(dtype="float32"):
    X = tw.placeholder((1, 2, 7, 7), dtype, name="X")
    out = tw.ops.max_pool2d(X, 3, stride=2, padding=1, name="pool")
    return [X, out], [out]


def op_softmax():
    X = tw.placeholder((4, 9), "float32", name="X")
    out = tw.ops.softmax(X, dim=1, name="sm")
    return [X, out], [out]


def op_contraction():
    X = tw.placeholder((3, 3, 4), "float32", name="X")
    Y = tw.placeholder((4, 5), "float32", name="Y")
    Z = tw.placeholder((5, 3, 4), "float32", name="Z")
    i, j, k = tw.reduce_axis(3, "i"), tw.reduce_axis(4, "j"), tw.reduce_axis(5, "k")
    T = tw.compute((3, 4), lambda a, b: tw.sum(X[a, i, j] * Y[j, k] * Z[k, i, b], axis=[i, j, k]), name="T")
    return [X, Y, Z, T], [T]


def op_masked_band():
    """where= and a reduce axis that starts at 2: S[i, j] = sum_{r in [2, 7), r != j} A[i, r] * B[r, j]."""
    A = tw.placeholder((5, 8), "float32", name="A")
    B = tw.placeholder((8, 6), "float32", name="B")
    r = tw.reduce_axis((2, 7), name="r")
    S = tw.compute((5, 6), lambda i, j: tw.sum(A[i, r] * B[r, j], axis=r, where=r != j + 1), name="S")
    return [A, B, S], [S]


def op_two_outputs():
    """Two outputs, the second reading the first, plus an intermediate read twice."""
    A = tw.placeholder((6, 9), "int32", name="A")
    P = tw.compute((6, 9), lambda i, j: A[i, j] * 3 - 1, name="P")
    B = tw.compute((6, 9), lambda i, j: P[i, j] + A[i, j], name="B")
    C = tw.compute((6, 9), lambda i, j: B[i, j] * P[i, j] + 2, name="C")
    return [A, B, C], [B, C]


def op_index_zoo():
    """Reversed, strided, transposed and div/mod (reshape-like) reads of an intermediate."""
    A = tw.placeholder((6, 8), "float32", name="A")
    P = tw.compute((6, 8), lambda i, j: A[i, j] * 2 + 1, name="P")
    Q = tw.compute((4, 12), lambda i, j: P[5 - i, 7 - (j % 8)] + P[(i * 12 + j) // 8, (i * 12 + j) % 8]
                   + P[j // 2, i * 2], name="Q")
    return [A, Q], [Q]


OPS = {
    "gemm": lambda: op_gemm(),
    "gemm_int32": lambda: op_gemm("int32"),
    "conv2d": op_conv2d,
    "conv2d_strided": op_conv2d_strided,
    "depthwise": op_depthwise,
    "max_pool2d": lambda: op_max_pool(),
    "max_pool2d_int32": lambda: op_max_pool("int32"),
    "softmax": op_softmax,
    "contraction": op_contraction,
    "masked_band": op_masked_band,
    "two_outputs": op_two_outputs,
    "index_zoo": op_index_zoo,
}


# absolute tolerance scale: about the magnitude of the outputs (sums of products of values in [-1, 1])
SCALE = {"gemm": 2.0, "conv2d": 4.0, "conv2d_strided": 3.0, "depthwise": 2.0, "contraction": 6.0, "masked_band": 2.0}


# ---- random legal schedules -----------------------------------------------------------------------------

def draw_structural(data, s, outputs) -> None:
    """cache_read of an input, cache_write local of a reduction and/or rfactor of a reduction (before loop
    transforms)."""
    if data.draw(st.integers(0, 4), label="cache_read?") == 0:
        tensor = data.draw(st.sampled_from(list(s.program.inputs)), label="cache_read input")
        readers = [stg for stg in s.stages if any(t is tensor for t in stg.op.input_tensors)]
        s.cache_read(tensor, data.draw(st.sampled_from(["local", "global"]), label="scope"), readers)
    reductions = [stg for stg in s.stages if stg.is_reduction]
    if not reductions:
        return
    if data.draw(st.integers(0, 3), label="cache_write?") == 0:
        stg = data.draw(st.sampled_from(reductions), label="cache_write stage")
        s.cache_write(stg.tensor, "local")
        reductions = [x for x in s.stages if x.is_reduction]
    if data.draw(st.integers(0, 3), label="rfactor?") == 0:
        stg = data.draw(st.sampled_from(reductions), label="rfactor stage")
        red = [a for a in stg.leaf_iter_vars if a.kind is AxisKind.REDUCE]
        axis = data.draw(st.sampled_from(red), label="rfactor axis")
        if axis.extent > 1 and data.draw(st.booleans(), label="split before rfactor"):
            outer, inner = stg.split(axis, factor=data.draw(st.integers(1, axis.extent), label="rf split"))
            axis = data.draw(st.sampled_from([outer, inner]), label="rf part")
        factor_axis = data.draw(st.integers(0, len(stg.op.axis)), label="factor_axis")
        s.rfactor(stg.tensor, axis, factor_axis=factor_axis)


def draw_loops(data, stage) -> None:
    for _ in range(data.draw(st.integers(0, 3), label=f"{stage.name} moves")):
        leaves = stage.leaf_iter_vars
        move = data.draw(st.sampled_from(["split", "split", "fuse", "reorder"]), label="move")
        if move == "split":
            axis = data.draw(st.sampled_from(leaves), label="split axis")
            if data.draw(st.booleans(), label="by factor"):
                stage.split(axis, factor=data.draw(st.integers(1, axis.extent + 2), label="factor"))
            else:
                stage.split(axis, nparts=data.draw(st.integers(1, axis.extent), label="nparts"))
        elif move == "fuse":
            pairs = [(a, b) for a, b in zip(leaves, leaves[1:]) if a.kind is b.kind]
            if pairs:
                stage.fuse(*data.draw(st.sampled_from(pairs), label="fuse pair"))
        elif len(leaves) > 1:
            stage.reorder(*data.draw(st.permutations(leaves), label="order"))


def draw_placement(data, s) -> None:
    """Consumers first, so a stage is only attached to stages that stay loops."""
    for stage in reversed(list(s.stages)):
        if stage.is_output:
            continue
        readers = s.reading_stages(stage)
        options = ["root"] + ([] if stage.is_reduction else ["inline"]) + (["at"] if len(readers) == 1 else [])
        choice = data.draw(st.sampled_from(options), label=f"{stage.name} placement")
        if choice == "inline":
            stage.compute_inline()
        elif choice == "at":
            parent = readers[0]
            stage.compute_at(parent, data.draw(st.sampled_from(parent.leaf_iter_vars), label="attach loop"))


def draw_annotations(data, stage) -> None:
    leaves = stage.leaf_iter_vars
    used = set()
    if leaves[0].kind is AxisKind.SPATIAL and data.draw(st.booleans(), label=f"{stage.name} parallel"):
        stage.parallel(leaves[0])
        used.add(id(leaves[0]))
    inner = leaves[-1]
    if len(leaves) > 1 and inner.kind is AxisKind.SPATIAL and id(inner) not in used \
            and data.draw(st.booleans(), label=f"{stage.name} vectorize"):
        stage.vectorize(inner)
        used.add(id(inner))
    short = [a for a in leaves if id(a) not in used and a.extent <= 6]
    if short and data.draw(st.integers(0, 2), label=f"{stage.name} unroll") == 0:  # one loop: code stays small
        stage.unroll(data.draw(st.sampled_from(short), label="unroll axis"))


def draw_schedule(data, outputs):
    s = tw.create_schedule(outputs)
    try:
        draw_structural(data, s, outputs)
        for stage in list(s.stages):
            draw_loops(data, stage)
        draw_placement(data, s)
        for stage in list(s.stages):
            if stage.attach.value != "inline":
                draw_annotations(data, stage)
    finally:
        note(f"trace: {s.trace.to_json()}")
        note(str(s.trace))
    return s


@pytest.mark.parametrize("op", sorted(OPS))
@SETTINGS
@given(data=st.data())
def test_random_schedule_matches_reference(op, data):
    args, outputs = OPS[op]()
    s = draw_schedule(data, outputs)
    check_kernel(s, args, np.random.default_rng(0), rtol=1e-4, atol=1e-4 * SCALE.get(op, 1.0))


# ---- regressions found by the random search -----------------------------------------------------------

def test_conv_reduce_split_reordered_spatial_innermost(rng):
    """Regression: GCC 12.2's loop vectorizer miscompiled this at -O3; build/cc.py now turns it off."""
    args, (out,) = op_conv2d()
    s = tw.create_schedule(out)
    acc = s["conv_sum"]
    n, o, h, w = acc.op.axis
    rc, rh, rw = acc.op.reduce_axis
    rwo, rwi = acc.split(rw, factor=2)  # 3 by 2: a tail
    acc.reorder(n, o, w, rc, rh, rwi, rwo, h)
    check_kernel(s, args, rng, rtol=1e-4, atol=1e-4)

"""The trace: every primitive is recorded; JSON round trips; replaying it onto the same program (or a
freshly built copy of it) gives the same loop structure and the same generated C."""

from __future__ import annotations

import json

import numpy as np
import pytest
from oracle import check_kernel

import tilewright as tw
from tilewright.schedule.trace import Trace

# ---- programs -----------------------------------------------------------------------------------------


def gemm_program():
    A = tw.placeholder((16, 12), "float32", name="A")
    B = tw.placeholder((12, 32), "float32", name="B")
    k = tw.reduce_axis(12, name="k")
    C = tw.compute((16, 32), lambda i, j: tw.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C], [C]


def conv_program():
    X = tw.placeholder((1, 3, 8, 7), "float32", name="X")
    W = tw.placeholder((4, 3, 3, 3), "float32", name="W")
    bias = tw.placeholder((4,), "float32", name="bias")
    out = tw.ops.relu(tw.ops.conv2d(X, W, bias, padding=1, name="conv"), name="out")
    return [X, W, bias, out], [out]


def sum_program():
    A = tw.placeholder((5, 40), "float32", name="A")
    r = tw.reduce_axis(40, name="r")
    S = tw.compute((5,), lambda i: tw.sum(A[i, r], axis=r), name="S")
    return [A, S], [S]


def chain_program():
    A = tw.placeholder((9, 10), "float32", name="A")
    P = tw.compute((9, 10), lambda i, j: A[i, j] * 2, name="P")
    Q = tw.compute((9, 10), lambda i, j: P[i, j] + P[i, j], name="Q")
    return [A, Q], [Q]


# ---- schedules ----------------------------------------------------------------------------------------

def sched_tile(args, outs):
    (C,) = outs
    s = tw.create_schedule(C)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
    s[C].reorder(io, jo, C.op.reduce_axis[0], ii, ji)
    s[C].unroll(ii)
    s[C].vectorize(ji)
    s[C].parallel(io)
    return s


def sched_cache_write(args, outs):
    A, B, C = args
    s = tw.create_schedule(C)
    CC = s.cache_write(C, "local")
    BB = s.cache_read(B, "global", [CC])
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 16)
    s[C].parallel(io)
    s[BB].compute_at(s[C], jo)
    s[CC].compute_at(s[C], jo)
    ci, cj = s[CC].op.axis
    (ck,) = s[CC].op.reduce_axis
    s[CC].reorder(ck, ci, cj)
    s[CC].unroll(ci)
    s[CC].vectorize(cj)
    s[C].vectorize(ji)
    return s


def sched_cache_read(args, outs):
    A, B, C = args
    s = tw.create_schedule(C)
    AA = s.cache_read(A, "local", [C])
    BB = s.cache_read(B, "global", [C])
    io, ii = s[C].split(C.op.axis[0], nparts=3)
    s[AA].compute_at(s[C], io)
    s[BB].compute_root()
    s[BB].storage_align(BB.op.axis[0], 16, 1)
    return s


def sched_rfactor(args, outs):
    (S,) = outs
    s = tw.create_schedule(S)
    ro, ri = s[S].split(S.op.reduce_axis[0], factor=8)
    SF = s.rfactor(S, ro, factor_axis=1)
    s[SF].parallel(s[SF].op.axis[0])
    s[SF].vectorize(s[SF].op.axis[1])
    return s


def sched_rfactor_inner(args, outs):
    (S,) = outs
    s = tw.create_schedule(S)
    ro, ri = s[S].split(S.op.reduce_axis[0], factor=6)  # non-divisible
    SF = s.rfactor(S, ri)
    s[SF].compute_at(s[S], S.op.axis[0])
    return s


def sched_conv(args, outs):
    (out,) = outs
    s = tw.create_schedule(out)
    pad, acc, conv = s["conv_pad"], s["conv_sum"], s["conv"]
    conv.compute_inline()
    n, o, h, w = acc.op.axis
    ho, hi = acc.split(h, factor=3)
    pad.compute_at(acc, ho)
    acc.compute_at(s[out], out.op.axis[1])
    f = s[out].fuse(out.op.axis[0], out.op.axis[1])
    s[out].parallel(f)
    return s


def max_program():
    A = tw.placeholder((6, 32), "float32", name="A")
    r = tw.reduce_axis(32, name="r")
    M = tw.compute((6,), lambda i: tw.max(A[i, r], axis=r), name="M")
    return [A, M], [M]


def sched_vectorize_reduce(args, outs):
    (M,) = outs
    s = tw.create_schedule(M)
    ro, ri = s[M].split(M.op.reduce_axis[0], factor=8)
    s[M].vectorize_reduce(ri)
    s[M].parallel(M.op.axis[0])
    return s


def sched_chain(args, outs):
    (Q,) = outs
    s = tw.create_schedule(Q)
    P = s.stages[0]
    f = s[Q].fuse(*Q.op.axis)
    fo, fi = s[Q].split(f, factor=16)
    P.compute_at(s[Q], fo)
    P.compute_root()
    P.compute_inline()
    s[Q].vectorize(fi)
    return s


CASES = {
    "tile": (gemm_program, sched_tile),
    "cache_write": (gemm_program, sched_cache_write),
    "cache_read": (gemm_program, sched_cache_read),
    "rfactor": (sum_program, sched_rfactor),
    "rfactor_inner": (sum_program, sched_rfactor_inner),
    "conv": (conv_program, sched_conv),
    "chain": (chain_program, sched_chain),
    "vectorize_reduce": (max_program, sched_vectorize_reduce),
}


def structure(s):
    out = []
    for st in s.stages:
        out.append((st.name, st.attach.value, st.attach_stage.name if st.attach_stage else None,
                    st.attach_axis.name if st.attach_axis is not None else None, st.scope.value,
                    [(a.name, a.extent, a.kind.value, st.loop_kind(a).value) for a in st.leaf_iter_vars],
                    sorted(st.align.items())))
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_json_round_trip(case):
    program, schedule = CASES[case]
    args, outs = program()
    s = schedule(args, outs)
    text = s.trace.to_json()
    data = json.loads(text)
    assert isinstance(data, list) and len(data) == len(s.trace)
    assert all(set(step) == {"stage", "primitive", "args"} for step in data)
    again = Trace.from_json(text)
    assert again.to_json() == text
    assert str(again) == str(s.trace)


@pytest.mark.parametrize("fresh", [False, True], ids=["same-program", "rebuilt-program"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_replay_same_structure_and_source(case, fresh, rng):
    program, schedule = CASES[case]
    args, outs = program()
    s = schedule(args, outs)
    k1 = tw.build(s, args)
    if fresh:
        args, outs = program()
    s2 = Trace.from_json(s.trace.to_json()).replay(outs)
    assert structure(s2) == structure(s)
    assert s2.trace.to_json() == s.trace.to_json()
    k2 = check_kernel(s2, args, rng)
    assert k2.source == k1.source


def test_trace_records_every_primitive():
    args, (C,) = gemm_program()
    A, B, _ = args
    s = tw.create_schedule(C)
    CC = s.cache_write(C, "local")
    s.cache_read(A, "global", [CC])
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
    f = s[C].fuse(xo, yo)
    s[C].parallel(f)
    s[C].unroll(xi)
    s[C].vectorize(yi)
    s[CC].compute_at(s[C], f)
    s[CC].split(s[CC].op.axis[1], nparts=2)
    assert [(st.stage, st.primitive) for st in s.trace] == [
        ("", "cache_write"), ("", "cache_read"),
        ("C", "split"), ("C", "split"), ("C", "reorder"), ("C", "fuse"),
        ("C", "parallel"), ("C", "unroll"), ("C", "vectorize"), ("C.local", "compute_at"), ("C.local", "split"),
    ]
    assert s.trace.steps[-1].args == {"axis": "j", "nparts": 2}
    assert s.trace.steps[5].args == {"axes": ["i.outer", "j.outer"]}
    assert s.trace.steps[9].args == {"parent": "C", "axis": "i.outer.j.outer.fused"}
    assert str(s.trace).splitlines()[0] == "s.cache_write(tensor='C', scope='local')"


def test_replay_unknown_axis_and_primitive():
    args, (C,) = gemm_program()
    bad_axis = json.dumps([{"stage": "C", "primitive": "split", "args": {"axis": "zz", "factor": 2}}])
    with pytest.raises(tw.ScheduleError, match="trace replay: stage 'C' has no loop named 'zz'"):
        Trace.from_json(bad_axis).replay(C)
    bad_prim = json.dumps([{"stage": "C", "primitive": "twist", "args": {}}])
    with pytest.raises(tw.ScheduleError, match="trace replay: unknown primitive 'twist' on stage 'C'"):
        Trace.from_json(bad_prim).replay(C)
    bad_sprim = json.dumps([{"stage": "", "primitive": "cache_everything", "args": {}}])
    with pytest.raises(tw.ScheduleError, match="unknown schedule primitive 'cache_everything'"):
        Trace.from_json(bad_sprim).replay(C)


def test_replay_of_illegal_step_raises_schedule_error():
    args, (C,) = gemm_program()
    text = json.dumps([{"stage": "C", "primitive": "parallel", "args": {"axis": "k"}}])
    with pytest.raises(tw.ScheduleError, match="cannot parallel reduce loop 'k'"):
        Trace.from_json(text).replay(C)


def test_replay_with_duplicate_stage_names():
    A = tw.placeholder((6, 5), "float32", name="A")
    P1 = tw.compute((6, 5), lambda i, j: A[i, j] * 2, name="T")
    P2 = tw.compute((6, 5), lambda i, j: A[i, j] + 3, name="T")
    R = tw.compute((6, 5), lambda i, j: P1[i, j] - P2[i, j], name="R")
    s = tw.create_schedule(R)
    assert [st.name for st in s.stages] == ["T", "T_1", "R"]
    s[P2].compute_at(s[R], R.op.axis[0])
    s[P1].compute_inline()
    s2 = Trace.from_json(s.trace.to_json()).replay(R)
    assert structure(s2) == structure(s)
    assert tw.build(s2, [A, R]).source == tw.build(s, [A, R]).source
    check_kernel(s2, [A, R], np.random.default_rng(1))


def test_replay_cache_read_of_duplicate_named_tensor():
    """Regression: the trace recorded cache_read's tensor by tensor name, so with two stages named 'T' the
    replay cached the wrong one."""
    A = tw.placeholder((6, 5), "float32", name="A")
    P1 = tw.compute((6, 5), lambda i, j: A[i, j] * 2, name="T")
    P2 = tw.compute((6, 5), lambda i, j: A[i, j] + 3, name="T")
    R = tw.compute((6, 5), lambda i, j: P1[i, j] - P2[i, j], name="R")
    s = tw.create_schedule(R)
    s.cache_read(P2, "local", [R])  # caches T_1
    s2 = Trace.from_json(s.trace.to_json()).replay(R)
    read = [[t.name for t in st.op.input_tensors] for st in s.stages]
    read2 = [[t.name for t in st.op.input_tensors] for st in s2.stages]
    assert read2 == read
    assert tw.build(s2, [A, R]).source == tw.build(s, [A, R]).source

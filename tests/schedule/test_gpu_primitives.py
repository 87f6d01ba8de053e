"""GPU schedule primitives: tw.thread_axis, s[T].bind, the shared scope, storage_align of a shared tile,
their trace, and every error a primitive can decide on its own (the kernel-wide ones are in
tests/lower/test_gpu_lowering.py)."""

from __future__ import annotations

import re

import pytest

import tilewright as tw
from tilewright.ir.stmt import THREAD_TAGS, ForKind, Scope
from tilewright.lower.lower import lower
from tilewright.schedule import Trace

BX, TX, TY = tw.thread_axis("blockIdx.x"), tw.thread_axis("threadIdx.x"), tw.thread_axis("threadIdx.y")


def raises(pattern: str, exc=tw.ScheduleError):
    return pytest.raises(exc, match=re.escape(pattern))


def vector_add(n=64):
    A = tw.placeholder((n,), "float32", name="A")
    B = tw.placeholder((n,), "float32", name="B")
    C = tw.compute((n,), lambda i: A[i] + B[i], name="C")
    return A, B, C


def rowsum(n=4, m=32):
    A = tw.placeholder((n, m), "float32", name="A")
    k = tw.reduce_axis(m, name="k")
    return A, tw.compute((n,), lambda i: tw.sum(A[i, k], axis=k), name="B")


# ---- thread_axis --------------------------------------------------------------------------------------

@pytest.mark.parametrize("tag", THREAD_TAGS)
def test_thread_axis_tags(tag):
    t = tw.thread_axis(tag, name="t")
    assert (t.tag, t.name) == (tag, "t")
    assert tw.thread_axis(tag).name == tag


@pytest.mark.parametrize("tag", ["threadIdx.w", "blockIdx", "", "warp"])
def test_thread_axis_unknown_tag(tag):
    with raises(f"thread_axis: unknown tag {tag!r}; valid tags are blockIdx.x"):
        tw.thread_axis(tag)


# ---- bind alone ---------------------------------------------------------------------------------------

def test_bind_marks_loops_and_lowers_to_bound_loops():
    A, B, C = vector_add()
    s = tw.create_schedule(C)
    bo, bi = s[C].split(C.op.axis[0], factor=16)
    s[C].bind(bo, BX)
    s[C].bind(bi, "threadIdx.x")  # a tag string is accepted too
    assert s[C].loop_kind(bo) is ForKind.THREAD_BINDING and s[C].thread_tag(bi) == "threadIdx.x"
    text = str(lower(s, [A, B, C]))
    assert "bound to blockIdx.x: for i.outer in range(4):" in text
    assert "bound to threadIdx.x: for i.inner in range(16):" in text


def test_bind_is_recorded_and_replays():
    A, B, C = vector_add()
    s = tw.create_schedule(C)
    bo, bi = s[C].split(C.op.axis[0], factor=16)
    s[C].bind(bo, tw.thread_axis("blockIdx.x", name="bx"))
    s[C].bind(bi, TX)
    steps = [st for st in s.trace if st.primitive == "bind"]
    assert [st.args for st in steps] == [{"axis": "i.outer", "tag": "blockIdx.x", "thread": "bx"},
                                         {"axis": "i.inner", "tag": "threadIdx.x", "thread": "threadIdx.x"}]
    again = Trace.from_json(s.trace.to_json()).replay([C])
    assert str(lower(again, [A, B, C])) == str(lower(s, [A, B, C]))


def test_shared_scope_is_accepted_by_cache_read_cache_write_and_set_scope():
    A, B = rowsum()
    s = tw.create_schedule(B)
    AS = s.cache_read(A, "shared", [B])
    BL = s.cache_write(B, "local")
    assert s[AS].scope is Scope.SHARED and s[BL].scope is Scope.LOCAL
    s[AS].set_scope("local")
    s[AS].set_scope("shared")
    assert s[AS].scope is Scope.SHARED
    assert [st.args.get("scope") for st in s.trace][:2] == ["shared", "local"]


def test_storage_align_pads_a_shared_tile():
    A, B = rowsum(n=8, m=32)
    s = tw.create_schedule(B)
    AS = s.cache_read(A, "shared", [B])
    io, ii = s[B].split(B.op.axis[0], factor=4)
    s[B].bind(io, BX)
    s[B].bind(ii, TX)
    s[AS].compute_at(s[B], io)
    s[AS].storage_align(AS.op.axis[0], 32, 1)
    a0, _ = AS.op.axis
    s[AS].bind(a0, TX)
    text = str(lower(s, [A, B]))
    assert "allocate A.shared: float32[4, 33] (shared)" in text


# ---- errors a primitive decides -------------------------------------------------------------------------

def test_bind_same_loop_twice():
    A, B, C = vector_add()
    s = tw.create_schedule(C)
    s[C].bind(C.op.axis[0], TX)
    with raises("stage 'C': bind of loop 'i' to threadIdx.y: the loop is already bound to threadIdx.x"):
        s[C].bind(C.op.axis[0], TY)


def test_bind_one_tag_to_two_loops_of_a_stage():
    A, B, C = vector_add()
    s = tw.create_schedule(C)
    o, i = s[C].split(C.op.axis[0], factor=8)
    s[C].bind(o, TX)
    with raises("loop 'i.outer' of this stage is already bound to threadIdx.x"):
        s[C].bind(i, TX)
    s[C].bind(i, tw.thread_axis("vthread"))  # several vthread loops are fine


@pytest.mark.parametrize("prim", ["parallel", "vectorize", "unroll"])
def test_bind_of_annotated_loop(prim):
    A, B, C = vector_add()
    s = tw.create_schedule(C)
    getattr(s[C], prim)(C.op.axis[0])
    kind = {"parallel": "parallel", "vectorize": "vectorized", "unroll": "unrolled"}[prim]
    with raises(f"stage 'C': bind of loop 'i' to threadIdx.x: the loop is already marked {kind}"):
        s[C].bind(C.op.axis[0], TX)


@pytest.mark.parametrize("prim", ["parallel", "vectorize", "unroll", "no_unroll"])
def test_annotation_of_bound_loop(prim):
    A, B, C = vector_add()
    s = tw.create_schedule(C)
    s[C].bind(C.op.axis[0], TX)
    with raises(f"stage 'C': cannot {prim} loop 'i', which is bound to threadIdx.x"):
        getattr(s[C], prim)(C.op.axis[0])


def test_vectorize_sum_of_bound_loop():
    A, B = rowsum()
    s = tw.create_schedule(B)
    s[B].bind(B.op.reduce_axis[0], TX)
    with raises("stage 'B': cannot vectorize_sum loop 'k', which is bound to threadIdx.x"):
        s[B].vectorize_sum(B.op.reduce_axis[0])


def test_split_of_bound_loop():
    A, B, C = vector_add()
    s = tw.create_schedule(C)
    s[C].bind(C.op.axis[0], TX)
    with raises("loop 'i' is already marked thread_binding; split or fuse before annotating"):
        s[C].split(C.op.axis[0], factor=2)


@pytest.mark.parametrize("tag", ["blockIdx.x", "vthread"])
def test_bind_reduce_axis_to_a_non_thread_tag(tag):
    A, B = rowsum()
    s = tw.create_schedule(B)
    with raises(f"stage 'B': bind of loop 'k' to {tag}: a reduce loop can only be bound to threadIdx.x|y|z"):
        s[B].bind(B.op.reduce_axis[0], tw.thread_axis(tag))


def test_bind_needs_a_thread_axis_and_a_loop_of_the_stage():
    A, B, C = vector_add()
    s = tw.create_schedule(C)
    with raises("thread_axis: unknown tag 'threadIdx'"):
        s[C].bind(C.op.axis[0], "threadIdx")
    with raises("bind needs a tw.thread_axis(tag) or a tag string, got 3"):
        s[C].bind(C.op.axis[0], 3)
    A2, B2 = rowsum()
    with raises("stage 'C': bind got"):
        s[C].bind(B2.op.axis[0], TX)


def test_failed_bind_leaves_schedule_unchanged():
    A, B, C = vector_add()
    s = tw.create_schedule(C)
    s[C].parallel(C.op.axis[0])
    before = (dict(s[C].loop_kinds), dict(s[C].bindings), len(s.trace))
    with pytest.raises(tw.ScheduleError):
        s[C].bind(C.op.axis[0], TX)
    assert (dict(s[C].loop_kinds), dict(s[C].bindings), len(s.trace)) == before

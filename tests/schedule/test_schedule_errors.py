"""Every illegal schedule request raises ScheduleError (or LoweringError when only lowering can tell)
naming the stage, the axis and the reason, and leaves the schedule and its trace unchanged."""

from __future__ import annotations

import re

import numpy as np
import pytest
from oracle import check_kernel, leaf_names

import tilewright as tw


def program():
    """A, B -> C = A @ B (reduction, intermediate) -> D = C + 1 (output); E = A * 2 (intermediate, read by D)."""
    A = tw.placeholder((10, 12), "float32", name="A")
    B = tw.placeholder((12, 9), "float32", name="B")
    k = tw.reduce_axis(12, name="k")
    C = tw.compute((10, 9), lambda i, j: tw.sum(A[i, k] * B[k, j], axis=k), name="C")
    E = tw.compute((10, 9), lambda i, j: A[i, j] * 2, name="E")
    D = tw.compute((10, 9), lambda i, j: C[i, j] + E[i, j], name="D")
    s = tw.create_schedule(D)
    return s, A, B, C, D, E


def raises(match, exc=tw.ScheduleError):
    return pytest.raises(exc, match=match)


def snapshot(s):
    return ([(st.name, st.attach.value, leaf_names(st), dict(st.loop_kinds)) for st in s.stages],
            s.trace.to_json())


# ---- annotations --------------------------------------------------------------------------------------

@pytest.mark.parametrize("prim", ["parallel", "vectorize"])
def test_parallel_or_vectorize_reduce_axis(prim):
    s, A, B, C, D, E = program()
    with raises(rf"stage 'C': cannot {prim} reduce loop 'k'.*rfactor"):
        getattr(s[C], prim)(C.op.reduce_axis[0])


@pytest.mark.parametrize("prim", ["parallel", "vectorize"])
def test_parallel_or_vectorize_split_reduce_axis(prim):
    s, A, B, C, D, E = program()
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=4)
    with raises(rf"stage 'C': cannot {prim} reduce loop 'k.inner'"):
        getattr(s[C], prim)(ki)


def test_unroll_of_reduce_axis_is_allowed():
    s, A, B, C, D, E = program()
    s[C].unroll(C.op.reduce_axis[0])


@pytest.mark.parametrize("prim", ["parallel", "vectorize", "unroll"])
def test_annotate_axis_of_other_stage(prim):
    s, A, B, C, D, E = program()
    with raises(rf"stage 'D': {prim} got axis 'i' of stage 'C'"):
        getattr(s[D], prim)(C.op.axis[0])


def test_split_after_annotation():
    s, A, B, C, D, E = program()
    s[D].parallel(D.op.axis[0])
    with raises(r"stage 'D': loop 'i' is already marked parallel; split or fuse before annotating"):
        s[D].split(D.op.axis[0], factor=2)


def test_fuse_after_annotation():
    s, A, B, C, D, E = program()
    s[D].vectorize(D.op.axis[1])
    with raises(r"stage 'D': loop 'j' is already marked vectorized; fuse before annotating"):
        s[D].fuse(*D.op.axis)
    s, A, B, C, D, E = program()
    s[D].unroll(D.op.axis[0])
    with raises(r"stage 'D': loop 'i' is already marked unrolled"):
        s[D].fuse(*D.op.axis)


# ---- split ------------------------------------------------------------------------------------------

def test_split_of_non_leaf_axis():
    s, A, B, C, D, E = program()
    i = D.op.axis[0]
    s[D].split(i, factor=2)
    with raises(r"stage 'D': split of axis 'i', which was already split or fused; "
                r"its current loops are \[i.outer, i.inner, j\]"):
        s[D].split(i, factor=2)


def test_split_of_fused_away_axis():
    s, A, B, C, D, E = program()
    s[D].fuse(*D.op.axis)
    with raises(r"stage 'D': split of axis 'j', which was already split or fused"):
        s[D].split(D.op.axis[1], factor=2)


def test_split_axis_of_another_stage():
    s, A, B, C, D, E = program()
    with raises(r"stage 'D': split got axis 'k' of stage 'C', not one of this stage's loops \[i, j\]"):
        s[D].split(C.op.reduce_axis[0], factor=2)


def test_split_of_not_an_axis():
    s, A, B, C, D, E = program()
    with raises(r"stage 'D': split got 'i', not one of this stage's loops"):
        s[D].split("i", factor=2)


def test_split_of_foreign_axis():
    s, A, B, C, D, E = program()
    other = tw.compute((3,), lambda q: tw.const(1.0, "float32"), name="other")
    with raises(r"stage 'D': split got .*q.*not one of this stage's loops \[i, j\]"):
        s[D].split(other.op.axis[0], factor=2)


@pytest.mark.parametrize("param", ["factor", "nparts"])
@pytest.mark.parametrize("value", [0, -1, -8, 2.0, 2.5, "2", None, True, [2]])
def test_split_bad_factor(param, value):
    s, A, B, C, D, E = program()
    if value is None:  # neither factor nor nparts
        with raises(r"stage 'D': split of 'i' needs exactly one of factor= or nparts="):
            s[D].split(D.op.axis[0], **{param: value})
        return
    with raises(re.escape(f"stage 'D': split of 'i' {param} must be a positive int, got {value!r}")):
        s[D].split(D.op.axis[0], **{param: value})


def test_split_bad_factor_names_axis():
    """Regression: the message used to name the stage but not the axis."""
    s, A, B, C, D, E = program()
    with raises(r"stage 'D': split of 'j' factor must be a positive int, got 0"):
        s[D].split(D.op.axis[1], factor=0)


@pytest.mark.parametrize("kind", ["factor", "nparts"])
def test_split_numpy_integer_factor(kind):
    """Regression: NumPy integers (as te shapes accept) used to be rejected."""
    s, A, B, C, D, E = program()
    outer, inner = s[D].split(D.op.axis[0], **{kind: np.int64(5)})
    assert (outer.extent, inner.extent) == ((2, 5) if kind == "factor" else (5, 2))
    with raises(r"must be a positive int, got 0"):
        s[D].split(D.op.axis[1], factor=np.int32(0))


def test_split_both_factor_and_nparts():
    s, A, B, C, D, E = program()
    with raises(r"stage 'D': split of 'i' needs exactly one of factor= or nparts="):
        s[D].split(D.op.axis[0], factor=2, nparts=5)


# ---- fuse -------------------------------------------------------------------------------------------

def test_fuse_non_adjacent():
    s, A, B, C, D, E = program()
    i, j = C.op.axis
    k = C.op.reduce_axis[0]
    with raises(r"stage 'C': fuse needs adjacent loops, outer first; \[i, k\] are at positions \[0, 2\]; "
                r"reorder them first"):
        s[C].fuse(i, k)


def test_fuse_inner_first():
    s, A, B, C, D, E = program()
    i, j = D.op.axis
    with raises(r"stage 'D': fuse needs adjacent loops, outer first; \[j, i\] are at positions \[1, 0\]"):
        s[D].fuse(j, i)


def test_fuse_spatial_with_reduce():
    s, A, B, C, D, E = program()
    i, j = C.op.axis
    k = C.op.reduce_axis[0]
    s[C].reorder(i, k, j)
    with raises(r"stage 'C': cannot fuse spatial and reduce loops \[i, k\]"):
        s[C].fuse(i, k)


def test_fuse_single_axis():
    s, A, B, C, D, E = program()
    with raises(r"stage 'D': fuse needs at least two loops"):
        s[D].fuse(D.op.axis[0])


def test_fuse_same_axis_twice():
    s, A, B, C, D, E = program()
    with raises(r"stage 'D': fuse needs adjacent loops"):
        s[D].fuse(D.op.axis[0], D.op.axis[0])


def test_fuse_axis_of_other_stage():
    s, A, B, C, D, E = program()
    with raises(r"stage 'D': fuse got axis 'j' of stage 'C'"):
        s[D].fuse(D.op.axis[0], C.op.axis[1])


# ---- reorder ------------------------------------------------------------------------------------------

def test_reorder_repeats_axis():
    s, A, B, C, D, E = program()
    i, j = C.op.axis
    with raises(r"stage 'C': reorder lists a loop twice: \['j', 'i', 'j'\]"):
        s[C].reorder(j, i, j)


def test_reorder_non_leaf():
    s, A, B, C, D, E = program()
    s[D].split(D.op.axis[1], factor=3)
    with raises(r"stage 'D': reorder of axis 'j', which was already split or fused"):
        s[D].reorder(D.op.axis[1], D.op.axis[0])


def test_reorder_axis_of_other_stage():
    s, A, B, C, D, E = program()
    with raises(r"stage 'D': reorder got axis 'k' of stage 'C'"):
        s[D].reorder(C.op.reduce_axis[0], D.op.axis[0])


# ---- placement ----------------------------------------------------------------------------------------

def test_compute_at_stage_that_does_not_read_it():
    s, A, B, C, D, E = program()
    with raises(r"stage 'E': compute_at stage 'C', which does not use it; .*: D"):
        s[E].compute_at(s[C], C.op.axis[0])


def test_compute_at_of_output():
    s, A, B, C, D, E = program()
    with raises(r"stage 'D' is an output of the schedule; it cannot be moved by compute_at"):
        s[D].compute_at(s[C], C.op.axis[0])


def test_compute_at_itself():
    s, A, B, C, D, E = program()
    with raises(r"stage 'C': cannot compute_at itself"):
        s[C].compute_at(s[C], C.op.axis[0])


def test_compute_at_axis_not_of_parent():
    s, A, B, C, D, E = program()
    with raises(r"stage 'D': compute_at of 'C' at got axis 'i' of stage 'C', not one of this stage's loops"):
        s[C].compute_at(s[D], C.op.axis[0])


def test_compute_at_non_leaf_axis_of_parent():
    s, A, B, C, D, E = program()
    s[D].split(D.op.axis[0], factor=2)
    with raises(r"stage 'D': compute_at of 'C' at of axis 'i', which was already split or fused"):
        s[C].compute_at(s[D], D.op.axis[0])


def test_compute_at_needs_a_stage():
    s, A, B, C, D, E = program()
    with raises(r"stage 'C': compute_at needs a stage of the same schedule, s\[T\]"):
        s[C].compute_at(D, D.op.axis[0])
    s2 = tw.create_schedule(D)
    with raises(r"stage 'C': compute_at needs a stage of the same schedule"):
        s[C].compute_at(s2[D], D.op.axis[0])


def test_compute_inline_of_reduction():
    s, A, B, C, D, E = program()
    with raises(r"stage 'C': a reduction cannot be inlined; use compute_at instead"):
        s[C].compute_inline()


def test_compute_inline_of_output():
    s, A, B, C, D, E = program()
    with raises(r"stage 'D' is an output of the schedule; it cannot be moved by compute_inline"):
        s[D].compute_inline()


def test_compute_at_through_root_intermediate_fails_in_lowering():
    A = tw.placeholder((6, 5), "float32", name="A")
    P = tw.compute((6, 5), lambda i, j: A[i, j] * 2, name="P")
    Q = tw.compute((6, 5), lambda i, j: P[i, j] + 1, name="Q")
    R = tw.compute((6, 5), lambda i, j: Q[i, j] * Q[i, j], name="R")
    s = tw.create_schedule(R)
    s[P].compute_at(s[R], R.op.axis[0])  # R uses P through Q, but Q stays at root
    with raises(r"stage 'P' is computed inside loop 'i' of 'R', but its reader 'Q' runs outside that loop",
                tw.LoweringError):
        tw.lower(s, [A, R])


def test_compute_at_with_reader_outside_fails_in_lowering():
    s, A, B, C, D, E = program()
    F = tw.compute((10, 9), lambda i, j: E[i, j] - 1, name="F")
    s = tw.create_schedule([D, F])
    s[E].compute_at(s[D], D.op.axis[0])
    with raises(r"stage 'E' is computed inside loop 'i' of 'D', but its reader 'F' runs outside that loop",
                tw.LoweringError):
        tw.lower(s, [A, B, D, F])


def chain():
    A = tw.placeholder((6, 5), "float32", name="A")
    P = tw.compute((6, 5), lambda i, j: A[i, j] * 2, name="P")
    Q = tw.compute((6, 5), lambda i, j: P[i, j] + 1, name="Q")
    R = tw.compute((6, 5), lambda i, j: Q[i, j] * Q[i, j], name="R")
    return A, P, Q, R


def test_compute_inline_of_attach_parent():
    """Regression: inlining a stage that another is computed at used to end in a raw KeyError in lowering."""
    A, P, Q, R = chain()
    s = tw.create_schedule(R)
    s[P].compute_at(s[Q], Q.op.axis[0])
    before = snapshot(s)
    with raises(r"stage 'Q' cannot be inlined: \['P'\] are computed at its loops"):
        s[Q].compute_inline()
    assert snapshot(s) == before
    s[P].compute_root()
    s[Q].compute_inline()  # fine once P has moved
    tw.lower(s, [A, R])


def test_compute_at_inlined_stage():
    A, P, Q, R = chain()
    s = tw.create_schedule(R)
    s[Q].compute_inline()
    with raises(r"stage 'P': compute_at stage 'Q', which is inlined and has no loops"):
        s[P].compute_at(s[Q], Q.op.axis[0])


# ---- cache_read / cache_write / rfactor ---------------------------------------------------------------

@pytest.mark.parametrize("prep", ["split", "fuse", "reorder", "parallel", "unroll", "vectorize"])
def test_cache_write_after_loop_transformation(prep):
    s, A, B, C, D, E = program()
    i, j = D.op.axis
    {"split": lambda: s[D].split(i, factor=2), "fuse": lambda: s[D].fuse(i, j),
     "reorder": lambda: s[D].reorder(j, i), "parallel": lambda: s[D].parallel(i),
     "unroll": lambda: s[D].unroll(j), "vectorize": lambda: s[D].vectorize(j)}[prep]()
    with raises(r"cache_write of 'D' must come before split/fuse/reorder/annotations on it"):
        s.cache_write(D, "local")


@pytest.mark.parametrize("scope", ["texture", "Local", "", "register"])
def test_unknown_scope(scope):
    s, A, B, C, D, E = program()
    with raises(rf"cache_write: unknown scope '{scope}'; valid scopes are global, local"):
        s.cache_write(C, scope)
    with raises(rf"cache_read: unknown scope '{scope}'; valid scopes are global, local"):
        s.cache_read(A, scope, [C])


def test_cache_read_by_stage_that_does_not_read():
    s, A, B, C, D, E = program()
    with raises(r"cache_read: stage 'D' does not read 'A'"):
        s.cache_read(A, "global", [C, D])


def test_cache_read_without_readers():
    s, A, B, C, D, E = program()
    with raises(r"cache_read.*'A'"):
        s.cache_read(A, "global", [])


def test_cache_write_of_placeholder():
    s, A, B, C, D, E = program()
    with raises(r"'A' is a placeholder \(an input\); it has no stage to schedule"):
        s.cache_write(A, "local")


def test_rfactor_errors():
    s, A, B, C, D, E = program()
    with raises(r"rfactor: stage 'D' is not a reduction"):
        s.rfactor(D, D.op.axis[0])
    with raises(r"rfactor: loop 'i' of stage 'C' is spatial; give a reduce loop"):
        s.rfactor(C, C.op.axis[0])
    for fa in (-1, 3):
        with raises(rf"rfactor: factor_axis must be in \[0, 2\], got {fa}"):
            s.rfactor(C, C.op.reduce_axis[0], factor_axis=fa)
    s[C].split(C.op.reduce_axis[0], factor=4)
    with raises(r"stage 'C': rfactor of axis 'k', which was already split or fused"):
        s.rfactor(C, C.op.reduce_axis[0])


# ---- lookups ------------------------------------------------------------------------------------------

def test_stage_of_placeholder():
    s, A, B, C, D, E = program()
    with raises(r"'B' is a placeholder \(an input\); it has no stage to schedule"):
        s[B]


def test_stage_of_unknown_tensor():
    s, A, B, C, D, E = program()
    Z = tw.placeholder((3,), "float32", name="Z")
    with raises(r"no stage for 'Z' in this schedule; stages are \['C', 'E', 'D'\]"):
        s[Z]
    with raises(r"no stage for 'nope'"):
        s["nope"]


def test_lower_args_missing_and_attached():
    s, A, B, C, D, E = program()
    with raises(r"args must include every input and output; input 'B' is missing", tw.LoweringError):
        tw.lower(s, [A, D])
    with raises(r"output 'D' is missing", tw.LoweringError):
        tw.lower(s, [A, B])
    s[C].compute_at(s[D], D.op.axis[0])
    with raises(r"argument 'C' is computed at; arguments must be at root", tw.LoweringError):
        tw.lower(s, [A, B, C, D])


# ---- a failed primitive changes nothing ---------------------------------------------------------------

FAILING = [
    lambda s, A, B, C, D, E: s[C].parallel(C.op.reduce_axis[0]),
    lambda s, A, B, C, D, E: s[D].split(D.op.axis[0], factor=0),
    lambda s, A, B, C, D, E: s[D].split(D.op.axis[0], factor=2, nparts=2),
    lambda s, A, B, C, D, E: s[D].fuse(D.op.axis[1], D.op.axis[0]),
    lambda s, A, B, C, D, E: s[C].fuse(C.op.axis[1], C.op.reduce_axis[0]),
    lambda s, A, B, C, D, E: s[D].reorder(D.op.axis[0], D.op.axis[0]),
    lambda s, A, B, C, D, E: s[E].compute_at(s[C], C.op.axis[0]),
    lambda s, A, B, C, D, E: s[D].compute_at(s[C], C.op.axis[0]),
    lambda s, A, B, C, D, E: s[C].compute_inline(),
    lambda s, A, B, C, D, E: s.cache_write(D, "texture"),
    lambda s, A, B, C, D, E: s.cache_read(A, "global", [C, D]),
    lambda s, A, B, C, D, E: s.rfactor(C, C.op.axis[0]),
]


@pytest.mark.parametrize("n", range(len(FAILING)))
def test_failed_primitive_leaves_schedule_unchanged(n):
    s, A, B, C, D, E = program()
    s[E].parallel(E.op.axis[0])
    before = snapshot(s)
    with pytest.raises(tw.ScheduleError):
        FAILING[n](s, A, B, C, D, E)
    assert snapshot(s) == before


# ---- requests accepted by the primitives but not by the code generator ----------------------------------

def test_vectorize_of_loop_enclosing_parallel_loop(rng):
    A = tw.placeholder((8, 8), "float32", name="A")
    B = tw.compute((8, 8), lambda i, j: A[i, j] * 2, name="B")
    s = tw.create_schedule(B)
    try:
        s[B].vectorize(B.op.axis[0])
        s[B].parallel(B.op.axis[1])
    except tw.ScheduleError as e:  # refusing the request with a clear error would be fine
        assert "'i'" in str(e) or "'j'" in str(e)
        return
    check_kernel(s, [A, B], rng)  # else it must build and be correct

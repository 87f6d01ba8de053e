"""Schedule primitives, alone and combined: the loop structure they produce (leaf loop names and extents)
and the results of the compiled kernel, which must equal the reference evaluator's."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import check_kernel, leaf_extents, leaf_names

import tilewright as tw


def gemm(m=10, n=9, k=12, dtype="float32"):
    A = tw.placeholder((m, k), dtype, name="A")
    B = tw.placeholder((k, n), dtype, name="B")
    r = tw.reduce_axis(k, name="k")
    C = tw.compute((m, n), lambda i, j: tw.sum(A[i, r] * B[r, j], axis=r), name="C")
    return A, B, C


def elementwise(shape=(10, 12), dtype="float32"):
    A = tw.placeholder(shape, dtype, name="A")
    B = tw.compute(shape, lambda i, j: A[i, j] * 2 + 1, name="B")
    return A, B


def conv_pad_bias_relu(n=1, c=3, h=7, w=6, o=4, k=3, pad=1):
    X = tw.placeholder((n, c, h, w), "float32", name="X")
    W = tw.placeholder((o, c, k, k), "float32", name="W")
    bias = tw.placeholder((o,), "float32", name="bias")
    conv = tw.ops.conv2d(X, W, bias, padding=pad, name="conv")
    out = tw.ops.relu(conv, name="out")
    return X, W, bias, out


def stage_named(s, name):
    return next(st for st in s.stages if st.name == name)


# ---- each primitive alone ----------------------------------------------------------------------------

def test_default_schedule(rng):
    A, B, C = gemm()
    s = tw.create_schedule(C)
    assert leaf_names(s[C]) == ["i", "j", "k"]
    assert leaf_extents(s[C]) == [10, 9, 12]
    assert len(s.trace) == 0
    check_kernel(s, [A, B, C], rng)


@pytest.mark.parametrize("factor", [1, 2, 3, 4, 5, 10, 16])
def test_split_factor(rng, factor):
    A, B = elementwise()
    s = tw.create_schedule(B)
    i, j = B.op.axis
    outer, inner = s[B].split(i, factor=factor)
    assert (outer.name, inner.name) == ("i.outer", "i.inner")
    assert leaf_names(s[B]) == ["i.outer", "i.inner", "j"]
    assert (outer.extent, inner.extent) == (-(-10 // factor), factor)
    check_kernel(s, [A, B], rng)


@pytest.mark.parametrize("factor", [3, 4, 16])
def test_split_non_divisible_reduce_axis(rng, factor):
    A = tw.placeholder((4, 10), "float32", name="A")
    r = tw.reduce_axis(10, name="r")
    S = tw.compute((4,), lambda i: tw.sum(A[i, r], axis=r), name="S")
    s = tw.create_schedule(S)
    ro, ri = s[S].split(r, factor=factor)
    assert leaf_extents(s[S]) == [4, -(-10 // factor), factor]
    check_kernel(s, [A, S], rng)


@pytest.mark.parametrize("nparts", [1, 2, 5, 10])
def test_split_nparts_divisible(rng, nparts):
    A, B = elementwise()
    s = tw.create_schedule(B)
    outer, inner = s[B].split(B.op.axis[0], nparts=nparts)
    assert outer.extent == nparts
    assert inner.extent == 10 // nparts
    check_kernel(s, [A, B], rng)


@pytest.mark.parametrize("extent,nparts", [(10, 3), (10, 4), (9, 4)])
def test_split_nparts_non_divisible_results(rng, extent, nparts):
    A, B = elementwise(shape=(extent, 5))
    s = tw.create_schedule(B)
    outer, inner = s[B].split(B.op.axis[0], nparts=nparts)
    assert outer.extent * inner.extent >= extent
    check_kernel(s, [A, B], rng)


@pytest.mark.parametrize("extent,nparts", [(9, 4), (10, 6), (10, 4), (7, 7), (5, 8)])
def test_split_nparts_outer_extent_is_nparts(rng, extent, nparts):
    """Regression: split(nparts=4) of extent 9 used to give an outer loop of 3 iterations."""
    A, B = elementwise(shape=(extent, 5))
    s = tw.create_schedule(B)
    outer, inner = s[B].split(B.op.axis[0], nparts=nparts)
    assert outer.extent == nparts  # documented: "or outer of extent `nparts`" (as TVM)
    assert inner.extent == -(-extent // nparts)
    check_kernel(s, [A, B], rng)


def test_fuse(rng):
    A, B = elementwise((4, 3))
    s = tw.create_schedule(B)
    i, j = B.op.axis
    f = s[B].fuse(i, j)
    assert f.name == "i.j.fused" and f.extent == 12
    assert leaf_names(s[B]) == ["i.j.fused"]
    check_kernel(s, [A, B], rng)


def test_fuse_three_axes_given_as_list(rng):
    A = tw.placeholder((2, 3, 5), "float32", name="A")
    B = tw.compute((2, 3, 5), lambda a, b, c: A[a, b, c] - 1, name="B")
    s = tw.create_schedule(B)
    f = s[B].fuse(list(B.op.axis))
    assert f.extent == 30 and leaf_names(s[B]) == ["a.b.c.fused"]
    check_kernel(s, [A, B], rng)


def test_fuse_reduce_axes(rng):
    A = tw.placeholder((3, 4, 5), "float32", name="A")
    r1, r2 = tw.reduce_axis(4, name="r1"), tw.reduce_axis(5, name="r2")
    S = tw.compute((3,), lambda i: tw.sum(A[i, r1, r2], axis=[r1, r2]), name="S")
    s = tw.create_schedule(S)
    f = s[S].fuse(r1, r2)
    assert f.extent == 20 and leaf_names(s[S]) == ["i", "r1.r2.fused"]
    check_kernel(s, [A, S], rng)


def test_reorder(rng):
    A, B, C = gemm()
    s = tw.create_schedule(C)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    s[C].reorder(k, j, i)
    assert leaf_names(s[C]) == ["k", "j", "i"]
    check_kernel(s, [A, B, C], rng)


def test_reorder_subset_keeps_other_positions(rng):
    A, B, C = gemm()
    s = tw.create_schedule(C)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    s[C].reorder(k, i)  # k and i swap their slots; j stays in the middle
    assert leaf_names(s[C]) == ["k", "j", "i"]
    check_kernel(s, [A, B, C], rng)


def test_tile(rng):
    A, B, C = gemm()
    s = tw.create_schedule(C)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 3)
    assert leaf_names(s[C]) == ["i.outer", "j.outer", "i.inner", "j.inner", "k"]
    assert leaf_extents(s[C]) == [3, 3, 4, 3, 12]
    check_kernel(s, [A, B, C], rng)


@pytest.mark.parametrize("extent", [4, 5, 8, 16, 17])
def test_unroll(rng, extent):
    A, B = elementwise((3, extent))
    s = tw.create_schedule(B)
    s[B].unroll(B.op.axis[1])
    assert s[B].loop_kind(B.op.axis[1]).value == "unrolled"
    kernel = check_kernel(s, [A, B], rng)
    # constant-extent unrolled loops are replicated: no loop over j is left
    assert "for (int32_t j " not in kernel.source


def test_unroll_reduce_axis(rng):
    A, B, C = gemm(k=5)
    s = tw.create_schedule(C)
    s[C].unroll(C.op.reduce_axis[0])
    check_kernel(s, [A, B, C], rng)


def test_no_unroll_keeps_reduce_loops_rolled(rng):
    A, B, C = gemm(k=3)
    s = tw.create_schedule(C)
    (k,) = C.op.reduce_axis
    s[C].no_unroll(k)
    assert s[C].loop_kind(k).value == "rolled"
    kernel = check_kernel(s, [A, B, C], rng)
    assert "#pragma GCC unroll 1\n" in kernel.source and "for (int32_t k " in kernel.source
    replayed = type(s.trace).from_json(s.trace.to_json()).replay([C])
    assert replayed[C].loop_kind(replayed[C].leaf_iter_vars[-1]).value == "rolled"


@pytest.mark.parametrize("extent", [4, 8, 16, 6, 7])
def test_vectorize(rng, extent):
    A, B = elementwise((3, extent))
    s = tw.create_schedule(B)
    s[B].vectorize(B.op.axis[1])
    kernel = check_kernel(s, [A, B], rng)
    if extent & (extent - 1) == 0:  # powers of two become vector statements
        assert f"tw_float32x{extent}" in kernel.source
    else:  # the rest keep a loop the C compiler vectorizes
        assert "#pragma omp simd" in kernel.source


@pytest.mark.parametrize("dtype", ["int32", "float64", "int8"])
def test_vectorize_other_dtypes(rng, dtype):
    A = tw.placeholder((3, 8), dtype, name="A")
    B = tw.compute((3, 8), lambda i, j: A[i, j] + A[i, j], name="B")
    s = tw.create_schedule(B)
    s[B].vectorize(B.op.axis[1])
    check_kernel(s, [A, B], rng)


def test_vectorize_split_with_tail(rng):
    A, B = elementwise((3, 13))
    s = tw.create_schedule(B)
    jo, ji = s[B].split(B.op.axis[1], factor=4)
    s[B].vectorize(ji)
    check_kernel(s, [A, B], rng)


@pytest.mark.parametrize("pad", [(1, 1), (2, 0), (0, 3)])
def test_padding_copy_splits_off_its_border(rng, pad):
    """A vectorized padding copy's row becomes head, interior and tail loops; in the interior
    no select depends on the row (each lane's condition is decided by the loop bounds)."""
    from tilewright.ir.expr import Select
    from tilewright.ir.stmt import For, Store
    from tilewright.ir.stmt_functor import walk_stmt
    from tilewright.ir.traverse import free_vars, walk

    A = tw.placeholder((3, 5, 37), "float32", name="A")
    P = tw.ops.pad(A, (pad[0], pad[1], 1, 1), name="P")
    s = tw.create_schedule(P)
    s[P].vectorize(P.op.axis[2])
    from tilewright.lower.lower import lower
    from tilewright.lower.registers import RegisterFile

    check_kernel(s, [A, P], rng)
    unmined = lower(s, [A, P], registers=RegisterFile(0, 16))  # without strip-mining, to see partition's loops
    rows = [f for f in walk_stmt(unmined.body) if isinstance(f, For) and f.var.name == P.op.axis[2].name]
    interior = next(f for f in rows if int(f.extent.value) == 37)
    assert int(interior.begin.value) == pad[0]
    row = interior.var
    assert not any(isinstance(n, Select) and row in free_vars(n.cond) for st in walk_stmt(interior.body)
                   if isinstance(st, Store) for n in walk(st.value))


def test_parallel(rng):
    A, B, C = gemm()
    s = tw.create_schedule(C)
    s[C].parallel(C.op.axis[0])
    kernel = check_kernel(s, [A, B, C], rng)
    assert "#pragma omp parallel for" in kernel.source


def test_parallel_fused(rng):
    A, B, C = gemm()
    s = tw.create_schedule(C)
    f = s[C].fuse(*C.op.axis)
    s[C].parallel(f)
    check_kernel(s, [A, B, C], rng)


def test_parallel_inner_spatial_loop_of_reduction(rng):
    A, B, C = gemm()
    s = tw.create_schedule(C)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    s[C].reorder(k, i, j)
    s[C].parallel(i)
    check_kernel(s, [A, B, C], rng)


def test_compute_root_is_default_and_undoes_compute_at(rng):
    X, W, bias, out = conv_pad_bias_relu()
    s = tw.create_schedule(out)
    pad = stage_named(s, "conv_pad")
    pad.compute_at(s[out], out.op.axis[1])
    pad.compute_root()
    assert pad.attach.value == "root"
    check_kernel(s, [X, W, bias, out], rng)


def test_compute_inline_elementwise_chain(rng):
    A = tw.placeholder((5, 6), "float32", name="A")
    B = tw.compute((5, 6), lambda i, j: A[i, j] * 3, name="B")
    C = tw.compute((5, 6), lambda i, j: B[i, j] + A[i, j], name="C")
    D = tw.compute((5, 6), lambda i, j: tw.exp(C[i, j]), name="D")
    s = tw.create_schedule(D)
    s[B].compute_inline()
    s[C].compute_inline()
    kernel = check_kernel(s, [A, D], rng, rtol=1e-5)
    assert "B[" not in kernel.source and "C[" not in kernel.source


def test_compute_at(rng):
    A = tw.placeholder((8, 6), "float32", name="A")
    B = tw.compute((8, 6), lambda i, j: A[i, j] * 2, name="B")
    C = tw.compute((8, 6), lambda i, j: B[i, j] + 1, name="C")
    s = tw.create_schedule(C)
    s[B].compute_at(s[C], C.op.axis[0])
    assert s[B].attach.value == "at" and s[B].attach_stage is s[C]
    check_kernel(s, [A, C], rng)
    # bound inference: B holds one row of 6 values inside C's i loop
    assert "allocate B: float32[1, 6]" in str(tw.lower(s, [A, C]))


def test_compute_at_stencil_region(rng):
    A = tw.placeholder((12,), "float32", name="A")
    B = tw.compute((12,), lambda i: A[i] * A[i], name="B")
    C = tw.compute((10,), lambda i: B[i] + B[i + 1] + B[i + 2], name="C")
    s = tw.create_schedule(C)
    io, ii = s[C].split(C.op.axis[0], factor=4)
    s[B].compute_at(s[C], io)
    check_kernel(s, [A, C], rng)


# ---- reductions: where=, reduce_axis with begin --------------------------------------------------------

def test_reduction_where(rng):
    A = tw.placeholder((7, 7), "float32", name="A")
    r = tw.reduce_axis(7, name="r")
    S = tw.compute((7,), lambda i: tw.sum(A[i, r], axis=r, where=r <= i), name="S")  # triangular
    s = tw.create_schedule(S)
    ro, ri = s[S].split(r, factor=3)
    s[S].parallel(S.op.axis[0])
    check_kernel(s, [A, S], rng)


def test_reduction_where_max(rng):
    A = tw.placeholder((6, 9), "int32", name="A")
    r = tw.reduce_axis(9, name="r")
    M = tw.compute((6,), lambda i: tw.max(A[i, r], axis=r, where=(r % 2) == 0), name="M")
    s = tw.create_schedule(M)
    s[M].split(r, factor=4)
    check_kernel(s, [A, M], rng)


def test_reduce_axis_with_begin(rng):
    A = tw.placeholder((4, 9), "float32", name="A")
    r = tw.reduce_axis((2, 7), name="r")
    S = tw.compute((4,), lambda i: tw.sum(A[i, r], axis=r), name="S")
    s = tw.create_schedule(S)
    assert leaf_extents(s[S]) == [4, 5]
    check_kernel(s, [A, S], rng)


@pytest.mark.parametrize("factor", [2, 3, 5])
def test_reduce_axis_with_begin_split(rng, factor):
    A = tw.placeholder((4, 9), "int32", name="A")
    r = tw.reduce_axis((2, 7), name="r")
    S = tw.compute((4,), lambda i: tw.sum(A[i, r], axis=r), name="S")
    s = tw.create_schedule(S)
    ro, ri = s[S].split(r, factor=factor)
    s[S].reorder(ri, ro)
    check_kernel(s, [A, S], rng)


def test_reduce_axis_with_begin_rfactor(rng):
    A = tw.placeholder((4, 9), "float32", name="A")
    r = tw.reduce_axis((2, 7), name="r")
    S = tw.compute((4,), lambda i: tw.sum(A[i, r], axis=r), name="S")
    s = tw.create_schedule(S)
    ro, ri = s[S].split(r, factor=2)
    s.rfactor(S, ri)
    check_kernel(s, [A, S], rng)


def test_reduce_axis_with_begin_compute_at(rng):
    A = tw.placeholder((4, 9), "float32", name="A")
    P = tw.compute((4, 9), lambda i, j: A[i, j] + 1, name="P")
    r = tw.reduce_axis((2, 7), name="r")
    S = tw.compute((4,), lambda i: tw.sum(P[i, r], axis=r), name="S")
    s = tw.create_schedule(S)
    s[P].compute_at(s[S], S.op.axis[0])
    check_kernel(s, [A, S], rng)


# ---- cache_read / cache_write / rfactor ----------------------------------------------------------------

def test_cache_write_local_structure(rng):
    A, B, C = gemm()
    s = tw.create_schedule(C)
    CC = s.cache_write(C, "local")
    assert [st.name for st in s.stages] == ["C.local", "C"]
    assert leaf_names(s[C]) == ["i", "j"]  # C now copies CC
    assert [a.name for a in s[CC].op.axis] == ["i", "j"] and leaf_names(s[CC]) == ["i", "j", "k"]
    assert s[CC].scope.value == "local"
    check_kernel(s, [A, B, C], rng)


def test_cache_write_global(rng):
    A, B, C = gemm()
    s = tw.create_schedule(C)
    CC = s.cache_write(C, "global")
    s[CC].compute_at(s[C], C.op.axis[0])
    check_kernel(s, [A, B, C], rng)


def test_cache_read_structure(rng):
    A, B, C = gemm()
    s = tw.create_schedule(C)
    AA = s.cache_read(A, "global", [C])
    assert AA.name == "A.global" and AA.shape == A.shape
    assert [st.name for st in s.stages] == ["A.global", "C"]
    assert leaf_names(s[AA]) == ["ax0", "ax1"]
    check_kernel(s, [A, B, C], rng)


def test_cache_read_two_readers(rng):
    A = tw.placeholder((6, 5), "float32", name="A")
    B = tw.compute((6, 5), lambda i, j: A[i, j] * 2, name="B")
    C = tw.compute((6, 5), lambda i, j: A[i, j] + B[i, j], name="C")
    s = tw.create_schedule(C)
    s.cache_read(A, "global", [B, C])
    check_kernel(s, [A, C], rng)


def test_rfactor_structure(rng):
    A = tw.placeholder((3, 20), "float32", name="A")
    r = tw.reduce_axis(20, name="r")
    S = tw.compute((3,), lambda i: tw.sum(A[i, r], axis=r), name="S")
    s = tw.create_schedule(S)
    ro, ri = s[S].split(r, factor=4)
    SF = s.rfactor(S, ri)
    assert [st.name for st in s.stages] == ["S.rf", "S"]
    assert SF.shape == (4, 3)
    assert leaf_names(s[SF]) == ["r.inner", "i", "r.outer"]
    assert leaf_names(s[S]) == ["i", "r.inner.v"]
    check_kernel(s, [A, S], rng)


def test_rfactor_factor_axis_last(rng):
    A = tw.placeholder((3, 20), "float32", name="A")
    r = tw.reduce_axis(20, name="r")
    S = tw.compute((3,), lambda i: tw.sum(A[i, r], axis=r), name="S")
    s = tw.create_schedule(S)
    ro, ri = s[S].split(r, factor=4)
    SF = s.rfactor(S, ro, factor_axis=1)
    assert SF.shape == (3, 5)
    check_kernel(s, [A, S], rng)


def test_rfactor_unsplit_axis_makes_elementwise_stage(rng):
    A = tw.placeholder((3, 6), "float32", name="A")
    r = tw.reduce_axis(6, name="r")
    S = tw.compute((3,), lambda i: tw.sum(A[i, r], axis=r), name="S")
    s = tw.create_schedule(S)
    SF = s.rfactor(S, r)
    assert not s[SF].op.reduce_axis
    check_kernel(s, [A, S], rng)


def test_rfactor_with_where_and_non_divisible_split(rng):
    A = tw.placeholder((5, 11), "float32", name="A")
    r = tw.reduce_axis(11, name="r")
    M = tw.compute((5,), lambda i: tw.max(A[i, r], axis=r, where=r != i), name="M")
    s = tw.create_schedule(M)
    ro, ri = s[M].split(r, factor=4)
    s.rfactor(M, ro)
    check_kernel(s, [A, M], rng)


# ---- combinations --------------------------------------------------------------------------------------

def test_tile_vectorize_parallel_unroll(rng):
    A, B, C = gemm(16, 32, 12)
    s = tw.create_schedule(C)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 16)
    (k,) = C.op.reduce_axis
    s[C].reorder(io, jo, k, ii, ji)
    s[C].unroll(ii)
    s[C].vectorize(ji)
    s[C].parallel(io)
    assert leaf_names(s[C]) == ["i.outer", "j.outer", "k", "i.inner", "j.inner"]
    kernel = check_kernel(s, [A, B, C], rng)
    # 16 lanes, or one statement per machine register where a register holds fewer (AVX2: 8)
    lanes = min(16, max(4, tw.Target("cpu").vector_bytes // 4))
    assert "#pragma omp parallel for" in kernel.source and f"tw_float32x{lanes}" in kernel.source


def test_tile_vectorize_parallel_unroll_non_divisible(rng):
    A, B, C = gemm(10, 21, 7)
    s = tw.create_schedule(C)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
    (k,) = C.op.reduce_axis
    s[C].reorder(io, jo, k, ii, ji)
    s[C].unroll(ii)
    s[C].vectorize(ji)
    s[C].parallel(io)
    check_kernel(s, [A, B, C], rng)


def test_cache_write_local_compute_at(rng):
    A, B, C = gemm(16, 32, 9)
    s = tw.create_schedule(C)
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 16)
    s[C].parallel(io)
    s[CC].compute_at(s[C], jo)
    ci, cj = s[CC].op.axis
    (ck,) = s[CC].op.reduce_axis
    assert leaf_names(s[CC]) == ["i", "j", "k"]
    s[CC].reorder(ck, ci, cj)
    s[CC].unroll(ci)
    s[CC].vectorize(cj)
    s[C].vectorize(ji)
    kernel = check_kernel(s, [A, B, C], rng)
    assert "C_local" in kernel.source


def test_cache_write_local_compute_at_non_divisible(rng):
    A, B, C = gemm(10, 13, 5)
    s = tw.create_schedule(C)
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
    s[CC].compute_at(s[C], jo)
    ci, cj = s[CC].op.axis
    (ck,) = s[CC].op.reduce_axis
    s[CC].reorder(ck, ci, cj)
    s[CC].vectorize(cj)
    check_kernel(s, [A, B, C], rng)


def test_cache_read_compute_at(rng):
    A, B, C = gemm(16, 32, 8)
    s = tw.create_schedule(C)
    BB = s.cache_read(B, "global", [C])
    AA = s.cache_read(A, "local", [C])
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
    s[BB].compute_at(s[C], jo)
    s[AA].compute_at(s[C], io)
    s[C].vectorize(ji)
    check_kernel(s, [A, B, C], rng)


def _lesson1():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "01_gemm_by_hand.py"
    spec = importlib.util.spec_from_file_location("lesson1", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("isa", ["native", "avx2", "scalar"])
def test_lesson1_gemm_schedule(rng, isa):
    """The hand schedule of examples/01_gemm_by_hand.py at a small size whose rows and columns
    its register block does not divide, on every ISA level the host has."""
    host = tw.as_target("cpu")
    if isa != "native" and isa != "scalar" and not host.has(isa):
        pytest.skip(f"host lacks {isa}")
    target = host.with_isa(isa)
    lesson = _lesson1()
    rows, cols = lesson.register_block(target)
    assert rows * cols // target.vector_lanes(4) + cols // target.vector_lanes(4) < target.vector_registers
    A, B, C = lesson.gemm(17, 3 * cols, 10)
    s = lesson.schedule_gemm(A, B, C, target=target)
    check_kernel(s, [A, B, C], rng, target=target)


def test_compute_inline_padding_into_conv(rng):
    X, W, bias, out = conv_pad_bias_relu()
    s = tw.create_schedule(out)
    names = [st.name for st in s.stages]
    assert names == ["conv_pad", "conv_sum", "conv", "out"]
    stage_named(s, "conv_pad").compute_inline()
    stage_named(s, "conv").compute_inline()
    kernel = check_kernel(s, [X, W, bias, out], rng)
    assert "conv_pad[" not in kernel.source


def test_compute_at_padding_into_conv_tile(rng):
    X, W, bias, out = conv_pad_bias_relu(h=9, w=10)
    s = tw.create_schedule(out)
    pad, acc = stage_named(s, "conv_pad"), stage_named(s, "conv_sum")
    stage_named(s, "conv").compute_inline()
    n, o, h, w = acc.op.axis
    ho, hi = acc.split(h, factor=4)
    pad.compute_at(acc, ho)
    acc.compute_at(s[out], out.op.axis[1])
    check_kernel(s, [X, W, bias, out], rng)


def test_rfactor_then_parallel_over_rfactor_axis(rng):
    A = tw.placeholder((3, 64), "float32", name="A")
    r = tw.reduce_axis(64, name="r")
    S = tw.compute((3,), lambda i: tw.sum(A[i, r], axis=r), name="S")
    s = tw.create_schedule(S)
    ro, ri = s[S].split(r, factor=8)
    SF = s.rfactor(S, ro)
    s[SF].parallel(s[SF].op.axis[0])
    with pytest.raises(tw.ScheduleError):
        s[S].parallel(s[S].op.reduce_axis[0])  # the remaining reduction is still a reduce loop
    kernel = check_kernel(s, [A, S], rng)
    assert "#pragma omp parallel for" in kernel.source


def test_rfactor_then_vectorize_partials(rng):
    A = tw.placeholder((5, 67), "float32", name="A")
    r = tw.reduce_axis(67, name="r")
    S = tw.compute((5,), lambda i: tw.sum(A[i, r], axis=r), name="S")
    s = tw.create_schedule(S)
    ro, ri = s[S].split(r, factor=8)
    SF = s.rfactor(S, ri, factor_axis=1)
    i, rf = s[SF].op.axis
    (rr,) = s[SF].op.reduce_axis
    s[SF].reorder(i, rr, rf)
    s[SF].vectorize(rf)
    s[SF].compute_at(s[S], S.op.axis[0])
    check_kernel(s, [A, S], rng, rtol=1e-5)


def test_fuse_then_split(rng):
    A, B = elementwise((6, 7))
    s = tw.create_schedule(B)
    f = s[B].fuse(*B.op.axis)
    fo, fi = s[B].split(f, factor=8)
    assert leaf_names(s[B]) == ["i.j.fused.outer", "i.j.fused.inner"]
    assert leaf_extents(s[B]) == [6, 8]
    s[B].vectorize(fi)
    s[B].parallel(fo)
    check_kernel(s, [A, B], rng)


def test_split_then_fuse_parts(rng):
    A, B = elementwise((10, 12))
    s = tw.create_schedule(B)
    i, j = B.op.axis
    io, ii = s[B].split(i, factor=3)
    s[B].fuse(ii, j)
    assert leaf_extents(s[B]) == [4, 36]
    check_kernel(s, [A, B], rng)


def test_fuse_then_compute_at_fused(rng):
    A = tw.placeholder((4, 5, 6), "float32", name="A")
    B = tw.compute((4, 5, 6), lambda a, b, c: A[a, b, c] + 2, name="B")
    C = tw.compute((4, 5, 6), lambda a, b, c: B[a, b, c] * B[a, b, c], name="C")
    s = tw.create_schedule(C)
    a, b, c = C.op.axis
    f = s[C].fuse(a, b)
    s[B].compute_at(s[C], f)
    check_kernel(s, [A, C], rng)


def test_compute_at_a_split_away_axis_uses_inner_part(rng):
    A = tw.placeholder((8, 6), "float32", name="A")
    B = tw.compute((8, 6), lambda i, j: A[i, j] * 2, name="B")
    C = tw.compute((8, 6), lambda i, j: B[i, j] + 1, name="C")
    s = tw.create_schedule(C)
    s[B].compute_at(s[C], C.op.axis[0])
    s[C].split(C.op.axis[0], factor=3)  # i is split after the attachment: B follows i.inner
    check_kernel(s, [A, C], rng)


def test_multiple_outputs(rng):
    A = tw.placeholder((5, 4), "float32", name="A")
    B = tw.compute((5, 4), lambda i, j: A[i, j] + 1, name="B")
    C = tw.compute((5, 4), lambda i, j: A[i, j] * 3, name="C")
    s = tw.create_schedule([B, C])
    s[B].vectorize(B.op.axis[1])
    s[C].parallel(C.op.axis[0])
    check_kernel(s, [A, B, C], rng)


def test_softmax_schedule(rng):
    X = tw.placeholder((4, 10), "float32", name="X")
    Y = tw.ops.softmax(X, dim=1, name="sm")
    s = tw.create_schedule(Y)
    assert [st.name for st in s.stages] == ["sm_max", "sm_exp", "sm_sum", "sm"]
    row = Y.op.axis[0]
    for stage in ("sm_max", "sm_exp", "sm_sum"):  # each read by the next: all run inside the row loop
        s[stage].compute_at(s[Y], row)
    s[Y].parallel(row)
    s[Y].vectorize(Y.op.axis[1])
    check_kernel(s, [X, Y], rng, rtol=1e-5, atol=1e-6)
    assert "allocate sm_max: float32[1]" in str(tw.lower(s, [X, Y]))


@pytest.mark.parametrize("dtype", ["int32", "int8", "float64"])
def test_gemm_dtypes_tiled(rng, dtype):
    A, B, C = gemm(6, 8, 5, dtype)
    s = tw.create_schedule(C)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 4)
    s[C].reorder(io, jo, C.op.reduce_axis[0], ii, ji)
    s[C].vectorize(ji)
    check_kernel(s, [A, B, C], rng)


def test_int_results_are_exact_with_wrapping(rng):
    A = tw.placeholder((4, 16), "int8", name="A")
    r = tw.reduce_axis(16, name="r")
    S = tw.compute((4,), lambda i: tw.sum(A[i, r] * A[i, r], axis=r), name="S")  # wraps in int8
    s = tw.create_schedule(S)
    s.rfactor(S, s[S].split(r, factor=4)[1])
    kernel = check_kernel(s, [A, S], rng)
    a = np.full((4, 16), 100, np.int8)
    out = np.zeros(4, np.int8)
    kernel(a, out)
    assert (out == tw.evaluate(S, {A: a})).all()


# ---- storage_align -------------------------------------------------------------------------------------

def allocations(s, args) -> dict[str, tuple[int, ...]]:
    from tilewright.ir.stmt import Allocate
    from tilewright.ir.stmt_functor import walk_stmt

    return {st.buffer.name: tuple(st.buffer.shape) for st in walk_stmt(tw.lower(s, args).body)
            if isinstance(st, Allocate)}


def strides(shape):
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return out[::-1]


def test_storage_align_cache_read_tile(rng):
    A, B, C = gemm(16, 32, 10)
    s = tw.create_schedule(C)
    BB = s.cache_read(B, "global", [C])
    s[BB].storage_align(BB.op.axis[0], 16, 3)
    jo, ji = s[C].split(C.op.axis[1], factor=8)
    s[BB].compute_at(s[C], jo)
    shape = allocations(s, [A, B, C])["B.global"]
    assert shape[0] == 10 and shape[1] >= 8 and strides(shape)[0] % 16 == 3
    check_kernel(s, [A, B, C], rng)


def test_storage_align_root_intermediate(rng):
    A = tw.placeholder((3, 4, 5), "float32", name="A")
    P = tw.compute((3, 4, 5), lambda a, b, c: A[a, b, c] * 2, name="P")
    Q = tw.compute((3, 4, 5), lambda a, b, c: P[a, b, c] + P[a, b, 4 - c], name="Q")
    s = tw.create_schedule(Q)
    s[P].storage_align(P.op.axis[1], 8, 0)
    shape = allocations(s, [A, Q])["P"]
    assert strides(shape)[1] % 8 == 0
    check_kernel(s, [A, Q], rng)


def test_storage_align_two_axes(rng):
    A = tw.placeholder((3, 4, 5), "float32", name="A")
    P = tw.compute((3, 4, 5), lambda a, b, c: A[a, b, c] * 2, name="P")
    Q = tw.compute((3, 4, 5), lambda a, b, c: P[a, b, c] + P[a, b, 4 - c], name="Q")
    s = tw.create_schedule(Q)
    s[P].storage_align(P.op.axis[0], 16, 8)
    s[P].storage_align(P.op.axis[1], 8, 0)
    check_kernel(s, [A, Q], rng)
    st = strides(allocations(s, [A, Q])["P"])
    assert st[1] % 8 == 0
    assert st[0] % 16 == 8  # padding the outer axis first gave [3, 8, 8]: stride 64 = 0 (mod 16)


def test_storage_align_two_axes_unsatisfiable():
    """A row stride that is a multiple of 8 can never give a plane stride of 1 modulo 16."""
    A = tw.placeholder((3, 4, 5), "float32", name="A")
    P = tw.compute((3, 4, 5), lambda a, b, c: A[a, b, c] * 2, name="P")
    Q = tw.compute((3, 4, 5), lambda a, b, c: P[a, b, c] + 1, name="Q")
    s = tw.create_schedule(Q)
    s[P].storage_align(P.op.axis[0], 16, 1)
    s[P].storage_align(P.op.axis[1], 8, 0)
    with pytest.raises(tw.LoweringError, match="stride of axis 0 equal to 1 modulo 16"):
        tw.lower(s, [A, Q])


def test_storage_order_of_packed_operand(rng):
    """Pack B of a GEMM with j outermost (B^T layout): same results, transposed buffer."""
    A = tw.placeholder((12, 10), "float32", name="A")
    B = tw.placeholder((10, 16), "float32", name="B")
    k = tw.reduce_axis(10, name="k")
    C = tw.compute((12, 16), lambda i, j: tw.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = tw.create_schedule(C)
    Bp = s.cache_read(B, "global", [C])
    io, ii = s[C].split(C.op.axis[0], factor=4)
    s[Bp].compute_at(s[C], io)
    s[Bp].storage_order(Bp.op.axis[1], Bp.op.axis[0])
    check_kernel(s, [A, B, C], rng)
    assert allocations(s, [A, B, C])["B.global"] == (16, 10)
    replayed = type(s.trace).from_json(s.trace.to_json()).replay([C])
    check_kernel(replayed, [A, B, C], rng)
    assert allocations(replayed, [A, B, C])["B.global"] == (16, 10)


def test_storage_order_with_align_and_local_accumulator(rng):
    A = tw.placeholder((6, 5, 8), "float32", name="A")
    P = tw.compute((6, 5, 8), lambda a, b, c: A[a, b, c] * 2, name="P")
    Q = tw.compute((6, 5, 8), lambda a, b, c: P[a, b, c] + P[5 - a, b, 7 - c], name="Q")
    s = tw.create_schedule(Q)
    s[P].storage_order(P.op.axis[2], P.op.axis[0], P.op.axis[1])
    s[P].storage_align(P.op.axis[2], 16, 0)
    check_kernel(s, [A, Q], rng)
    shape = allocations(s, [A, Q])["P"]
    assert shape[0] == 8 and strides(shape)[0] % 16 == 0


@pytest.mark.parametrize("bad", ["missing", "repeated", "foreign"])
def test_storage_order_errors(bad):
    A = tw.placeholder((4, 4), "float32", name="A")
    P = tw.compute((4, 4), lambda i, j: A[i, j] + 1, name="P")
    Q = tw.compute((4, 4), lambda i, j: P[i, j] * 2, name="Q")
    s = tw.create_schedule(Q)
    i, j = P.op.axis
    axes = {"missing": (i,), "repeated": (i, i), "foreign": (Q.op.axis[0], j)}[bad]
    message = r"stage 'P': storage_order needs each of its root spatial axes \[i, j\]"
    with pytest.raises(tw.ScheduleError, match=message):
        s[P].storage_order(*axes)


def test_storage_order_of_argument_is_refused():
    A = tw.placeholder((4, 4), "float32", name="A")
    Q = tw.compute((4, 4), lambda i, j: A[i, j] * 2, name="Q")
    s = tw.create_schedule(Q)
    s[Q].storage_order(Q.op.axis[1], Q.op.axis[0])
    with pytest.raises(tw.LoweringError, match="storage_order apply only to intermediate stages"):
        tw.lower(s, [A, Q])

"""Tensorize: semantic matching (TVM's failure patterns as named cases), operand staging,
partial tiles, and every tensorized kernel checked by the intrinsic interpreter."""

import numpy as np
import pytest

import tilewright as tw
from tilewright.intrin import decl_tensor_intrin, get, run_lowered
from tilewright.intrin.declare import Emitter


def _u8s8_gemm(M, N, K, b_layout="nk"):
    A = tw.placeholder((M, K), "uint8", name="A")
    B = tw.placeholder((N, K) if b_layout == "nk" else (K, N), "int8", name="B")
    k = tw.reduce_axis(K, name="k")
    read_b = (lambda j, kk: B[j, kk]) if b_layout == "nk" else (lambda j, kk: B[kk, j])
    C = tw.compute((M, N), lambda i, j: tw.sum(A[i, k].astype("int32") * read_b(j, k).astype("int32"), axis=k),
                   name="C")
    return A, B, C


def _inputs(rng, A, B, extremes=False):
    if extremes:  # 255 x -128 in every pair: saturates a naive vpmaddubsw
        return np.full(A.shape, 255, np.uint8), np.full(B.shape, -128, np.int8)
    return rng.integers(0, 256, A.shape).astype(np.uint8), rng.integers(-128, 128, B.shape).astype(np.int8)


def _reference(a, b, layout="nk"):
    bb = b.astype(np.int64) if layout == "nk" else b.astype(np.int64).T
    return (a.astype(np.int64) @ bb.T).astype(np.int32)


def _check(s, args, arrays, want, min_calls=1):
    f = tw.lower(s, args)
    out = np.zeros(want.shape, want.dtype)
    calls = run_lowered(f, *arrays, out)
    assert calls >= min_calls
    np.testing.assert_array_equal(out, want)
    return f


def _gemm_tiles(s, C, reorder_inner=("ji", "ki")):
    i, j = C.op.axis
    jo, ji = s[C].split(j, 8)
    ko, ki = s[C].split(C.op.reduce_axis[0], 4)
    inner = {"ji": ji, "ki": ki}
    s[C].reorder(i, jo, ko, *[inner[n] for n in reorder_inner])
    return {"i": i, "jo": jo, "ji": ji, "ko": ko, "ki": ki}


def test_gemm_tensorizes_and_interprets_exactly(rng):
    A, B, C = _u8s8_gemm(4, 16, 32)
    s = tw.create_schedule(C)
    loops = _gemm_tiles(s, C)
    s[C].tensorize(loops["ji"], get("x86.dot_8x4_u8s8"))
    a, b = _inputs(rng, A, B)
    f = _check(s, [A, B, C], (a, b), _reference(a, b), min_calls=4 * 2 * 8)
    assert "x86.dot_8x4_u8s8" in str(f)


def test_reordered_inner_loops_match(rng):
    """apache/tvm#1625: the matcher failed once the tensorized loops were reordered."""
    A, B, C = _u8s8_gemm(4, 16, 32)
    s = tw.create_schedule(C)
    loops = _gemm_tiles(s, C, reorder_inner=("ki", "ji"))  # reduce loop outside the lanes
    s[C].tensorize(loops["ki"], get("x86.dot_8x4_u8s8"))
    a, b = _inputs(rng, A, B)
    _check(s, [A, B, C], (a, b), _reference(a, b))


def test_unit_loops_inside_the_region_are_fixed_at_zero(rng):
    """apache/tvm#16566: a unit iterator inside the tensorized loops broke matching."""
    A, B, C = _u8s8_gemm(4, 16, 32)
    s = tw.create_schedule(C)
    i, j = C.op.axis
    io, ii = s[C].split(i, 1)
    jo, ji = s[C].split(j, 8)
    ko, ki = s[C].split(C.op.reduce_axis[0], 4)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].tensorize(ii, get("x86.dot_8x4_u8s8"))
    a, b = _inputs(rng, A, B)
    _check(s, [A, B, C], (a, b), _reference(a, b))


def test_transposed_operand_is_staged_into_the_intrinsic_layout(rng):
    A, B, C = _u8s8_gemm(4, 16, 32, b_layout="kn")
    s = tw.create_schedule(C)
    loops = _gemm_tiles(s, C)
    s[C].tensorize(loops["ji"], get("x86.dot_8x4_u8s8"))
    a, b = _inputs(rng, A, B)
    f = _check(s, [A, B, C], (a, b), _reference(a, b, "kn"))
    assert "staged" in str(f)


def test_packed_operand_is_read_in_place(rng):
    M, N, K = 4, 16, 32
    A = tw.placeholder((M, K), "uint8", name="A")
    Bp = tw.placeholder((N // 8, K // 4, 8, 4), "int8", name="Bp")
    k = tw.reduce_axis(K, name="k")
    C = tw.compute((M, N), lambda i, j: tw.sum(
        A[i, k].astype("int32") * Bp[j // 8, k // 4, j % 8, k % 4].astype("int32"), axis=k), name="C")
    s = tw.create_schedule(C)
    loops = _gemm_tiles(s, C)
    s[C].tensorize(loops["ji"], get("x86.dot_8x4_u8s8"))
    a = rng.integers(0, 256, (M, K)).astype(np.uint8)
    b = rng.integers(-128, 128, (N, K)).astype(np.int8)
    bp = np.ascontiguousarray(b.reshape(N // 8, 8, K // 4, 4).transpose(0, 2, 1, 3))
    f = _check(s, [A, Bp, C], (a, bp), _reference(a, b))
    assert "staged" not in str(f)


def _conv(pad: int, inline_pad: bool):
    """A blocked-layout conv (NCHW4c u8 activations, [K/8][C/4][R][S][8][4] s8 weights, NCHW8c out)."""
    N, Cin, H, W, K, R = 1, 8, 6, 6, 16, 3
    X = tw.placeholder((N, Cin // 4, H, W, 4), "uint8", name="X")
    Wt = tw.placeholder((K // 8, Cin // 4, R, R, 8, 4), "int8", name="Wt")
    Hp = H + 2 * pad
    Xp = tw.compute((N, Cin // 4, Hp, Hp, 4), lambda n, c, y, x, cc: tw.if_then_else(
        tw.all(y >= pad, y < H + pad, x >= pad, x < W + pad), X[n, c, y - pad, x - pad, cc],
        tw.const(0, "uint8")), name="Xp")
    Ho = Hp - R + 1
    rc = tw.reduce_axis(Cin, name="rc")
    ry = tw.reduce_axis(R, name="ry")
    rx = tw.reduce_axis(R, name="rx")
    Y = tw.compute((N, K // 8, Ho, Ho, 8), lambda n, ko, y, x, ki: tw.sum(
        Xp[n, rc // 4, y + ry, x + rx, rc % 4].astype("int32") * Wt[ko, rc // 4, ry, rx, ki, rc % 4].astype("int32"),
        axis=[rc, ry, rx]), name="Y")
    s = tw.create_schedule(Y)
    if inline_pad:
        s[Xp].compute_inline()
    n, ko, y, x, ki = Y.op.axis
    rco, rci = s[Y].split(rc, 4)
    s[Y].reorder(n, ko, y, x, rco, ry, rx, ki, rci)
    s[Y].tensorize(ki, get("x86.dot_8x4_u8s8"))
    return s, (X, Wt, Y), (N, Cin, H, W, K, R)


@pytest.mark.parametrize("inline_pad", [False, True], ids=["padded-buffer", "inlined-padding"])
def test_conv2d_tensorizes(rng, inline_pad):
    """apache/tvm#5099 (only GEMMs were recognised) and #737 (an if_then_else padding broke matching)."""
    s, args, (N, Cin, H, W, K, R) = _conv(1, inline_pad)
    x = rng.integers(0, 256, (N, Cin, H, W)).astype(np.uint8)
    w = rng.integers(-128, 128, (K, Cin, R, R)).astype(np.int8)
    x5 = np.ascontiguousarray(x.reshape(N, Cin // 4, 4, H, W).transpose(0, 1, 3, 4, 2))
    wp = np.ascontiguousarray(w.reshape(K // 8, 8, Cin // 4, 4, R, R).transpose(0, 2, 4, 5, 1, 3))
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((N, K, H, W), np.int64)
    for ry in range(R):
        for rx in range(R):
            want += np.einsum("nchw,kc->nkhw", xp[:, :, ry:ry + H, rx:rx + W], w[:, :, ry, rx].astype(np.int64))
    want8 = np.ascontiguousarray(want.reshape(N, K // 8, 8, H, W).transpose(0, 1, 3, 4, 2)).astype(np.int32)
    f = _check(s, list(args), (x5, wp), want8)
    assert ("staged" in str(f)) == inline_pad


def test_inexact_split_keeps_the_scalar_nest_for_partial_tiles(rng):
    """apache/tvm#3981 (unprovable region extents): N = 20 is not a multiple of 8 lanes."""
    A, B, C = _u8s8_gemm(3, 20, 16)
    s = tw.create_schedule(C)
    loops = _gemm_tiles(s, C)
    s[C].tensorize(loops["ji"], get("x86.dot_8x4_u8s8"))
    a, b = _inputs(rng, A, B)
    f = tw.lower(s, [A, B, C])
    out = np.zeros((3, 20), np.int32)
    assert run_lowered(f, a, b, out) == 3 * 2 * 4  # two whole 8-lane tiles per row; the last 4 lanes scalar
    np.testing.assert_array_equal(out, _reference(a, b))


def test_adversarial_extremes_are_exact(rng):
    A, B, C = _u8s8_gemm(2, 8, 64)
    s = tw.create_schedule(C)
    loops = _gemm_tiles(s, C)
    s[C].tensorize(loops["ji"], get("x86.dot_8x4_u8s8"))
    a, b = _inputs(rng, A, B, extremes=True)
    _check(s, [A, B, C], (a, b), np.full((2, 8), 64 * 255 * -128, np.int32))


def test_mismatches_name_stage_axis_and_constraint():
    A, B, C = _u8s8_gemm(4, 16, 32)
    s = tw.create_schedule(C)
    i, j = C.op.axis
    jo, ji = s[C].split(j, 16)  # 16 lanes, the intrinsic has 8
    ko, ki = s[C].split(C.op.reduce_axis[0], 4)
    s[C].reorder(i, jo, ko, ji, ki)
    s[C].tensorize(ji, get("x86.dot_8x4_u8s8"))
    with pytest.raises(tw.ScheduleError, match=r"stage 'C'.*'j.inner'.*x86.dot_8x4_u8s8.*j.inner: 16 spatial"):
        tw.lower(s, [A, B, C])


def test_dtype_mismatch_is_refused():
    """s8 x s8 does not embed in u8 x s8 (it would need the zero-point correction)."""
    A = tw.placeholder((4, 32), "int8", name="A")
    B = tw.placeholder((16, 32), "int8", name="B")
    k = tw.reduce_axis(32, name="k")
    C = tw.compute((4, 16), lambda i, j: tw.sum(A[i, k].astype("int32") * B[j, k].astype("int32"), axis=k),
                   name="C")
    s = tw.create_schedule(C)
    loops = _gemm_tiles(s, C)
    s[C].tensorize(loops["ji"], get("x86.dot_8x4_u8s8"))
    with pytest.raises(tw.ScheduleError, match="operand 'a' is uint8, the stage reads int8"):
        tw.lower(s, [A, B, C])


def test_annotated_loop_inside_the_region_is_refused():
    A, B, C = _u8s8_gemm(4, 16, 32)
    s = tw.create_schedule(C)
    loops = _gemm_tiles(s, C)
    s[C].unroll(loops["ki"])
    s[C].tensorize(loops["ji"], get("x86.dot_8x4_u8s8"))
    with pytest.raises(tw.ScheduleError, match="loop 'k.inner' inside it is unrolled"):
        tw.lower(s, [A, B, C])


def test_split_after_tensorize_is_refused():
    A, B, C = _u8s8_gemm(4, 16, 32)
    s = tw.create_schedule(C)
    loops = _gemm_tiles(s, C)
    s[C].tensorize(loops["ji"], get("x86.dot_8x4_u8s8"))
    with pytest.raises(tw.ScheduleError, match="tensorized; split or fuse before tensorize"):
        s[C].split(loops["ji"], 2)


def test_user_declared_intrinsic_and_trace_replay(rng):
    """A user's own declaration (an elementwise one here) tensorizes like a built-in, and a trace
    replays with the intrinsics resolved by name."""
    x = tw.placeholder((8,), "float32", name="x")
    y = tw.placeholder((8,), "float32", name="y")
    z = tw.compute((8,), lambda i: x[i] * y[i] + x[i], name="z")
    spelled = Emitter("c", (), lambda ops: f"{{ for (int q = 0; q < 8; ++q) ({ops[2]})[q] = ({ops[0]})[q] * "
                                           f"({ops[1]})[q] + ({ops[0]})[q]; }}")
    fma8 = decl_tensor_intrin(z, [spelled], name="test.fma8")
    P = tw.placeholder((32,), "float32", name="P")
    Q = tw.placeholder((32,), "float32", name="Q")
    R = tw.compute((32,), lambda i: P[i] * Q[i] + P[i], name="R")
    s = tw.create_schedule(R)
    o, i = s[R].split(R.op.axis[0], 8)
    s[R].tensorize(i, fma8)
    p, q = rng.random(32, np.float32), rng.random(32, np.float32)
    _check(s, [P, Q, R], (p, q), p * q + p)
    replayed = s.trace.replay([R], intrinsics={"test.fma8": fma8}.__getitem__)
    out = np.zeros(32, np.float32)
    tw.build(replayed, [P, Q, R], target="cpu")(p, q, out)
    np.testing.assert_allclose(out, p * q + p, rtol=1e-6)
    with pytest.raises(tw.ScheduleError, match="pass intrinsics="):
        s.trace.replay([R])


def test_cache_write_tile_lives_in_registers(rng):
    """The intrinsic's output tile of a cache_write stage becomes vector register slots (an
    address-taking call would otherwise keep it in memory, loaded and stored on every call)."""
    from tilewright.ir.stmt import Allocate
    from tilewright.ir.stmt_functor import walk_stmt

    A, B, C = _u8s8_gemm(8, 32, 64)
    s = tw.create_schedule(C)
    CL = s.cache_write(C, "local")
    i, j = C.op.axis
    io, ii = s[C].split(i, 4)
    jo, ji = s[C].split(j, 16)
    s[C].reorder(io, jo, ii, ji)
    s[CL].compute_at(s[C], jo)
    jv, jl = s[C].split(ji, 8)
    s[C].vectorize(jl)
    s[C].unroll(jv)
    s[C].unroll(ii)
    ci, cj = CL.op.axis
    cjo, cji = s[CL].split(cj, 8)
    ko, ki = s[CL].split(CL.op.reduce_axis[0], 4)
    s[CL].reorder(ko, ci, cjo, cji, ki)
    s[CL].unroll(ci)
    s[CL].unroll(cjo)
    s[CL].tensorize(cji, get("x86.dot_8x4_u8s8"))
    f = tw.lower(s, [A, B, C])
    tiles = [x for x in walk_stmt(f.body) if isinstance(x, Allocate) and x.buffer.name == "C.local"]
    assert tiles and tiles[0].register_lanes == 8
    a, b = _inputs(rng, A, B)
    _check(s, [A, B, C], (a, b), _reference(a, b))
    if "avx2" in tw.Target("cpu").features:
        out = np.zeros((8, 32), np.int32)
        tw.build(s, [A, B, C], target="cpu")(a, b, out)
        np.testing.assert_array_equal(out, _reference(a, b))

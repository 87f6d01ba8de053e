"""The x86 declarations: each one's spellings compiled and their opcodes found in the object
code on every host; run (exact, against NumPy) where the host has the feature, skipped with
the reason elsewhere; the interpreter check of each on any host."""

import dataclasses
import shutil
import subprocess

import numpy as np
import pytest
from synthetic_targets import AVX2, host_runs

import tilewright as tw
from tilewright.backends import backend_for
from tilewright.intrin import get, registered, run_lowered
from tilewright.targets import ISA_FEATURES

AVX512 = dataclasses.replace(AVX2, features=frozenset(ISA_FEATURES["avx512"]), isa="avx512")
VNNI = dataclasses.replace(AVX512, features=AVX512.features | {"avx512_vnni"})
BF16 = dataclasses.replace(AVX512, features=AVX512.features | {"avx512_bf16"})
AVX_VNNI = dataclasses.replace(AVX2, features=AVX2.features | {"avx_vnni"})

_DTYPES = {"x86.dot_8x4_u8s8": ("uint8", "int8", "int32"), "x86.dot_16x4_u8s8": ("uint8", "int8", "int32"),
           "x86.dot_8x4_u7s8": ("uint8", "int8", "int32"), "x86.dot_16x4_u7s8": ("uint8", "int8", "int32"),
           "x86.dot_8x4_u8s7": ("uint8", "int8", "int32"), "x86.dot_16x4_u8s7": ("uint8", "int8", "int32"),
           "x86.dot_8x2_s16": ("int16", "int16", "int32"), "x86.dot_16x2_bf16": ("bfloat16", "bfloat16", "float32"),
           "x86.dot_8x2_bf16": ("bfloat16", "bfloat16", "float32")}


def _gemm(name, M=3, blocks=2, kgroups=3):
    """C[i, j] = sum_k A[i, k] * Bp[j // L, k // G, j % L, k % G], tensorized at the L lanes."""
    intrin = get(name)
    lanes, group = intrin.inputs[1].shape
    a_t, b_t, acc = _DTYPES[name]
    N, K = blocks * lanes, kgroups * group
    A = tw.placeholder((M, K), a_t, name="A", value_range=intrin.value_ranges[0])
    Bp = tw.placeholder((blocks, kgroups, lanes, group), b_t, name="Bp", value_range=intrin.value_ranges[1])
    k = tw.reduce_axis(K, name="k")
    C = tw.compute((M, N), lambda i, j: tw.sum(
        A[i, k].astype(acc) * Bp[j // lanes, k // group, j % lanes, k % group].astype(acc), axis=k), name="C")
    s = tw.create_schedule(C)
    i, j = C.op.axis
    jo, ji = s[C].split(j, lanes)
    ko, ki = s[C].split(k, group)
    s[C].reorder(i, jo, ko, ji, ki)
    s[C].tensorize(ji, intrin)
    return s, [A, Bp, C], (M, N, K, lanes, group)


def _data(name, shape_info, rng, extremes):
    M, N, K, lanes, group = shape_info
    a_t, b_t, acc = _DTYPES[name]
    if a_t == "bfloat16":
        from tilewright.reference.values import round_to_bfloat16

        a = round_to_bfloat16(rng.standard_normal((M, K)).astype(np.float32))
        b = round_to_bfloat16(rng.standard_normal((N, K)).astype(np.float32))
    else:
        a_hi = 127 if "u7" in name else np.iinfo(a_t).max
        b_lo, b_hi = (-64, 64) if "s7" in name else (np.iinfo(b_t).min, np.iinfo(b_t).max)
        if extremes:
            a = np.full((M, K), a_hi if a_t == "uint8" else np.iinfo(a_t).min, a_t)
            b = np.full((N, K), b_lo, b_t)
        else:
            a = rng.integers(np.iinfo(a_t).min, a_hi + 1, (M, K)).astype(a_t)
            b = rng.integers(b_lo, b_hi + 1, (N, K)).astype(b_t)
    bp = np.ascontiguousarray(b.reshape(N // lanes, lanes, K // group, group).transpose(0, 2, 1, 3))
    if acc == "int32":
        want = (a.astype(np.int64) @ b.astype(np.int64).T).astype(np.int32)  # wraps like int32 sums
    else:
        want = (a.astype(np.float64) @ b.astype(np.float64).T).astype(np.float32)
    return a, bp, want


def _compare(out, want):
    if want.dtype == np.float32:
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("name", sorted(_DTYPES))
@pytest.mark.parametrize("extremes", [False, True], ids=["random", "extremes"])
def test_interpreter_check(name, extremes, rng):
    s, args, info = _gemm(name)
    a, bp, want = _data(name, info, rng, extremes)
    out = np.zeros(want.shape, want.dtype)
    assert run_lowered(tw.lower(s, args), a, bp, out) == info[0] * 2 * 3
    _compare(out, want)


def _objdump(library) -> str:
    objdump = shutil.which("objdump")
    if objdump is None:
        pytest.skip("objdump (binutils) is not installed")
    return subprocess.run([objdump, "-d", "--no-show-raw-insn", str(library)], capture_output=True, text=True,
                          timeout=60).stdout


SPELLINGS = [("x86.dot_8x4_u7s8", AVX2, "vpmaddubsw"), ("x86.dot_16x4_u7s8", AVX512, "vpmaddubsw"),
             ("x86.dot_8x4_u8s7", AVX2, "vpmaddubsw"), ("x86.dot_16x4_u8s7", VNNI, "vpdpbusd"),
             ("x86.dot_8x4_u8s8", AVX2, "vpmaddwd"), ("x86.dot_8x4_u8s8", AVX_VNNI, "vpdpbusd"),
             ("x86.dot_8x4_u8s8", VNNI, "vpdpbusd"), ("x86.dot_16x4_u8s8", AVX512, "vpmaddwd"),
             ("x86.dot_16x4_u8s8", VNNI, "vpdpbusd"), ("x86.dot_8x2_s16", AVX2, "vpmaddwd"),
             ("x86.dot_16x2_bf16", BF16, "vdpbf16ps"), ("x86.dot_16x2_bf16", AVX512, "vfmadd"),
             ("x86.dot_8x2_bf16", BF16, "vdpbf16ps"), ("x86.dot_8x2_bf16", AVX2, "vfmadd")]
_IDS = [f"{n}-{'+'.join(sorted(t.features - AVX2.features)) or 'avx2'}" for n, t, _ in SPELLINGS]


@pytest.mark.skipif(shutil.which("gcc") is None and shutil.which("cc") is None, reason="no C compiler")
@pytest.mark.parametrize("name,target,opcode", SPELLINGS, ids=_IDS)
def test_spelling_compiles_to_its_opcode_and_runs_where_the_host_can(name, target, opcode, rng):
    backend = backend_for(target)
    s, args, info = _gemm(name)
    func = backend.lower(s, args, "kernel", target)
    source = backend.render(func, target)
    assert "__attribute__((target(" in source.text
    artefact = backend.compile(source, target)
    assert opcode in _objdump(artefact.library)
    if not host_runs(target):
        pytest.skip(f"the host lacks {sorted(target.features - tw.Target('cpu').features)}: compiled and its "
                    f"opcodes checked only")
    kernel = backend.load(func, source, artefact, target)
    for extremes in (False, True):
        a, bp, want = _data(name, info, rng, extremes)
        if a.dtype == np.float32:  # a compiled kernel takes bfloat16 as its 16-bit storage
            a, bp = ((x.view(np.uint32) >> 16).astype(np.uint16) for x in (a, bp))
        out = np.zeros(want.shape, want.dtype)
        kernel(a, bp, out)
        _compare(out, want)


def test_registered_lists_what_a_target_can_emit():
    assert registered(AVX2) == ["x86.dot_8x2_bf16", "x86.dot_8x2_s16", "x86.dot_8x4_u7s8", "x86.dot_8x4_u8s7",
                                "x86.dot_8x4_u8s8"]  # bf16 pairs widened to fp32 FMAs where no vdpbf16ps
    assert "x86.dot_16x4_u8s8" in registered(AVX512) and "x86.dot_16x2_bf16" in registered(AVX512)
    assert get("x86.dot_16x2_bf16").emitter_for("c", AVX512.features).opcodes == ("vfmadd",)
    assert get("x86.dot_16x2_bf16").emitter_for("c", BF16.features).opcodes == ("vdpbf16ps",)
    assert set(registered()) >= set(_DTYPES)


def test_a_target_without_the_feature_is_a_clear_error():
    s, args, _ = _gemm("x86.dot_16x4_u8s8")
    with pytest.raises(tw.TilewrightError, match=r"'x86.dot_16x4_u8s8' needs avx512_vnni or avx512bw; the target has"):
        backend_for(AVX2).lower(s, args, "kernel", AVX2)


def test_unknown_name_lists_the_registered_ones():
    with pytest.raises(tw.TilewrightError, match="no intrinsic named 'x86.nope'; registered: .*x86.dot_8x4_u8s8"):
        get("x86.nope")


def _u7_gemm(a_range, b_range=None, intrin="x86.dot_8x4_u7s8"):
    A = tw.placeholder((2, 8), "uint8", name="A", value_range=a_range)
    Bp = tw.placeholder((1, 2, 8, 4), "int8", name="Bp", value_range=b_range)
    k = tw.reduce_axis(8, name="k")
    C = tw.compute((2, 8), lambda i, j: tw.sum(
        A[i, k].astype("int32") * Bp[j // 8, k // 4, j % 8, k % 4].astype("int32"), axis=k), name="C")
    s = tw.create_schedule(C)
    i, j = C.op.axis
    ko, ki = s[C].split(k, 4)
    s[C].reorder(i, ko, j, ki)
    s[C].tensorize(j, get(intrin))
    return s, [A, Bp, C]


def test_7_bit_weight_spelling_needs_weights_proven_within_64():
    """2 x 255 x 64 fits 16 bits: u8 activations at full range with weights in [-64, 64] (ONNX
    Runtime's reduce_range) may use vpmaddubsw; a weight range not proven is an error naming it."""
    s, args = _u7_gemm(None, None, "x86.dot_8x4_u8s7")
    with pytest.raises(tw.ScheduleError, match=r"operand 'b' must lie in \[-64, 64\].*\[-128, 127\]"):
        tw.lower(s, args)
    s, args = _u7_gemm(None, (-64, 64), "x86.dot_8x4_u8s7")
    a, b = np.full((2, 8), 255, np.uint8), np.full((8, 8), -64, np.int8)
    bp = np.ascontiguousarray(b.reshape(1, 8, 2, 4).transpose(0, 2, 1, 3))
    out = np.zeros((2, 8), np.int32)
    run_lowered(tw.lower(s, args), a, bp, out)
    np.testing.assert_array_equal(out, np.full((2, 8), 8 * 255 * -64, np.int32))


def test_saturating_spelling_needs_a_proven_range():
    """vpmaddubsw sums u8 x s8 pairs in 16 bits with saturation (FBGEMM#199): 255 x -128 twice does not
    fit. The 7-bit intrinsic embeds only where the activations are proven to lie in [0, 127]."""
    s, args = _u7_gemm(None)
    with pytest.raises(tw.ScheduleError, match=r"operand 'a' must lie in \[0, 127\].*\[0, 255\]"):
        tw.lower(s, args)
    s, args = _u7_gemm((0, 127))
    f = tw.lower(s, args)
    a = np.full((2, 8), 127, np.uint8)
    b = np.full((8, 8), -128, np.int8)
    bp = np.ascontiguousarray(b.reshape(1, 8, 2, 4).transpose(0, 2, 1, 3))
    out = np.zeros((2, 8), np.int32)
    run_lowered(f, a, bp, out)
    np.testing.assert_array_equal(out, np.full((2, 8), 8 * 127 * -128, np.int32))
    if host_runs(AVX2):
        kernel = tw.build(s, args, target="cpu")
        # a host with a dot-product instruction takes it first; vpmaddubsw is the AVX2 host's spelling
        host = tw.Target("cpu").features
        vnni = "avx_vnni" in host or {"avx512_vnni", "avx512vl"} <= host
        assert ("_mm256_dpbusd_epi32" if vnni else "_mm256_maddubs_epi16") in kernel.source
        out[:] = 0
        kernel(a, bp, out)
        np.testing.assert_array_equal(out, np.full((2, 8), 8 * 127 * -128, np.int32))


def test_placeholder_range_is_checked():
    with pytest.raises(tw.ShapeError, match="value_range"):
        tw.placeholder((4,), "uint8", name="q", value_range=(0, 300))
    with pytest.raises(tw.ShapeError, match="integer dtypes"):
        tw.placeholder((4,), "float32", name="f", value_range=(0, 1))

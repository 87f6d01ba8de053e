"""Generated C: golden files for fixed schedules, -Wall cleanliness of every source the code generator
emits for a range of features, and sanitizing of names that are not C identifiers.

Regenerate the golden files after an intended change to the code generator with
    UPDATE_GOLDEN=1 .venv/bin/pytest tests/codegen/test_golden.py
and review the diff."""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from oracle import check_kernel

import tilewright as tw
from tilewright.build import compile_flags
from tilewright.codegen import generate_c

GOLDEN_DIR = Path(__file__).parent / "golden"


def assert_golden(name: str, text: str) -> None:
    """Compare `text` with golden/<name>; with UPDATE_GOLDEN=1 (re)write the file instead."""
    path = GOLDEN_DIR / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    if not path.exists():
        pytest.fail(f"golden file {path} is missing; run UPDATE_GOLDEN=1 pytest {__file__} to create it")
    want = path.read_text()
    if text != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True), f"golden/{name}",
                                            "generated", n=2))
        pytest.fail(f"generated C differs from golden/{name} (UPDATE_GOLDEN=1 to accept):\n{diff[:6000]}")


# ---- fixed schedules -----------------------------------------------------------------------------------

def gemm_tiled():
    A = tw.placeholder((16, 12), "float32", name="A")
    B = tw.placeholder((12, 32), "float32", name="B")
    k = tw.reduce_axis(12, name="k")
    C = tw.compute((16, 32), lambda i, j: tw.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = tw.create_schedule(C)
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
    s[C].parallel(io)
    s[C].vectorize(ji)
    s[CC].compute_at(s[C], jo)
    ci, cj = s[CC].op.axis
    (ck,) = s[CC].op.reduce_axis
    s[CC].reorder(ck, ci, cj)
    s[CC].unroll(ci)
    s[CC].vectorize(cj)
    return s, [A, B, C]


def conv_inline_pad():
    X = tw.placeholder((1, 2, 5, 5), "float32", name="X")
    W = tw.placeholder((3, 2, 3, 3), "float32", name="W")
    bias = tw.placeholder((3,), "float32", name="bias")
    out = tw.ops.relu(tw.ops.conv2d(X, W, bias, padding=1, name="conv"), name="out")
    s = tw.create_schedule(out)
    s["conv_pad"].compute_inline()
    s["conv"].compute_inline()
    acc = s["conv_sum"]
    acc.compute_at(s[out], out.op.axis[1])
    n, o, h, w = acc.op.axis
    ho, hi = acc.split(h, factor=2)  # 5 rows by 2: a tail
    return s, [X, W, bias, out]


def rfactor_max():
    A = tw.placeholder((4, 21), "int32", name="A")
    r = tw.reduce_axis(21, name="r")
    M = tw.compute((4,), lambda i: tw.max(A[i, r], axis=r, where=r != i), name="M")
    s = tw.create_schedule(M)
    ro, ri = s[M].split(r, factor=4)
    MF = s.rfactor(M, ri, factor_axis=1)
    i, rf = s[MF].op.axis
    (rr,) = s[MF].op.reduce_axis
    s[MF].reorder(i, rr, rf)
    s[MF].vectorize(rf)
    return s, [A, M]


def stride2_load():
    """A width-2 sum pool along rows, vectorized along its output: A[i, 2j] and A[i, 2j + 1] are strided
    vector loads (two contiguous loads and a shuffle each, codegen/strided.py), not an omp simd loop."""
    A = tw.placeholder((3, 34), "float32", name="A")
    B = tw.compute((3, 16), lambda i, j: A[i, 2 * j] + A[i, 2 * j + 1] * 0.5, name="B")
    s = tw.create_schedule(B)
    jo, ji = s[B].split(B.op.axis[1], factor=8)
    s[B].vectorize(ji)
    return s, [A, B]


GOLDEN = {"gemm_tiled.c": gemm_tiled, "conv_inline_pad.c": conv_inline_pad, "rfactor_max.c": rfactor_max,
          "stride2_load.c": stride2_load}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_source(name, rng):
    s, args = GOLDEN[name]()
    kernel = check_kernel(s, args, rng)
    assert kernel.source == generate_c(tw.lower(s, args)).text  # build compiles exactly what codegen emits
    assert_golden(name, kernel.source)


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_generation_is_deterministic(name):
    s1, args1 = GOLDEN[name]()
    s2, args2 = GOLDEN[name]()
    assert generate_c(tw.lower(s1, args1)).text == generate_c(tw.lower(s2, args2)).text


# ---- -Wall cleanliness ----------------------------------------------------------------------------------

def _elementwise_features():
    A = tw.placeholder((4, 16), "float32", name="A")
    N = tw.placeholder((4, 16), "int32", name="I")
    B = tw.compute((4, 16), lambda i, j: tw.if_then_else(
        A[i, j] > 0, tw.exp(A[i, j]) + tw.sqrt(tw.abs(A[i, j])), tw.max(A[i, j], -0.5) * tw.cast(N[i, j], "float32")),
        name="B")
    C = tw.compute((4, 16), lambda i, j: tw.floordiv(N[i, j], 3) + tw.floormod(N[i, j], 5) + tw.min(N[i, j], 7),
                   name="C")
    s = tw.create_schedule([B, C])
    s[B].vectorize(B.op.axis[1])
    s[C].vectorize(C.op.axis[1])
    return s, [A, N, B, C]


def _small_dtypes():
    A = tw.placeholder((3, 8), "float16", name="A")
    G = tw.placeholder((3, 8), "bfloat16", name="G")
    Q = tw.placeholder((3, 8), "int8", name="Q")
    U = tw.placeholder((3, 8), "uint8", name="U")
    B = tw.compute((3, 8), lambda i, j: A[i, j] * A[i, j] + tw.cast(G[i, j], "float16"), name="B")
    H = tw.compute((3, 8), lambda i, j: G[i, j] * 2 - tw.sigmoid(G[i, j]), name="H")
    R = tw.compute((3, 8), lambda i, j: Q[i, j] + tw.cast(U[i, j], "int16"), name="R")
    s = tw.create_schedule([B, H, R])
    s[R].vectorize(R.op.axis[1])
    return s, [A, G, Q, U, B, H, R]


def _heap_buffer():
    A = tw.placeholder((160, 160), "float32", name="A")  # 100 KiB intermediate: on the heap
    P = tw.compute((160, 160), lambda i, j: A[i, j] * 2, name="P")
    Q = tw.compute((160, 160), lambda i, j: P[j, i] + 1, name="Q")
    s = tw.create_schedule(Q)
    s[Q].parallel(Q.op.axis[0])
    return s, [A, Q]


def _float64_reduction_unrolled():
    A = tw.placeholder((5, 6), "float64", name="A")
    r = tw.reduce_axis(6, name="r")
    S = tw.compute((5,), lambda i: tw.min(A[i, r], axis=r), name="S")
    s = tw.create_schedule(S)
    s[S].unroll(r)
    return s, [A, S]


WALL = {
    "gemm_tiled": gemm_tiled, "conv_inline_pad": conv_inline_pad, "rfactor_max": rfactor_max,
    "elementwise_features": _elementwise_features, "small_dtypes": _small_dtypes, "heap_buffer": _heap_buffer,
    "float64_reduction_unrolled": _float64_reduction_unrolled, "stride2_load": stride2_load,
}


@pytest.mark.parametrize("name", sorted(WALL))
def test_source_compiles_without_warnings(name, tmp_path):
    s, args = WALL[name]()
    source = generate_c(tw.lower(s, args)).text
    target = tw.as_target("cpu")
    src = tmp_path / "k.c"
    src.write_text(source)
    cmd = [target.compiler, *compile_flags(target), str(src), "-o", str(tmp_path / "k.so"), "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "-Wall" in cmd
    assert proc.stderr == "", f"warnings compiling {name}:\n{proc.stderr}"


@pytest.mark.parametrize("name", ["elementwise_features", "heap_buffer", "float64_reduction_unrolled"])
def test_feature_kernels_are_correct(name, rng):
    s, args = WALL[name]()
    check_kernel(s, args, rng)


# ---- names that are not C identifiers -------------------------------------------------------------------

def _program(names):
    a, b, c, k = names
    A = tw.placeholder((6, 5), "float32", name=a)
    B = tw.placeholder((5, 4), "float32", name=b)
    r = tw.reduce_axis(5, name=k)
    C = tw.compute((6, 4), lambda i, j: tw.sum(A[i, r] * B[r, j], axis=r), name=c)
    D = tw.compute((6, 4), lambda i, j: tw.exp(C[i, j]) + tw.sqrt(C[i, j] * C[i, j]), name="D")
    return A, B, C, D


BAD_NAMES = [
    ("my tensor; exit(1)", "for", "1abc", "k k"),
    ("A", "B", "C", "); abort(); ("),
    ("int", "while", "return", "if"),
    ("a-b", "a_b", "a b", "a.b"),  # all sanitize to a_b: must stay distinct
    ("tw_call", "tw_time", "__x", "kernel"),
    ("main", "errno", "é", "_"),
]


@pytest.mark.parametrize("names", BAD_NAMES, ids=lambda n: "|".join(n))
def test_names_are_sanitized(names, rng):
    A, B, C, D = _program(names)
    s = tw.create_schedule(D)
    s[C].compute_at(s[D], D.op.axis[0])
    s[D].vectorize(D.op.axis[1])
    kernel = check_kernel(s, [A, B, D], rng, rtol=1e-5)
    for n in names:
        if not n.isidentifier():  # never spelled out as a token of the source
            assert not re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", kernel.source), n


def test_kernel_name_is_sanitized(rng, tmp_path):
    A, B, C, D = _program(("A", "B", "C", "k"))
    s = tw.create_schedule(D)
    kernel = check_kernel(s, [A, B, D], rng, rtol=1e-5, name="my kernel(); exit")
    assert "my kernel" not in kernel.source
    kernel.export(tmp_path)
    assert len(list(tmp_path.glob("*.so"))) == 1


@pytest.mark.parametrize("name,role", [
    ("int32_t", "input"), ("int32_t", "intermediate"), ("uint16_t", "input"), ("expf", "input"),
    ("exp", "intermediate"), ("sqrtf", "intermediate"), ("NAN", "input"), ("M_PI", "intermediate"),
    ("INT32_MIN", "input"), ("INT64_C", "input"), ("free", "intermediate"), ("aligned_alloc", "input"),
    ("memcpy", "input"), ("CLOCK_MONOTONIC", "intermediate"), ("omp_set_num_threads", "input"),
    ("linux", "input"),
    ("unix", "intermediate"),
])
def test_names_colliding_with_c_library_identifiers(name, role, rng):
    """Regression: tensors named like a typedef, a math function or a macro the generated C uses broke the
    build (or worse, see INFINITY below). `role`: the input A or the intermediate C (a local buffer)."""
    names = (name, "B", "C", "k") if role == "input" else ("A", "B", name, "k")
    A, B, C, D = _program(names)
    s = tw.create_schedule(D)
    check_kernel(s, [A, B, D], rng, rtol=1e-5)


@pytest.mark.parametrize("name", ["expf", "free", "aligned_alloc"])
def test_heap_buffer_named_like_a_libc_function(name, rng):
    A = tw.placeholder((20000,), "float32", name="A")  # 80 KB intermediate: heap
    P = tw.compute((20000,), lambda i: tw.exp(A[i]), name=name)
    Q = tw.compute((20000,), lambda i: P[i] + 1, name="Q")
    s = tw.create_schedule(Q)
    kernel = check_kernel(s, [A, Q], rng, rtol=1e-5)
    assert "aligned_alloc(64" in kernel.source


@pytest.mark.parametrize("name", ["args", "t0", "number", "n"])
def test_kernel_names_colliding_with_wrapper_locals(name, rng):
    A, B, C, D = _program(("A", "B", "C", "k"))
    check_kernel(tw.create_schedule(D), [A, B, D], rng, rtol=1e-5, name=name)


def test_tensor_named_infinity_runs(tmp_path):
    """Regression: a tensor named INFINITY compiled (the macro expanded inside the parameter list) and the
    kernel crashed with SIGSEGV. Runs in a child process so a crash cannot take the session down."""
    script = textwrap.dedent("""
        import numpy as np, tilewright as tw
        A = tw.placeholder((4,), "float32", name="INFINITY")
        C = tw.compute((4,), lambda i: A[i] + 1, name="C")
        k = tw.build(tw.create_schedule(C), [A, C])
        c = np.zeros(4, "float32")
        k(np.arange(4, dtype="float32"), c)
        print(c.tolist())
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=str(tmp_path))
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    assert proc.stdout.strip() == "[1.0, 2.0, 3.0, 4.0]"


def test_sanitized_sources_compile_without_warnings(tmp_path):
    A, B, C, D = _program(BAD_NAMES[0])
    s = tw.create_schedule(D)
    source = generate_c(tw.lower(s, [A, B, D])).text
    target = tw.as_target("cpu")
    (tmp_path / "k.c").write_text(source)
    proc = subprocess.run([target.compiler, *compile_flags(target), str(tmp_path / "k.c"), "-o",
                           str(tmp_path / "k.so"), "-lm"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr

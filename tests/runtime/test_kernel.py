"""The Kernel runtime: argument checks, timing, export, and calling an exported library without tilewright."""

from __future__ import annotations

import ctypes
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from oracle import check_kernel

import tilewright as tw
from tilewright.build import compile_flags


@pytest.fixture(scope="module")
def gemm():
    A = tw.placeholder((6, 5), "float32", name="A")
    B = tw.placeholder((5, 8), "float32", name="B")
    k = tw.reduce_axis(5, name="k")
    C = tw.compute((6, 8), lambda i, j: tw.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = tw.create_schedule(C)
    jo, ji = s[C].split(C.op.axis[1], factor=4)
    s[C].reorder(C.op.axis[0], jo, k, ji)
    s[C].vectorize(ji)
    s[C].parallel(C.op.axis[0])
    kernel = tw.build(s, [A, B, C])
    return kernel, A, B, C


def arrays(rng):
    a = rng.uniform(-1, 1, (6, 5)).astype("float32")
    b = rng.uniform(-1, 1, (5, 8)).astype("float32")
    c = np.zeros((6, 8), "float32")
    return a, b, c


def test_call_writes_output_in_place(gemm, rng):
    kernel, A, B, C = gemm
    a, b, c = arrays(rng)
    ident = id(c)
    assert kernel(a, b, c) is None
    assert id(c) == ident
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-6)
    assert kernel.output_names == ("C",)
    assert [buf.name for buf in kernel.args] == ["A", "B", "C"]


def test_inputs_are_not_modified_and_may_be_read_only(gemm, rng):
    kernel, A, B, C = gemm
    a, b, c = arrays(rng)
    a0, b0 = a.copy(), b.copy()
    a.flags.writeable = False
    b.flags.writeable = False
    kernel(a, b, c)
    assert (a == a0).all() and (b == b0).all()


# ---- argument checks ----------------------------------------------------------------------------------

def test_wrong_argument_count(gemm, rng):
    kernel, *_ = gemm
    a, b, c = arrays(rng)
    with pytest.raises(tw.MeasureError, match=r"kernel 'kernel' takes 3 arrays \(A, B, C\), got 2"):
        kernel(a, b)
    with pytest.raises(tw.MeasureError, match=r"takes 3 arrays \(A, B, C\), got 4"):
        kernel(a, b, c, c)
    with pytest.raises(tw.MeasureError, match=r"got 0"):
        kernel()


def test_not_an_array(gemm, rng):
    kernel, *_ = gemm
    a, b, c = arrays(rng)
    with pytest.raises(tw.MeasureError, match=r"argument 'B' must be a NumPy array, got list"):
        kernel(a, b.tolist(), c)


@pytest.mark.parametrize("dtype", ["float64", "float16", "int32", ">f4"])
def test_wrong_dtype(gemm, rng, dtype):
    kernel, *_ = gemm
    a, b, c = arrays(rng)
    with pytest.raises(tw.MeasureError, match=r"argument 'A' has dtype .*, expected float32 \(float32\)"):
        kernel(a.astype(dtype), b, c)
    with pytest.raises(tw.MeasureError, match=r"argument 'C' has dtype"):
        kernel(a, b, c.astype(dtype))


@pytest.mark.parametrize("shape", [(5, 6), (6, 5, 1), (30,), (6, 6)])
def test_wrong_shape(gemm, rng, shape):
    kernel, *_ = gemm
    a, b, c = arrays(rng)
    bad = np.zeros(shape, "float32")
    with pytest.raises(tw.MeasureError,
                       match=re.escape(f"argument 'A' has shape {list(shape)}, expected [6, 5]")):
        kernel(bad, b, c)


def test_non_contiguous(gemm, rng):
    kernel, *_ = gemm
    a, b, c = arrays(rng)
    with pytest.raises(tw.MeasureError, match=r"argument 'A' is not C-contiguous; pass np.ascontiguousarray"):
        kernel(np.asfortranarray(a), b, c)
    wide = np.zeros((6, 16), "float32")
    with pytest.raises(tw.MeasureError, match=r"argument 'C' is not C-contiguous"):
        kernel(a, b, wide[:, ::2])
    with pytest.raises(tw.MeasureError, match=r"argument 'B' is not C-contiguous"):
        kernel(a, np.zeros((8, 5), "float32").T, c)


def test_read_only_output(gemm, rng):
    kernel, *_ = gemm
    a, b, c = arrays(rng)
    c.flags.writeable = False
    with pytest.raises(tw.MeasureError, match=r"argument 'C' is read-only"):
        kernel(a, b, c)
    with pytest.raises(tw.MeasureError, match=r"argument 'C' is read-only"):
        kernel.time(a, b, c)


def test_read_only_computed_argument():
    A = tw.placeholder((4,), "float32", name="A")
    P = tw.compute((4,), lambda i: A[i] * 2, name="P")
    Q = tw.compute((4,), lambda i: P[i] + 1, name="Q")
    kernel = tw.build(tw.create_schedule(Q), [A, P, Q])  # P is computed by the kernel into its argument
    p = np.zeros(4, "float32")
    p.flags.writeable = False
    with pytest.raises(tw.MeasureError, match="'P' is read-only"):
        kernel(np.ones(4, "float32"), p, np.zeros(4, "float32"))
    assert (p == 0).all()


def test_computed_intermediate_argument(rng):
    A = tw.placeholder((4,), "float32", name="A")
    P = tw.compute((4,), lambda i: A[i] * 2, name="P")
    Q = tw.compute((4,), lambda i: P[i] + 1, name="Q")
    kernel = tw.build(tw.create_schedule(Q), [A, P, Q])
    a = rng.uniform(-1, 1, 4).astype("float32")
    p, q = np.zeros(4, "float32"), np.zeros(4, "float32")
    kernel(a, p, q)
    np.testing.assert_allclose(p, a * 2, rtol=1e-6)
    np.testing.assert_allclose(q, a * 2 + 1, rtol=1e-6)


def test_checks_happen_before_running(gemm, rng):
    kernel, *_ = gemm
    a, b, c = arrays(rng)
    c[:] = 7
    with pytest.raises(tw.MeasureError):
        kernel(a, b.astype("float64"), c)
    assert (c == 7).all()


def test_contiguous_views_are_accepted(gemm, rng):
    kernel, A, B, C = gemm
    a, b, _ = arrays(rng)
    big = np.zeros((8, 6, 8), "float32")
    out = big[1]  # a C-contiguous view at an offset
    assert out.flags.c_contiguous and not out.flags.owndata
    kernel(a, b, out)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-6)
    assert (big[0] == 0).all() and (big[2:] == 0).all()


def test_bfloat16_arguments_are_raw_uint16(rng):
    A = tw.placeholder((4,), "bfloat16", name="A")
    B = tw.compute((4,), lambda i: A[i] * 2, name="B")
    kernel = tw.build(tw.create_schedule(B), [A, B])
    with pytest.raises(tw.MeasureError, match=r"argument 'A' has dtype float32, expected uint16 \(bfloat16\)"):
        kernel(np.zeros(4, "float32"), np.zeros(4, "uint16"))
    bits = (np.array([1.0, -2.0, 0.5, 3.0], "float32").view(np.uint32) >> 16).astype(np.uint16)
    out = np.zeros(4, np.uint16)
    kernel(bits, out)
    got = (out.astype(np.uint32) << 16).view(np.float32)
    assert got.tolist() == [2.0, -4.0, 1.0, 6.0]


def test_set_num_threads(gemm, rng):
    kernel, *_ = gemm
    a, b, c = arrays(rng)
    kernel(a, b, c)
    want = c.copy()
    kernel.set_num_threads(1)
    c[:] = 0
    kernel(a, b, c)
    assert (c == want).all()
    kernel.set_num_threads(kernel.target.cores)


# ---- timing -------------------------------------------------------------------------------------------

def test_time_returns_sane_stats(gemm, rng):
    kernel, *_ = gemm
    a, b, c = arrays(rng)
    r = kernel.time(a, b, c, repeat=3, min_repeat_ms=2)
    assert r.repeat == 3 and r.number >= 1
    assert 0 < r.min <= r.median <= r.max < 1.0
    assert r.stdev >= 0 and r.stdev <= r.max - r.min + 1e-12
    assert re.fullmatch(r"median [\d.]+ ms \(min [\d.]+, max [\d.]+, 3x\d+ calls\)", str(r))
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-6)  # timing runs the kernel


def test_time_with_fixed_number_and_cache_flush(gemm, rng):
    kernel, *_ = gemm
    a, b, c = arrays(rng)
    r = kernel.time(a, b, c, number=4, repeat=2)
    assert (r.number, r.repeat) == (4, 2)
    r = kernel.time(a, b, c, repeat=2, flush_cache=True)
    assert r.number == 1 and r.min > 0


def test_time_checks_arguments(gemm, rng):
    kernel, *_ = gemm
    a, b, c = arrays(rng)
    with pytest.raises(tw.MeasureError, match="takes 3 arrays"):
        kernel.time(a, b)


# ---- export -------------------------------------------------------------------------------------------

def _exported(tmp_path, rng, name="gemm_k"):
    A = tw.placeholder((6, 5), "float32", name="A")
    B = tw.placeholder((5, 8), "float32", name="B")
    k = tw.reduce_axis(5, name="k")
    C = tw.compute((6, 8), lambda i, j: tw.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = tw.create_schedule(C)
    s[C].vectorize(C.op.axis[1])
    kernel = check_kernel(s, [A, B, C], rng, name=name)
    out = kernel.export(tmp_path / "out")
    return kernel, out


def test_export_writes_source_library_and_header(tmp_path, rng):
    kernel, out = _exported(tmp_path, rng)
    assert out == tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["gemm_k.c", "gemm_k.h", "gemm_k.so"]
    assert (out / "gemm_k.c").read_text() == kernel.source
    assert (out / "gemm_k.so").read_bytes() == kernel.build_result.library.read_bytes()
    header = (out / "gemm_k.h").read_text()
    assert "int32_t gemm_k(float *restrict A, float *restrict B, float *restrict C);" in header
    assert "int32_t tw_call(void **args);" in header
    assert "double tw_time(void **args, int32_t number);" in header
    assert "A: float32[6, 5]" in header and "C: float32[6, 8]" in header
    assert "#ifndef TILEWRIGHT_GEMM_K_H" in header and header.rstrip().endswith("#endif")
    assert " ".join(kernel.build_result.flags) in header


def test_export_header_matches_the_source(tmp_path, rng):
    """The header's declaration compiles together with the exported source (same signature)."""
    kernel, out = _exported(tmp_path, rng)
    unit = tmp_path / "unit.c"
    unit.write_text(f'#include "{out / "gemm_k.h"}"\n#include "{out / "gemm_k.c"}"\n')
    target = kernel.target
    proc = subprocess.run([target.compiler, *compile_flags(target), "-c", str(unit), "-o", str(tmp_path / "u.o")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_exported_library_via_ctypes(tmp_path, rng):
    kernel, out = _exported(tmp_path, rng)
    lib = ctypes.CDLL(str(out / "gemm_k.so"))
    lib.tw_call.restype = ctypes.c_int32
    lib.tw_call.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    a = rng.uniform(-1, 1, (6, 5)).astype("float32")
    b = rng.uniform(-1, 1, (5, 8)).astype("float32")
    c = np.zeros((6, 8), "float32")
    ptrs = (ctypes.c_void_p * 3)(a.ctypes.data, b.ctypes.data, c.ctypes.data)
    assert lib.tw_call(ptrs) == 0
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-6)
    # the named entry point too
    c2 = np.zeros_like(c)
    fn = lib.gemm_k
    fn.restype = ctypes.c_int32
    fn.argtypes = [ctypes.c_void_p] * 3
    assert fn(a.ctypes.data, b.ctypes.data, c2.ctypes.data) == 0
    assert (c2 == c).all()
    lib.tw_time.restype = ctypes.c_double
    lib.tw_time.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int32]
    assert lib.tw_time(ptrs, 3) > 0


def test_exported_library_from_c(tmp_path, rng):
    """A C program includes the header, links the library and calls tw_call: no Python involved."""
    kernel, out = _exported(tmp_path, rng)
    main = tmp_path / "main.c"
    main.write_text(textwrap.dedent("""
        #include <stdio.h>
        #include "gemm_k.h"
        int main(void) {
          float a[30], b[40], c[48];
          for (int n = 0; n < 30; ++n) a[n] = (float)(n % 7) - 3.0f;
          for (int n = 0; n < 40; ++n) b[n] = (float)(n % 5) * 0.5f;
          void *args[3] = {a, b, c};
          if (tw_call(args) != 0) return 2;
          if (gemm_k(a, b, c) != 0) return 3;
          for (int n = 0; n < 48; ++n) printf("%.6f\\n", c[n]);
          return 0;
        }
    """))
    target = kernel.target
    exe = tmp_path / "main"
    proc = subprocess.run([target.compiler, "-std=gnu11", "-Wall", f"-I{out}", str(main), str(out / "gemm_k.so"),
                           f"-Wl,-rpath,{out}", "-o", str(exe)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    got = np.array([float(x) for x in run.stdout.split()], "float32").reshape(6, 8)
    a = (np.arange(30) % 7 - 3.0).reshape(6, 5)
    b = (np.arange(40) % 5 * 0.5).reshape(5, 8)
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)


def test_heap_buffer_kernel(rng):
    """An intermediate larger than the stack limit lives on the heap (aligned_alloc, freed after use)."""
    A = tw.placeholder((1 << 16,), "float32", name="A")
    P = tw.compute((1 << 16,), lambda i: A[i] * 2, name="P")
    Q = tw.compute((1 << 16,), lambda i: P[i] + 1, name="Q")
    s = tw.create_schedule(Q)
    kernel = tw.build(s, [A, Q])
    assert "aligned_alloc" in kernel.source and "free(P)" in kernel.source
    check_kernel(s, [A, Q], rng, kernel=kernel)


def test_failed_allocation_is_a_measure_error(tmp_path):
    """A heap allocation that fails makes the kernel return -1, reported as MeasureError (run in a child
    process whose address space is limited, so the 8 GiB intermediate cannot be allocated)."""
    pytest.importorskip("resource")
    script = textwrap.dedent("""
        import resource, numpy as np, tilewright as tw
        n = 1 << 30
        A = tw.placeholder((4,), "float64", name="A")
        P = tw.compute((n,), lambda i: A[i % 4] * 2, name="P")
        Q = tw.compute((4,), lambda i: P[i * 1000] + 1, name="Q")
        kernel = tw.build(tw.create_schedule(Q), [A, Q])
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, resource.getrlimit(resource.RLIMIT_AS)[1]))
        try:
            kernel(np.ones(4), np.zeros(4))
            print("no error")
        except tw.MeasureError as e:
            print(e)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "kernel 'kernel' failed with code -1 (out of memory?)"

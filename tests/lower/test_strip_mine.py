"""Strip-mining in the vectorizer (lower/vectorize.py, opt-in with the target's vector width): a
vectorized loop that is not one power-of-two vector (a padding copy's 112-element interior starting at
column 1) becomes vectors of the target's width plus a power-of-two remainder, instead of an
`omp simd` loop GCC left scalar; results match the reference, guarded rows read nothing outside the
input, short tails and GPU kernels are left alone, and without the width nothing changes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from oracle import check_kernel

import tilewright as tw
from tilewright.ir.stmt import For, ForKind
from tilewright.ir.stmt_functor import walk_stmt
from tilewright.lower import passes
from tilewright.lower import vectorize as vectorize_module
from tilewright.lower.lower import lower
from tilewright.lower.registers import RegisterFile

AVX2_BYTES = 32


@pytest.fixture
def strip_mine(monkeypatch):
    # AVX2's width whatever the pipeline passes: on an AVX-512 host it passes 64 bytes, and 13 lanes are
    # then a short tail left as a loop
    monkeypatch.setattr(passes, "vectorize", lambda body, vector_bytes=0: vectorize_module.vectorize(
        body, vector_bytes=AVX2_BYTES))


def simd_loops(func) -> list[For]:
    return [s for s in walk_stmt(func.body) if isinstance(s, For) and s.kind is ForKind.VECTORIZED]


def scaled_rows(n: int, dtype: str = "float32", out_dtype: str | None = None):
    A = tw.placeholder((3, n), dtype, name="A")
    B = tw.compute((3, n), lambda i, j: tw.cast(A[i, j] * 2 + 1, out_dtype or dtype), name="B")
    s = tw.create_schedule(B)
    s[B].vectorize(B.op.axis[1])
    return s, [A, B]


def test_without_the_width_non_power_of_two_loops_stay_omp_simd():
    s, args = scaled_rows(100)
    assert len(simd_loops(lower(s, args, registers=RegisterFile(0, 16)))) == 1  # a target without vectors


def test_the_pipeline_strip_mines_at_the_targets_width():
    s, args = scaled_rows(100)
    assert not simd_loops(tw.lower(s, args, target=tw.Target("cpu")))


@pytest.mark.parametrize("n", [8, 13, 100, 112, 130, 257])
def test_strip_mined_loops_match_the_reference(strip_mine, n, rng):
    s, args = scaled_rows(n)
    assert not simd_loops(tw.lower(s, args))
    check_kernel(s, args, rng)


@pytest.mark.parametrize("dtype,out_dtype,n", [("int8", None, 100), ("float64", None, 37), ("int16", None, 50),
                                               ("float32", "float64", 21), ("uint8", None, 65)])
def test_width_follows_the_widest_stored_value(strip_mine, dtype, out_dtype, n, rng):
    s, args = scaled_rows(n, dtype, out_dtype)
    assert not simd_loops(tw.lower(s, args))
    check_kernel(s, args, rng)


def test_short_tails_stay_loops(strip_mine):
    s, args = scaled_rows(6)  # shorter than one 8-lane vector: a register tile's tail
    assert len(simd_loops(tw.lower(s, args))) == 1


def padding_copy(width: int = 114):
    """A conv's padding copy at root as the CPU space schedules it: rows fused and parallel, the
    row loop vectorized (partition splits off the border columns, leaving the interior at column 1)."""
    x = tw.placeholder((2, 5, width - 2), "float32", name="x")
    p = tw.ops.pad(x, (1, 1, 1, 1), name="p")
    s = tw.create_schedule(p)
    c, h, w = p.op.axis
    s[p].parallel(c)
    s[p].vectorize(w)
    return s, [x, p]


def test_padding_copy_interior_is_vectors(strip_mine, rng):
    s, args = padding_copy()
    func = tw.lower(s, args)
    assert not simd_loops(func)
    check_kernel(s, args, rng)
    source = tw.build(s, args).source
    assert "omp simd" not in source and "tw_float32x8" in source


def test_gpu_kernels_are_not_strip_mined(strip_mine, rng):
    A = tw.placeholder((4, 12), "float32", name="A")
    B = tw.compute((4, 12), lambda i, j: A[i, j] + 1, name="B")
    s = tw.create_schedule(B)
    s[B].bind(B.op.axis[0], tw.thread_axis("threadIdx.x"))
    s[B].vectorize(B.op.axis[1])
    func = tw.lower(s, [A, B])
    assert any(x.kind is ForKind.THREAD_BINDING for x in walk_stmt(func.body) if isinstance(x, For))
    assert len(simd_loops(func)) == 1
    from tilewright.build.opencl import opencl_available

    if opencl_available() is None:
        check_kernel(s, [A, B], rng, target="opencl")


def test_guarded_padding_rows_read_nothing_outside(tmp_path):
    """The strip-mined padding copy next to guard pages: a border row's select must not load."""
    child = textwrap.dedent("""
        import ctypes, functools, mmap, numpy as np, tilewright as tw
        from tilewright.lower import passes, vectorize as V
        passes.vectorize = functools.partial(V.vectorize, vector_bytes=32)
        x = tw.placeholder((2, 5, 112), "float32", name="x")
        p = tw.ops.pad(x, (1, 1, 1, 1), name="p")
        s = tw.create_schedule(p)
        c, h, w = p.op.axis
        s[p].parallel(c)
        s[p].vectorize(w)
        k = tw.build(s, [x, p])
        assert "omp simd" not in k.source
        page = mmap.PAGESIZE
        values = np.arange(2 * 5 * 112, dtype=np.float32).reshape(2, 5, 112) + 1
        pages = -(-values.nbytes // page)
        for side in ("before", "after"):
            mm = mmap.mmap(-1, (pages + 2) * page)
            base = ctypes.addressof((ctypes.c_char * ((pages + 2) * page)).from_buffer(mm))
            offset = page if side == "before" else (pages + 1) * page - values.nbytes
            a = np.frombuffer(mm, dtype=np.float32, count=values.size, offset=offset).reshape(values.shape)
            a[...] = values
            libc = ctypes.CDLL(None)
            libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
            assert libc.mprotect(base, page, 0) == 0 and libc.mprotect(base + (pages + 1) * page, page, 0) == 0
            out = np.zeros((2, 7, 114), np.float32)
            k(a, out)
            assert (out == np.pad(values, ((0, 0), (1, 1), (1, 1)))).all()
        print("OK")
    """)
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300,
                          cwd=str(tmp_path))
    assert proc.returncode == 0, f"child exited with {proc.returncode} (SIGSEGV is -11):\n{proc.stderr[-3000:]}"
    assert proc.stdout.strip().endswith("OK"), proc.stdout + proc.stderr

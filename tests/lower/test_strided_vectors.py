"""Strided vector loads (lower/vectorize.py keeps a load at base + s*lane as one vector load for
|s| <= 4; codegen/strided.py reads its span with contiguous loads and shuffles): the lowered IR holds
no scalar loop, results match the reference for strides 2, 3, 4 and negative ones, with tails, and no
read leaves the elements between the first and last lane (a guard page after or before the input
faults otherwise). GPU renderers read such a load lane by lane."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from oracle import check_kernel

import tilewright as tw
from tilewright.codegen import generate_c
from tilewright.codegen.strided import shuffle_steps, strided_plan
from tilewright.ir.expr import Load, Ramp
from tilewright.ir.stmt import For, ForKind
from tilewright.ir.stmt_functor import stmt_exprs, walk_stmt
from tilewright.ir.traverse import walk


def strided_read(n: int, stride: int, lanes: int, dtype: str = "float32", rows: int = 2, taps: int = 1):
    """B[i, j] = sum_r A[i, stride*j + r] (stride < 0: A read from the row's end backwards), j split by
    `lanes` and vectorized; A is exactly as long as the reads need, so the last lane reads its last element."""
    s_abs = abs(stride)
    width = s_abs * (n - 1) + taps
    A = tw.placeholder((rows, width), dtype, name="A")
    r = tw.reduce_axis(taps, name="r")
    if stride > 0:
        B = tw.compute((rows, n), lambda i, j: tw.sum(A[i, j * stride + r], axis=r), name="B")
    else:
        B = tw.compute((rows, n), lambda i, j: tw.sum(A[i, (n - 1 - j) * s_abs + r], axis=r), name="B")
    s = tw.create_schedule(B)
    jo, ji = s[B].split(B.op.axis[1], factor=lanes)
    s[B].reorder(B.op.axis[0], jo, r, ji)
    s[B].vectorize(ji)
    return s, [A, B]


def vector_loads(func) -> list[Load]:
    return [n for st in walk_stmt(func.body) for e in stmt_exprs(st) for n in walk(e)
            if isinstance(n, Load) and n.dtype.lanes > 1]


def test_stride_two_load_is_one_vector_load_not_a_scalar_loop():
    s, args = strided_read(16, 2, 8, taps=3)
    func = tw.lower(s, args)
    assert not any(isinstance(st, For) and st.kind is ForKind.VECTORIZED for st in walk_stmt(func.body))
    ramps = [ld.indices[0] for ld in vector_loads(func) if ld.tensor.name == "A"]
    assert ramps and all(isinstance(r, Ramp) and r.stride == 2 and r.lanes == 8 for r in ramps)
    source = generate_c(func).text
    assert "omp simd" not in source and "tw_load_s2_float32x8(&A[" in source


def test_large_strides_stay_scalar_loops():
    s, args = strided_read(16, 5, 8)  # five vector loads per vector used: left to the compiler
    func = tw.lower(s, args)
    assert any(isinstance(st, For) and st.kind is ForKind.VECTORIZED for st in walk_stmt(func.body))
    check_kernel(s, args, np.random.default_rng(0))


@pytest.mark.parametrize("stride", [2, 3, 4, -1, -2, -3])
@pytest.mark.parametrize("n,lanes", [(16, 8), (13, 8), (11, 4), (7, 2)])  # 13, 11, 7: a tail after the vectors
def test_strided_loads_match_the_reference(stride, n, lanes, rng):
    s, args = strided_read(n, stride, lanes, taps=2)
    check_kernel(s, args, rng)


@pytest.mark.parametrize("dtype,lanes", [("float64", 4), ("int8", 32), ("int16", 16), ("uint8", 16),
                                         ("int64", 2), ("float32", 16)])
def test_strided_loads_of_every_vector_dtype(dtype, lanes, rng):
    s, args = strided_read(lanes * 2 + 1, 2, lanes, dtype=dtype)
    check_kernel(s, args, rng)
    s, args = strided_read(lanes, -3, lanes, dtype=dtype)
    check_kernel(s, args, rng)


def test_plan_reads_only_the_span_and_each_lane_once():
    for stride in (-4, -3, -2, -1, 2, 3, 4):
        for lanes in (2, 4, 8, 16, 32, 64):
            plan = strided_plan(stride, lanes)
            span = abs(stride) * (lanes - 1) + 1
            assert plan.starts[0] == 0 and max(plan.starts) + lanes == span  # never past the last lane's element
            assert len(plan.starts) <= abs(stride)
            for i, (j, pos) in enumerate(plan.sources):
                assert plan.starts[j] + pos == stride * i - plan.low
            steps = shuffle_steps(plan)
            assert len(steps) == max(1, len(plan.starts) - 1)
            assert all(0 <= k < 2 * lanes for *_, mask in steps for k in mask)


# ---- no read outside the tensor: guard pages around exactly-sized inputs --------------------------------

GUARDED = textwrap.dedent("""
    import ctypes, mmap, numpy as np, tilewright as tw
    from tests_lower_strided import strided_read

    def guarded(values, side):
        '''A copy of `values` starting right after (side="before") or ending right before (side="after")
        an inaccessible page.'''
        page = mmap.PAGESIZE
        nbytes = values.nbytes
        pages = -(-nbytes // page)
        mm = mmap.mmap(-1, (pages + 2) * page)
        base = ctypes.addressof((ctypes.c_char * ((pages + 2) * page)).from_buffer(mm))
        offset = page if side == "before" else (pages + 1) * page - nbytes
        arr = np.frombuffer(mm, dtype=values.dtype, count=values.size, offset=offset).reshape(values.shape)
        arr[...] = values
        libc = ctypes.CDLL(None)
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        assert libc.mprotect(base, page, 0) == 0 and libc.mprotect(base + (pages + 1) * page, page, 0) == 0
        guarded.keep.append(mm)
        return arr
    guarded.keep = []
""")


def test_strided_reads_stay_inside_the_input(tmp_path):
    """Every stride and lane count, the input ending (and starting) at an unmapped page: a load of
    |s| * lanes elements from the first lane would read up to |s| - 1 elements past the last one."""
    (tmp_path / "tests_lower_strided.py").write_text(
        "import tilewright as tw\n" + textwrap.dedent(_source_of(strided_read)))
    body = """
        for stride in (2, 3, 4, -2, -3, -4):
            for n, lanes, dtype in ((8, 8, "float32"), (9, 8, "float32"), (16, 16, "float32"), (4, 4, "float64"),
                                    (32, 32, "int8")):
                s, args = strided_read(n, stride, lanes, dtype=dtype, rows=1)
                k = tw.build(s, args)
                assert "tw_load_s" in k.source, (stride, n, lanes)
                a = (np.arange(args[0].shape[1]) % 100 + 1).astype(dtype).reshape(args[0].shape)
                want = a[0, ::abs(stride)][:n] if stride > 0 else a[0, ::abs(stride)][:n][::-1]
                for side in ("before", "after"):
                    b = np.zeros((1, n), dtype)
                    k(guarded(a, side), b)
                    assert (b[0] == want).all(), (stride, n, lanes, side, b, want)
        print("OK")
    """
    proc = subprocess.run([sys.executable, "-c", GUARDED + textwrap.dedent(body)], capture_output=True, text=True,
                          timeout=300, cwd=str(tmp_path))
    assert proc.returncode == 0, f"child exited with {proc.returncode} (SIGSEGV is -11):\n{proc.stderr[-3000:]}"
    assert proc.stdout.strip().endswith("OK"), proc.stdout + proc.stderr


def _source_of(fn) -> str:
    import inspect

    return inspect.getsource(fn)


# ---- the instructions GCC makes of it ---------------------------------------------------------------------

def _assembly(source: str, march: str, tmp_path) -> str:
    cc = tw.as_target("cpu").compiler
    src = tmp_path / "k.c"
    src.write_text(source)
    proc = subprocess.run([cc, "-O3", "-std=gnu11", "-fopenmp", f"-march={march}", "-S", "-o", "-", str(src)],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        pytest.skip(f"{cc} cannot compile for {march}: {proc.stderr[-300:]}")
    return proc.stdout


@pytest.mark.parametrize("march,lanes,permute", [("x86-64-v4", 16, "vperm[it]2ps"), ("x86-64-v3", 8, "vpermd|vpermps")])
def test_stride_two_compiles_to_loads_and_permutes(march, lanes, permute, tmp_path):
    """Compile only (this host may lack AVX-512): no gather and no lane-by-lane inserts."""
    if shutil.which(tw.as_target("cpu").compiler) is None:
        pytest.skip("no C compiler")
    s, args = strided_read(4 * lanes, 2, lanes, rows=1)
    asm = _assembly(generate_c(tw.lower(s, args)).text, march, tmp_path)
    assert re.search(permute, asm), asm[-3000:]
    assert not re.search(r"vgather|vinsertps|vpinsr", asm)


# ---- GPU renderers: lane by lane ----------------------------------------------------------------------------

def test_gpu_renderers_read_strided_vectors_lane_by_lane():
    from tilewright.codegen import generate_cuda, generate_opencl

    A = tw.placeholder((4, 64), "float32", name="A")
    B = tw.compute((4, 32), lambda i, j: A[i, 2 * j] + A[i, 2 * j + 1], name="B")
    s = tw.create_schedule(B)
    jo, ji = s[B].split(B.op.axis[1], factor=4)
    s[B].bind(B.op.axis[0], tw.thread_axis("blockIdx.x"))
    s[B].bind(jo, tw.thread_axis("threadIdx.x"))
    s[B].vectorize(ji)
    func = tw.lower(s, [A, B])
    assert any(isinstance(ld.indices[0], Ramp) and ld.indices[0].stride == 2 for ld in vector_loads(func))
    for gen in (generate_cuda, generate_opencl):
        src = gen(func).source
        assert "tw_load_s" not in src and "(j_outer * 8)) + 6)]" in src, src  # lane 3 of A[i, 2j]
    from tilewright.build.opencl import opencl_available

    if opencl_available() is None:
        check_kernel(s, [A, B], np.random.default_rng(0), target="opencl")


def test_a_store_across_rows_is_one_vector_scatter():
    """B[j, i] = 2 * A[i, j] + c[j] vectorized along j: contiguous reads, B's lanes a row apart
    (a conv's epilogue along its output channels into NCHW)."""
    A = tw.placeholder((16, 12), "float32", name="A")
    c = tw.placeholder((12,), "float32", name="c")
    B = tw.compute((12, 16), lambda j, i: 2.0 * A[i, j] + c[j], name="B")
    s = tw.create_schedule(B)
    jo, ji = s[B].split(B.op.axis[0], factor=4)
    s[B].reorder(jo, B.op.axis[1], ji)
    s[B].vectorize(ji)
    func = tw.lower(s, [A, c, B])
    assert not any(isinstance(st, For) and st.kind is ForKind.VECTORIZED for st in walk_stmt(func.body))
    source = generate_c(func).text
    assert "tw_scatter_float32x4_s16(&B[" in source and "omp simd" not in source, source
    check_kernel(s, [A, c, B], np.random.default_rng(0))

def test_a_scatter_whose_value_would_gather_stays_a_loop():
    A = tw.placeholder((16, 6), "float32", name="A")
    B = tw.compute((6, 16), lambda j, i: A[i, j] * 2.0, name="B")
    s = tw.create_schedule(B)
    jo, ji = s[B].split(B.op.axis[1], factor=8)
    s[B].reorder(B.op.axis[0], jo, ji)
    s[B].vectorize(ji)  # reads A down a column (stride 6 > 4): no vector load, so no vector store either
    func = tw.lower(s, [A, B])
    assert any(isinstance(st, For) and st.kind is ForKind.VECTORIZED for st in walk_stmt(func.body))
    assert "tw_scatter" not in generate_c(func).text
    check_kernel(s, [A, B], np.random.default_rng(0))

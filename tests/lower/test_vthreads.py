"""Virtual threads (TVM 3.5): a shared tile attached inside vthread loops covers the block's whole tile and
is fetched once per block iteration, with the same barriers whatever the vthreads; statements that depend
on the vthread run once per vthread value, interleaved, with local buffers expanded per vthread. Results on
OpenCL (PoCL) against the reference, and the big GEMM schedule of examples/03 compiled for sm_90."""

from __future__ import annotations

import importlib
import importlib.util
import re
import shutil
import subprocess

import pytest
from gpu_gemm import gemm_schedule, lesson
from oracle import check_kernel

import tilewright as tw
from tilewright.ir.stmt import Allocate, Barrier, For, ForKind, Scope, Store
from tilewright.ir.stmt_functor import walk_stmt
from tilewright.lower.gpu_checks import kernels, launch_extents, validate_gpu_func
from tilewright.lower.lower import lower

TX, TY = tw.thread_axis("threadIdx.x"), tw.thread_axis("threadIdx.y")


def gemm(m=64, n=64, k=32, block=32, threads=4, vy=2, vx=2, step=8, vector=4):
    """examples/03's schedule with vthreads per axis (1: none) and any shapes: shared panels fetched
    cooperatively with vector loads, local fragments and a local register tile per thread."""
    return gemm_schedule(m, n, k, block=block, threads=threads, vthreads=(vy, vx), step=step, vector=vector)


def elementwise(n=50, vthreads=3, block=16, inside=False):
    """A stage bound to vthread with nothing shared inside (non-divisible: guards on the vthread);
    `inside`: the vthread loop inside the thread loop."""
    A = tw.placeholder((n,), "float32", name="A")
    C = tw.compute((n,), lambda i: A[i] * 2 + 1, name="C")
    s = tw.create_schedule(C)
    bo, rest = s[C].split(C.op.axis[0], factor=block)
    v, rest = s[C].split(rest, nparts=vthreads)
    t, _ = s[C].split(rest, nparts=4)
    if inside:
        s[C].reorder(t, v)
    s[C].bind(bo, tw.thread_axis("blockIdx.x"))
    s[C].bind(v, tw.thread_axis("vthread"))
    s[C].bind(t, TX)
    return s, [A, C]


def _buffers(stmt, scope):
    return {s.buffer.name: s.buffer for s in walk_stmt(stmt) if isinstance(s, Allocate) and s.buffer.scope is scope}


def _k_outer(f):
    return next(s for s in walk_stmt(f.body) if isinstance(s, For) and s.var.name == "k.outer")


def _stores(stmt, name):
    return [s for s in walk_stmt(stmt) if isinstance(s, Store) and s.buffer.name == name]


# ---- the IR --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("vy,vx", [(1, 1), (2, 1), (2, 2), (4, 2)])
def test_one_fetch_per_k_step_whatever_the_vthreads(vy, vx):
    f = lower(*gemm(vy=vy, vx=vx))
    validate_gpu_func(f)
    (kernel,) = kernels(f)
    assert launch_extents(kernel) == {"blockIdx.y": 2, "blockIdx.x": 2, "threadIdx.y": 4, "threadIdx.x": 4}
    assert not [s for s in walk_stmt(kernel) if isinstance(s, For) and s.thread_tag == "vthread"]
    # the block's 32x8 and 8x32 panels, once: 256 floats = 16 threads x 4 float4 stores, for any vthreads
    shared = _buffers(kernel, Scope.SHARED)
    assert {b: v.shape for b, v in shared.items()} == {"A.shared": (32, 8), "B.shared": (8, 32)}
    ko = _k_outer(f)
    for name in ("A.shared", "B.shared"):
        (store,) = _stores(ko, name)
        assert store.value.dtype.lanes == 4
    assert len([s for s in walk_stmt(ko) if isinstance(s, Barrier)]) == 2
    assert len([s for s in walk_stmt(f.body) if isinstance(s, Barrier)]) == 2
    # local buffers: one slice per vthread they depend on (A's fragment on vy, B's on vx)
    local = _buffers(kernel, Scope.LOCAL)
    rows, cols = 32 // vy // 4, 32 // vx // 4
    want = {"C.local": (rows, cols), "A.shared.local": (rows, 1), "B.shared.local": (1, cols)}
    expand = {"C.local": (vy, vx), "A.shared.local": (vy,), "B.shared.local": (vx,)}
    for name, shape in want.items():
        lead = tuple(e for e in expand[name] if e > 1)
        assert local[name].shape == lead + shape, name


def test_vthread_copies_interleave_in_the_innermost_loop():
    f = lower(*gemm(vy=2, vx=2))
    # the register-tile update: one store per vthread inside the j loop, not four copies of the loop nest
    updates = _stores(_k_outer(f), "C.local")
    assert len(updates) == 4
    loops = [s for s in walk_stmt(_k_outer(f)) if isinstance(s, For)]
    j = next(s for s in loops if s.var.name == "j")
    assert len(_stores(j, "C.local")) == 4
    assert all(s.kind is not ForKind.UNROLLED or s.var.name != "vy" for s in loops)
    text = str(f)
    assert text.count("A.shared[ramp(") == 1 and text.count("B.shared[ramp(") == 1


def test_elementwise_vthread_keeps_its_copies():
    s, args = elementwise()
    f = lower(s, args)
    validate_gpu_func(f)
    assert len(_stores(f.body, "C")) == 3  # one guarded copy per vthread value
    assert launch_extents(kernels(f)[0]) == {"blockIdx.x": 4, "threadIdx.x": 4}


# ---- results on OpenCL (PoCL) -----------------------------------------------------------------------------

needs_opencl = pytest.mark.skipif(importlib.util.find_spec("pyopencl") is None,
                                  reason="pyopencl is not installed (make test installs it with PoCL)")

CASES = {
    "2x2": lambda: gemm(),
    "2x1": lambda: gemm(vy=2, vx=1),
    "1x4": lambda: gemm(vy=1, vx=4),
    "4x2-scalar-fetch": lambda: gemm(vy=4, vx=2, vector=1),
    "3x2-non-divisible": lambda: gemm(m=60, n=50, k=30, vy=3, vx=2, vector=1),
    "2x2-non-divisible": lambda: gemm(m=50, n=44, k=24, vy=2, vx=2, vector=2, step=4),
    "elementwise": lambda: elementwise(),
    "elementwise-vthread-inside": lambda: elementwise(inside=True),
    "elementwise-20-vthreads": lambda: elementwise(n=300, vthreads=20, block=160),
}


@needs_opencl
@pytest.mark.parametrize("case", sorted(CASES))
def test_opencl_matches_reference(case, rng):
    s, args = CASES[case]()
    check_kernel(s, args, rng, kernel=tw.build(s, args, target="opencl"))


@needs_opencl
@pytest.mark.parametrize("n", [64, 128, 256])
def test_example_schedule_on_opencl(n, rng):
    ex = lesson
    A, B, C = ex.gemm(n)
    big = n == 256  # block 128, 16x16 threads, 2x2 vthreads, step 8: 256 work-items fit PoCL
    s = ex.schedule_gemm(A, B, C) if big else ex.schedule_gemm(A, B, C, block=32, threads=4)
    check_kernel(s, [A, B, C], rng, kernel=tw.build(s, [A, B, C], target="opencl"))


# ---- the 4096 GEMM for sm_90 -------------------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_example_4096_compiles_to_a_register_tile(tmp_path):
    ex = lesson
    A, B, C = ex.gemm(4096)
    kernel = tw.build(ex.schedule_gemm(A, B, C), [A, B, C], target="cuda -arch=sm_90")
    src = kernel.source
    assert "block=(16, 16, 1)" in src and "float C_local[64]" in src  # 2x2 vthreads of 4x4
    loop = src[src.index("for (int k_outer"):]
    assert loop.count("__syncthreads()") == 2
    assert len(re.findall(r"const float4 tw_t\d+ = \*\(const float4 \*\)\(&[AB]\[", loop)) == 2
    assert len(re.findall(r"C_local\[[^]]*\] = \(C_local", loop)) == 4  # the 4 vthreads' FMAs per (i, j)
    cu = tmp_path / "gemm.cu"
    cu.write_text(src)
    out = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-Xptxas", "-v", "-o", str(tmp_path / "g.cubin"),
                          str(cu)], capture_output=True, text=True, check=True)
    info = out.stdout + out.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in info, info
    regs = int(re.search(r"Used (\d+) registers", info).group(1))
    assert regs <= 255

"""CUDA and OpenCL source: golden files for fixed hand-built IR, every CUDA kernel compiled with nvcc
(sm_80 and sm_90), the launch descriptors, names, and the error paths.

Regenerate the golden files after an intended change with
    UPDATE_GOLDEN=1 .venv/bin/pytest tests/codegen/test_gpu_codegen.py
and review the diff."""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path

import pytest
from gpu_programs import PROGRAMS, SCHEDULES, bind, c, has_bind, ld, loop

import tilewright as tw
from tilewright.build.nvcc import compile_cuda, compiler_available
from tilewright.codegen.cuda import generate_cuda
from tilewright.codegen.device import DeviceModule
from tilewright.codegen.opencl import generate_opencl
from tilewright.errors import BuildError
from tilewright.ir.dtype import as_dtype
from tilewright.ir.expr import Load, Ramp, Var
from tilewright.ir.stmt import Allocate, Barrier, Buffer, ForKind, Scope, Store, seq
from tilewright.lower.lower import LoweredFunc

GOLDEN_DIR = Path(__file__).parent / "golden"
GENERATORS = {"cu": generate_cuda, "cl": generate_opencl}
NO_NVCC = compiler_available() is None


def assert_golden(name: str, text: str) -> None:
    path = GOLDEN_DIR / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(text)
        return
    if not path.exists():
        pytest.fail(f"golden file {path} is missing; run UPDATE_GOLDEN=1 pytest {__file__} to create it")
    want = path.read_text()
    if text != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True), f"golden/{name}",
                                            "generated", n=2))
        pytest.fail(f"generated source differs from golden/{name} (UPDATE_GOLDEN=1 to accept):\n{diff[:6000]}")


@pytest.mark.parametrize("ext", sorted(GENERATORS))
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_golden_gpu_source(name, ext):
    func, _, _ = PROGRAMS[name]()
    module = GENERATORS[ext](func)
    assert_golden(f"gpu_{name}.{ext}", str(module))
    again, _, _ = PROGRAMS[name]()
    assert GENERATORS[ext](again).source == module.source  # deterministic


@pytest.mark.skipif(NO_NVCC, reason="no CUDA compiler: nvcc is not on PATH and NVRTC cannot be loaded")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_every_cuda_kernel_compiles(name, arch):
    func, _, _ = PROGRAMS[name]()
    module = generate_cuda(func)
    binary = compile_cuda(module.source, arch)
    assert binary.cubin and ".entry" in binary.ptx
    for k in module.kernels:
        assert f".entry {k.name}(" in binary.ptx  # extern "C": unmangled names for cuModuleGetFunction


def test_launch_descriptors():
    func, _, _ = PROGRAMS["tiled_matmul"]()
    (k,) = generate_cuda(func).kernels
    assert (k.grid, k.block, k.shared_bytes) == ((4, 4, 1), (8, 8, 1), 2 * 64 * 4)
    assert [p.name for p in k.params] == ["A", "B", "C"]
    func, _, _ = PROGRAMS["elementwise_two_kernels"]()
    m = generate_opencl(func)
    assert [k.block for k in m.kernels] == [(8, 1, 1), (32, 1, 1)]
    assert [b.name for b in m.intermediates] == ["C"] and m.outputs == (2,)
    assert m.kernels[1].global_size == (64 * 32, 1, 1)
    assert [(p.role, p.index) for p in m.kernels[1].params] == [("arg", 2), ("intermediate", 0)]
    back = DeviceModule.from_descriptor(m.source, json.loads(m.to_json()))
    assert back == m


def test_vector_accesses_need_proven_alignment_in_cuda():
    f32 = as_dtype("float32")
    X, Y = Buffer("X", (40,), f32), Buffer("Y", (40,), f32)
    t = Var("t")
    idx = Ramp(t * 4 + 1, 1, 4, as_dtype("int32").with_lanes(4))  # starts at 4t+1: not 16-byte aligned
    body = Store(Y, (idx,), Load(X, (idx,), f32.with_lanes(4)))
    func = LoweredFunc("shifted", (X, Y), loop(t, 9, body, "threadIdx.x"))
    cuda = generate_cuda(func).source
    assert "float4" not in cuda and "Y[((t * 4) + 1)]" in cuda  # scalarized lanes
    assert "vload4" in generate_opencl(func).source  # vloadN needs only element alignment


@pytest.mark.parametrize("gen", [generate_cuda, generate_opencl])
def test_stage_without_bound_loop_is_an_error(gen):
    A = tw.placeholder((8,), "float32", name="A")
    B = tw.compute((8,), lambda i: A[i] + 1, name="B")
    func = tw.lower(tw.create_schedule(B), [A, B])
    with pytest.raises(BuildError, match="stage 'B' has no loop bound to blockIdx/threadIdx"):
        gen(func)


def test_parallel_and_vthread_loops_are_errors():
    func, _, _ = PROGRAMS["guarded_threads"]()
    f32 = as_dtype("float32")
    X = Buffer("X", (4,), f32)
    i, j = Var("i"), Var("j")
    par = LoweredFunc("p", (X,), loop(i, 1, loop(j, 4, Store(X, (j,), c(1.0, "float32")), kind=ForKind.PARALLEL),
                                      "blockIdx.x"))
    with pytest.raises(BuildError, match="parallel"):
        generate_cuda(par)
    vt = LoweredFunc("v", (X,), loop(i, 4, Store(X, (i,), c(1.0, "float32")), "vthread"))
    with pytest.raises(BuildError, match="vthread"):
        generate_opencl(vt)


def test_local_buffer_outside_every_kernel_is_an_error():
    f32 = as_dtype("float32")
    X, L = Buffer("X", (4,), f32), Buffer("L", (4,), f32, Scope.LOCAL)
    i = Var("i")
    func = LoweredFunc("l", (X,), Allocate(L, loop(i, 4, Store(X, (i,), ld(L, i)), "threadIdx.x")))
    with pytest.raises(BuildError, match="scope local is allocated outside every kernel"):
        generate_cuda(func)


def test_shorter_bound_loop_around_a_barrier_is_an_error():
    """Threads 8..15 would skip the barrier that threads 0..7 wait at."""
    X = Buffer("X", (16,), as_dtype("float32"))
    t1, t2 = Var("t1"), Var("t2")
    body = seq(loop(t1, 16, Store(X, (t1,), c(0.0, "float32")), "threadIdx.x"),
               loop(t2, 8, seq(Barrier(Scope.SHARED), Store(X, (t2,), c(1.0, "float32"))), "threadIdx.x"))
    with pytest.raises(BuildError, match="barrier"):
        generate_cuda(LoweredFunc("b", (X,), loop(Var("b"), 1, body, "blockIdx.x")))


@pytest.mark.skipif(NO_NVCC, reason="no CUDA compiler: nvcc is not on PATH and NVRTC cannot be loaded")
@pytest.mark.parametrize("names", [("float4", "kernel", "__global"), ("class", "blockIdx", "new"),
                                   ("int", "my tensor; x", "vload4")])
def test_names_are_sanitized_for_device_code(names):
    a, b, out = names
    A = tw.placeholder((8, 4), "float32", name=a)
    B = tw.placeholder((8, 4), "float32", name=b)
    C = tw.compute((8, 4), lambda i, j: A[i, j] * B[i, j], name=out)
    f = tw.lower(tw.create_schedule(C), [A, B, C])
    f = bind(f, {f.body.var.name: "blockIdx.x", f.body.body.var.name: "threadIdx.x"})
    module = generate_cuda(f)
    compile_cuda(module.source, "sm_90")
    assert "my tensor" not in module.source and " float4 *" not in module.source.replace("const float4 *", "")
    assert [p.name for p in module.args] == [p.name for p in generate_opencl(f).args]


@pytest.mark.skipif(not has_bind(), reason="the bind schedule primitive is not there yet")
@pytest.mark.skipif(NO_NVCC, reason="no CUDA compiler: nvcc is not on PATH and NVRTC cannot be loaded")
@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_scheduled_programs_compile_for_cuda(name):
    s, args = SCHEDULES[name]()
    module = generate_cuda(tw.lower(s, args))
    compile_cuda(module.source, "sm_90")
    if name == "vector_relu":
        assert "make_float4" in module.source and module.kernels[0].block == (16, 1, 1)
    else:
        assert "__syncthreads();" in module.source and module.kernels[0].shared_bytes == 2 * 64 * 4

"""GPU targets through the plug-in spine: tw.build with a default or a hand
schedule on OpenCL (PoCL's CPU device in CI), CUDA compiled without a GPU,
isolated measurement of device candidates, and the errors a user meets."""

import shutil
from dataclasses import replace

import numpy as np
import pytest
from gpu_gemm import gemm_schedule as lesson_gemm

import tilewright as tw
from tilewright.backends import backend_for
from tilewright.build.opencl import opencl_available
from tilewright.runtime.measure import ErrorKind, Measurer
from tilewright.space.gpu_default import naive_gpu_schedule

NO_OPENCL = opencl_available()
needs_opencl = pytest.mark.skipif(NO_OPENCL is not None, reason=f"no OpenCL: {NO_OPENCL}")
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


def matmul(n=48, m=40, k=24):
    A = tw.placeholder((n, k), "float32", name="A")
    B = tw.placeholder((k, m), "float32", name="B")
    return [A, B, tw.ops.matmul(A, B)]


def conv():
    x = tw.placeholder((1, 3, 10, 10), "float32", name="x")
    w = tw.placeholder((4, 3, 3, 3), "float32", name="w")
    return [x, w, tw.ops.relu(tw.ops.conv2d(x, w, padding=1))]


def run_and_check(tensors, kernel):
    rng = np.random.default_rng(0)
    ins = [rng.standard_normal(t.shape).astype("float32") for t in tensors[:-1]]
    out = np.zeros(tensors[-1].shape, "float32")
    kernel(*ins, out)
    np.testing.assert_allclose(out, tw.evaluate(tensors[-1], dict(zip(tensors[:-1], ins))), rtol=1e-4, atol=1e-4)


def gemm_schedule():
    return lesson_gemm(128, block=32, threads=4, vthreads=2)


@needs_opencl
@pytest.mark.parametrize("program", [matmul, conv])
def test_default_gpu_schedule_builds_and_is_correct(program):
    tensors = program()
    kernel = tw.build(tensors, target="opencl")
    assert "__kernel" in kernel.source and "get_local_id(0)" in kernel.source
    run_and_check(tensors, kernel)


@needs_opencl
def test_hand_scheduled_gemm_with_shared_tiles_runs_on_opencl():
    s, args = gemm_schedule()
    kernel = tw.build(s, args, target="opencl")
    assert "__local float" in kernel.source and "barrier(CLK_LOCAL_MEM_FENCE" in kernel.source
    run_and_check(args, kernel)
    assert kernel.time(*[np.ones(a.shape, "float32") for a in args], number=1, repeat=2).median > 0


@needs_nvcc
def test_cuda_compiles_without_a_gpu_and_exports(tmp_path):
    s, args = gemm_schedule()
    kernel = tw.build(s, args, target="cuda -arch=sm_90")
    assert "__global__" in kernel.source and "__syncthreads();" in kernel.source
    out = kernel.export(tmp_path / "gemm")
    assert {p.name for p in out.iterdir()} >= {"kernel.cu", "kernel.ptx", "kernel.cubin", "launch.json"}
    if "(preset)" in tw.Target("cuda -arch=sm_90").gpu.name:  # no GPU here: it says so when called
        with pytest.raises(tw.MeasureError, match="cannot run here"):
            kernel(*[np.ones(a.shape, "float32") for a in args])


@needs_opencl
def test_device_candidates_are_measured_in_isolation_with_their_error_kinds():
    tensors = matmul()
    target = tw.Target("opencl")
    backend = backend_for(target)
    good = naive_gpu_schedule(tensors[-1:], target)  # its source has the " + (A[" the wrong render breaks
    with Measurer(tensors[-1:], tensors, target, backend, timeout=30) as m:
        ok, = m.measure([backend.default_schedule(tensors[-1:], target)])
        assert ok.ok and 0 < ok.cost < 1
        m.backend = replace(backend, render=lambda f, t: replace(backend.render(f, t), source="this is not OpenCL"))
        bad, = m.measure([good])
        assert bad.error_kind is ErrorKind.COMPILE and "build failed" in bad.error_msg
        def wrong(f, t):
            module = backend.render(f, t)
            return replace(module, source=module.source.replace(" + (A[", " - (A["))
        m.backend = replace(backend, render=wrong)
        wrong_result, = m.measure([good])
        assert wrong_result.error_kind is ErrorKind.WRONG_RESULT
        def rewrite(old, new):
            return replace(backend, render=lambda f, t: replace(backend.render(f, t),
                                                                source=backend.render(f, t).source.replace(old, new)))
        m.backend = rewrite("matmul[", "matmul[1000000000 + ")  # far outside the buffer: the runner dies
        crashed, = m.measure([good])
        assert crashed.error_kind in (ErrorKind.RUNTIME, ErrorKind.WRONG_RESULT)
        m.backend = backend
        again, = m.measure([good])  # a failed candidate never poisons the next one
        assert again.ok
        m.timeout = 2.0
        m.backend = rewrite("for (int k = 0;", "for (volatile int spin = 1; spin;) {} for (int k = 0;")
        hung, = m.measure([good])
        assert hung.error_kind is ErrorKind.TIMEOUT
        m.backend = backend
        assert m.measure([good])[0].ok


@needs_opencl
def test_gpu_targets_refuse_what_they_cannot_do():
    target = tw.Target("opencl")
    with pytest.raises(tw.TilewrightError, match="no schedule space"):  # a kind plugged in without a space
        replace(backend_for(target), space=None).require_space()
    A, B, C = matmul()
    s = tw.create_schedule(C)
    with pytest.raises(tw.LoweringError, match="bound"):
        tw.build(s, [A, B, C], target=target)  # nothing bound: it would run on one thread
    small = replace(target, gpu=replace(target.gpu, max_threads_per_block=64))
    s = tw.create_schedule(C)
    io, ii = s[C].split(C.op.axis[0], factor=16)
    s[C].bind(io, tw.thread_axis("blockIdx.x"))
    s[C].bind(ii, tw.thread_axis("threadIdx.y"))
    s[C].bind(C.op.axis[1], tw.thread_axis("threadIdx.x"))
    with pytest.raises(tw.TilewrightError, match="640|threads"):
        tw.build(s, [A, B, C], target=small)  # 16 x 40 threads per block > 64


def test_target_strings_and_fingerprints():
    with pytest.raises(tw.TilewrightError, match="unknown target option"):
        tw.Target("cuda -isa=avx2")
    with pytest.raises(tw.TilewrightError, match="unknown target"):
        tw.Target("tpu")
    preset = tw.Target("cuda -arch=sm_80") if shutil.which("nvcc") else None
    if preset is not None and "(preset)" in preset.gpu.name:
        assert preset.key.startswith("cuda-") and "sm_80" in preset.key
        assert preset.key != tw.Target("cuda -arch=sm_90").key


@needs_opencl
def test_bfloat16_candidates_are_measured_and_checked_as_numbers():
    """The measurer stores bfloat16 as its uint16 bits; the device runner takes them as such and compares values."""
    A = tw.placeholder((32, 16), "bfloat16", name="A")
    B = tw.placeholder((16, 24), "bfloat16", name="B")
    k = tw.reduce_axis(16, name="k")
    C = tw.compute((32, 24), lambda i, j: tw.sum(A[i, k].astype("float32") * B[k, j].astype("float32"), axis=k),
                   name="C")
    D = tw.compute((32, 24), lambda i, j: C[i, j].astype("bfloat16"), name="D")
    target = tw.Target("opencl")
    backend = backend_for(target)
    with Measurer([D], [A, B, D], target, backend, timeout=30) as m:
        r, = m.measure([backend.default_schedule([D], target)])
    assert r.ok, r.error_msg


def test_bfloat16_outputs_are_compared_as_values_not_bits():
    from tilewright.runtime.runner import check_outputs

    def bits(x):
        return (np.array(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)

    # 2.0 against 1.0 is 0x4000 against 0x3f80: under 1% apart as integers, a factor of two as numbers
    assert "max abs error 1" in check_outputs([bits([2.0])], [bits([1.0])], [5e-2], ["bfloat16"])
    assert check_outputs([bits([1.0078125])], [bits([1.0])], [5e-2], ["bfloat16"]) is None


@needs_nvcc
def test_a_program_the_gpu_space_cannot_place_gets_the_fallback_schedule():
    """45 elements: no thread count of the space fills 75% of its warps, so the space is empty; the build
    falls back to one thread per element instead of failing."""
    x = tw.placeholder((1, 5, 3, 3), "float32", name="x")
    kernel = tw.build([x, tw.ops.relu(x)], target="cuda -arch=sm_90")
    assert kernel.module.kernels[0].block == (45, 1, 1)


@needs_opencl
def test_opencl_artefacts_name_their_platform_and_device(tmp_path):
    import json

    from tilewright.build.device_artefact import compile_opencl_artefact

    tensors = matmul()
    target = tw.Target("opencl -platform=0 -device=0")
    backend = backend_for(target)
    module = backend.render(backend.lower(naive_gpu_schedule(tensors[-1:], target), tensors, "k", target), target)
    artefact = compile_opencl_artefact(module, target)
    desc = json.loads((artefact.path / "launch.json").read_text())
    assert (desc["platform"], desc["device"]) == (0, 0)
    with pytest.raises(tw.TilewrightError, match="no OpenCL device"):
        tw.Target("opencl -device=7")

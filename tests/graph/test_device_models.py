"""Whole models on GPUs (graph/device_*.py): compiled with `tw.compile(..., target="opencl" | "cuda")`
and checked against PyTorch or the NumPy reference. OpenCL runs on PoCL's CPU device in CI; CUDA is
compile-only without a GPU (every kernel built, the module says why it cannot run); the tests that need
a CUDA GPU are written here and skipped without one.

TW_DEVICE_MODELS picks the in-tree models run end to end (default "resnet18,bert_layer": each model
costs PoCL 20-60 s from a cold cache on two cores); "all" runs all six and also compiles every kernel
of each for sm_90 and sm_80 in float32 and float16."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from graph_cases import (
    Builder,
    attention,
    conv_bias_relu,
    dense_gelu,
    passthrough,
    random_inputs,
    residual_block,
    slices_and_concat,
)

import tilewright as tw
from tilewright.build.nvcc import compiler_available
from tilewright.build.opencl import opencl_available
from tilewright.errors import BuildError, MeasureError, ShapeError, TilewrightError
from tilewright.graph.reference import run_reference
from tilewright.targets.gpu import detect_cuda

torch = pytest.importorskip("torch")

from tilewright.models import MODELS  # noqa: E402

NO_OPENCL = opencl_available()
NO_NVCC = compiler_available() is None


def _detected():
    """This machine's CUDA GPU for choosing what to compile for (a broken driver reads as none here; the
    tests that run on the GPU take the `cuda_gpu` fixture, which fails on one)."""
    try:
        return detect_cuda()
    except TilewrightError:
        return None


GPU = _detected()
_PICK = os.environ.get("TW_DEVICE_MODELS", "resnet18,bert_layer")
PICKED = sorted(MODELS) if _PICK == "all" else [m for m in _PICK.split(",") if m]
ALL = _PICK == "all"

needs_opencl = pytest.mark.skipif(NO_OPENCL is not None, reason=f"no OpenCL: {NO_OPENCL}")
needs_nvcc = pytest.mark.skipif(NO_NVCC, reason="no CUDA compiler: nvcc is not on PATH and NVRTC cannot be loaded")
needs_torch_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="this torch has no CUDA (or no GPU)")
CUDA_ARCH = GPU.arch if GPU is not None else "sm_90"


def _compile(model, target, tmp, example=None, dtype="float32"):
    return tw.compile(model, example, target=target, records=tmp / "r.db", progress=False, dtype=dtype)


def _close(got, want, dtype="float32"):
    got = np.asarray(got, dtype=np.float32)
    scale = max(1.0, float(np.max(np.abs(want))))
    tol = 1e-4 if dtype == "float32" else 1e-2  # float16 storage: ~5e-4 per rounding, over some 20 layers
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale)
    return float(np.max(np.abs(got - want)))


def odd_views():
    """Slices and an in-place concat at byte offsets no device can address (36, 180, 108 bytes):
    those views get buffers of their own and device copies."""
    return slices_and_concat("odd_views", (1, 7, 3, 3), (1, 6), (3, 6))


def scalar_mean():
    b = Builder("scalar_mean")
    x = b.input("x", (2, 3))
    b.op("mean", [x], "m", (), axes=(0, 1), keepdims=False)
    return b.graph("m")


# --- OpenCL on PoCL ---

@pytest.fixture(scope="module")
def conv_module(tmp_path_factory):
    if NO_OPENCL is not None:
        pytest.skip(f"no OpenCL: {NO_OPENCL}")
    g = conv_bias_relu()
    return g, _compile(g, "opencl", tmp_path_factory.mktemp("conv"))


@needs_opencl
@pytest.mark.parametrize("make", [dense_gelu] + ([attention, residual_block] if ALL else []))
def test_graphs_match_pytorch_on_opencl(make, tmp_path):
    from graph_cases import torch_reference

    g = make()
    module = _compile(g, "opencl", tmp_path)
    inputs = random_inputs(g)
    _close(module(*inputs), torch_reference(g, inputs)[0])
    assert len(module.steps) == len(module.partition.groups) - sum(grp.is_view for grp in module.partition.groups)


@needs_opencl
def test_views_at_unaddressable_offsets_get_their_own_buffers(tmp_path):
    from tilewright.graph.device_plan import CopyStep

    g = odd_views()
    module = _compile(g, "opencl", tmp_path)
    inputs = random_inputs(g)
    np.testing.assert_allclose(module(*inputs), run_reference(g, inputs)[0], rtol=1e-6)
    assert set(module.plan.own) == {"xs", "c", "s"}  # 'a' starts the concat: offset 0
    kinds = [type(s).__name__ for s in module.plan.steps]
    assert kinds.count("CopyStep") == 3 and kinds.count("Launch") == 3
    copy_out = [s for s in module.plan.steps if isinstance(s, CopyStep) and s.src.where == "own"]
    assert [s.src.name for s in copy_out] == ["c"]  # written by its kernel, then copied into the concat


@needs_opencl
def test_outputs_that_are_views_inputs_or_read_later(tmp_path):
    g = passthrough()
    module = _compile(g, "opencl", tmp_path)
    inputs = random_inputs(g)
    for a, b in zip(module(*inputs), run_reference(g, inputs)):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert [i for i, _ in module.plan.finals] == [0, 1]  # the view and the input are copied out


@needs_opencl
def test_device_arrays_in_place_and_errors(conv_module):
    import pyopencl.array as cl_array

    g, module = conv_module
    x = random_inputs(g)[0]
    want = run_reference(g, [x])[0]
    dev = cl_array.to_device(module.memory.queue, x)
    out = module(dev)
    assert isinstance(out, cl_array.Array) and out.shape == want.shape
    np.testing.assert_allclose(out.get(), want, rtol=1e-5, atol=1e-5)
    x2 = random_inputs(g, seed=5)[0]
    np.testing.assert_allclose(module(cl_array.to_device(module.memory.queue, x2)).get(), run_reference(g, [x2])[0],
                               rtol=1e-5, atol=1e-5)  # new buffers: the launches are repointed
    np.testing.assert_allclose(module(x), want, rtol=1e-5, atol=1e-5)  # and back to NumPy
    import pyopencl as cl

    buf = module(dev.base_data)  # a raw Buffer in: a raw Buffer out
    host = np.empty_like(want)
    cl.enqueue_copy(module.memory.queue, host, buf)
    np.testing.assert_allclose(host, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ShapeError, match="OpenCL buffer of 16 bytes; it must hold float32"):
        module(cl.Buffer(module.memory.context, cl.mem_flags.READ_WRITE, 16))
    with pytest.raises(ShapeError, match=r"input 'x' has shape \[1, 3, 8\], expected \[1, 3, 8, 8\]"):
        module(x[..., 0])
    with pytest.raises(ShapeError, match="input 'x' has dtype float64, expected float32"):
        module(x.astype(np.float64))
    with pytest.raises(ShapeError, match="takes 1 inputs"):
        module(x, x)
    with pytest.raises(MeasureError, match="torch tensor on the cpu.*x.numpy()"):
        module(torch.from_numpy(x))


@needs_opencl
def test_time_summary_export_and_load(conv_module, tmp_path):
    from tilewright.graph.device_export import load_gpu_module

    g, module = conv_module
    x = random_inputs(g)[0]
    assert 0 < module.time(x, number=2, repeat=2) < 1.0
    text = module.summary(x)
    assert "conv2d+relu" in text and "whole model" in text and "arena" in text
    module.export(tmp_path / "m")
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["kernels", "model.json", "weights.bin"]
    again = load_gpu_module(tmp_path / "m")
    np.testing.assert_allclose(again(x), run_reference(g, [x])[0], rtol=1e-5, atol=1e-5)


@needs_opencl
@pytest.mark.parametrize("name", PICKED)
def test_model_matches_pytorch_on_opencl(name, tmp_path):
    spec = MODELS[name]
    model, x = spec.build(reduced=True), spec.example_input(reduced=True)
    module = _compile(model, "opencl", tmp_path, (x,))
    with torch.no_grad():
        want = model(x).numpy()
    err = _close(module(x.numpy()), want)
    print(f"{name} opencl float32: {len(module.steps)} kernels, max error {err:.2e}")


@needs_opencl
@pytest.mark.parametrize("name", PICKED)
def test_float16_models_match_pytorch_on_opencl(name, tmp_path):
    """float16 is storage only on OpenCL (vload_half / vstore_half_rte): it runs on PoCL's CPU device too."""
    spec = MODELS[name]
    model, x = spec.build(reduced=True), spec.example_input(reduced=True)
    module = _compile(model, "opencl", tmp_path, (x,), dtype="float16")
    with torch.no_grad():
        want = model(x).numpy()
    got = module(x.numpy().astype(np.float16))
    assert got.dtype == np.float16
    err = _close(got, want, "float16")
    print(f"{name} opencl float16: {len(module.steps)} kernels, max error {err:.2e}")


@needs_opencl
def test_compile_errors_name_the_group_and_the_way_out(tmp_path):
    with pytest.raises(BuildError, match=r"group 'g0_mean' \(ops: mean\) does not build for opencl.*0-d output.*"
                                         r"target='cpu'"):
        _compile(scalar_mean(), "opencl", tmp_path)
    with pytest.raises(ShapeError, match="layout 'NCHWc' is for CPUs"):
        tw.compile(conv_bias_relu(), target="opencl", layout="NCHWc", records=tmp_path / "r.db")
    with pytest.raises(ShapeError, match="dtype 'bfloat16' is not supported"):
        tw.compile(conv_bias_relu(), target="opencl", dtype="bfloat16", records=tmp_path / "r.db")


def test_float16_is_for_gpu_targets(tmp_path):
    with pytest.raises(ShapeError, match="dtype 'float16' is for GPU targets"):
        tw.compile(conv_bias_relu(), target="cpu", dtype="float16", records=tmp_path / "r.db")


# --- float16 programs: float32 accumulation ---

@needs_opencl
def test_half_programs_accumulate_in_float32():
    from tilewright.graph.half_precision import half_program
    from tilewright.graph.lower_te import GroupProgram

    k = 4096  # float16 sums of ones stall at 2048 (2048 + 1 rounds to 2048); float32 reaches 4096
    x = tw.placeholder((1, k), "float32", name="x")
    w = tw.placeholder((2, k), "float32", name="w")
    r = tw.reduce_axis(k, "r")
    y = tw.compute((1, 2), lambda i, j: tw.sum(x[i, r] * w[j, r], axis=r), name="y")
    h = half_program(GroupProgram("dense", (x, w, y), ("x", "w"), ("y",)))
    assert [t.dtype.name for t in h.args] == ["float16", "float16", "float16"]
    kernel = tw.build(list(h.args), target="opencl")
    out = np.zeros((1, 2), np.float16)
    kernel(np.ones((1, k), np.float16), np.ones((2, k), np.float16), out)
    assert out.tolist() == [[4096.0, 4096.0]]


# --- CUDA without a GPU: compile-only ---

@needs_nvcc
@pytest.mark.parametrize("make,dtype", [(conv_bias_relu, "float32"), (attention, "float16")])
def test_cuda_builds_every_kernel_and_says_it_cannot_run_here(make, dtype, tmp_path):
    from tilewright.graph.device_export import load_gpu_module

    g = make()
    module = _compile(g, f"cuda -arch={CUDA_ARCH}", tmp_path, dtype=dtype)
    sources = [k.source for k in module.kernels.values()]
    assert len(module.steps) == sum(t.weight for t in module.tasks) and all("__global__" in s for s in sources)
    assert all(("__half" in s) == (dtype == "float16") for s in sources)
    assert module.input_types[0].dtype == dtype
    x = random_inputs(g)[0].astype(dtype)
    with pytest.raises(MeasureError, match="torch tensor on the cpu.*x.cuda()"):
        module(torch.from_numpy(x))
    with pytest.raises(ShapeError, match="has shape"):
        module(x[0])
    module.export(tmp_path / "m")
    assert {p.name for p in (tmp_path / "m" / "kernels" / "k0").iterdir()} >= {"kernel.cu", "kernel.ptx",
                                                                               "launch.json"}
    again = load_gpu_module(tmp_path / "m")
    assert len(again.steps) == len(module.steps)
    if GPU is None:
        with pytest.raises(MeasureError, match="cannot run here"):
            module(x)
        assert "cannot run here" in module.summary() and "cannot run here" in again.summary()
        with pytest.raises(MeasureError, match="cannot run here"):
            again(x)
    else:
        np.testing.assert_allclose(again(x).astype(np.float32), module(x).astype(np.float32))


@needs_nvcc
def test_cuda_input_checks_read_the_cuda_array_interface(tmp_path):
    g = conv_bias_relu()
    module = _compile(g, "cuda -arch=sm_80", tmp_path)

    class FakeCudaArray:  # what a CuPy array or a torch CUDA tensor shows of itself
        def __init__(self, shape, typestr):
            self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (256, False), "version": 3}

    with pytest.raises(ShapeError, match=r"input 'x' has shape \[1, 3, 8\], expected \[1, 3, 8, 8\]"):
        module(FakeCudaArray((1, 3, 8), "<f4"))
    with pytest.raises(ShapeError, match=r"input 'x' has dtype float16, expected float32 \(cast it with .float\(\)\)"):
        module(FakeCudaArray((1, 3, 8, 8), "<f2"))


@pytest.mark.skipif(NO_NVCC or not ALL, reason="TW_DEVICE_MODELS=all compiles every model for two archs and dtypes "
                                               "(about 8 minutes); nvcc needed")
@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_model_kernel_compiles_for_sm90_and_sm80(name, tmp_path):
    spec = MODELS[name]
    model, x = spec.build(reduced=True), spec.example_input(reduced=True)
    for arch in ("sm_90", "sm_80"):
        for dtype in ("float32", "float16"):
            module = _compile(model, f"cuda -arch={arch}", tmp_path, (x,), dtype=dtype)
            assert all(k.module.kernels for k in module.kernels.values())


# --- CUDA on a GPU ---

@pytest.mark.parametrize("name", PICKED)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_model_matches_pytorch_on_cuda(name, dtype, tmp_path, cuda_gpu):
    spec = MODELS[name]
    model, x = spec.build(reduced=True), spec.example_input(reduced=True)
    module = _compile(model, "cuda", tmp_path, (x,), dtype=dtype)
    with torch.no_grad():
        want = model(x).numpy()
    xin = x.numpy().astype(dtype)
    err = _close(module(xin), want, dtype)
    module.cuda_graph = False  # launches queued from Python: the same result
    _close(module(xin), want, dtype)
    assert module.time(xin, number=3, repeat=2) > 0
    print(f"{name} cuda {dtype}: {len(module.steps)} kernels, max error {err:.2e}")


@needs_torch_cuda
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_torch_cuda_tensors_in_place(dtype, tmp_path, cuda_gpu):
    spec = MODELS["resnet18"]
    model, x = spec.build(reduced=True), spec.example_input(reduced=True)
    module = _compile(model, "cuda", tmp_path, (x,), dtype=dtype)
    with torch.no_grad():
        want = model(x).numpy()
    tdtype = getattr(torch, dtype)
    for seed in (0, 1):  # new tensors each call: the CUDA graph is captured again for their pointers
        xc = (x if seed == 0 else x.clone()).to("cuda", tdtype)
        out = module(xc)
        assert isinstance(out, torch.Tensor) and out.is_cuda and out.dtype == tdtype
        _close(out.float().cpu().numpy(), want, dtype)
    with pytest.raises(MeasureError, match="torch tensor on the cpu"):
        module(x.to(tdtype))
    assert module.time(x.to("cuda", tdtype), number=3, repeat=2) > 0
    assert "CUDA graph" in module.summary(x.to("cuda", tdtype))


def test_views_and_graph_cases_on_cuda(tmp_path, cuda_gpu):
    from graph_cases import torch_reference

    for g in (odd_views(), passthrough()):
        module = _compile(g, "cuda", tmp_path)
        inputs = random_inputs(g)
        got = module(*inputs)
        for a, b in zip(got if isinstance(got, list) else [got], run_reference(g, inputs)):
            np.testing.assert_allclose(a, b, rtol=1e-6)
    g = attention()
    module = _compile(g, "cuda", tmp_path)
    inputs = random_inputs(g)
    _close(module(*inputs), torch_reference(g, inputs)[0])


# --- CUDA's host side against the driver double of tests/runtime (real cuda-bindings, kernels not run) ---

@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory) -> Path:
    pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is not installed")
    if NO_NVCC:
        pytest.skip("no CUDA compiler: nvcc is not on PATH and NVRTC cannot be loaded")
    from fake_cuda import build_fake_driver

    return build_fake_driver(tmp_path_factory.mktemp("fake_cuda"))


FAKE_MODEL = """
import json, sys
import numpy as np
import tilewright as tw
import tilewright.graph.device_export
from graph_cases import attention, random_inputs
from test_device_models import odd_views
out = {}
for make, dtype in ((odd_views, "float32"), (attention, "float16")):
    g = make()
    m = tw.compile(g, target="cuda", dtype=dtype, records="r.db", progress=False)
    x = [a.astype(dtype) for a in random_inputs(g)]
    first, second = m(*x), m(*x)
    m.cuda_graph = False
    eager = m(*x)
    out[g.name] = {"shape": list(first.shape), "dtype": str(second.dtype), "time": m.time(*x, number=2, repeat=1),
                   "summary": m.summary(*x), "copies": len(m.plan.own), "launches": len(m.steps)}
    m.export("exported")
    out[g.name]["reloaded"] = list(tw.graph.device_export.load_gpu_module("exported")(*x).shape)
print(json.dumps(out))
"""


def test_cuda_module_host_side_under_the_driver_double(fake_driver, tmp_path):
    from fake_cuda import fake_env

    log = tmp_path / "driver.log"
    env = fake_env(fake_driver, log, tmp_path / "cache", extra_path=(Path(__file__).parent,))
    proc = subprocess.run([sys.executable, "-c", FAKE_MODEL], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    lines = log.read_text().splitlines()
    views, att = got["odd_views"], got["attention"]
    assert views["shape"] == [1, 3, 3, 3] and views["copies"] == 3 and att["dtype"] == "float16"
    assert "one CUDA graph launch" not in views["summary"]  # cuda_graph was turned off before the summary
    assert views["time"] > 0 and views["reloaded"] == [1, 3, 3, 3] and att["reloaded"] == [1, 4, 8]
    # each model: captured once for its two NumPy calls (the same staging buffers) and replayed twice, its
    # reloaded export captured and replayed once; the eager call, timing and summary queue launches directly
    assert sum(x.startswith("capture-begin") for x in lines) == 4
    assert sum(x.startswith("graph-launch") for x in lines) == 6

"""The GPU schedule space (issue 16): golden default points on device presets (no GPU is read),
every default and sampled point within the device's limits and lowerable, the defaults compiled by
nvcc, and points of many operators run on OpenCL (PoCL's CPU device in CI) and checked against the
NumPy reference; a tuning smoke run on OpenCL.

Regenerate the golden file after an intended change to the GPU default model with
    UPDATE_GOLDEN=1 .venv/bin/pytest tests/space/test_gpu_space.py
and review the diff of golden/gpu_default_points.json."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import tilewright as tw
from tilewright.backends import backend_for
from tilewright.build.opencl import opencl_available
from tilewright.space.gpu import block_registers, estimated_registers, fits, warp_fill
from tilewright.space.gpu_model import describe, heuristic_points
from tilewright.space.gpu_plan import fetch_region, shared_bytes, threads
from tilewright.workloads.builders import suite_program

GOLDEN = Path(__file__).parent / "golden" / "gpu_default_points.json"
NO_OPENCL = opencl_available()
needs_opencl = pytest.mark.skipif(NO_OPENCL is not None, reason=f"no OpenCL: {NO_OPENCL}")
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


def _amd_like(t: tw.Target) -> tw.Target:
    """A synthetic OpenCL GPU with 64-wide wavefronts, 256-thread work-groups and 64 KiB of local memory."""
    gpu = replace(t.gpu, api="opencl", name="synthetic 64-wide GPU", vendor="synthetic", arch="OpenCL 2.0",
                  compute_capability=None, sm_count=60, max_threads_per_block=256, warp_size=64,
                  shared_mem_per_block=64 * 1024, shared_mem_per_block_optin=64 * 1024, regs_per_thread=0,
                  regs_per_sm=0, max_threads_per_sm=2560, memory_bus_bits=4096, mem_clock_khz=1000000)
    return replace(t, kind="opencl", gpu=gpu)


def _targets() -> dict[str, tw.Target]:
    sm90 = tw.Target("cuda -arch=sm_90")
    sm90 = replace(sm90, gpu=replace(sm90.gpu, compiler_version="pinned", driver_version="pinned"))
    sm80 = tw.Target("cuda -arch=sm_80")
    sm80 = replace(sm80, gpu=replace(sm80.gpu, compiler_version="pinned", driver_version="pinned"))
    return {"sm_90": sm90, "sm_80": sm80, "opencl64": _amd_like(sm90)}


WORKLOADS = {
    "gemm_1024": ("GEMM", "gemm_1024"),
    "yolo_c2": ("C2D", "yolo_conv2"),
    "yolo_c8": ("C2D", "yolo_conv8"),
    "yolo_c13": ("C2D", "yolo_conv21"),
    "depthwise": ("DEP", "mbv2_dw_1"),
    "gemv_1024": ("GEMV", "gemv_1024"),
}


@pytest.fixture(scope="module")
def defaults():
    out = {}
    for tname, t in _targets().items():
        backend = backend_for(t)
        for wname, (op, case) in WORKLOADS.items():
            tensors = suite_program(op, case)
            space, plan = backend.space(tensors[-1:], t)
            out[f"{tname}/{wname}"] = (t, tensors, space, plan, backend.default_point(space, plan))
    return out


def test_gpu_default_points_match_the_golden_file(defaults):
    got = {key: str(p) for key, (*_, p) in defaults.items()}
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        return
    want = json.loads(GOLDEN.read_text())
    changed = [f"{key}\n  golden: {want.get(key)}\n  now:    {got.get(key)}" for key in sorted(set(want) | set(got))
               if want.get(key) != got.get(key)]
    assert not changed, f"{len(changed)} GPU default points changed (UPDATE_GOLDEN=1 to accept):\n" + "\n".join(changed)


def test_defaults_and_samples_respect_the_device_and_lower(defaults):
    rng = random.Random(0)
    for key, (t, tensors, space, plan, default) in defaults.items():
        backend = backend_for(t)
        gpu = t.gpu
        points = [default] + [space.sample(rng) for _ in range(3)]
        for p in points:
            assert fits(plan, p), (key, str(p))
            n = threads(plan, p)
            assert n <= gpu.max_threads_per_block and warp_fill(plan, n) >= 0.75, (key, n, str(p))
            assert shared_bytes(plan, p) <= gpu.shared_mem_per_block, (key, str(p))
            if gpu.regs_per_thread:
                assert estimated_registers(plan, p) <= gpu.regs_per_thread
            if gpu.regs_per_block:
                assert block_registers(plan, p) <= gpu.regs_per_block
            func = backend.lower(backend.apply(tensors[-1:], plan, p), tensors, "k", t)  # device limits checked
            assert func.body is not None
        assert "blocks" in describe(plan, default)


def test_blocks_over_the_register_budget_are_outside_the_space():
    """A block whose threads need more registers than the SM gives one block could not launch (or would spill
    everything past 65536 / threads under its __launch_bounds__): the space leaves such points out."""
    t = _targets()["sm_90"]
    tensors = suite_program(*WORKLOADS["gemm_1024"])
    space, plan = backend_for(t).space(tensors[-1:], t)
    rng = random.Random(1)
    points = [space.sample(rng) for _ in range(60)]
    budget = 16384
    assert any(block_registers(plan, p) > budget for p in points)  # the full budget admits such blocks
    tight = replace(plan, target=replace(t, gpu=replace(t.gpu, regs_per_block=budget)))
    assert not any(fits(tight, p) for p in points if block_registers(tight, p) > budget)


def test_the_default_stages_reused_operands_in_shared_memory(defaults):
    """A GEMM's and a 3x3 conv's operands are reused across the block: the default stages both in
    shared memory, with a register tile of several outputs per thread; and the staged region of a
    GEMM's A is (block rows) x (a reduce chunk)."""
    for tname in _targets():
        for wname in ("gemm_1024", "yolo_c8"):
            t, tensors, space, plan, p = defaults[f"{tname}/{wname}"]
            staged = [k for k in space.knobs if k.startswith("shared.") and p[k] != 0]
            assert len(staged) == 2, (tname, wname, str(p))
            acc = math.prod(v[1] * v[3] for k, v in p.values if k.startswith("split.") and len(v) == 4)
            assert acc >= 4, (tname, wname, str(p))
        t, tensors, space, plan, p = defaults[f"{tname}/gemm_1024"]
        rows = p["split.i"][1] * p["split.i"][2] * p["split.i"][3]
        level = "outer" if p["shared.A"] == 1 else "middle"
        chunk = p["split.k"][1] * p["split.k"][2] if level == "outer" else p["split.k"][2]
        assert fetch_region(plan, p, tensors[0], level) == (rows, chunk)


def test_heuristic_points_are_distinct_and_start_with_the_default(defaults):
    t, tensors, space, plan, p = defaults["sm_90/yolo_c2"]
    pts = heuristic_points(space, plan, k=6)
    assert pts[0] == p and len(set(pts)) == 6 and all(space.valid(q) for q in pts)


def test_a_rounded_axis_never_feeds_a_staged_fetch():
    """Rounding 14 up to 16 along a conv's rows would make the cooperative fetch read past the padded
    input (the main node's guard does not cover the copy): such points are outside the space."""
    t = _targets()["sm_90"]
    x = tw.placeholder((1, 8, 14, 14), "float32", name="x")
    w = tw.placeholder((16, 8, 3, 3), "float32", name="w")
    y = tw.ops.conv2d(x, w, padding=1)
    space, plan = backend_for(t).space([y], t)
    p = backend_for(t).default_point(space, plan)
    staged = p.replace("shared.conv2d_pad", 1).replace("split.h", (1, 1, 8, 2))  # 16 > 14
    assert not space.valid(staged)
    assert space.valid(staged.replace("shared.conv2d_pad", 0)) or not fits(plan, staged.replace("shared.conv2d_pad", 0))


def test_a_gemv_shares_each_reduction_across_threads(defaults):
    """4096 outputs cannot fill an H100 one thread each: the default splits each row's reduction over
    several threads, neighbouring threads reading neighbouring elements of the row."""
    for tname in ("sm_90", "sm_80"):
        t, tensors, space, plan, p = defaults[f"{tname}/gemv_1024"]
        assert p["cross"] > 0, (tname, str(p))
        assert "reductions over" in describe(plan, p)


@needs_opencl
@pytest.mark.parametrize("cross", [1, 3])
def test_shared_reductions_run_correctly_on_opencl(cross):
    """Rows of threads, each row reducing one output over `cross`-option threads with a tree; the
    reduction's length (97) not a multiple of the threads; a bilinear form's two reduce loops."""
    a = tw.placeholder((20, 97), "float32", name="a")
    v = tw.placeholder((97,), "float32", name="v")
    k = tw.reduce_axis(97, name="k")
    gemv = [a, v, tw.compute((20,), lambda i: tw.sum(a[i, k] * v[k], axis=k), name="y")]
    x1 = tw.placeholder((3, 12), "float32", name="x1")
    x2 = tw.placeholder((3, 10), "float32", name="x2")
    w = tw.placeholder((5, 12, 10), "float32", name="w")
    k1, k2 = tw.reduce_axis(12, name="k1"), tw.reduce_axis(10, name="k2")
    bil = [x1, x2, w, tw.compute((3, 5), lambda b, m: tw.sum(x1[b, k1] * w[m, k1, k2] * x2[b, k2], axis=[k1, k2]),
                                 name="bil")]
    t = tw.Target("opencl")
    backend = backend_for(t)
    for tensors in (gemv, bil):
        space, plan = backend.space(tensors[-1:], t)
        p = backend.default_point(space, plan).replace("cross", min(cross, len(space.knobs["cross"].options) - 1))
        first = next(k for k in space.knobs.values() if getattr(k, "parts", 0) == 4)
        p = p.replace(first.name, (1, 1, first.extent, 1))  # every row of the first loop in one block
        assert space.valid(p), str(p)
        kernel = backend.build(backend.apply(tensors[-1:], plan, p), tensors, t)
        ins = [np.random.default_rng(0).standard_normal(x.shape).astype("float32") for x in tensors[:-1]]
        out = np.full(tensors[-1].shape, np.nan, "float32")
        kernel(*ins, out)
        want = tw.evaluate(tensors[-1], dict(zip(tensors[:-1], ins)))
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=str(p))


@needs_nvcc
def test_cuda_defaults_compile_with_nvcc(defaults):
    for key in ("sm_90/gemm_1024", "sm_90/yolo_c8", "sm_80/depthwise"):
        t, tensors, space, plan, p = defaults[key]
        backend = backend_for(t)
        kernel = backend.build(backend.apply(tensors[-1:], plan, p), tensors, t)
        assert "__shared__" in kernel.source and "__syncthreads" in kernel.source, key
        binary = getattr(kernel, "binary", None) or kernel  # UnrunnableKernel without a GPU
        if hasattr(binary, "spills"):
            assert binary.spills == 0, (key, binary.resources)


def _programs():
    def conv_bias_relu():
        x = tw.placeholder((1, 6, 9, 9), "float32", name="x")
        w = tw.placeholder((8, 6, 3, 3), "float32", name="w")
        b = tw.placeholder((8,), "float32", name="b")
        return [x, w, b, tw.ops.relu(tw.ops.conv2d(x, w, b, padding=1))]

    def matmul_odd():
        a = tw.placeholder((50, 29), "float32", name="a")
        b = tw.placeholder((29, 37), "float32", name="b")
        return [a, b, tw.ops.matmul(a, b)]

    def depthwise_stride2():
        x = tw.placeholder((1, 8, 12, 12), "float32", name="x")
        w = tw.placeholder((8, 1, 3, 3), "float32", name="w")
        return [x, w, tw.ops.depthwise_conv2d(x, w, stride=2, padding=1)]

    def grouped_dilated():
        x = tw.placeholder((1, 8, 10, 10), "float32", name="x")
        w = tw.placeholder((8, 2, 3, 3), "float32", name="w")
        return [x, w, tw.ops.conv2d(x, w, padding=2, dilation=2, groups=4)]

    def transpose2d():
        x = tw.placeholder((1, 4, 5, 5), "float32", name="x")
        w = tw.placeholder((4, 3, 3, 3), "float32", name="w")
        return [x, w, tw.ops.conv_transpose2d(x, w, stride=2, padding=1)]

    def gemv():
        a = tw.placeholder((64, 96), "float32", name="a")
        v = tw.placeholder((96,), "float32", name="v")
        k = tw.reduce_axis(96, name="k")
        return [a, v, tw.compute((64,), lambda i: tw.sum(a[i, k] * v[k], axis=k), name="y")]

    def elementwise():
        a = tw.placeholder((33, 20), "float32", name="a")
        b = tw.placeholder((33, 20), "float32", name="b")
        return [a, b, tw.compute((33, 20), lambda i, j: tw.exp(a[i, j]) * b[i, j] + 1.0, name="e")]

    return [conv_bias_relu, matmul_odd, depthwise_stride2, grouped_dilated, transpose2d, gemv, elementwise]


@needs_opencl
@pytest.mark.parametrize("make", _programs(), ids=lambda f: f.__name__)
def test_points_run_correctly_on_opencl(make):
    """The default, the model's next point and random points of each program, run on the OpenCL device
    and compared with the reference: guarded round-ups, strided and dilated windows, groups, transposed
    convolutions, epilogues and programs without a reduction."""
    tensors = make()
    t = tw.Target("opencl")
    backend = backend_for(t)
    space, plan = backend.space(tensors[-1:], t)
    rng = random.Random(1)
    points = heuristic_points(space, plan, k=2) + [space.sample(rng) for _ in range(3)]
    data = np.random.default_rng(0)
    ins = [data.standard_normal(x.shape).astype("float32") for x in tensors[:-1]]
    want = tw.evaluate(tensors[-1], dict(zip(tensors[:-1], ins)))
    for p in points:
        kernel = backend.build(backend.apply(tensors[-1:], plan, p), tensors, t)
        out = np.full(tensors[-1].shape, np.nan, "float32")
        kernel(*ins, out)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=str(p))


@needs_opencl
def test_tuning_on_opencl_measures_checks_and_records(tmp_path):
    a = tw.placeholder((64, 48), "float32", name="a")
    b = tw.placeholder((48, 40), "float32", name="b")
    c = tw.ops.matmul(a, b)
    db = tmp_path / "records.db"
    result = tw.tune([a, b, c], target="opencl", trials=6, records=db, progress=False)
    assert len(result.history) == 6 and not result.errors
    assert math.isfinite(result.best_cost) and result.best_cost <= result.default_cost * 1.5
    kernel = result.build()
    x = np.random.default_rng(0).standard_normal((64, 48)).astype("float32")
    y = np.random.default_rng(1).standard_normal((48, 40)).astype("float32")
    out = np.zeros((64, 40), "float32")
    kernel(x, y, out)
    np.testing.assert_allclose(out, x @ y, rtol=1e-4, atol=1e-4)
    again = tw.tune([a, b, c], target="opencl", trials=6, records=db, progress=False)  # known points not re-measured
    assert {str(t.point) for t in again.history}.isdisjoint({str(t.point) for t in result.history})

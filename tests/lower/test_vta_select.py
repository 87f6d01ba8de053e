"""te schedules on the VTA-like accelerator: scopes from cache_read / set_scope, padding copies as DMA
padding, the tensorized block multiply as GEMM micro-op loops, the epilogue on the ALU, virtual threads
through lower/vthreads.py; bit-exact in the dependence-checked simulator against the reference."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilewright as tw
from tilewright.errors import LoweringError, ScheduleError
from tilewright.reference import evaluate
from tilewright.targets.vta import VTAConfig

_spec = importlib.util.spec_from_file_location(
    "vta_lesson", Path(__file__).resolve().parents[2] / "examples" / "05_conv_on_vta.py")
_lesson = importlib.util.module_from_spec(_spec)  # the schedule lesson 5 teaches
_spec.loader.exec_module(_lesson)


def conv_schedule(cfg=VTAConfig(), **kw):  # noqa: B008 - frozen configuration
    return _lesson.conv_schedule(cfg, **kw)


def run(s, args, target="vta", seed=0):
    kernel = tw.build(s, args, target=target)
    rng = np.random.default_rng(seed)
    arrays = [rng.integers(-128, 128, t.shape, dtype=np.int8) if t.dtype.name == "int8"
              else rng.integers(-99, 99, t.shape, dtype=np.int32) for t in args[:-1]]
    out = np.zeros(args[-1].shape, np.int8)
    kernel(*arrays, out)
    np.testing.assert_array_equal(out, evaluate([args[-1]], dict(zip(args[:-1], arrays)))[0])
    return kernel


@pytest.mark.parametrize("kw", [
    dict(), dict(vthreads=2), dict(bias=False), dict(k=1, stride=2, h=14, tile_h=7), dict(stride=2, h=14, tile_h=7),
    dict(vthreads=2, o=4, tile_o=1, tile_h=14), dict(c=1, o=2, tile_o=1, h=8, tile_h=4, vthreads=2),
])
def test_tutorial_schedules_are_bit_exact(kw):
    kernel = run(*conv_schedule(**kw))
    s = kernel.stats()
    assert s.gemm_uops > 0 and s.cycles > 0
    assert "GEMM" in kernel.source and "LOAD  INP" in kernel.source


def test_virtual_threads_interleave_and_hide_latency():
    one = run(*conv_schedule(vthreads=1))
    two = run(*conv_schedule(vthreads=2))
    assert two.stats().cycles < one.stats().cycles
    assert two.stats().gemm_uops == one.stats().gemm_uops
    gemms = [n for n, line in enumerate(two.source.splitlines()) if "GEMM  uop" in line]
    assert gemms[1] == gemms[0] + 1  # the two threads' GEMMs follow each other: round-robin


def test_block_8x8x8():
    cfg = VTAConfig(batch=8, block_in=8, block_out=8)
    run(*conv_schedule(cfg=cfg, h=6, c=2, o=4, tile_o=2, tile_h=3), target="vta -block=8x8x8")


def test_what_the_accelerator_cannot_take_is_named():
    with pytest.raises(ScheduleError, match=r"vta\.acc' overflows at 'conv2d_blocked'.*bytes over"):
        tw.build(*conv_schedule(h=56, c=4, o=64, tile_o=64, tile_h=56), target="vta")
    with pytest.raises(LoweringError, match="tensorize the block axis with"):
        tw.build(*conv_schedule(tensorize=False), target="vta")
    with pytest.raises(LoweringError, match="scope 'global'"):
        tw.build(*conv_schedule(scope_out="global"), target="vta")
    with pytest.raises(tw.TilewrightError, match=r"VTA accelerator's scratchpads.*target='vta'"):
        tw.build(*conv_schedule(tensorize=False), target="cpu")
    x = tw.placeholder((1, 1, 1, 16), "int32", "x")
    y = tw.te.compute((1, 1, 1, 16), lambda *i: x[i] * 3, name="y")
    s = tw.create_schedule(y)
    with pytest.raises(LoweringError):
        tw.build(s, [x, y], target="vta")


@pytest.mark.parametrize("vthreads", [1, 2])
def test_schedule_and_tiling_lowerings_agree_cycle_for_cycle(vthreads):
    """Two independent lowerings of the same tiling: the te schedule through instruction selection, and
    lower/vta_conv.py's direct one; the same instructions up to order within a step, so the same cycles."""
    from tilewright.bench.vta_resnet import random_inputs
    from tilewright.lower.vta_conv import ConvShape, VTATiling, lower_conv2d
    from tilewright.runtime.vta_kernel import VTAKernel

    cfg = VTAConfig()
    te_kernel = run(*conv_schedule(h=14, c=2, o=4, tile_o=2, tile_h=7, vthreads=vthreads))
    shape = ConvShape(1, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1)
    direct = VTAKernel(lower_conv2d(shape, cfg, VTATiling(7, 14, 2, 1, vthreads, "co")))
    inputs = random_inputs(shape, cfg)
    direct(inputs["data"], inputs["kernel"], inputs["bias"])
    a, b = te_kernel.stats(), direct.stats()
    assert a.cycles == b.cycles
    for k in ("gemm_uops", "alu_uops", "load_bytes_inp", "load_bytes_wgt", "load_bytes_acc", "store_bytes",
              "pad_elements", "load_insns", "store_insns"):
        assert getattr(a, k) == getattr(b, k), k  # micro-op tables may differ by a few entries


@st.composite
def schedules(draw):
    k = draw(st.sampled_from([1, 3]))
    stride = draw(st.sampled_from([1, 2]))
    h = draw(st.integers(4, 9))
    out_h = (h + 2 * (k // 2) - k) // stride + 1
    vthreads = draw(st.sampled_from([1, 2]))
    tile_o = draw(st.sampled_from([1, 2]))
    o = tile_o * vthreads * draw(st.integers(1, 2))
    tile_h = draw(st.sampled_from([d for d in range(1, out_h + 1) if out_h % d == 0]))
    return dict(h=h, c=draw(st.integers(1, 2)), o=o, k=k, stride=stride, vthreads=vthreads, tile_o=tile_o,
                tile_h=tile_h, bias=draw(st.booleans()))


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(schedules())
def test_random_tutorial_schedules_are_bit_exact(kw):
    run(*conv_schedule(**kw))


def test_an_accumulator_feeding_two_epilogues_is_refused():
    """The ALU rewrites the accumulator in place on the way to a store; a second reader would see the
    rewritten values, so the selection refuses it instead of computing a wrong result."""
    from tilewright.ops.blocked_conv import conv2d_blocked, shift_bias_clip

    data = tw.placeholder((1, 1, 4, 4, 1, 16), "int8", "data")
    weight = tw.placeholder((1, 1, 1, 1, 16, 16), "int8", "weight")
    conv = conv2d_blocked(data, weight)
    one, two = shift_bias_clip(conv, shift=8, name="one"), shift_bias_clip(conv, shift=4, name="two")
    s = tw.create_schedule([one, two])
    s.cache_read(data, "vta.inp", [conv])
    s.cache_read(weight, "vta.wgt", [conv])
    s[conv].set_scope("vta.acc")
    s[conv].tensorize(conv.op.axis[4], tw.intrin.vta_gemm(VTAConfig()))
    with pytest.raises(LoweringError, match="one epilogue only"):
        tw.build(s, [data, weight, one, two], target="vta")

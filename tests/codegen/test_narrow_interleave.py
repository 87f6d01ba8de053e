"""Integer narrowing by lane picks, widening by one vpmovzx/vpmovsx, and k-way interleaves of
stride-k scatters (codegen/strided.py): exact against NumPy, and the interleave used where a
relayout's channel block is in the register tile."""

import numpy as np
import pytest
from synthetic_targets import AVX2, host_runs

import tilewright as tw
from tilewright.backends import backend_for

pytestmark = pytest.mark.skipif(not host_runs(AVX2), reason="the host cannot run AVX2 kernels")


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16"])
def test_vector_narrowing_wraps_like_c(dtype):
    x = tw.placeholder((64,), "int32", name="x")
    y = tw.compute((64,), lambda i: x[i].astype(dtype), name="y")
    s = tw.create_schedule(y)
    s[y].vectorize(s[y].split(y.op.axis[0], 8)[1])
    kernel = tw.build(s, [x, y], target=AVX2)
    assert "tw_narrow_" in kernel.source
    a = np.arange(-70000, 70000, 140000 // 64, dtype=np.int32)[:64]
    out = np.zeros(64, dtype)
    kernel(a, out)
    np.testing.assert_array_equal(out, a.astype(dtype))


@pytest.mark.parametrize("src,dst", [("uint8", "int32"), ("int8", "int32"), ("int16", "int32"),
                                     ("uint8", "int16")])
def test_vector_widening_is_one_extension(src, dst):
    lanes = 16 if dst == "int16" else 8
    x = tw.placeholder((64,), src, name="x")
    y = tw.compute((64,), lambda i: x[i].astype(dst) * 3, name="y")
    s = tw.create_schedule(y)
    s[y].vectorize(s[y].split(y.op.axis[0], lanes)[1])
    kernel = tw.build(s, [x, y], target=AVX2)
    assert "_mm256_cvtep" in kernel.source
    info = np.iinfo(src)
    a = np.linspace(info.min, info.max, 64).astype(src)
    out = np.zeros(64, dst)
    kernel(a, out)
    np.testing.assert_array_equal(out, a.astype(dst) * 3)


def test_a_lossless_narrowing_widened_back_is_dropped():
    """requantize then dequantize: int32 clamped to [0, 255], cast to uint8 and back to int32 is the clamp."""
    x = tw.placeholder((64,), "int32", name="x")
    q = tw.compute((64,), lambda i: tw.min(tw.max(x[i], 0), 255).astype("uint8"), name="q")
    y = tw.compute((64,), lambda i: q[i].astype("int32") - 3, name="y")
    s = tw.create_schedule(y)
    s[q].compute_inline()
    s[y].vectorize(s[y].split(y.op.axis[0], 8)[1])
    kernel = tw.build(s, [x, y], target=AVX2)
    assert "tw_narrow_" not in kernel.source and "tw_widen_" not in kernel.source
    a = np.arange(-100, 540, 10, dtype=np.int32)
    out = np.zeros(64, np.int32)
    kernel(a, out)
    np.testing.assert_array_equal(out, np.clip(a, 0, 255) - 3)


@pytest.mark.parametrize("channels,hw_tile", [(8, 16), (12, 8)])
def test_channel_block_relayout_interleaves(channels, hw_tile):
    backend = backend_for(AVX2)
    X = tw.placeholder((1, channels, 8, 8), "uint8", name="X")
    Y = tw.ops.layout_transform(X, "NCHW", "NCHW4c")
    space, plan = backend.space([Y], AVX2)
    point = backend.default_point(space, plan)
    point = point.replace("split.c_inner", (1, 1, 4)).replace("split.hw", (64 // hw_tile, 1, hw_tile))
    point = point.replace("split.c", (channels // 4, 1, 1))
    assert space.valid(point)
    kernel = backend.build(backend.apply([Y], plan, point), [X, Y], AVX2)
    assert "tw_interleave4_" in kernel.source
    x = np.random.default_rng(0).integers(0, 256, X.shape).astype(np.uint8)
    out = np.zeros(Y.shape, np.uint8)
    kernel(x, out)
    np.testing.assert_array_equal(out, x.reshape(1, channels // 4, 4, 8, 8).transpose(0, 1, 3, 4, 2))

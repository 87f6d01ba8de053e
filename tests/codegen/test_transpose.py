"""Transposing copies render as blocks of vector loads, shuffles and vector stores
(codegen/transpose.py), and compute exactly the copy the loops describe."""

import numpy as np
import pytest
from synthetic_targets import AVX2, AVX512, host_runs

import tilewright as tw
from tilewright.targets import as_target


def _transposed(rows, cols, dtype="float32"):
    a = tw.placeholder((rows, cols), dtype, name="a")
    b = tw.compute((cols, rows), lambda i, j: a[j, i], name="b")
    return a, b


@pytest.mark.parametrize("target", ["native", "avx2"])
@pytest.mark.parametrize("rows,cols,dtype,blocked", [
    (32, 48, "float32", True),  # 16 x 16 blocks on AVX-512, 8 x 8 on AVX2
    (24, 40, "int32", True),  # 8 x 8 blocks
    (12, 20, "float32", True),  # 4 x 4 blocks
    (30, 20, "float32", False),  # 30 has no power-of-two factor >= 4: plain loops
    (3, 64, "float32", False),  # a stride below the block edge: plain loops
    (64, 48, "uint8", True),  # 16 x 16 byte blocks
    (24, 8, "uint8", True),  # 8 x 8 byte blocks
    (32, 16, "int16", True),
    (16, 8, "int64", True),
])
def test_transposing_copy_is_blocked_and_exact(target, rows, cols, dtype, blocked):
    t = as_target("cpu") if target == "native" else AVX2
    if not host_runs(t):
        pytest.skip("the host cannot run this ISA")
    a, b = _transposed(rows, cols, dtype)
    k = tw.build(tw.create_schedule(b), [a, b], target=t)
    assert ("tw_transpose_" in k.source) == blocked
    x = (np.arange(rows * cols) * 7 % 1009).reshape(rows, cols).astype(dtype)
    out = np.zeros((cols, rows), dtype)
    k(x, out)
    np.testing.assert_array_equal(out, x.T)


def test_block_edge_follows_the_target_width():
    if not host_runs(AVX2):
        pytest.skip("the host cannot run AVX2")
    a, b = _transposed(32, 32)
    src = tw.build(tw.create_schedule(b), [a, b], target=AVX2).source
    assert "tw_transpose_float32x8" in src and "tw_transpose_float32x16" not in src


@pytest.mark.parametrize("channels,size,kernel,stride", [
    (64, 7, 1, 1),  # weights [O, C] packed as [C, O-block] by a root pack: its parallel loop steps by blocks
    (64, 14, 3, 2),  # [O, C, 3, 3]: input channel, row and column step the source as one run of C x 9
])
def test_a_conv_weight_pack_is_blocked(channels, size, kernel, stride):
    """A conv vectorized along its output channels packs its weights with them innermost: a
    transposing copy, blocked, and the conv checked against the reference. The default is pinned
    to a synthetic 16-lane target (on AVX2 a 1x1 conv this small is vectorized along its pixels)."""
    if not host_runs(AVX512):
        pytest.skip("the host cannot run AVX-512")
    x = tw.placeholder((1, channels, size, size), "float32", name="x")
    w = tw.placeholder((channels, channels, kernel, kernel), "float32", name="w")
    y = tw.ops.conv2d(x, w, padding=kernel // 2, stride=stride)
    k = tw.build([x, w, y], target=AVX512)
    assert "tw_transpose_float32x16" in k.source
    rng = np.random.default_rng(0)
    xa, wa = rng.standard_normal(x.shape).astype("float32"), rng.standard_normal(w.shape).astype("float32")
    out = np.empty(y.shape, "float32")
    k(xa, wa, out)
    np.testing.assert_allclose(out, tw.evaluate(y, {x: xa, w: wa}), rtol=1e-4, atol=1e-4)


def test_loops_that_are_not_one_run_stay_loops():
    a = tw.placeholder((32, 8, 16), "float32", name="a")
    b = tw.compute((16, 8, 32), lambda k, j, i: a[i, j, k], name="b")
    k = tw.build(tw.create_schedule(b), [a, b], target="cpu")
    assert "tw_transpose_" not in k.source
    x = np.arange(32 * 8 * 16, dtype="float32").reshape(32, 8, 16)
    out = np.zeros((16, 8, 32), "float32")
    k(x, out)
    np.testing.assert_array_equal(out, x.transpose(2, 1, 0))


@pytest.mark.parametrize("dtype,block", [("uint8", 4), ("uint8", 8), ("uint8", 16), ("float32", 8),
                                         ("float32", 16)])
@pytest.mark.parametrize("target", [AVX2, AVX512], ids=["avx2", "avx512"])
def test_a_relayout_into_channel_blocks_never_stores_an_element_alone(dtype, block, target):
    """NCHW -> NCHW{b}c: the default takes the channel block whole into the tile, and its b stores at
    stride b become one interleave (at most 128 bytes) or b x b transposes (wider), exact either way. On
    AVX2 a 16-channel block would hold all 16 vector registers (and 16 float32 channels do not divide its
    8 lanes): there the default keeps fewer channels and may store them alone."""
    if not host_runs(target):
        pytest.skip("the host cannot run this ISA")
    x = tw.placeholder((1, 32, 8, 16), dtype, name="x")
    y = tw.ops.layout_transform(x, "NCHW", f"NCHW{block}c", name="y")
    k = tw.build([x, y], target=target)
    if not (target is AVX2 and block == 16):
        assert "tw_scatter_" not in k.source
    xa = (np.arange(32 * 8 * 16) * 7 % 251).reshape(x.shape).astype(dtype)
    out = np.zeros(y.shape, dtype)
    k(xa, out)
    np.testing.assert_array_equal(out, xa.reshape(1, 32 // block, block, 8, 16).transpose(0, 1, 3, 4, 2))

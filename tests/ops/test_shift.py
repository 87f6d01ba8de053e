"""tw.ops.shift_conv2d against an element-by-element NumPy loop of the FlexTensor
SHO definition, and every error."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import assert_close, random_array

import tilewright as tw
from tilewright.te import collect_program
from tilewright.workloads import suite_case


def loop_oracle(x: np.ndarray, shift: np.ndarray, kernel: int, stride: int, dilation: int) -> np.ndarray:
    """out[n,h,w,c] = pad(x)[n, h*s + (shift[c]//k)*d, w*s + (shift[c]%k)*d, c]; the padding of
    each axis is total//2 before (total = (s-1)*size - s + d*(k-1) + 1), zeros outside x."""
    n, height, width, channels = x.shape
    top = ((stride - 1) * height - stride + dilation * (kernel - 1) + 1) // 2
    left = ((stride - 1) * width - stride + dilation * (kernel - 1) + 1) // 2
    out = np.zeros_like(x)
    for h in range(height):
        for w in range(width):
            for c in range(channels):
                row, col = divmod(int(shift[c]), kernel)
                src_h = h * stride + row * dilation - top
                src_w = w * stride + col * dilation - left
                if 0 <= src_h < height and 0 <= src_w < width:
                    out[:, h, w, c] = x[:, src_h, src_w, c]
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("shape, kernel, stride, dilation", [
    pytest.param((2, 6, 7, 5), 3, 1, 1, id="k3"),
    pytest.param((1, 8, 6, 4), 5, 1, 1, id="k5"),
    pytest.param((2, 7, 9, 3), 3, 1, 2, id="k3-dil2"),
    pytest.param((1, 6, 5, 6), 3, 2, 1, id="k3-stride2-odd-total"),
    pytest.param((1, 5, 5, 4), 2, 1, 1, id="k2-odd-total"),
    pytest.param((2, 4, 6, 3), 3, 3, 2, id="stride3-dil2"),
])
def test_shift_conv2d_matches_loop_oracle(rng, shape, kernel, stride, dilation, dtype):
    x = tw.placeholder(shape, dtype, "x")
    s = tw.placeholder((shape[3],), "int32", "shift")
    y = tw.ops.shift_conv2d(x, s, kernel, stride=stride, dilation=dilation)
    assert y.shape == shape and y.dtype == x.dtype
    xa = random_array(rng, shape, dtype)
    sa = rng.integers(0, kernel * kernel, size=shape[3]).astype(np.int32)
    got = tw.evaluate(y, {x: xa, s: sa})
    np.testing.assert_array_equal(got, loop_oracle(xa, sa, kernel, stride, dilation))


def test_every_shift_position_and_int8_shift(rng):
    # one channel per kernel position, with an int8 shift tensor (any integer dtype indexes)
    x = tw.placeholder((1, 5, 5, 9), "float32", "x")
    s = tw.placeholder((9,), "int8", "shift")
    xa, sa = random_array(rng, x.shape, "float32"), np.arange(9, dtype=np.int8)
    got = tw.evaluate(tw.ops.shift_conv2d(x, s, 3), {x: xa, s: sa})
    assert_close(got, loop_oracle(xa, sa, 3, 1, 1), "float32")


@pytest.mark.parametrize("case_name", ["shift_3", "shift_1"])
def test_flextensor_suite_case(rng, case_name):
    case = suite_case("SHO", case_name)
    shape = (case["batch"], case["height"], case["width"], case["channels"])
    k = case["kernel"]
    x = tw.placeholder(shape, "float32", "x")
    s = tw.placeholder((case["channels"],), "int32", "shift")
    y = tw.ops.shift_conv2d(x, s, k, stride=case["stride"], dilation=case["dilation"])
    xa = random_array(rng, shape, "float32")
    sa = rng.integers(0, k * k, size=case["channels"]).astype(np.int32)
    got = tw.evaluate(y, {x: xa, s: sa})
    np.testing.assert_array_equal(got, loop_oracle(xa, sa, k, case["stride"], case["dilation"]))


def test_structure_data_dependent_index():
    x = tw.placeholder((1, 4, 4, 8), "float32", "x")
    s = tw.placeholder((8,), "int32", "shift")
    y = tw.ops.shift_conv2d(x, s, 3, name="sc")
    assert [t.name for t in collect_program(y).stages] == ["sc_pad", "sc"]
    assert str(y.op.body) == ("sc_pad[n, h + max(min(shift[c], 8), 0) // 3, w + max(min(shift[c], 8), 0) % 3, c]")


def _x(shape=(1, 4, 4, 8), dtype="float32"):
    return tw.placeholder(shape, dtype, "x")


def _s(shape=(8,), dtype="int32"):
    return tw.placeholder(shape, dtype, "shift")


@pytest.mark.parametrize("build, match", [
    pytest.param(lambda: tw.ops.shift_conv2d(_x((4, 4, 8)), _s(), 3),
                 r"shift_conv2d: input 'x' must have 4 dimensions \(NHWC\)", id="x-ndim"),
    pytest.param(lambda: tw.ops.shift_conv2d(_x(), _s((8, 1)), 3), r"shift 'shift' must have 1 dimensions",
                 id="shift-ndim"),
    pytest.param(lambda: tw.ops.shift_conv2d(_x(), _s((4,)), 3),
                 r"shift 'shift' has 4 entries but input 'x' has 8 channels \(NHWC\)", id="shift-length"),
    pytest.param(lambda: tw.ops.shift_conv2d(_x(), _s(), 0), r"shift_conv2d: kernel must be >= 1", id="kernel"),
    pytest.param(lambda: tw.ops.shift_conv2d(_x(), _s(), 3, stride=0), r"shift_conv2d: stride must be >= 1",
                 id="stride"),
    pytest.param(lambda: tw.ops.shift_conv2d(_x(), _s(), 3, dilation=(1, 0)), r"shift_conv2d: dilation must be >= 1",
                 id="dilation"),
    pytest.param(lambda: tw.ops.shift_conv2d(_x(), np.zeros(8), 3), r"shift must be a tilewright Tensor",
                 id="not-a-tensor"),
])
def test_shift_conv2d_shape_errors(build, match):
    with pytest.raises(tw.ShapeError, match=match):
        build()


def test_shift_conv2d_float_shift_is_a_dtype_error():
    with pytest.raises(tw.DTypeError, match=r"shift_conv2d: shift 'shift' must have an integer dtype"):
        tw.ops.shift_conv2d(_x(), _s(dtype="float32"), 3)


def test_out_of_range_shifts_are_clamped_so_the_kernel_builds_and_stays_in_bounds(rng):
    """Positions outside [0, 9) read the nearest valid one (9 -> 8, -3 -> 0), in the evaluator and in a
    compiled kernel alike: lowering can then prove every read inside the padded input (a data-dependent
    index it cannot bound is refused), so the suite's SHO cases build on every target."""
    x, s = _x(), _s()
    y = tw.ops.shift_conv2d(x, s, 3)
    xv = random_array(rng, x.shape)
    wild = np.array([9, -3, 4, 100, 0, 8, -1, 2], np.int32)
    want = loop_oracle(xv, np.clip(wild, 0, 8), 3, 1, 1)
    assert_close(tw.evaluate(y, {x: xv, s: wild}), want)
    out = np.zeros(y.shape, "float32")
    tw.build([x, s, y])(xv, wild, out)
    assert_close(out, want)

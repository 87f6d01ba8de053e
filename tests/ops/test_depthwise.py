"""tw.ops.depthwise_conv2d against F.conv2d(x, w, groups=C) (float64 on the same inputs),
an integer case against a NumPy formula, and every error."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import assert_close, random_array, torch_or_skip

import tilewright as tw
from tilewright.te import collect_program
from tilewright.workloads import suite_case


def check_against_torch(rng, x_shape, multiplier: int, kernel, dtype: str, bias: bool, **kw) -> tw.Tensor:
    torch = torch_or_skip()
    c = x_shape[1]
    w_shape = (c * multiplier, 1, *kernel)
    x = tw.placeholder(x_shape, dtype, "x")
    w = tw.placeholder(w_shape, dtype, "w")
    b = tw.placeholder((w_shape[0],), dtype, "b") if bias else None
    y = tw.ops.depthwise_conv2d(x, w, b, **kw)
    arrays = {"x": random_array(rng, x_shape, dtype), "w": random_array(rng, w_shape, dtype)}
    if bias:
        arrays["b"] = random_array(rng, (w_shape[0],), dtype)
    got = tw.evaluate(y, arrays)
    t = {k: torch.from_numpy(v.astype(np.float64)) for k, v in arrays.items()}
    want = torch.nn.functional.conv2d(t["x"], t["w"], t.get("b"), groups=c, **kw).numpy()
    assert got.dtype == np.dtype(dtype)
    assert_close(got, want, dtype)
    return y


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel:UserWarning")  # torch's own note
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("x_shape, multiplier, kernel, stride, padding, dilation, bias", [
    pytest.param((2, 3, 7, 6), 1, (3, 3), 1, 1, 1, True, id="m1-pad1-bias"),
    pytest.param((1, 4, 9, 8), 2, (3, 3), 2, 0, 1, False, id="m2-stride2"),
    pytest.param((2, 2, 11, 7), 3, (3, 2), 3, (2, 1), (1, 2), True, id="m3-stride3-tuples-dil"),
    pytest.param((1, 3, 8, 8), 2, (4, 3), 1, "same", 1, False, id="same-even-kernel"),
    pytest.param((1, 2, 9, 9), 1, (3, 3), 1, "same", 2, True, id="same-dil2"),
    pytest.param((3, 2, 5, 6), 2, (2, 2), 1, "valid", 1, False, id="valid-batch3"),
])
def test_depthwise_matches_torch(rng, x_shape, multiplier, kernel, stride, padding, dilation, bias, dtype):
    check_against_torch(rng, x_shape, multiplier, kernel, dtype, bias, stride=stride, padding=padding,
                        dilation=dilation)


def test_depthwise_float16(rng):
    check_against_torch(rng, (1, 4, 7, 6), 2, (3, 3), "float16", True, stride=2, padding=1)


def test_depthwise_int32_against_numpy(rng):
    x = tw.placeholder((2, 3, 6, 5), "int32", "x")
    w = tw.placeholder((6, 1, 3, 2), "int32", "w")
    xa, wa = random_array(rng, x.shape, "int32"), random_array(rng, w.shape, "int32")
    got = tw.evaluate(tw.ops.depthwise_conv2d(x, w, stride=(1, 2), padding=1, dilation=(2, 1)), {x: xa, w: wa})
    xp = np.pad(xa.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    oh, ow = (6 + 2 - 2 * 2 - 1) // 1 + 1, (5 + 2 - 1 - 1) // 2 + 1
    want = np.zeros((2, 6, oh, ow), dtype=np.int64)
    for o in range(6):
        for r in range(3):
            for s in range(2):
                want[:, o] += xp[:, o // 2, r * 2:r * 2 + oh, s:s + 2 * (ow - 1) + 1:2] * int(wa[o, 0, r, s])
    np.testing.assert_array_equal(got, want.astype(np.int32))


@pytest.mark.parametrize("case_name", ["mbv2_dw_5", "mbv2_dw_1"])
def test_flextensor_suite_case(rng, case_name):
    case = suite_case("DEP", case_name)
    x_shape = (case["batch"], case["in_channels"], case["height"], case["width"])
    k = case["kernel"]
    y = check_against_torch(rng, x_shape, case["channel_multiplier"], (k, k), "float32", False, stride=case["stride"],
                            padding=case["padding"], dilation=case["dilation"])
    assert list(y.shape) == [case["batch"], case["out_channels"], case["out_height"], case["out_width"]]


def test_structure_has_no_channel_reduction():
    x = tw.placeholder((1, 4, 6, 6), "float32", "x")
    w = tw.placeholder((8, 1, 3, 3), "float32", "w")
    b = tw.placeholder((8,), "float32", "b")
    y = tw.ops.depthwise_conv2d(x, w, b, padding=1, name="dw")
    assert [t.name for t in collect_program(y).stages] == ["dw_pad", "dw_sum", "dw"]
    conv = collect_program(y).by_name("dw_sum")
    assert [a.name for a in conv.op.reduce_axis] == ["rh", "rw"]
    assert "dw_pad[n, o // 2, h + rh, w + rw] * w[o, 0, rh, rw]" in str(conv.op.body)


def _x(shape=(1, 4, 6, 6), dtype="float32"):
    return tw.placeholder(shape, dtype, "x")


def _w(shape=(8, 1, 3, 3), dtype="float32"):
    return tw.placeholder(shape, dtype, "w")


@pytest.mark.parametrize("build, match", [
    pytest.param(lambda: tw.ops.depthwise_conv2d(_x((4, 6, 6)), _w()),
                 r"depthwise_conv2d: input 'x' must have 4 dimensions \(NCHW\)", id="x-ndim"),
    pytest.param(lambda: tw.ops.depthwise_conv2d(_x(), _w((8, 3, 3))),
                 r"weight 'w' must have 4 dimensions \(C\*M, 1, KH, KW\)", id="w-ndim"),
    pytest.param(lambda: tw.ops.depthwise_conv2d(_x(), _w((8, 4, 3, 3))),
                 r"weight 'w' must have shape \[C\*M, 1, KH, KW\].*axis 1 is 4; it must be 1", id="w-axis1"),
    pytest.param(lambda: tw.ops.depthwise_conv2d(_x(), _w((6, 1, 3, 3))),
                 r"weight 'w' has 6 output channels, which must be a multiple of the 4 channels of input 'x'",
                 id="multiplier"),
    pytest.param(lambda: tw.ops.depthwise_conv2d(_x(), _w(), stride=0), r"stride must be >= 1", id="stride"),
    pytest.param(lambda: tw.ops.depthwise_conv2d(_x(), _w(), dilation=(1, 0)), r"dilation must be >= 1",
                 id="dilation"),
    pytest.param(lambda: tw.ops.depthwise_conv2d(_x(), _w(), padding=(1, -1)), r"padding must be >= 0",
                 id="padding"),
    pytest.param(lambda: tw.ops.depthwise_conv2d(_x(), _w(), stride=2, padding="same"),
                 r"depthwise_conv2d: padding='same' needs stride 1", id="same-strided"),
    pytest.param(lambda: tw.ops.depthwise_conv2d(_x(), _w(), dilation=3), r"along axis H of input 'x'.*smaller",
                 id="too-small"),
    pytest.param(lambda: tw.ops.depthwise_conv2d(_x(), _w(), tw.placeholder((4,), "float32", "b")),
                 r"bias 'b' must have shape \[8\]", id="bias"),
])
def test_depthwise_shape_errors(build, match):
    with pytest.raises(tw.ShapeError, match=match):
        build()


def test_depthwise_dtype_error():
    match = r"depthwise_conv2d: weight 'w' has dtype float16 but input 'x' has float32"
    with pytest.raises(tw.DTypeError, match=match):
        tw.ops.depthwise_conv2d(_x(), _w(dtype="float16"))

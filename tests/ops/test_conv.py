"""tw.ops.conv1d / conv2d / conv3d against torch.nn.functional (evaluated in float64
on the same inputs), an integer case against a NumPy formula, and every error."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from oracle import assert_close, random_array, torch_or_skip

import tilewright as tw
from tilewright.te import collect_program
from tilewright.workloads import suite_case


def torch_ref(fn_name: str, x, w, b=None, **kw) -> np.ndarray:
    torch = torch_or_skip()
    t = [None if a is None else torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in (x, w, b)]
    with warnings.catch_warnings():  # torch notes that padding="same" with an even kernel copies the input
        warnings.simplefilter("ignore", UserWarning)
        return getattr(torch.nn.functional, fn_name)(*t, **kw).numpy()


def check_against_torch(rng, op: str, x_shape, w_shape, dtype: str, bias: bool, **kw) -> tw.Tensor:
    x = tw.placeholder(x_shape, dtype, "x")
    w = tw.placeholder(w_shape, dtype, "w")
    b = tw.placeholder((w_shape[0],), dtype, "b") if bias else None
    y = getattr(tw.ops, op)(x, w, b, **kw)
    arrays = {"x": random_array(rng, x_shape, dtype), "w": random_array(rng, w_shape, dtype)}
    if bias:
        arrays["b"] = random_array(rng, (w_shape[0],), dtype)
    got = tw.evaluate(y, arrays)
    want = torch_ref(op, arrays["x"], arrays["w"], arrays.get("b"), **kw)
    assert got.dtype == np.dtype(dtype)
    assert_close(got, want, dtype)
    return y


FLOATS = ["float32", "float64"]

# (x shape, w shape, stride, padding, dilation, groups, bias)
CONV2D_CASES = [
    pytest.param((2, 4, 9, 7), (6, 4, 3, 3), 1, 0, 1, 1, True, id="basic-bias"),
    pytest.param((1, 3, 8, 8), (5, 3, 3, 3), 2, 1, 1, 1, False, id="stride2-pad1"),
    pytest.param((2, 4, 11, 9), (4, 2, 3, 2), 3, 2, 1, 2, True, id="stride3-pad2-groups2"),
    pytest.param((1, 8, 10, 7), (8, 2, 3, 3), (2, 1), (1, 2), 2, 4, True, id="tuples-dil2-groups4"),
    pytest.param((2, 4, 7, 6), (6, 4, 4, 3), 1, "same", 1, 1, True, id="same-even-kernel"),
    pytest.param((1, 4, 9, 8), (4, 1, 3, 3), 1, "same", (2, 1), 4, False, id="same-dilated-depthwise"),
    pytest.param((1, 2, 6, 5), (3, 2, 3, 3), 1, "valid", 1, 1, True, id="valid"),
    pytest.param((3, 2, 5, 5), (4, 2, 1, 1), 2, 0, 1, 1, False, id="1x1-batch3"),
    pytest.param((1, 4, 13, 10), (4, 4, 3, 3), (3, 2), 0, (2, 1), 1, True, id="odd-sizes-mixed"),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("x_shape, w_shape, stride, padding, dilation, groups, bias", CONV2D_CASES)
def test_conv2d_matches_torch(rng, x_shape, w_shape, stride, padding, dilation, groups, bias, dtype):
    check_against_torch(rng, "conv2d", x_shape, w_shape, dtype, bias, stride=stride, padding=padding,
                        dilation=dilation, groups=groups)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("x_shape, w_shape, stride, padding, dilation, groups, bias", [
    pytest.param((2, 4, 11), (6, 4, 3), 1, 0, 1, 1, True, id="basic"),
    pytest.param((1, 4, 16), (4, 2, 5), 3, 2, 2, 2, False, id="stride3-dil2-groups2"),
    pytest.param((2, 8, 9), (8, 2, 4), 1, "same", 1, 4, True, id="same-even-kernel-groups4"),
    pytest.param((1, 3, 7), (2, 3, 3), 2, (1,), 1, 1, True, id="tuple-padding"),
    pytest.param((1, 2, 6), (3, 2, 2), 1, "valid", 2, 1, False, id="valid-dil2"),
])
def test_conv1d_matches_torch(rng, x_shape, w_shape, stride, padding, dilation, groups, bias, dtype):
    check_against_torch(rng, "conv1d", x_shape, w_shape, dtype, bias, stride=stride, padding=padding,
                        dilation=dilation, groups=groups)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("x_shape, w_shape, stride, padding, dilation, groups, bias", [
    pytest.param((2, 2, 5, 6, 4), (3, 2, 3, 3, 2), 1, 1, 1, 1, True, id="basic"),
    pytest.param((1, 4, 7, 5, 6), (4, 2, 3, 2, 3), (2, 1, 3), (1, 0, 2), (1, 2, 1), 2, False, id="mixed-groups2"),
    pytest.param((1, 2, 4, 5, 5), (2, 2, 2, 3, 2), 1, "same", 2, 1, True, id="same-dil2"),
])
def test_conv3d_matches_torch(rng, x_shape, w_shape, stride, padding, dilation, groups, bias, dtype):
    check_against_torch(rng, "conv3d", x_shape, w_shape, dtype, bias, stride=stride, padding=padding,
                        dilation=dilation, groups=groups)


@pytest.mark.parametrize("x_shape, w_shape, stride, padding, dilation, groups, bias", [
    pytest.param((2, 4, 9, 7), (6, 4, 3, 3), 1, 1, 1, 1, True, id="basic"),
    pytest.param((1, 8, 10, 7), (8, 2, 3, 2), (2, 1), (1, 2), (1, 2), 4, False, id="groups4-mixed"),
    pytest.param((1, 4, 6, 5), (4, 4, 2, 3), 1, "same", 1, 1, True, id="same-even-kernel"),
])
def test_conv2d_nhwc_matches_torch(rng, x_shape, w_shape, stride, padding, dilation, groups, bias):
    x_nhwc = random_array(rng, (x_shape[0], x_shape[2], x_shape[3], x_shape[1]), "float32")
    w_hwio = random_array(rng, (w_shape[2], w_shape[3], w_shape[1], w_shape[0]), "float32")
    b_arr = random_array(rng, (w_shape[0],), "float32")
    x = tw.placeholder(x_nhwc.shape, "float32", "x")
    w = tw.placeholder(w_hwio.shape, "float32", "w")
    b = tw.placeholder(b_arr.shape, "float32", "b") if bias else None
    y = tw.ops.conv2d(x, w, b, stride, padding, dilation, groups, layout="NHWC")
    inputs = {x: x_nhwc, w: w_hwio} | ({b: b_arr} if bias else {})
    got = tw.evaluate(y, inputs)
    want = torch_ref("conv2d", x_nhwc.transpose(0, 3, 1, 2), w_hwio.transpose(3, 2, 0, 1), b_arr if bias else None,
                     stride=stride, padding=padding, dilation=dilation, groups=groups)
    assert_close(got, want.transpose(0, 2, 3, 1), "float32")


def test_conv2d_float16(rng):
    check_against_torch(rng, "conv2d", (2, 4, 7, 6), (4, 2, 3, 3), "float16", True, stride=2, padding=1, groups=2)


def numpy_conv2d(x, w, stride, padding, dilation, groups) -> np.ndarray:
    """Direct NCHW convolution in int64: one einsum per (group, kernel offset)."""
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    og = o // groups
    out = np.zeros((n, o, oh, ow), dtype=np.int64)
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, g * cg:(g + 1) * cg, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                           j * dw:j * dw + sw * (ow - 1) + 1:sw]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, w[g * og:(g + 1) * og, :, i, j])
    return out


def test_conv2d_int8_inputs_accumulate_in_int32(rng):
    x8 = tw.placeholder((2, 4, 9, 8), "int8", "x8")
    w8 = tw.placeholder((6, 2, 3, 2), "int8", "w8")
    x = tw.compute(x8.shape, lambda n, c, h, w: tw.cast(x8[n, c, h, w], "int32"), name="x32")
    w = tw.compute(w8.shape, lambda o, i, h, w: tw.cast(w8[o, i, h, w], "int32"), name="w32")
    y = tw.ops.conv2d(x, w, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2)
    assert y.dtype == tw.as_dtype("int32")
    xa = rng.integers(-128, 128, size=x8.shape).astype(np.int8)
    wa = rng.integers(-128, 128, size=w8.shape).astype(np.int8)
    got = tw.evaluate(y, {x8: xa, w8: wa})
    want = numpy_conv2d(xa, wa, (2, 1), (1, 2), (1, 2), 2)
    np.testing.assert_array_equal(got, want.astype(np.int32))


def test_conv2d_int32_with_bias(rng):
    x = tw.placeholder((1, 3, 6, 6), "int32", "x")
    w = tw.placeholder((2, 3, 3, 3), "int32", "w")
    b = tw.placeholder((2,), "int32", "b")
    xa, wa, ba = (random_array(rng, t.shape, "int32") for t in (x, w, b))
    got = tw.evaluate(tw.ops.conv2d(x, w, b, padding=1), {x: xa, w: wa, b: ba})
    want = numpy_conv2d(xa, wa, (1, 1), (1, 1), (1, 1), 1) + ba[None, :, None, None]
    np.testing.assert_array_equal(got, want.astype(np.int32))


@pytest.mark.parametrize("op, case_name, ndim", [
    ("C1D", "yolo_conv23_1d", 1),
    ("C2D", "yolo_conv22", 2),
    ("C3D", "c3d_7", 3),
    ("GRP", "yolo_conv17_g4", 2),
    ("DIL", "yolo_conv23_d2", 2),
])
def test_flextensor_suite_case(rng, op, case_name, ndim):
    case = suite_case(op, case_name)
    spatial = {1: ["length"], 2: ["height", "width"], 3: ["depth", "height", "width"]}[ndim]
    c, o, k, groups = case["in_channels"], case["out_channels"], case["kernel"], case["groups"]
    x_shape = (case["batch"], c, *(case[s] for s in spatial))
    w_shape = (o, c // groups) + (k,) * ndim
    y = check_against_torch(rng, f"conv{ndim}d", x_shape, w_shape, "float32", False, stride=case["stride"],
                            padding=case["padding"], dilation=case["dilation"], groups=groups)
    want_spatial = [case["out_length"]] if ndim == 1 else [case[f"out_{s}"] for s in spatial]
    assert list(y.shape) == [case["batch"], o, *want_spatial]


def stage_names(y) -> list[str]:
    return [t.name for t in collect_program(y).stages]


def test_stages_pad_only_when_padded_and_bias_separate():
    x = tw.placeholder((1, 4, 8, 8), "float32", "x")
    w = tw.placeholder((4, 4, 3, 3), "float32", "w")
    b = tw.placeholder((4,), "float32", "b")
    assert stage_names(tw.ops.conv2d(x, w)) == ["conv2d"]
    assert stage_names(tw.ops.conv2d(x, w, padding="valid", name="c")) == ["c"]
    padded = tw.ops.conv2d(x, w, b, padding=1, name="c")
    assert stage_names(padded) == ["c_pad", "c_sum", "c"]
    conv = collect_program(padded).by_name("c_sum")
    assert [a.name for a in conv.op.axis] == ["n", "o", "h", "w"]
    assert [a.name for a in conv.op.reduce_axis] == ["rc", "rh", "rw"]
    # groups == 1: the data read does not depend on the output channel; groups > 1: g = o // (O / groups)
    assert "o //" not in str(conv.op.body)
    grouped = tw.ops.conv2d(x, tw.placeholder((4, 2, 3, 3), "float32", "w2"), groups=2)
    assert "x[n, o // 2 * 2 + rc, h + rh, w + rw]" in str(grouped.op.body)


def test_conv1d_and_conv3d_axis_names():
    y1 = tw.ops.conv1d(tw.placeholder((1, 2, 5), "float32", "x"), tw.placeholder((3, 2, 2), "float32", "w"))
    assert [a.name for a in y1.op.axis] == ["n", "o", "l"]
    y3 = tw.ops.conv3d(tw.placeholder((1, 2, 3, 4, 5), "float32", "x"), tw.placeholder((3, 2, 1, 2, 2), "float32", "w"))
    assert [a.name for a in y3.op.axis] == ["n", "o", "d", "h", "w"]
    assert [a.name for a in y3.op.reduce_axis] == ["rc", "rd", "rh", "rw"]


def _x(shape=(1, 4, 8, 8), dtype="float32"):
    return tw.placeholder(shape, dtype, "x")


def _w(shape=(6, 4, 3, 3), dtype="float32"):
    return tw.placeholder(shape, dtype, "w")


@pytest.mark.parametrize("build, match", [
    pytest.param(lambda: tw.ops.conv2d(_x((4, 8, 8)), _w()), r"conv2d: input 'x' must have 4 dimensions \(NCHW\)",
                 id="x-ndim"),
    pytest.param(lambda: tw.ops.conv2d(_x(), _w((6, 4, 3))), r"conv2d: weight 'w' must have 4 dimensions \(OIHW\)",
                 id="w-ndim"),
    pytest.param(lambda: tw.ops.conv1d(_x(), _w((6, 4, 3))), r"conv1d: input 'x' must have 3 dimensions \(NCL\)",
                 id="conv1d-x-ndim"),
    pytest.param(lambda: tw.ops.conv3d(_x(), _w()), r"conv3d: input 'x' must have 5 dimensions \(NCDHW\)",
                 id="conv3d-x-ndim"),
    pytest.param(lambda: tw.ops.conv2d(_x(), _w((3, 3, 4, 6)), layout="NHCW"), r"layout must be 'NCHW'.*'NHWC'",
                 id="layout"),
    pytest.param(lambda: tw.ops.conv2d(_x((1, 8, 8, 4)), _w((6, 4, 3, 3)), layout="NHWC"),
                 r"weight 'w' \(HWIO, shape \[6, 4, 3, 3\]\) has 3 input channels per group.*must be 4",
                 id="nhwc-weight"),
    pytest.param(lambda: tw.ops.conv2d(_x(), _w((6, 1, 3, 3)), groups=3),
                 r"input 'x' has 4 channels, which groups=3 does not divide", id="groups-in"),
    pytest.param(lambda: tw.ops.conv2d(_x(), _w((6, 1, 3, 3)), groups=4),
                 r"weight 'w' has 6 output channels, which groups=4 does not divide", id="groups-out"),
    pytest.param(lambda: tw.ops.conv2d(_x(), _w((6, 4, 3, 3)), groups=2),
                 r"has 4 input channels per group.*groups=2, so it must be 2", id="weight-channels"),
    pytest.param(lambda: tw.ops.conv2d(_x(), _w(), groups=0), r"conv2d: groups must be >= 1", id="groups-zero"),
    pytest.param(lambda: tw.ops.conv2d(_x(), _w(), stride=0), r"conv2d: stride must be >= 1", id="stride-zero"),
    pytest.param(lambda: tw.ops.conv2d(_x(), _w(), stride=(1, 2, 1)), r"stride must be an int or 2 ints",
                 id="stride-len"),
    pytest.param(lambda: tw.ops.conv2d(_x(), _w(), dilation=(1, 0)), r"conv2d: dilation must be >= 1",
                 id="dilation-zero"),
    pytest.param(lambda: tw.ops.conv2d(_x(), _w(), padding=-1), r"conv2d: padding must be >= 0", id="padding-neg"),
    pytest.param(lambda: tw.ops.conv2d(_x(), _w(), padding=(1, 1, 1, 1)),
                 r"padding must be an int or 2 ints.*'valid' or 'same'", id="padding-len"),
    pytest.param(lambda: tw.ops.conv2d(_x(), _w(), padding="full"), r"padding must be .*'valid' or 'same', got 'full'",
                 id="padding-string"),
    pytest.param(lambda: tw.ops.conv2d(_x(), _w(), stride=2, padding="same"),
                 r"padding='same' needs stride 1", id="same-strided"),
    pytest.param(lambda: tw.ops.conv2d(_x((1, 4, 2, 8)), _w()), r"along axis H of input 'x'.*smaller than the dilated",
                 id="too-small"),
    pytest.param(lambda: tw.ops.conv2d(_x(), _w(), dilation=4), r"along axis H .*dilated kernel \(9\)",
                 id="too-dilated"),
    pytest.param(lambda: tw.ops.conv2d(_x(), _w(), tw.placeholder((4,), "float32", "b")),
                 r"bias 'b' must have shape \[6\]", id="bias-shape"),
    pytest.param(lambda: tw.ops.conv2d(np.zeros((1, 4, 8, 8)), _w()), r"input must be a tilewright Tensor",
                 id="not-a-tensor"),
])
def test_conv_shape_errors(build, match):
    with pytest.raises(tw.ShapeError, match=match):
        build()


@pytest.mark.parametrize("build, match", [
    pytest.param(lambda: tw.ops.conv2d(_x(), _w(dtype="float64")),
                 r"conv2d: weight 'w' has dtype float64 but input 'x' has float32; they must match", id="weight"),
    pytest.param(lambda: tw.ops.conv2d(_x(), _w(), tw.placeholder((6,), "float16", "b")),
                 r"conv2d: bias 'b' has dtype float16 but input 'x' has float32", id="bias"),
    pytest.param(lambda: tw.ops.conv2d(_x(dtype="bool"), _w(dtype="bool")), r"not defined on bool", id="bool"),
])
def test_conv_dtype_errors(build, match):
    with pytest.raises(tw.DTypeError, match=match):
        build()

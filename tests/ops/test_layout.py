"""tw.ops.layout_transform against NumPy reshape/transpose, tw.ops.conv2d_nchwc against
F.conv2d on unpacked data (float64 on the same inputs), and every error."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import assert_close, random_array, torch_or_skip

import tilewright as tw
from tilewright.workloads import suite_case


def pack_nchwc(a: np.ndarray, block: int) -> np.ndarray:
    n, c, h, w = a.shape
    return a.reshape(n, c // block, block, h, w).transpose(0, 1, 3, 4, 2)


def unpack_nchwc(a: np.ndarray) -> np.ndarray:
    n, co, h, w, block = a.shape
    return a.transpose(0, 1, 4, 2, 3).reshape(n, co * block, h, w)


def pack_oihw(w: np.ndarray, cb: int, ob: int) -> np.ndarray:
    o, i, kh, kw = w.shape
    return w.reshape(o // ob, ob, i // cb, cb, kh, kw).transpose(0, 2, 4, 5, 3, 1)


@pytest.mark.parametrize("shape, src, dst, oracle", [
    pytest.param((2, 16, 3, 5), "NCHW", "NCHW8c", lambda a: pack_nchwc(a, 8), id="NCHW-NCHW8c"),
    pytest.param((1, 2, 3, 3, 16), "NCHW16c", "NCHW", unpack_nchwc, id="NCHW16c-NCHW"),
    pytest.param((2, 16, 3, 5), "NCHW", "NHWC", lambda a: a.transpose(0, 2, 3, 1), id="NCHW-NHWC"),
    pytest.param((32, 16, 3, 3), "OIHW", "OIHW8i16o", lambda a: pack_oihw(a, 8, 16), id="OIHW-OIHW8i16o"),
    pytest.param((2, 2, 3, 5, 8), "NCHW8c", "NCHW4c", lambda a: pack_nchwc(unpack_nchwc(a), 4), id="NCHW8c-NCHW4c"),
    pytest.param((2, 4, 3, 5, 4), "NCHW4c", "NHWC2c",
                 lambda a: pack_nchwc(unpack_nchwc(a), 2).transpose(0, 2, 3, 1, 4), id="NCHW4c-NHWC2c"),
    pytest.param((2, 3, 5, 16), "NHWC", "NCHW8c", lambda a: pack_nchwc(a.transpose(0, 3, 1, 2), 8),
                 id="NHWC-NCHW8c"),
    pytest.param((2, 3, 5, 6), "NCHW", "CWNH", lambda a: a.transpose(1, 3, 0, 2), id="permute"),
])
def test_layout_transform_matches_numpy(rng, shape, src, dst, oracle):
    t = tw.placeholder(shape, "int32", "t")
    a = random_array(rng, shape, "int32")
    y = tw.ops.layout_transform(t, src, dst, name="packed")
    assert y.name == "packed"
    np.testing.assert_array_equal(tw.evaluate(y, {t: a}), oracle(a))


def test_layout_transform_round_trip_and_identity(rng):
    t = tw.placeholder((2, 12, 3, 4), "float16", "t")
    a = random_array(rng, t.shape, "float16")
    packed = tw.ops.layout_transform(t, "NCHW", "NCHW4c")
    assert [ax.name for ax in packed.op.axis] == ["n", "c", "h", "w", "c_inner"]
    back = tw.ops.layout_transform(packed, "NCHW4c", "NCHW", name="back")
    np.testing.assert_array_equal(tw.evaluate(back, {t: a}), a)
    assert tw.ops.layout_transform(t, "NCHW", "NCHW") is t


def _t(shape=(2, 16, 3, 5)):
    return tw.placeholder(shape, "float32", "t")


@pytest.mark.parametrize("build, match", [
    pytest.param(lambda: tw.ops.layout_transform(_t(), "NCHW", "NCDW"),
                 r"src layout 'NCHW' and dst layout 'NCDW' must have the same primal \(upper-case\) axes",
                 id="letters"),
    pytest.param(lambda: tw.ops.layout_transform(_t(), "NCHW", "NCHW5c"),
                 r"dst layout 'NCHW5c' splits axis C \(extent 16\) into blocks of 5, which does not divide it",
                 id="split-divides"),
    pytest.param(lambda: tw.ops.layout_transform(_t(), "NCHW", "NC-HW"), r"dst layout 'NC-HW' is invalid at '-HW'",
                 id="bad-char"),
    pytest.param(lambda: tw.ops.layout_transform(_t(), "NCHW", "NCHW0c"), r"is invalid at '0c'", id="zero-split"),
    pytest.param(lambda: tw.ops.layout_transform(_t(), "NCHC", "NCHW"), r"src layout 'NCHC' repeats the primal axis C",
                 id="repeat-primal"),
    pytest.param(lambda: tw.ops.layout_transform(_t(), "NCHW", "NCHW8c2c"), r"repeats the split sub-axis C",
                 id="repeat-split"),
    pytest.param(lambda: tw.ops.layout_transform(_t(), "NCHW", "NCHW8d"), r"splits d without the primal axis D",
                 id="orphan-split"),
    pytest.param(lambda: tw.ops.layout_transform(_t(), "NCHW8c", "NCHW"), r"src layout 'NCHW8c' has 5 axes but tensor",
                 id="ndim"),
    pytest.param(lambda: tw.ops.layout_transform(_t((2, 4, 3, 5, 4)), "NCHW8c", "NCHW"),
                 r"sub-axis 8c has extent 8 but tensor 't' \(shape \[2, 4, 3, 5, 4\]\) has 4", id="block-extent"),
    pytest.param(lambda: tw.ops.layout_transform(_t(), None, "NCHW"), r"src layout must be a non-empty string",
                 id="not-a-string"),
])
def test_layout_transform_errors(build, match):
    with pytest.raises(tw.ShapeError, match=match):
        build()


def check_nchwc_against_torch(rng, n, c, h, w, o, kernel, cb, ob, dtype, bias, **kw) -> tw.Tensor:
    torch = torch_or_skip()
    x_arr, w_arr, b_arr = (random_array(rng, s, dtype) for s in ((n, c, h, w), (o, c, *kernel), (o,)))
    x = tw.placeholder((n, c // cb, h, w, cb), dtype, "x")
    wt = tw.placeholder((o // ob, c // cb, *kernel, cb, ob), dtype, "w")
    b = tw.placeholder((o,), dtype, "b") if bias else None
    y = tw.ops.conv2d_nchwc(x, wt, b, **kw)
    inputs = {x: pack_nchwc(x_arr, cb), wt: pack_oihw(w_arr, cb, ob)} | ({b: b_arr} if bias else {})
    got = tw.evaluate(y, inputs)
    t = [torch.from_numpy(a.astype(np.float64)) for a in (x_arr, w_arr, b_arr)]
    want = torch.nn.functional.conv2d(t[0], t[1], t[2] if bias else None, **kw).numpy()
    assert_close(got, pack_nchwc(want, ob), dtype)
    return y


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel:UserWarning")  # torch's own note
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n, c, h, w, o, kh, kw, cb, ob, stride, padding, dilation, bias", [
    pytest.param(2, 8, 7, 6, 8, 3, 3, 4, 4, 1, 1, 1, True, id="basic-bias"),
    pytest.param(1, 4, 9, 8, 6, 3, 2, 2, 3, 2, (1, 0), (1, 2), False, id="stride2-tuples"),
    pytest.param(1, 6, 6, 7, 4, 4, 3, 3, 2, 1, "same", (1, 2), True, id="same-even-kernel"),
    pytest.param(1, 4, 5, 5, 4, 1, 1, 4, 1, 3, "valid", 1, False, id="1x1-stride3"),
])
def test_conv2d_nchwc_matches_torch(rng, n, c, h, w, o, kh, kw, cb, ob, stride, padding, dilation, bias, dtype):
    y = check_nchwc_against_torch(rng, n, c, h, w, o, (kh, kw), cb, ob, dtype, bias, stride=stride, padding=padding,
                                  dilation=dilation)
    assert [a.name for a in y.op.axis] == ["n", "o", "h", "w", "o_inner"]


def test_conv2d_nchwc_between_layout_transforms(rng):
    torch = torch_or_skip()
    x = tw.placeholder((2, 8, 6, 5), "float32", "x")
    w = tw.placeholder((8, 8, 3, 3), "float32", "w")
    xp = tw.ops.layout_transform(x, "NCHW", "NCHW4c", name="x_packed")
    wp = tw.ops.layout_transform(w, "OIHW", "OIHW4i2o", name="w_packed")
    y = tw.ops.layout_transform(tw.ops.conv2d_nchwc(xp, wp, padding=1), "NCHW2c", "NCHW", name="y")
    xa, wa = random_array(rng, x.shape, "float32"), random_array(rng, w.shape, "float32")
    want = torch.nn.functional.conv2d(torch.from_numpy(xa.astype(np.float64)), torch.from_numpy(wa.astype(np.float64)),
                                      padding=1).numpy()
    assert_close(tw.evaluate(y, {x: xa, w: wa}), want, "float32")


def test_flextensor_suite_case_packed(rng):
    case = suite_case("C2D", "yolo_conv23")
    k = case["kernel"]
    y = check_nchwc_against_torch(rng, case["batch"], case["in_channels"], case["height"], case["width"],
                                  case["out_channels"], (k, k), 16, 32, "float32", False, stride=case["stride"],
                                  padding=case["padding"], dilation=case["dilation"])
    assert list(y.shape) == [case["batch"], case["out_channels"] // 32, case["out_height"], case["out_width"], 32]


def _x(shape=(1, 2, 6, 6, 4), dtype="float32"):
    return tw.placeholder(shape, dtype, "x")


def _w(shape=(3, 2, 3, 3, 4, 2), dtype="float32"):
    return tw.placeholder(shape, dtype, "w")


@pytest.mark.parametrize("build, match", [
    pytest.param(lambda: tw.ops.conv2d_nchwc(_x((1, 8, 6, 6)), _w()),
                 r"conv2d_nchwc: input 'x' must have 5 dimensions \(NCHW\{cb\}c", id="x-ndim"),
    pytest.param(lambda: tw.ops.conv2d_nchwc(_x(), _w((6, 8, 3, 3))),
                 r"conv2d_nchwc: weight 'w' must have 6 dimensions \(OIHW\{cb\}i\{ob\}o", id="w-ndim"),
    pytest.param(lambda: tw.ops.conv2d_nchwc(_x(), _w((3, 1, 3, 3, 4, 2))),
                 r"must hold 2 input blocks of 4 channels.*got 1 blocks of 4; conv2d_nchwc has no groups parameter",
                 id="channels-no-groups"),
    pytest.param(lambda: tw.ops.conv2d_nchwc(_x(), _w((3, 2, 3, 3, 2, 2))), r"got 2 blocks of 2", id="block-size"),
    pytest.param(lambda: tw.ops.conv2d_nchwc(_x(), _w(), stride=(1, 0)), r"conv2d_nchwc: stride must be >= 1",
                 id="stride"),
    pytest.param(lambda: tw.ops.conv2d_nchwc(_x(), _w(), stride=2, padding="same"), r"padding='same' needs stride 1",
                 id="same-strided"),
    pytest.param(lambda: tw.ops.conv2d_nchwc(_x(), _w(), dilation=3), r"along axis H of input 'x'.*smaller",
                 id="too-small"),
    pytest.param(lambda: tw.ops.conv2d_nchwc(_x(), _w(), tw.placeholder((3,), "float32", "b")),
                 r"bias 'b' must have shape \[6\]", id="bias"),
])
def test_conv2d_nchwc_shape_errors(build, match):
    with pytest.raises(tw.ShapeError, match=match):
        build()


def test_conv2d_nchwc_dtype_error_and_no_groups_keyword():
    with pytest.raises(tw.DTypeError, match=r"conv2d_nchwc: weight 'w' has dtype float64 but input 'x' has float32"):
        tw.ops.conv2d_nchwc(_x(), _w(dtype="float64"))
    with pytest.raises(TypeError, match="groups"):
        tw.ops.conv2d_nchwc(_x(), _w(), groups=2)


@pytest.mark.parametrize("stride, padding, dilation", [(1, 1, 1), (2, 1, 1), (1, 2, 2), (2, 0, 1)])
def test_depthwise_conv2d_nchwc_matches_torch(rng, stride, padding, dilation):
    torch = torch_or_skip()
    x = tw.placeholder((1, 3, 9, 8, 4), "float32", "x")
    w = tw.placeholder((3, 1, 3, 3, 1, 4), "float32", "w")
    b = tw.placeholder((12,), "float32", "b")
    y = tw.ops.depthwise_conv2d_nchwc(x, w, b, stride=stride, padding=padding, dilation=dilation)
    xa, wa, ba = (random_array(rng, t.shape, "float32") for t in (x, w, b))
    plain_w = wa.transpose(0, 5, 1, 4, 2, 3).reshape(12, 1, 3, 3)
    args = (torch.from_numpy(a.astype(np.float64)) for a in (unpack_nchwc(xa), plain_w, ba))
    want = torch.nn.functional.conv2d(*args, stride=stride, padding=padding, dilation=dilation, groups=12).numpy()
    assert_close(tw.evaluate(y, {x: xa, w: wa, b: ba}), pack_nchwc(want, 4), "float32")
    assert [a.name for a in y.op.axis] == ["n", "c", "h", "w", "c_inner"]


def test_depthwise_conv2d_nchwc_weight_error():
    x = tw.placeholder((1, 3, 9, 8, 4), "float32", "x")
    with pytest.raises(tw.ShapeError, match=r"weight 'w' \(shape \[3, 1, 3, 3, 4, 4\]\) must have shape \[3, 1, KH"):
        tw.ops.depthwise_conv2d_nchwc(x, tw.placeholder((3, 1, 3, 3, 4, 4), "float32", "w"))


@pytest.mark.parametrize("pool, kw", [("max_pool2d", {"kernel_size": 3, "stride": 2, "padding": 1}),
                                      ("avg_pool2d", {"kernel_size": 2, "ceil_mode": True}),
                                      ("avg_pool2d", {"kernel_size": 3, "stride": 2, "padding": 1,
                                                      "count_include_pad": False})])
def test_pooling_on_packed_data_pools_each_lane(rng, pool, kw):
    x = tw.placeholder((1, 8, 7, 7), "float32", "x")
    xp = tw.placeholder((1, 2, 7, 7, 4), "float32", "xp")
    xa = random_array(rng, x.shape, "float32")
    want = tw.evaluate(getattr(tw.ops, pool)(x, **kw), {x: xa})
    got = tw.evaluate(getattr(tw.ops, pool)(xp, **kw), {xp: np.ascontiguousarray(pack_nchwc(xa, 4))})
    assert_close(got, pack_nchwc(want, 4), "float32")

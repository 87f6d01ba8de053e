"""tw.ops.conv_transpose1d / 2d / 3d against torch.nn.functional (float64 on the same
inputs), an integer case against a NumPy scatter formula, and every error."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from oracle import assert_close, random_array, torch_or_skip

import tilewright as tw
from tilewright.te import collect_program
from tilewright.workloads import suite_case


def check_against_torch(rng, nsp: int, x_shape, w_shape, dtype: str, bias: bool, **kw) -> tw.Tensor:
    torch = torch_or_skip()
    groups = kw.get("groups", 1)
    out_channels = w_shape[1] * groups
    x = tw.placeholder(x_shape, dtype, "x")
    w = tw.placeholder(w_shape, dtype, "w")
    b = tw.placeholder((out_channels,), dtype, "b") if bias else None
    y = getattr(tw.ops, f"conv_transpose{nsp}d")(x, w, b, **kw)
    arrays = {"x": random_array(rng, x_shape, dtype), "w": random_array(rng, w_shape, dtype)}
    if bias:
        arrays["b"] = random_array(rng, (out_channels,), dtype)
    got = tw.evaluate(y, arrays)
    t = {k: torch.from_numpy(v.astype(np.float64)) for k, v in arrays.items()}
    want = getattr(torch.nn.functional, f"conv_transpose{nsp}d")(t["x"], t["w"], t.get("b"), **kw).numpy()
    assert got.dtype == np.dtype(dtype)
    assert_close(got, want, dtype)
    return y


# (x shape, w shape, stride, padding, output_padding, dilation, groups, bias)
CASES_2D = [
    pytest.param((2, 4, 5, 6), (4, 3, 3, 3), 1, 0, 0, 1, 1, True, id="basic-bias"),
    pytest.param((1, 3, 4, 4), (3, 2, 3, 3), 2, 1, 1, 1, 1, False, id="stride2-outpad1"),
    pytest.param((2, 4, 5, 3), (4, 2, 3, 2), 3, 2, 2, 1, 2, True, id="stride3-pad2-outpad2-groups2"),
    pytest.param((1, 8, 4, 5), (8, 1, 3, 3), (2, 1), (1, 2), (0, 1), (1, 2), 4, True, id="tuples-groups4"),
    pytest.param((1, 2, 3, 7), (2, 3, 4, 3), 1, 2, 1, 2, 1, False, id="dil2-outpad-from-dilation"),
    pytest.param((3, 2, 4, 4), (2, 2, 1, 1), 2, 0, 1, 1, 1, True, id="1x1-stride2-batch3"),
    pytest.param((1, 2, 6, 5), (2, 2, 3, 3), 1, 2, 0, 1, 1, False, id="padding-crops"),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("x_shape, w_shape, stride, padding, output_padding, dilation, groups, bias", CASES_2D)
def test_conv_transpose2d_matches_torch(rng, x_shape, w_shape, stride, padding, output_padding, dilation, groups,
                                        bias, dtype):
    check_against_torch(rng, 2, x_shape, w_shape, dtype, bias, stride=stride, padding=padding,
                        output_padding=output_padding, groups=groups, dilation=dilation)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("x_shape, w_shape, stride, padding, output_padding, dilation, groups, bias", [
    pytest.param((2, 4, 7), (4, 3, 3), 2, 1, 1, 1, 1, True, id="stride2"),
    pytest.param((1, 4, 5), (4, 2, 4), 3, 0, 2, 2, 2, False, id="stride3-dil2-groups2"),
])
def test_conv_transpose1d_matches_torch(rng, x_shape, w_shape, stride, padding, output_padding, dilation, groups,
                                        bias, dtype):
    check_against_torch(rng, 1, x_shape, w_shape, dtype, bias, stride=stride, padding=padding,
                        output_padding=output_padding, groups=groups, dilation=dilation)


def test_conv_transpose1d_parameter_sweep(rng):
    """Every stride/padding/output_padding/dilation/groups/kernel combination PyTorch accepts."""
    for s, p, op, d, g, k in itertools.product([1, 2, 3], [0, 1, 2], [0, 1, 2], [1, 2], [1, 2], [1, 2, 3]):
        if op >= max(s, d) or (4 - 1) * s - 2 * p + d * (k - 1) + op + 1 <= 0:
            continue
        check_against_torch(rng, 1, (2, 4, 4), (4, 3, k), "float64", True, stride=s, padding=p, output_padding=op,
                            groups=g, dilation=d)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("x_shape, w_shape, stride, padding, output_padding, dilation, groups, bias", [
    pytest.param((1, 2, 3, 4, 3), (2, 3, 3, 2, 3), (2, 1, 3), (1, 0, 1), (1, 0, 2), 1, 1, True, id="mixed"),
    pytest.param((2, 4, 2, 3, 3), (4, 1, 2, 3, 2), 2, 1, 0, (1, 2, 1), 2, False, id="groups2-dil"),
])
def test_conv_transpose3d_matches_torch(rng, x_shape, w_shape, stride, padding, output_padding, dilation, groups,
                                        bias, dtype):
    check_against_torch(rng, 3, x_shape, w_shape, dtype, bias, stride=stride, padding=padding,
                        output_padding=output_padding, groups=groups, dilation=dilation)


def test_conv_transpose2d_float16(rng):
    check_against_torch(rng, 2, (1, 4, 4, 5), (4, 2, 3, 3), "float16", True, stride=2, padding=1, output_padding=1,
                        groups=2)


def numpy_conv_transpose2d(x, w, stride, padding, output_padding, dilation, groups) -> np.ndarray:
    """Scatter form in int64: every input element adds x * w into the outputs it reaches."""
    (sh, sw), (ph, pw), (oph, opw), (dh, dw) = stride, padding, output_padding, dilation
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    cg = c // groups
    full_h, full_w = (h - 1) * sh + dh * (kh - 1) + 1 + oph, (wd - 1) * sw + dw * (kw - 1) + 1 + opw
    full = np.zeros((n, og * groups, full_h, full_w), dtype=np.int64)
    for ci in range(c):
        g = ci // cg
        for i, j, r, s in itertools.product(range(h), range(wd), range(kh), range(kw)):
            contrib = x[:, ci, i, j].astype(np.int64)[:, None] * w[ci, :, r, s].astype(np.int64)[None, :]
            full[:, g * og:(g + 1) * og, i * sh + r * dh, j * sw + s * dw] += contrib
    return full[:, :, ph:full_h - ph, pw:full_w - pw]


def test_conv_transpose2d_int8_inputs_accumulate_in_int32(rng):
    x8 = tw.placeholder((2, 4, 3, 4), "int8", "x8")
    w8 = tw.placeholder((4, 3, 3, 2), "int8", "w8")
    x = tw.compute(x8.shape, lambda n, c, h, w: tw.cast(x8[n, c, h, w], "int32"), name="x32")
    w = tw.compute(w8.shape, lambda i, o, h, w: tw.cast(w8[i, o, h, w], "int32"), name="w32")
    y = tw.ops.conv_transpose2d(x, w, stride=(2, 3), padding=(1, 0), output_padding=(1, 2), groups=2, dilation=(1, 2))
    xa = rng.integers(-128, 128, size=x8.shape).astype(np.int8)
    wa = rng.integers(-128, 128, size=w8.shape).astype(np.int8)
    got = tw.evaluate(y, {x8: xa, w8: wa})
    want = numpy_conv_transpose2d(xa, wa, (2, 3), (1, 0), (1, 2), (1, 2), 2)
    np.testing.assert_array_equal(got, want.astype(np.int32))


@pytest.mark.parametrize("op, case_name, nsp", [
    ("T1D", "yolo_conv23_t1d", 1),
    ("T2D", "yolo_conv22_t", 2),
    ("T3D", "t3d_7", 3),
])
def test_flextensor_suite_case(rng, op, case_name, nsp):
    case = suite_case(op, case_name)
    spatial = {1: ["length"], 2: ["height", "width"], 3: ["depth", "height", "width"]}[nsp]
    c, o, k, groups = case["in_channels"], case["out_channels"], case["kernel"], case["groups"]
    x_shape = (case["batch"], c, *(case[s] for s in spatial))
    w_shape = (c, o // groups) + (k,) * nsp
    y = check_against_torch(rng, nsp, x_shape, w_shape, "float32", False, stride=case["stride"],
                            padding=case["padding"], output_padding=case["output_padding"], groups=groups,
                            dilation=case["dilation"])
    want_spatial = [case["out_length"]] if nsp == 1 else [case[f"out_{s}"] for s in spatial]
    assert list(y.shape) == [case["batch"], o, *want_spatial]


def test_stages_and_flipped_kernel():
    x = tw.placeholder((1, 4, 5, 5), "float32", "x")
    w = tw.placeholder((4, 2, 3, 3), "float32", "w")
    b = tw.placeholder((2,), "float32", "b")
    # k=1, padding 0, stride 1: nothing to spread or pad
    w1 = tw.placeholder((4, 2, 1, 1), "float32", "w1")
    assert [t.name for t in collect_program(tw.ops.conv_transpose2d(x, w1)).stages] == ["conv_transpose2d"]
    y = tw.ops.conv_transpose2d(x, w, b, stride=1, padding=1, name="same")
    assert [t.name for t in collect_program(y).stages] == ["same_pad", "same_sum", "same"]
    assert "w[rc, o, 2 - rh, 2 - rw]" in str(collect_program(y).by_name("same_sum").op.body)
    # stride 2 with few outputs per phase: the spread input
    y = tw.ops.conv_transpose2d(x, w, b, stride=2, padding=1, name="small")
    assert [t.name for t in collect_program(y).stages] == ["small_pad", "small_sum", "small"]
    assert "(h - 1) % 2 == 0" in str(collect_program(y).by_name("small_pad").op.body)
    # with many: per output phase, no products with inserted zeros, ceil(3 / 2) = 2 taps per axis
    big = tw.placeholder((1, 4, 20, 20), "float32", "big")
    y = tw.ops.conv_transpose2d(big, w, b, stride=2, padding=1, name="up")
    program = collect_program(y)
    assert [t.name for t in program.stages] == ["up_pad", "up_wphase", "up_phases", "up_sum", "up"]
    phases = program.by_name("up_phases")
    assert [a.extent for a in phases.op.reduce_axis] == [4, 2, 2]
    assert list(phases.shape) == [1, 2, 2, 2, 20, 20]  # [N, O, phase h, phase w, q h, q w]


@pytest.mark.parametrize("size,k,stride,padding,output_padding,nsp", [
    (5, 1, 3, 0, 0, 2), (5, 2, 3, 0, 2, 2), (6, 3, 2, 2, 1, 2), (4, 5, 3, 1, 2, 1), (7, 4, 2, 0, 1, 3),
    (3, 3, 4, 0, 3, 1), (5, 7, 2, 3, 1, 2), (5, 3, 3, 2, 0, 1),
])
def test_phase_decomposition_matches_torch(rng, monkeypatch, size, k, stride, padding, output_padding, nsp):
    """Every phase layout (kernel shorter than, equal to, longer than the stride; padding beyond
    k - 1; output padding) against PyTorch, forced onto the phase path at small sizes."""
    import tilewright.ops.conv_transpose as ct

    monkeypatch.setattr(ct, "MIN_PHASE_POINTS", 1)
    y = check_against_torch(rng, nsp, (2, 3) + (size,) * nsp, (3, 4) + (k,) * nsp, "float32", True,
                            stride=stride, padding=padding, output_padding=output_padding)
    assert any(t.name.endswith("_phases") for t in collect_program(y).stages)


def _x(shape=(1, 4, 5, 5), dtype="float32"):
    return tw.placeholder(shape, dtype, "x")


def _w(shape=(4, 3, 3, 3), dtype="float32"):
    return tw.placeholder(shape, dtype, "w")


@pytest.mark.parametrize("build, match", [
    pytest.param(lambda: tw.ops.conv_transpose2d(_x((1, 4, 5)), _w()),
                 r"conv_transpose2d: input 'x' must have 4 dimensions \(NCHW\)", id="x-ndim"),
    pytest.param(lambda: tw.ops.conv_transpose1d(_x((1, 4, 5)), _w()),
                 r"conv_transpose1d: weight 'w' must have 3 dimensions \(in_channels, out_channels/groups, KL\)",
                 id="w-ndim"),
    pytest.param(lambda: tw.ops.conv_transpose2d(_x(), _w((3, 3, 3, 3))),
                 r"weight 'w' .* has 3 input channels on axis 0, but input 'x' has 4; the weight layout is "
                 r"\[in_channels, out_channels/groups", id="weight-channels"),
    pytest.param(lambda: tw.ops.conv_transpose2d(_x(), _w(), groups=3),
                 r"input 'x' has 4 channels, which groups=3 does not divide", id="groups"),
    pytest.param(lambda: tw.ops.conv_transpose2d(_x(), _w(), stride=2, output_padding=2),
                 r"output_padding=\(2, 2\) must be smaller than stride or dilation.*axis H it is 2 with stride 2 "
                 r"and dilation 1", id="output-padding"),
    pytest.param(lambda: tw.ops.conv_transpose2d(_x(), _w(), output_padding=(0, 1)),
                 r"must be smaller than stride or dilation.*axis W", id="output-padding-stride1"),
    pytest.param(lambda: tw.ops.conv_transpose2d(_x(), _w(), padding="same"),
                 r"padding must be an int or 2 ints, got 'same'; transposed convolution has no 'same'/'valid'",
                 id="string-padding"),
    pytest.param(lambda: tw.ops.conv_transpose2d(_x(), _w(), padding=-1), r"padding must be >= 0", id="padding-neg"),
    pytest.param(lambda: tw.ops.conv_transpose2d(_x((1, 4, 1, 5)), _w(), padding=(2, 0)),
                 r"along axis H of input 'x' the output size .* = -1 is not positive", id="output-size"),
    pytest.param(lambda: tw.ops.conv_transpose2d(_x(), _w(), stride=0), r"stride must be >= 1", id="stride"),
    pytest.param(lambda: tw.ops.conv_transpose3d(_x(), _w()), r"conv_transpose3d: input 'x' must have 5",
                 id="conv_transpose3d-ndim"),
    pytest.param(lambda: tw.ops.conv_transpose2d(_x(), _w(), dilation=0), r"dilation must be >= 1", id="dilation"),
    pytest.param(lambda: tw.ops.conv_transpose2d(_x(), _w(), tw.placeholder((3,), "float32", "b"), groups=2),
                 r"bias 'b' must have shape \[6\] \(one value per output channel\)", id="bias-shape-groups"),
])
def test_conv_transpose_shape_errors(build, match):
    with pytest.raises(tw.ShapeError, match=match):
        build()


def test_conv_transpose_dtype_error():
    match = r"conv_transpose2d: weight 'w' has dtype float64 but input 'x' has float32"
    with pytest.raises(tw.DTypeError, match=match):
        tw.ops.conv_transpose2d(_x(), _w(dtype="float64"))

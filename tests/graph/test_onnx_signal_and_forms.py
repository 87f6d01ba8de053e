"""ONNX's DFT (forward, inverse, one-sided both ways, any axis, a dft_length that pads or cuts) and STFT
against NumPy's FFT, and the newer forms of older ops: Pad modes edge / reflect / wrap, Dropout's mask,
MatMul with a vector operand, ReduceMax / ReduceMin of booleans."""

import numpy as np
import pytest
from synthetic_targets import AVX2, host_runs

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilewright as tw  # noqa: E402
from tilewright.graph.frontend import UnsupportedOpError  # noqa: E402

pytestmark = pytest.mark.skipif(not host_runs(AVX2), reason="the host cannot run AVX2 kernels")
RNG = np.random.default_rng(3)
_TYPES = {np.dtype("float32"): TensorProto.FLOAT, np.dtype("bool"): TensorProto.BOOL}


def _run(nodes, inputs: dict, inits: dict, outputs, tmp_path, opset=20):
    vis = [helper.make_tensor_value_info(k, _TYPES[v.dtype], v.shape) for k, v in inputs.items()]
    outs = [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs]
    g = helper.make_graph(nodes, "g", vis, outs, [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    got = tw.compile(model, list(inputs.values()), target=AVX2, records=tmp_path / "r.db", progress=False)(
        *inputs.values())
    return got if isinstance(got, list) else [got]


def _complex(a):
    return a[..., 0] + 1j * a[..., 1] if a.shape[-1] == 2 else a[..., 0]


@pytest.mark.parametrize("inverse,onesided,length,axis,parts", [
    (0, 0, None, 1, 1), (0, 1, None, 1, 1), (0, 0, 12, 2, 2), (1, 0, None, 1, 2), (1, 1, 10, 1, 2),
    (0, 1, 6, 2, 1),
])
def test_dft_matches_numpy(inverse, onesided, length, axis, parts, tmp_path):
    x = RNG.standard_normal((2, 8, 5, parts)).astype(np.float32)
    names = ["x", "n" if length else "", "axis"]
    inits = {"axis": np.array(axis, np.int64)} | ({"n": np.array(length, np.int64)} if length else {})
    node = helper.make_node("DFT", names, ["y"], inverse=inverse, onesided=onesided)
    got = _run([node], {"x": x}, inits, ["y"], tmp_path)[0]
    signal = _complex(x.astype(np.float64))
    if inverse and onesided:
        want = np.fft.irfft(signal, n=length, axis=axis)[..., None]
    else:
        spectrum = (np.fft.ifft if inverse else np.fft.fft)(signal, n=length, axis=axis)
        if onesided:
            spectrum = np.take(spectrum, range(spectrum.shape[axis] // 2 + 1), axis=axis)
        want = np.stack([spectrum.real, spectrum.imag], -1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_stft_with_a_window(tmp_path):
    x, window = RNG.standard_normal((1, 40, 1)).astype(np.float32), np.hanning(16).astype(np.float32)
    node = helper.make_node("STFT", ["x", "step", "w"], ["y"], onesided=1)
    got = _run([node], {"x": x}, {"step": np.array(8, np.int64), "w": window}, ["y"], tmp_path, opset=17)[0]
    frames = np.stack([x[0, f * 8:f * 8 + 16, 0] * window for f in range(4)])
    spectrum = np.fft.rfft(frames.astype(np.float64), axis=-1)
    np.testing.assert_allclose(got[0], np.stack([spectrum.real, spectrum.imag], -1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["edge", "reflect", "wrap"])
def test_pad_modes(mode, tmp_path):
    x = RNG.standard_normal((2, 3, 5)).astype(np.float32)
    node = helper.make_node("Pad", ["x", "pads"], ["y"], mode=mode)
    pads = np.array([0, 2, 1, 0, 1, 3], np.int64)
    got = _run([node], {"x": x}, {"pads": pads}, ["y"], tmp_path)[0]
    np.testing.assert_array_equal(got, np.pad(x, [(0, 0), (2, 1), (1, 3)], mode=mode))


def test_reflect_pad_longer_than_the_axis_is_refused(tmp_path):
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    node = helper.make_node("Pad", ["x", "pads"], ["y"], mode="reflect")
    with pytest.raises(UnsupportedOpError, match="reflect pads 3, 0 on an axis of 3"):
        _run([node], {"x": x}, {"pads": np.array([0, 3, 0, 0], np.int64)}, ["y"], tmp_path)


def test_dropout_mask_vector_matmul_and_boolean_reductions(tmp_path):
    x, v = RNG.standard_normal((2, 3, 4)).astype(np.float32), RNG.standard_normal(4).astype(np.float32)
    b = RNG.standard_normal((2, 3)) > 0
    nodes = [helper.make_node("Dropout", ["x"], ["d", "mask"]), helper.make_node("MatMul", ["d", "v"], ["xv"]),
             helper.make_node("MatMul", ["v", "v"], ["vv"]),
             helper.make_node("ReduceMax", ["b", "axes"], ["any"], keepdims=0),
             helper.make_node("ReduceMin", ["b", "axes"], ["all"], keepdims=0)]
    got = _run(nodes, {"x": x, "v": v, "b": b}, {"axes": np.array([1], np.int64)},
               ["mask", "xv", "vv", "any", "all"], tmp_path)
    np.testing.assert_array_equal(got[0], np.ones_like(x, bool))
    np.testing.assert_allclose(got[1], x @ v, rtol=1e-5)
    np.testing.assert_allclose(got[2], v @ v, rtol=1e-5)
    np.testing.assert_array_equal(got[3], b.any(1))
    np.testing.assert_array_equal(got[4], b.all(1))


def test_float_to_integer_casts_truncate_saturate_and_zero_nan(tmp_path):
    x = np.array([1.7, -1.7, 3e9, -3e9, np.nan, np.inf, -np.inf, 255.9, -0.5], np.float32)
    i32, i64 = np.iinfo(np.int32), np.iinfo(np.int64)
    want = {"i32": (TensorProto.INT32, np.array([1, -1, i32.max, i32.min, 0, i32.max, i32.min, 255, 0], np.int32)),
            "u8": (TensorProto.UINT8, np.array([1, 0, 255, 0, 0, 255, 0, 255, 0], np.uint8)),
            "i64": (TensorProto.INT64, np.array([1, -1, 3000000000, -3000000000, 0, i64.max, i64.min, 255, 0],
                                                np.int64))}
    nodes = [helper.make_node("Cast", ["x"], [k], to=v[0]) for k, v in want.items()]
    for got, (_, expected) in zip(_run(nodes, {"x": x}, {}, list(want), tmp_path), want.values()):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("fmod", [0, 1])
def test_float_mod_edges(fmod, tmp_path):
    a = np.array([5.5, -5.5, 5.5, -5.5, 0.0, np.inf, 3.0, -3.0, 7.25], np.float32)
    b = np.array([2.0, 2.0, -2.0, -2.0, 3.0, 2.0, np.inf, np.inf, 0.0], np.float32)
    node = helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod)
    got = _run([node], {"a": a, "b": b}, {}, ["y"], tmp_path)[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        want = (np.fmod if fmod else np.mod)(a, b)
    np.testing.assert_array_equal(got, want)


def test_pow_of_mixed_dtypes(tmp_path):
    x, e = np.array([1.5, 2.0, -3.0], np.float32), np.array([2, 3, 3], np.int64)
    n = np.array([2, 3, -4], np.int32)
    nodes = [helper.make_node("Pow", ["x", "e"], ["f"]), helper.make_node("Pow", ["n", "e"], ["i"])]
    vis = {"x": x, "n": n}
    _TYPES[np.dtype("int32")] = TensorProto.INT32
    got = _run(nodes, vis, {"e": e}, ["f", "i"], tmp_path)
    np.testing.assert_allclose(got[0], x ** e.astype(np.float32), rtol=1e-6)
    np.testing.assert_array_equal(got[1], n ** e.astype(np.int32))


@pytest.mark.parametrize("mode,padding,align", [("linear", "zeros", 0), ("cubic", "reflection", 1),
                                                ("nearest", "border", 0), ("cubic", "border", 0)])
def test_grid_sample(mode, padding, align, tmp_path):
    from onnx.reference import ReferenceEvaluator

    x = RNG.standard_normal((1, 2, 4, 5)).astype(np.float32)
    grid = RNG.uniform(-1.3, 1.3, (1, 3, 4, 2)).astype(np.float32)
    node = helper.make_node("GridSample", ["x", "g"], ["y"], mode=mode, padding_mode=padding, align_corners=align)
    got = _run([node], {"x": x, "g": grid}, {}, ["y"], tmp_path)[0]
    model = helper.make_model(helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape) for k, v in (("x", x), ("g", grid))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]), opset_imports=[helper.make_opsetid("", 20)])
    want = ReferenceEvaluator(model).run(None, {"x": x, "g": grid})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("b_dtype,b_zero,shape", [("int8", 0, (5, 3)), ("uint8", 128, (6, 10)), ("uint8", 0, (4, 3)),
                                                  ("int8", 3, (2, 4, 3))])
def test_qlinear_matmul_of_any_shape_matches_onnx(b_dtype, b_zero, shape, tmp_path):
    """int8-range B of odd K / N through the padded qdense; B - b_zero outside int8 or batched B in float64."""
    from onnx.reference import ReferenceEvaluator

    lo, hi = (-128, 128) if b_dtype == "int8" else (0, 256)
    b = RNG.integers(lo, hi, shape).astype(b_dtype)
    a = RNG.integers(0, 256, (2, 3, shape[-2]) if len(shape) == 2 else (shape[0], 3, shape[1])).astype(np.uint8)
    inits = {"as": np.float32(0.02), "az": np.uint8(120), "b": b, "bs": np.float32(0.05), "bz": np.asarray(b_zero,
             b_dtype), "ys": np.float32(0.3), "yz": np.uint8(100)}
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", TensorProto.UINT8, a.shape)],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, None)],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    got = tw.compile(model, [a], target=AVX2, records=tmp_path / "r.db", progress=False)(a)
    want = ReferenceEvaluator(model).run(None, {"a": a})[0]
    if len(shape) == 2 and b_zero in (0, 128):  # the int8 kernel requantizes in float32, as ONNX Runtime does
        ort = pytest.importorskip("onnxruntime")
        theirs = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, {"a": a})[0]
        np.testing.assert_array_equal(got, theirs)
        assert np.abs(got.astype(int) - want.astype(int)).max() <= 1  # the reference multiplies in float64
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_resize_tf_crop_and_resize_extrapolates_outside_the_roi(mode, tmp_path):
    from onnx.reference import ReferenceEvaluator

    x = RNG.standard_normal((1, 2, 5, 6)).astype(np.float32)
    roi = np.array([0.2, -0.3, 0.9, 1.17], np.float32)  # axes 2, 3: starts, then ends (past both sides on axis 3)
    node = helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], mode=mode, axes=[2, 3],
                            coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-7.0)
    inits = {"roi": roi, "sizes": np.array([4, 7], np.int64)}
    got = _run([node], {"x": x}, inits, ["y"], tmp_path, opset=19)[0]
    model = helper.make_model(helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()]), opset_imports=[helper.make_opsetid("", 19)])
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    assert (got == -7.0).any()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

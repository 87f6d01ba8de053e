"""ONNX's activations, integer Mod, and Expand / Tile / Split / Slice / Trilu on run-time tensors (with
Range and ConstantOfShape folded from example values) compile and match ONNX Runtime."""

import numpy as np
import pytest
from synthetic_targets import AVX2, host_runs

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilewright as tw  # noqa: E402

pytestmark = pytest.mark.skipif(not host_runs(AVX2), reason="the host cannot run AVX2 kernels")


def _check(nodes, inputs, xs, inits=(), opset=18, exact=False, tmp_path=None, out_type=TensorProto.FLOAT):
    ort = pytest.importorskip("onnxruntime")
    outputs = [helper.make_tensor_value_info(o, out_type, None) for o in nodes[-1].output]
    g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(a, n) for n, a in inits])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {i.name: x for i, x in zip(inputs, xs)})
    got = tw.compile(model, xs, target=AVX2, records=tmp_path / "r.db", progress=False)(*xs)
    for g_, w in zip(got if isinstance(got, list) else [got], want, strict=True):
        if exact:
            np.testing.assert_array_equal(g_, w)
        else:
            np.testing.assert_allclose(g_, w, rtol=2e-5, atol=1e-6)


def _vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


@pytest.mark.parametrize("op, attrs", [
    ("Elu", {"alpha": 0.7}), ("Celu", {"alpha": 1.5}), ("Selu", {}), ("HardSigmoid", {"alpha": 0.3}),
    ("HardSwish", {}), ("Softplus", {}), ("Softsign", {}), ("ThresholdedRelu", {"alpha": 0.5}), ("Mish", {}),
    ("Shrink", {"bias": 0.2, "lambd": 0.6}), ("Sign", {}), ("Tan", {}), ("LogSoftmax", {"axis": 1}),
])
def test_activations(op, attrs, tmp_path):
    x = np.random.default_rng(0).uniform(-30, 30, (3, 7)).astype(np.float32)
    x[0, :3] = [0.0, 0.5, -0.5]
    _check([helper.make_node(op, ["x"], ["y"], **attrs)], [_vi("x", [3, 7])], [x], tmp_path=tmp_path)


def test_prelu_sum_mean_isnan_isinf(tmp_path):
    x = np.array([[1.0, -2.0, np.inf], [-np.inf, np.nan, 0.0]], np.float32)
    slope = np.array([0.1, 0.2, 0.3], np.float32)
    nodes = [helper.make_node("PRelu", ["x", "s"], ["p"]), helper.make_node("Sum", ["x", "p", "x"], ["t"]),
             helper.make_node("Mean", ["t", "p"], ["m"]), helper.make_node("IsNaN", ["m"], ["n"]),
             helper.make_node("IsInf", ["m"], ["i"], detect_negative=0), helper.make_node("Xor", ["n", "i"], ["y"])]
    _check(nodes, [_vi("x", [2, 3])], [x], [("s", slope)], exact=True, tmp_path=tmp_path, out_type=TensorProto.BOOL)


@pytest.mark.parametrize("fmod", [0, 1])
def test_integer_mod_takes_the_sign_its_mode_says(fmod, tmp_path):
    a = np.array([-7, 7, -7, 7, 5, -4], np.int32)
    b = np.array([2, 2, -2, -2, 3, 3], np.int32)
    _check([helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod)],
           [_vi("a", [6], TensorProto.INT32), _vi("b", [6], TensorProto.INT32)], [a, b], exact=True, tmp_path=tmp_path,
           out_type=TensorProto.INT32)


def test_expand_tile_split_slice_trilu(tmp_path):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    nodes = [helper.make_node("Expand", ["x", "shape"], ["e"]),  # [2, 3, 4] -> [2, 2, 3, 4]
             helper.make_node("Tile", ["x", "reps"], ["t"]),
             helper.make_node("Split", ["t", "parts"], ["s0", "s1"], axis=2),
             helper.make_node("Slice", ["s1", "starts", "ends", "axes", "steps"], ["sl"]),
             helper.make_node("Trilu", ["sl", "k"], ["tr"], upper=0),
             helper.make_node("Add", ["tr", "tr"], ["y"])]
    inits = [("shape", np.array([2, 1, 1, 1], np.int64)), ("reps", np.array([1, 2, 3], np.int64)),
             ("parts", np.array([5, 7], np.int64)), ("starts", np.array([1, 0], np.int64)),
             ("ends", np.array([6, 100], np.int64)), ("axes", np.array([1, -1], np.int64)),
             ("steps", np.array([2, 3], np.int64)), ("k", np.array(1, np.int64))]
    _check(nodes, [_vi("x", [2, 3, 4])], [x], inits, exact=True, tmp_path=tmp_path)
    _check([helper.make_node("Expand", ["x", "shape"], ["y"])], [_vi("x", [2, 3, 4])], [x], inits[:1],
           exact=True, tmp_path=tmp_path)


def test_range_and_constant_of_shape_from_example_values(tmp_path):
    start, limit, delta = (np.array(v, np.int64) for v in (2, 11, 3))
    nodes = [helper.make_node("Range", ["a", "b", "c"], ["r"]), helper.make_node("Cast", ["r"], ["y"], to=1)]
    _check(nodes, [_vi(n, [], TensorProto.INT64) for n in "abc"], [start, limit, delta], exact=True,
           tmp_path=tmp_path)


def test_gather_and_gather_elements_of_run_time_data(tmp_path):
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    idx = np.array([[0, -1], [2, 1]], np.int64)
    nodes = [helper.make_node("Gather", ["x", "i"], ["g"], axis=1),  # [3, 2, 2, 5]
             helper.make_node("GatherElements", ["x", "e"], ["y"], axis=2)]
    e = np.random.default_rng(3).integers(-5, 5, (3, 4, 2)).astype(np.int64)
    _check(nodes[:1], [_vi("x", [3, 4, 5]), _vi("i", [2, 2], TensorProto.INT64)], [x, idx], exact=True,
           tmp_path=tmp_path)
    _check(nodes[1:], [_vi("x", [3, 4, 5]), _vi("e", [3, 4, 2], TensorProto.INT64)], [x, e], exact=True,
           tmp_path=tmp_path)


def test_gather_indices_out_of_range_are_refused_before_any_kernel(tmp_path):
    g = helper.make_graph([helper.make_node("Gather", ["x", "i"], ["y"], axis=1)], "g",
                          [_vi("x", [2, 3]), _vi("i", [2], TensorProto.INT64)], [_vi("y", None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    x, i = np.ones((2, 3), np.float32), np.array([0, 2], np.int64)
    module = tw.compile(model, [x, i], target=AVX2, records=tmp_path / "r.db", progress=False)
    with pytest.raises(tw.ShapeError, match=r"input 'i' holds id 3, outside \[-3, 3\)"):
        module(x, np.array([0, 3], np.int64))


@pytest.mark.parametrize("mode, transform, extra", [
    ("nearest", "asymmetric", {"nearest_mode": "floor"}), ("nearest", "half_pixel", {}),
    ("linear", "half_pixel", {}), ("linear", "align_corners", {}), ("linear", "pytorch_half_pixel", {}),
    ("cubic", "half_pixel", {}), ("cubic", "asymmetric", {"exclude_outside": 1, "cubic_coeff_a": -0.5}),
])
@pytest.mark.parametrize("scales", [(1, 1, 2.0, 1.5), (1, 1, 0.6, 0.8)])
def test_resize_matches_onnxruntime(mode, transform, extra, scales, tmp_path):
    if transform == "align_corners" and scales[3] * 6 != int(scales[3] * 6):
        pytest.skip("a fractional resized length: ONNX's reference (which the node tests follow, and so do we) "
                    "divides by it, ONNX Runtime by the rounded length")
    x = np.random.default_rng(4).standard_normal((1, 2, 5, 6)).astype(np.float32)
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode, coordinate_transformation_mode=transform,
                            **extra)
    _check([node], [_vi("x", [1, 2, 5, 6]), _vi("scales", [4])], [x, np.array(scales, np.float32)],
           tmp_path=tmp_path)


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_cumsum(exclusive, reverse, dtype, tmp_path):
    x = np.random.default_rng(5).integers(-9, 9, (3, 5)).astype(dtype)
    onnx_type = TensorProto.FLOAT if dtype == np.float32 else TensorProto.INT32
    _check([helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)],
           [_vi("x", [3, 5], onnx_type)], [x], [("axis", np.array(1, np.int64))], exact=True, tmp_path=tmp_path,
           out_type=onnx_type)


def test_one_hot_wraps_negative_indices(tmp_path):
    idx = np.array([[0, -1, 2], [3, 1, -4]], np.int64)
    _check([helper.make_node("OneHot", ["i", "depth", "values"], ["y"], axis=1)], [_vi("i", [2, 3], TensorProto.INT64)],
           [idx], [("depth", np.array(4, np.int64)), ("values", np.array([-1.0, 5.0], np.float32))], exact=True,
           tmp_path=tmp_path)

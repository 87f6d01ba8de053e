"""Dynamically quantized ONNX models (what ONNX Runtime's `quantize_dynamic` writes): DynamicQuantizeLinear
computes each activation's scale and zero point at run time, MatMulInteger multiplies in int32, Cast and
Mul scale back. The quantized activation, its scale and zero point match ONNX Runtime's bit for bit (the
range's corner cases included: all zeros, all negative, all positive), the int32 products are exact, and
weights or zero points the int8 kernel cannot take are refused by name."""

import importlib

import numpy as np
import pytest
from synthetic_targets import AVX2, host_runs

import tilewright as tw
from tilewright.errors import TilewrightError

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tilewright.graph.frontend.onnx import from_onnx  # noqa: E402

reference = importlib.import_module("tilewright.graph.reference")
optimize = importlib.import_module("tilewright.graph.optimize")

pytestmark = pytest.mark.skipif(not host_runs(AVX2), reason="the host cannot run AVX2 kernels")

K, N = 32, 16


def _model(w, w_zero, x_shape=(2, 5, K), a_zero_const=None, outputs="scaled"):
    """x -> DynamicQuantizeLinear -> MatMulInteger(w) -> Cast -> Mul(x_scale * w_scale) -> y, or (with
    outputs="dql") the three DynamicQuantizeLinear outputs, or ("int") MatMulInteger's int32."""
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(w_zero, "w_zero"),
             numpy_helper.from_array(np.float32(0.01), "w_scale")]
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"])]
    a_zero = "xz"
    if a_zero_const is not None:
        inits.append(numpy_helper.from_array(np.uint8(a_zero_const), "az"))
        a_zero = "az"
    nodes += [helper.make_node("MatMulInteger", ["xq", "w", a_zero, "w_zero"], ["acc"]),
              helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
              helper.make_node("Mul", ["xs", "w_scale"], ["s"]),
              helper.make_node("Mul", ["accf", "s"], ["y"])]
    out_shape = (*x_shape[:-1], w.shape[1])
    outs = {"scaled": [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
            "int": [helper.make_tensor_value_info("acc", TensorProto.INT32, out_shape)],
            "dql": [helper.make_tensor_value_info("xq", TensorProto.UINT8, x_shape),
                    helper.make_tensor_value_info("xs", TensorProto.FLOAT, []),
                    helper.make_tensor_value_info("xz", TensorProto.UINT8, [])]}[outputs]
    g = helper.make_graph(nodes, "dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)], outs,
                          inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _inputs(rng, shape=(2, 5, K)):
    return {"mixed": rng.standard_normal(shape).astype(np.float32) * 3,
            "zeros": np.zeros(shape, np.float32),
            "negative": -np.abs(rng.standard_normal(shape)).astype(np.float32) - 0.5,
            "positive": np.abs(rng.standard_normal(shape)).astype(np.float32) + 0.5}


def _run(model, x):
    module = tw.compile(from_onnx(model), [x], target=AVX2, progress=False)
    out = module(x)
    return [np.asarray(o) for o in out] if isinstance(out, (list, tuple)) else [np.asarray(out)]


def test_dynamic_quantize_linear_matches_onnx_runtime_bit_for_bit():
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(0)
    model = _model(rng.integers(-128, 128, (K, N)).astype(np.int8), np.int8(0), outputs="dql")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for kind, x in _inputs(rng).items():
        ours = _run(model, x)
        theirs = session.run(None, {"x": x})
        for a, b, what in zip(ours, theirs, ("y", "y_scale", "y_zero_point")):
            assert a.dtype == b.dtype and np.array_equal(a.reshape(b.shape), b), (kind, what, a, b)


@pytest.mark.parametrize("w_dtype,w_zero", [("int8", 0), ("uint8", 128)])
def test_matmul_integer_is_exact_and_the_scaled_result_matches_onnx_runtime(w_dtype, w_zero):
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(1)
    lo, hi = (-128, 128) if w_dtype == "int8" else (0, 256)
    w = rng.integers(lo, hi, (K, N)).astype(w_dtype)
    w[0, :] = lo  # the extremes in every column: 255 x -128 products
    zero = np.asarray(w_zero, w_dtype)
    x = _inputs(rng)["mixed"]
    acc = _run(_model(w, zero, outputs="int"), x)[0]
    xq, _, xz = _run(_model(w, zero, outputs="dql"), x)
    want = (xq.astype(np.int64) - int(xz.reshape(()))) @ (w.astype(np.int64) - w_zero)
    assert acc.dtype == np.int32 and np.array_equal(acc, want)
    model = _model(w, zero)
    ours = _run(model, x)[0]
    theirs = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_array_equal(ours, theirs[0])
    graph = from_onnx(model)
    np.testing.assert_array_equal(ours, reference.run_reference(optimize.optimize(graph), [x])[0])


def test_a_constant_activation_zero_point_folds_into_the_bias():
    rng = np.random.default_rng(2)
    w = rng.integers(-128, 128, (K, N)).astype(np.int8)
    x = _inputs(rng)["positive"]
    acc = _run(_model(w, np.int8(0), a_zero_const=7, outputs="int"), x)[0]
    xq = _run(_model(w, np.int8(0), outputs="dql"), x)[0]
    np.testing.assert_array_equal(acc, (xq.astype(np.int64) - 7) @ w.astype(np.int64))


def test_weights_of_any_shape_pad_and_what_the_int8_kernel_cannot_take_is_refused_by_name():
    rng = np.random.default_rng(3)
    w = rng.integers(0, 256, (K, N)).astype(np.uint8)
    with pytest.raises(TilewrightError, match="must fit int8"):
        from_onnx(_model(w, np.uint8(0)))
    odd = rng.integers(-128, 128, (K - 3, N + 3)).astype(np.int8)  # padded to the packed blocks, sliced back
    x = np.ascontiguousarray(_inputs(rng)["mixed"][..., :K - 3])
    acc = _run(_model(odd, np.int8(0), x_shape=x.shape, outputs="int"), x)[0]
    xq, _, xz = _run(_model(odd, np.int8(0), x_shape=x.shape, outputs="dql"), x)
    assert np.array_equal(acc, (xq.astype(np.int64) - int(xz.reshape(()))) @ odd.astype(np.int64))
    per_row = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "w", "az"], ["y"])], "g",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [4, K]),
         helper.make_tensor_value_info("az", TensorProto.UINT8, [4])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [4, N])],
        [numpy_helper.from_array(rng.integers(-128, 128, (K, N)).astype(np.int8), "w")])
    with pytest.raises(TilewrightError, match="a_zero_point must be a scalar"):
        from_onnx(helper.make_model(per_row, opset_imports=[helper.make_opsetid("", 17)]))


def test_cast_between_integers_and_to_float_and_float_to_integer_saturates():
    def cast_model(src, dst, onnx_src, onnx_dst):
        g = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=onnx_dst)], "c",
                              [helper.make_tensor_value_info("x", onnx_src, [3, 8])],
                              [helper.make_tensor_value_info("y", onnx_dst, [3, 8])])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])

    x = np.arange(-12, 12, dtype=np.int32).reshape(3, 8) * 1000
    got = _run(cast_model("int32", "float32", TensorProto.INT32, TensorProto.FLOAT), x)[0]
    np.testing.assert_array_equal(got, x.astype(np.float32))
    got = _run(cast_model("int32", "uint8", TensorProto.INT32, TensorProto.UINT8), x)[0]
    np.testing.assert_array_equal(got, x.astype(np.uint8))  # wraps, as NumPy does
    f = np.array([[2.9, -2.9, 1e10, -1e10, np.nan, np.inf, -np.inf, 0.5]] * 3, np.float32)
    got = _run(cast_model("float32", "int32", TensorProto.FLOAT, TensorProto.INT32), f)[0]
    top, bottom = np.iinfo(np.int32).max, np.iinfo(np.int32).min
    np.testing.assert_array_equal(got, np.array([[2, -2, top, bottom, 0, top, bottom, 0]] * 3, np.int32))


def _conv_integer_model(w, w_zero, pads, computed_x_zero=True):
    """x -> DynamicQuantizeLinear -> ConvInteger(w, x_zero, w_zero) -> int32 (quantize_dynamic on a CNN)."""
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(w_zero, "w_zero")]
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"])]
    x_zero = "xz"
    if not computed_x_zero:
        inits.append(numpy_helper.from_array(np.uint8(7), "x_zero"))
        x_zero = "x_zero"
    nodes.append(helper.make_node("ConvInteger", ["xq", "w", x_zero, "w_zero"], ["y"], pads=list(pads)))
    o, c, kh, kw = w.shape
    oh = 6 + pads[0] + pads[2] - kh + 1
    graph = helper.make_graph(nodes, "conv_integer", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                   [1, c, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, [1, o, oh, oh])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("pads", [(0, 0, 0, 0), (1, 1, 1, 1)], ids=["valid", "padded"])
@pytest.mark.parametrize("computed_x_zero", [True, False], ids=["computed-zero", "constant-zero"])
def test_conv_integer_pads_after_subtracting_the_zero_points(tmp_path, pads, computed_x_zero):
    """ONNX ConvInteger is conv(x - x_zero, w - w_zero) with zero padding: the border sees 0, not -x_zero."""
    rng = np.random.default_rng(3)
    w = rng.integers(-128, 128, (8, 3, 3, 3)).astype(np.int8)
    w_zero = rng.integers(-3, 4, 8).astype(np.int8)  # one per output channel
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    graph = from_onnx(_conv_integer_model(w, w_zero, pads, computed_x_zero))
    module = tw.compile(graph, target=AVX2, trials=0, layout="NCHW", records=tmp_path / "r.db")
    got = np.asarray(module(x))
    np.testing.assert_array_equal(got, reference.run_reference(optimize.optimize(graph), [x])[0])
    # and against torch's float64 convolution of the centred operands (exact at these sizes), from the
    # quantized input and zero point DynamicQuantizeLinear gives
    torch = pytest.importorskip("torch")

    dql = onnx.helper.make_model(onnx.helper.make_graph(
        [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"])], "dql",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])],
        [helper.make_tensor_value_info(v, t, s) for v, t, s in (("xq", TensorProto.UINT8, [1, 3, 6, 6]),
                                                               ("xs", TensorProto.FLOAT, []),
                                                               ("xz", TensorProto.UINT8, []))]),
        opset_imports=[helper.make_opsetid("", 17)])
    xq, _, xz = reference.run_reference(optimize.optimize(from_onnx(dql)), [x])
    zero = int(xz) if computed_x_zero else 7
    centred = torch.from_numpy(xq.astype(np.float64) - zero)
    weights = torch.from_numpy(w.astype(np.float64) - w_zero.astype(np.float64).reshape(8, 1, 1, 1))
    want = torch.nn.functional.conv2d(centred, weights, padding=pads[:2]).numpy().astype(np.int32)
    np.testing.assert_array_equal(got, want)


def test_conv_integer_of_a_float_input_is_refused_by_name():
    w = np.zeros((4, 3, 3, 3), np.int8)
    graph = helper.make_graph([helper.make_node("ConvInteger", ["x", "w"], ["y"])], "bad",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, [1, 4, 4, 4])],
                              [numpy_helper.from_array(w, "w")])
    with pytest.raises(TilewrightError, match="ConvInteger.*x and w must be uint8 or int8"):
        from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))

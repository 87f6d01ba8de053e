"""ONNX's Reduce family, comparisons, logic and Where compile and match ONNX Runtime; an input
that fixes a shape takes its example value and every call is checked against it."""

import numpy as np
import pytest
from synthetic_targets import AVX2, host_runs

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilewright as tw  # noqa: E402
from tilewright.errors import ShapeError  # noqa: E402
from tilewright.graph.frontend import UnsupportedOpError  # noqa: E402

pytestmark = pytest.mark.skipif(not host_runs(AVX2), reason="the host cannot run AVX2 kernels")


def _model(nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(a, n) for n, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def _onnxruntime(model, xs):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: x for i, x in zip(model.graph.input, xs)})


def _compiled(model, xs, tmp_path):
    return tw.compile(model, xs, target=AVX2, records=tmp_path / "r.db", progress=False)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceProd", "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSum",
                                "ReduceLogSumExp", "ReduceMean", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_family_matches_onnxruntime(op, keepdims, tmp_path):
    x = np.random.default_rng(0).uniform(0.5, 2.0, (3, 4, 5)).astype(np.float32)
    if op == "ReduceLogSumExp":
        x[0, 0, 0] = 80.0  # exp overflows float32 unless shifted by the maximum
    model = _model([helper.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims)], [_vi("x", [3, 4, 5])],
                   [_vi("y", None)], [("axes", np.array([0, -1], np.int64))])
    got = _compiled(model, [x], tmp_path)(x)
    np.testing.assert_allclose(got, _onnxruntime(model, [x])[0], rtol=1e-5)


def test_comparisons_logic_and_where_match_onnxruntime(tmp_path):
    rng = np.random.default_rng(1)
    a = rng.integers(-3, 3, (2, 3, 4)).astype(np.float32)
    b = rng.integers(-3, 3, (3, 1)).astype(np.float32)
    nodes = [helper.make_node("Less", ["a", "b"], ["lt"]), helper.make_node("Equal", ["a", "b"], ["eq"]),
             helper.make_node("GreaterOrEqual", ["a", "b"], ["ge"]), helper.make_node("Or", ["lt", "eq"], ["le"]),
             helper.make_node("Xor", ["le", "ge"], ["x"]), helper.make_node("Not", ["x"], ["nx"]),
             helper.make_node("And", ["nx", "lt"], ["both"]), helper.make_node("Where", ["both", "a", "b"], ["y"])]
    model = _model(nodes, [_vi("a", [2, 3, 4]), _vi("b", [3, 1])],
                   [_vi("y", None), _vi("x", None, TensorProto.BOOL)])
    y, x = _compiled(model, [a, b], tmp_path)(a, b)
    want_y, want_x = _onnxruntime(model, [a, b])
    np.testing.assert_array_equal(x, want_x)
    np.testing.assert_array_equal(y, want_y)


def test_a_shape_input_takes_its_example_value_and_is_checked(tmp_path):
    model = _model([helper.make_node("Reshape", ["x", "shape"], ["y"])],
                   [_vi("x", [2, 6]), _vi("shape", [2], TensorProto.INT64)], [_vi("y", None)])
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    module = _compiled(model, [x, np.array([3, 4], np.int64)], tmp_path)
    np.testing.assert_array_equal(module(x, np.array([3, 4], np.int64)), x.reshape(3, 4))
    with pytest.raises(ShapeError, match=r"input 'shape' holds \[4, 3\], but the module was compiled for \[3, 4\]"):
        module(x, np.array([4, 3], np.int64))
    loaded = tw.load(module.export(tmp_path / "lib"))
    np.testing.assert_array_equal(loaded(x, np.array([3, 4], np.int64)), x.reshape(3, 4))
    with pytest.raises(ShapeError, match=r"input 'shape' holds \[4, 3\], but the library was compiled for"):
        loaded(x, np.array([4, 3], np.int64))
    with pytest.raises(UnsupportedOpError, match="must be a constant, or a graph input given a value"):
        tw.compile(model, target=AVX2, records=tmp_path / "r.db", progress=False)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1])
def test_arg_extremes_pick_the_first_or_last_tie(op, last, tmp_path):
    x = np.random.default_rng(2).integers(0, 3, (4, 5, 3)).astype(np.float32)  # ties everywhere
    model = _model([helper.make_node(op, ["x"], ["y"], axis=1, keepdims=0, select_last_index=last)],
                   [_vi("x", [4, 5, 3])], [_vi("y", None, TensorProto.INT64)])
    np.testing.assert_array_equal(_compiled(model, [x], tmp_path)(x), _onnxruntime(model, [x])[0])

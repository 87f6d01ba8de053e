"""ONNX's bitwise ops (BitwiseAnd/Or/Xor/Not, BitShift) and unsigned tensors (uint16/32/64) through the
graph: compiled results equal ONNX's reference evaluator and NumPy, including values above INT64_MAX,
comparisons across the sign boundary and shift counts outside [0, bits); inputs the ops do not take are
refused naming the op, the node and the valid dtypes."""

import numpy as np
import pytest
from synthetic_targets import AVX2, host_runs

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import tilewright as tw  # noqa: E402
from tilewright.errors import ShapeError  # noqa: E402
from tilewright.graph import Graph, Node, TensorType  # noqa: E402
from tilewright.graph.frontend import UnsupportedOpError, from_onnx  # noqa: E402
from tilewright.graph.infer import infer_types  # noqa: E402

pytestmark = pytest.mark.skipif(not host_runs(AVX2), reason="the host cannot run AVX2 kernels")

_ELEM = {"uint8": TensorProto.UINT8, "uint16": TensorProto.UINT16, "uint32": TensorProto.UINT32,
         "uint64": TensorProto.UINT64, "int8": TensorProto.INT8, "int32": TensorProto.INT32,
         "float32": TensorProto.FLOAT, "bool": TensorProto.BOOL}


def _model(nodes, inputs, outputs, opset=28):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, _ELEM[d], s) for n, d, s in inputs],
                          [helper.make_tensor_value_info(n, _ELEM[d], None) for n, d in outputs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _check(model, xs, tmp_path):
    got = tw.compile(model, xs, target=AVX2, records=tmp_path / "r.db", progress=False)(*xs)
    got = got if isinstance(got, (list, tuple)) else [got]
    want = ReferenceEvaluator(model).run(None, {i.name: x for i, x in zip(model.graph.input, xs)})
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    return got


def _uint64(rng, shape):
    return rng.integers(0, 2 ** 64 - 1, shape, dtype=np.uint64, endpoint=True) | np.uint64(2 ** 63) * (
        rng.integers(0, 2, shape).astype(np.uint64))


def test_bitwise_ops_broadcast_on_uint64_above_int64_max(tmp_path):
    rng = np.random.default_rng(0)
    x, y = _uint64(rng, (3, 4, 5)), _uint64(rng, (5,))
    nodes = [helper.make_node("BitwiseAnd", ["x", "y"], ["a"]), helper.make_node("BitwiseOr", ["x", "y"], ["o"]),
             helper.make_node("BitwiseXor", ["a", "o"], ["e"]), helper.make_node("BitwiseNot", ["e"], ["n"])]
    model = _model(nodes, [("x", "uint64", [3, 4, 5]), ("y", "uint64", [5])],
                   [("a", "uint64"), ("o", "uint64"), ("n", "uint64")], opset=18)
    a, o, n = _check(model, [x, y], tmp_path)
    np.testing.assert_array_equal(a, x & y)
    np.testing.assert_array_equal(n, ~((x & y) ^ (x | y)))
    assert (x > np.uint64(2 ** 63)).any()


@pytest.mark.parametrize("dtype", ["uint16", "int32"])
def test_bitwise_not_of_narrow_and_signed_values(dtype, tmp_path):
    info = np.iinfo(dtype)
    x = np.random.default_rng(1).integers(info.min, info.max, (4, 6), dtype=dtype, endpoint=True)
    x[0, :2] = info.min, info.max
    model = _model([helper.make_node("BitwiseNot", ["x"], ["y"])], [("x", dtype, [4, 6])], [("y", dtype)], opset=18)
    np.testing.assert_array_equal(_check(model, [x], tmp_path)[0], ~x)


@pytest.mark.parametrize("dtype", ["uint32", "int8"])
def test_bitshift_both_directions_with_counts_outside_the_width(dtype, tmp_path):
    info = np.iinfo(dtype)
    x = np.array([[1, info.max, info.min, 5, -8 if info.min else 200, 64, info.max // 2 + 1, 3]], dtype)
    counts = [1, 31, 7, 0, 40, 100, -1, -100] if info.min else [1, 31, 7, 0, 32, 33, 100, 2 ** 32 - 1]
    y = np.array(counts, np.int64).astype(dtype)
    nodes = [helper.make_node("BitShift", ["x", "y"], ["l"], direction="LEFT"),
             helper.make_node("BitShift", ["x", "y"], ["r"], direction="RIGHT")]
    model = _model(nodes, [("x", dtype, [1, 8]), ("y", dtype, [8])], [("l", dtype), ("r", dtype)])
    left, right = _check(model, [x, y], tmp_path)
    bits = info.bits
    inside = (np.array(counts) >= 0) & (np.array(counts) < bits)
    assert (left[0, ~inside] == 0).all()
    fill = np.where(x[0, ~inside] < 0, -1, 0)
    np.testing.assert_array_equal(right[0, ~inside], fill)


def test_unsigned_arithmetic_comparisons_and_mod_across_the_sign_boundary(tmp_path):
    x = np.array([2 ** 31, 2 ** 32 - 1, 7, 0, 2 ** 31 - 1, 3_000_000_000], np.uint32)
    y = np.array([1, 2 ** 31, 7, 2 ** 32 - 1, 2 ** 31, 4_000_000_000], np.uint32)
    nodes = [helper.make_node("Greater", ["x", "y"], ["g"]), helper.make_node("LessOrEqual", ["x", "y"], ["le"]),
             helper.make_node("Max", ["x", "y"], ["mx"]), helper.make_node("Mod", ["x", "y"], ["m"]),
             helper.make_node("Sub", ["x", "y"], ["d"]), helper.make_node("Mul", ["x", "y"], ["p"]),
             helper.make_node("Div", ["x", "y"], ["q"])]
    model = _model(nodes, [("x", "uint32", [6]), ("y", "uint32", [6])],
                   [("g", "bool"), ("le", "bool"), ("mx", "uint32"), ("m", "uint32"), ("d", "uint32"),
                    ("p", "uint32"), ("q", "uint32")], opset=18)
    g, le, mx, m, d, p, q = _check(model, [x, y], tmp_path)
    np.testing.assert_array_equal(g, x > y)
    np.testing.assert_array_equal(m, x % y)
    np.testing.assert_array_equal(d, x - y)
    np.testing.assert_array_equal(q, x // y)


def test_integer_div_rounds_toward_zero(tmp_path):
    x = np.array([[-7, 7, -128, 127, -1, 100]], np.int8)
    y = np.array([2, -2, -1, 3, 5, -7], np.int8)
    model = _model([helper.make_node("Div", ["x", "y"], ["q"])], [("x", "int8", [1, 6]), ("y", "int8", [6])],
                   [("q", "int8")], opset=18)
    q = _check(model, [x, y], tmp_path)[0]
    np.testing.assert_array_equal(q, [[-3, -3, -128, 42, 0, -14]])


def test_bitwise_inputs_that_are_not_integers_are_refused():
    floats = _model([helper.make_node("BitwiseAnd", ["x", "y"], ["z"])],
                    [("x", "float32", [2]), ("y", "float32", [2])], [("z", "float32")], opset=18)
    with pytest.raises(UnsupportedOpError, match=r"BitwiseAnd.*a float32 input; valid: int8, .*uint64"):
        from_onnx(floats)
    sideways = _model([helper.make_node("BitShift", ["x", "y"], ["z"], direction="UP")],
                      [("x", "uint8", [2]), ("y", "uint8", [2])], [("z", "uint8")])
    with pytest.raises(UnsupportedOpError, match=r"BitShift.*direction 'UP'; valid: 'LEFT', 'RIGHT'"):
        from_onnx(sideways)


def test_graph_bitwise_ops_take_one_integer_dtype():
    mixed = Graph([Node("left_shift", ("a", "b"), ("c",), name="shl")], ["a", "b"], ["c"],
                  {"a": TensorType((2,), "uint32"), "b": TensorType((2,), "int32")})
    with pytest.raises(ShapeError, match=r"node 'shl' \(left_shift\).*integer inputs of one dtype"):
        infer_types(mixed)
    logical = Graph([Node("bitwise_not", ("a",), ("c",), name="inv")], ["a"], ["c"], {"a": TensorType((2,), "bool")})
    with pytest.raises(ShapeError, match="bool: the logical_\\* ops"):
        infer_types(logical)


def test_graph_truncdiv_and_shifts_equal_their_reference_with_zero_divisors_and_wide_counts(tmp_path):
    from tilewright.graph.reference import run_reference

    nodes = [Node("truncdiv", ("a", "b"), ("q",), name="q"), Node("right_shift", ("a", "b"), ("r",), name="r"),
             Node("bitwise_xor", ("q", "r"), ("y",), name="y")]
    graph = Graph(nodes, ["a", "b"], ["q", "r", "y"],
                  {"a": TensorType((2, 8), "int64"), "b": TensorType((8,), "int64")})
    a = np.array([[-2 ** 63, 2 ** 63 - 1, -9, 9, -1, 5, 0, -77]] * 2, np.int64)
    b = np.array([-1, 0, 64, -3, 63, 70, 2, -64], np.int64)
    q, r, y = run_reference(infer_types(graph), [a, b])
    np.testing.assert_array_equal(q[0], [-2 ** 63, 0, 0, -3, 0, 0, 0, 1])  # MIN / -1 wraps, x / 0 == 0
    np.testing.assert_array_equal(r[0], [-1, 2 ** 63 - 1, -1, 0, -1, 0, 0, -1])
    got = tw.compile(graph, target=AVX2, trials=0, records=tmp_path / "r.db", progress=False)(a, b)
    for g, w in zip(got, (q, r, y), strict=True):
        np.testing.assert_array_equal(g, w)

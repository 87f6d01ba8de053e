"""from_onnx: in-tree models exported by torch.onnx (dynamo and TorchScript
exporters) and small hand-built ONNX graphs become opset graphs whose NumPy
reference run matches PyTorch eager / ONNX Runtime; unsupported ops and
opsets are errors that name them."""

import io

import numpy as np
import pytest
from synthetic_targets import AVX2, host_runs

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tilewright.errors import TilewrightError  # noqa: E402
from tilewright.graph.frontend import UnsupportedOpError, from_onnx  # noqa: E402
from tilewright.graph.infer import infer_types  # noqa: E402
from tilewright.graph.reference import run_reference  # noqa: E402
from tilewright.models import MODELS  # noqa: E402


def _eager(model, x):
    with torch.no_grad():
        return model(x).numpy()


def _close(got, want, rtol=1e-4):
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * max(1.0, np.abs(want).max()))


def _checked(graph):
    graph.check()
    inferred = infer_types(graph)
    assert {v: inferred.types[v] for v in graph.types} == graph.types
    return graph


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "bert_layer"])
def test_dynamo_export_matches_eager(name, tmp_path):
    spec = MODELS[name]
    model, x = spec.build(reduced=True), spec.example_input(reduced=True)
    path = tmp_path / f"{name}.onnx"
    torch.onnx.export(model, (x,), str(path), dynamo=True, verbose=False)
    graph = _checked(from_onnx(path))
    _close(run_reference(graph, [x.numpy()])[0], _eager(model, x))


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("opset", [13, 17])
def test_torchscript_export_matches_eager(name, opset):
    """The older exporter leaves BatchNormalization, Flatten, Erf-based GELU (opset 13) and weight Transposes."""
    spec = MODELS[name]
    model, x = spec.build(reduced=True), spec.example_input(reduced=True)
    f = io.BytesIO()
    torch.onnx.export(model, (x,), f, dynamo=False, opset_version=opset, do_constant_folding=False)
    graph = _checked(from_onnx(onnx.load_from_string(f.getvalue())))
    assert all(n.op not in ("permute",) or not graph.is_constant(n.inputs[0]) for n in graph.nodes)
    _close(run_reference(graph, [x.numpy()])[0], _eager(model, x))


def _model(nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(a, n) for n, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _against_onnxruntime(model, *xs):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {i.name: x for i, x in zip(model.graph.input, xs)})
    got = run_reference(_checked(from_onnx(model)), list(xs))
    for g, w in zip(got, want, strict=True):
        _close(g, w)


def test_shape_chain_gemm_pad_and_reductions_fold_and_match(rng):
    w = rng.standard_normal((6, 12)).astype(np.float32)
    c = rng.standard_normal((1, 6)).astype(np.float32)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(np.array(0, np.int64))),
        helper.make_node("Gather", ["s", "zero"], ["n"]),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["flat"]),  # [2, 3, 2, 2] -> [2, 12]
        helper.make_node("Gemm", ["flat", "w", "c"], ["y"], transB=1, alpha=0.5, beta=2.0),
        helper.make_node("Pad", ["x", "pads", "padv"], ["xp"], mode="constant"),
        helper.make_node("AveragePool", ["xp"], ["ap"], kernel_shape=[2, 2], strides=[2, 2], auto_pad="SAME_UPPER"),
        helper.make_node("ReduceMean", ["ap", "axes"], ["rm"], keepdims=0),
        helper.make_node("Clip", ["rm", "lo", ""], ["z"]),
    ]
    inits = [("w", w), ("c", c), ("ax0", np.array([0], np.int64)), ("minus1", np.array([-1], np.int64)),
             ("pads", np.array([0, 0, 1, 0, 0, 0, 0, 2], np.int64)), ("padv", np.array(0.5, np.float32)),
             ("axes", np.array([-1, 1], np.int64)), ("lo", np.array(-0.1, np.float32))]
    model = _model(nodes, [_vi("x", [2, 3, 2, 2])], [_vi("y", [2, 6]), _vi("z", None)], inits)
    graph = from_onnx(model)
    assert [n.op for n in graph.nodes if n.op != "constant"] == ["reshape", "dense", "pad", "avg_pool2d", "mean",
                                                                 "clip"]
    _against_onnxruntime(model, rng.standard_normal((2, 3, 2, 2)).astype(np.float32))


def test_attention_pieces_and_erf_gelu(rng):
    """MatMul of two activations, Transpose, Softmax, LayerNormalization and GELU written with Erf."""
    nodes = [
        helper.make_node("Transpose", ["q"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["s"]),
        helper.make_node("Softmax", ["s"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "q"], ["ctx"]),
        helper.make_node("LayerNormalization", ["ctx", "g", "b"], ["ln"], axis=-1, epsilon=1e-5),
        helper.make_node("Div", ["ln", "sqrt2"], ["h"]),
        helper.make_node("Erf", ["h"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["e1"]),
        helper.make_node("Mul", ["ln", "e1"], ["m"]),
        helper.make_node("Mul", ["m", "half"], ["gelu"]),
        helper.make_node("Gelu", ["ln"], ["gelu2"], approximate="tanh"),
        helper.make_node("Sub", ["gelu", "gelu2"], ["out"]),
    ]
    inits = [("g", rng.standard_normal(8).astype(np.float32)), ("b", rng.standard_normal(8).astype(np.float32)),
             ("sqrt2", np.array(np.sqrt(2), np.float32)), ("one", np.array(1, np.float32)),
             ("half", np.array(0.5, np.float32))]
    model = _model(nodes, [_vi("q", [2, 5, 8])], [_vi("out", None)], inits, opset=20)
    graph = from_onnx(model)
    assert {"matmul", "softmax", "layer_norm", "erf", "gelu", "permute"} <= {n.op for n in graph.nodes}
    _against_onnxruntime(model, rng.standard_normal((2, 5, 8)).astype(np.float32))


def test_unsupported_op_names_op_node_and_supported_set():
    model = _model([helper.make_node("NonMaxSuppression", ["x", "s"], ["i"], name="nms0")], [_vi("x", [1, 4, 4])],
                   [_vi("i", None)], [("s", np.ones((1, 1, 4), np.float32))])
    with pytest.raises(UnsupportedOpError) as err:
        from_onnx(model)
    msg = str(err.value)
    assert "'NonMaxSuppression'" in msg and "nms0" in msg and "supported:" in msg and "Conv" in msg


def test_unsupported_form_of_a_supported_op_says_why():
    model = _model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv4d")], [_vi("x", [1, 2, 5, 5, 5, 5])],
                   [_vi("y", None)], [("w", np.ones((3, 2, 3, 3, 3, 3), np.float32))])
    with pytest.raises(UnsupportedOpError, match="'Conv' at node 'conv4d'.*rank 6.*1-D, 2-D or 3-D"):
        from_onnx(model)


def test_unsupported_opset_is_named():
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [4])], [_vi("y", [4])], opset=99)
    with pytest.raises(UnsupportedOpError, match=r"opset 99.*13-\d+"):
        from_onnx(model)


def test_an_older_opset_is_converted_to_13():
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [4])], [_vi("y", [4])], opset=11)
    assert [n.op for n in from_onnx(model).nodes] == ["relu"]


def test_opsets_past_21_are_read_and_newer_attributes_refused():
    relu = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [4])], [_vi("y", [4])], opset=25)
    x = np.array([-1, 2, -3, 4], np.float32)
    np.testing.assert_array_equal(run_reference(from_onnx(relu), [x])[0], np.maximum(x, 0))
    cast = _model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT16, round_mode="up", name="c")],
                  [_vi("x", [4])], [_vi("y", [4])], opset=28)
    with pytest.raises(UnsupportedOpError, match="'Cast' at node 'c'.*attribute round_mode \\(opset 28\\) is newer"):
        from_onnx(cast)


@pytest.mark.parametrize("name", ["resnet18", "bert_layer"])
def test_dynamic_dims_need_input_shapes_and_shape_chains_fold(name):
    spec = MODELS[name]
    model, x = spec.build(reduced=True), spec.example_input(reduced=True)
    f = io.BytesIO()
    torch.onnx.export(model, (x,), f, dynamo=False, opset_version=17, input_names=["image"],
                      dynamic_axes={"image": {0: "batch", 1: "dim1"}})
    proto = onnx.load_from_string(f.getvalue())
    if name == "bert_layer":
        assert "Shape" in {n.op_type for n in proto.graph.node}
    with pytest.raises(UnsupportedOpError, match="input_shapes"):
        from_onnx(proto)
    graph = _checked(from_onnx(proto, input_shapes={"image": (2, *x.shape[1:])}))
    x2 = torch.cat([x, -x])
    _close(run_reference(graph, [x2.numpy()])[0], _eager(model, x2))


@pytest.mark.parametrize("attrs, past, three_d", [({}, False, False), ({"is_causal": 1, "softcap": 2.0}, True, False),
                                                  ({"scale": 0.3, "q_num_heads": 4, "kv_num_heads": 2}, False, True)])
def test_attention_matches_onnx_reference(attrs, past, three_d, tmp_path):
    """Grouped-query attention (4 query heads over 2 key/value heads), against onnx's own reference."""
    from onnx.reference import ReferenceEvaluator

    from tilewright.graph.compile import compile as tw_compile

    rng = np.random.default_rng(0)
    shapes = {"Q": (2, 4, 3, 8), "K": (2, 2, 5, 8), "V": (2, 2, 5, 6), "past_key": (2, 2, 2, 8),
              "past_value": (2, 2, 2, 6)}
    if three_d:
        shapes = {"Q": (2, 3, 32), "K": (2, 5, 16), "V": (2, 5, 12)}
    names = ["Q", "K", "V", "", "past_key", "past_value"] if past else ["Q", "K", "V"]
    outs = ["Y", "present_key", "present_value"] if past else ["Y"]
    node = helper.make_node("Attention", names, outs, **attrs)
    vi = [helper.make_tensor_value_info(nm, TensorProto.FLOAT, list(shapes[nm])) for nm in names if nm]
    graph = helper.make_graph([node], "att", vi, [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                                                  for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    feeds = {nm: rng.standard_normal(shapes[nm]).astype(np.float32) for nm in names if nm}
    want = ReferenceEvaluator(model).run(None, feeds)
    if not host_runs(AVX2):
        pytest.skip("the host cannot run AVX2 kernels")
    got = tw_compile(model, target=AVX2, records=tmp_path / "r.db", progress=False)(*feeds.values())
    for g, w in zip(got if isinstance(got, list) else [got], want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_attention_with_a_mask_wider_than_the_keys_is_refused():
    node = helper.make_node("Attention", ["Q", "K", "V", "m"], ["Y"], name="att")
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2, 3, 4]) for n in ("Q", "K", "V")]
    vi.append(helper.make_tensor_value_info("m", TensorProto.FLOAT, [3, 5]))
    model = helper.make_model(helper.make_graph([node], "g", vi, [_vi("Y", None)]),
                              opset_imports=[helper.make_opsetid("", 23)])
    with pytest.raises(UnsupportedOpError, match="'Attention' at node 'att'.*mask"):
        from_onnx(model)


def test_gather_of_a_constant_table_is_an_embedding_with_negative_ids(tmp_path):
    from tilewright.graph.compile import compile as tw_compile

    table = np.arange(12, dtype=np.float32).reshape(6, 2)
    node = helper.make_node("Gather", ["table", "ids"], ["y"], axis=0)
    vi = [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3])]
    model = _model([node], vi, [_vi("y", None)], [("table", table)], opset=13)
    if not host_runs(AVX2):
        pytest.skip("the host cannot run AVX2 kernels")
    module = tw_compile(model, target=AVX2, records=tmp_path / "r.db", progress=False)
    ids = np.array([[0, -1, 5], [2, -6, 3]], np.int64)
    np.testing.assert_array_equal(module(ids), table[ids])
    with pytest.raises(TilewrightError, match="holds id 6, outside \\[-6, 6\\)"):
        module(np.array([[0, 6, 1], [1, 1, 1]], np.int64))

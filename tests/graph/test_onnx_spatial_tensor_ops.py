"""ONNX ops built from the graph's ops: Conv of 1 and 3 spatial dims, pooling of any rank and padding
(by window taps), ConvTranspose with output_shape / SAME, Einsum, TopK, EyeLike, DepthToSpace /
SpaceToDepth, CumProd, the inverse and hyperbolic trigonometric ops, GatherND and the scatters, and
models of opsets older than 13 (converted): each compiled and compared with onnx's reference
evaluator; what stays out is refused by name."""

import numpy as np
import pytest
from synthetic_targets import AVX2, host_runs

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import tilewright as tw  # noqa: E402
from tilewright.graph.frontend import UnsupportedOpError  # noqa: E402

pytestmark = pytest.mark.skipif(not host_runs(AVX2), reason="the host cannot run AVX2 kernels")
RNG = np.random.default_rng(0)
_TYPES = {np.dtype("float32"): TensorProto.FLOAT, np.dtype("int64"): TensorProto.INT64,
          np.dtype("int32"): TensorProto.INT32}


def _model(node, inputs: dict, inits: dict | None = None, outputs=("y",), opset=21):
    vis = [helper.make_tensor_value_info(k, _TYPES[v.dtype], v.shape) for k, v in inputs.items()]
    outs = [helper.make_tensor_value_info(o, TensorProto.INT64 if o == "i" else TensorProto.FLOAT, None)
            for o in outputs]
    inits = [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()]
    g = helper.make_graph(node if isinstance(node, list) else [node], "g", vis, outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _reference(model, inputs: dict, ort: bool):
    if not ort:
        return ReferenceEvaluator(model).run(None, inputs)
    onnxruntime = pytest.importorskip("onnxruntime")
    return onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, inputs)


def _check(model, inputs: dict, tmp_path, rtol=1e-5, atol=1e-6, ort=False):
    want = _reference(model, inputs, ort)
    got = tw.compile(model, list(inputs.values()), target=AVX2, records=tmp_path / "r.db", progress=False)(
        *inputs.values())
    got = got if isinstance(got, list) else [got]
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=rtol, atol=atol)


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("attrs", [dict(pads=[1, 2], strides=[2]), dict(dilations=[2], group=2),
                                   dict(auto_pad="SAME_UPPER")])
def test_conv_1d(attrs, tmp_path):
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)
    x, w, b = _x(2, 4, 11), _x(6, 4 // attrs.get("group", 1), 3), _x(6)
    _check(_model(node, {"x": x}, {"w": w, "b": b}), {"x": x}, tmp_path)


def test_conv_3d_runtime_weight(tmp_path):
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 0, 1, 0, 1, 1], strides=[2, 1, 1], dilations=[1, 2, 1])
    x, w = _x(1, 3, 5, 7, 6), _x(4, 3, 3, 2, 2)
    _check(_model(node, {"x": x, "w": w}), {"x": x, "w": w}, tmp_path, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op,attrs,shape", [
    ("MaxPool", dict(kernel_shape=[3], pads=[2, 2]), (1, 2, 9)),
    ("MaxPool", dict(kernel_shape=[2, 2, 2], dilations=[2, 1, 2], ceil_mode=1, strides=[2, 2, 1]), (1, 2, 6, 5, 6)),
    ("AveragePool", dict(kernel_shape=[3, 3], pads=[2, 2, 2, 2]), (1, 2, 6, 6)),
    ("AveragePool", dict(kernel_shape=[3, 3], pads=[2, 1, 2, 1], count_include_pad=1, ceil_mode=1, strides=[2, 2]),
     (1, 1, 7, 8)),
    ("AveragePool", dict(kernel_shape=[2, 2], dilations=[2, 2]), (1, 2, 6, 6)),
    ("LpPool", dict(kernel_shape=[2, 3], p=3, strides=[1, 2]), (1, 2, 5, 7)),
])
def test_pooling_by_taps(op, attrs, shape, tmp_path):
    x = _x(*shape)
    # ONNX Runtime: the reference evaluator indexes past the input for pads over half the window
    _check(_model(helper.make_node(op, ["x"], ["y"], **attrs), {"x": x}), {"x": x}, tmp_path, rtol=1e-4, ort=True)


@pytest.mark.parametrize("op", ["GlobalMaxPool", "GlobalLpPool", "GlobalAveragePool"])
def test_global_pools_of_any_rank(op, tmp_path):
    x = _x(2, 3, 4, 5, 2)
    _check(_model(helper.make_node(op, ["x"], ["y"]), {"x": x}), {"x": x}, tmp_path, rtol=1e-5, ort=True)


def test_pool_window_past_the_tap_limit_is_refused(tmp_path):
    x = _x(1, 1, 20, 20)
    model = _model(helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[12, 12]), {"x": x})
    with pytest.raises(UnsupportedOpError, match="144 taps"):
        tw.compile(model, [x], target=AVX2, records=tmp_path / "r.db", progress=False)


@pytest.mark.parametrize("attrs", [dict(output_shape=[10], strides=[3]), dict(auto_pad="SAME_LOWER", strides=[2]),
                                   dict(pads=[1, 2], output_padding=[1], strides=[2])])
def test_conv_transpose_1d(attrs, tmp_path):
    x, w, b = _x(1, 2, 4), _x(2, 3, 3), _x(3)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)
    # ONNX Runtime: the reference evaluator rejects output_shape with a stride
    _check(_model(node, {"x": x}, {"w": w, "b": b}), {"x": x}, tmp_path, rtol=1e-5, ort=True)


@pytest.mark.parametrize("equation,shapes", [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("...ij,...jk", [(2, 3, 4), (1, 4, 2)]), ("ii->i", [(4, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]), ("i,j->ij", [(3,), (4,)]), ("bhqd,bhkd->bhqk", [(1, 2, 3, 4)] * 2),
    ("ijk->", [(2, 3, 4)]), ("bii->bi", [(2, 3, 3)]),
])
def test_einsum(equation, shapes, tmp_path):
    names = [f"x{k}" for k in range(len(shapes))]
    inputs = {n: _x(*s) for n, s in zip(names, shapes)}
    _check(_model(helper.make_node("Einsum", names, ["y"], equation=equation), inputs), inputs, tmp_path, rtol=1e-4)


def test_top_k_ties_infinities_and_smallest(tmp_path):
    x = np.array([[3, -np.inf, 3, 1, -np.inf, 7], [0, 0, 0, 0, 0, 0]], np.float32)
    for largest in (1, 0):
        node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, largest=largest)
        model = _model(node, {"x": x}, {"k": np.array([5], np.int64)}, outputs=("v", "i"))
        _check(model, {"x": x}, tmp_path)


def test_top_k_larger_than_the_axis_is_refused(tmp_path):
    x = _x(2, 3)
    model = _model(helper.make_node("TopK", ["x", "k"], ["v", "i"]), {"x": x}, {"k": np.array([4], np.int64)},
                   outputs=("v", "i"))
    with pytest.raises(UnsupportedOpError, match="k = 4 along an axis of 3"):
        tw.compile(model, [x], target=AVX2, records=tmp_path / "r.db", progress=False)


@pytest.mark.parametrize("op,mode", [("DepthToSpace", "DCR"), ("DepthToSpace", "CRD"), ("SpaceToDepth", None)])
def test_depth_space_permutes(op, mode, tmp_path):
    x = _x(2, 8, 4, 6) if op == "DepthToSpace" else _x(2, 3, 4, 6)
    node = helper.make_node(op, ["x"], ["y"], blocksize=2, **({"mode": mode} if mode else {}))
    _check(_model(node, {"x": x}), {"x": x}, tmp_path, rtol=0, atol=0)


def test_eye_like_and_cumprod(tmp_path):
    x = RNG.uniform(0.5, 1.5, (3, 5)).astype(np.float32)
    nodes = [helper.make_node("EyeLike", ["x"], ["eye"], k=1),
             helper.make_node("CumProd", ["x", "axis"], ["p"], exclusive=1, reverse=1),
             helper.make_node("Add", ["eye", "p"], ["y"])]
    _check(_model(nodes, {"x": x}, {"axis": np.array(1, np.int64)}, opset=26), {"x": x}, tmp_path)


@pytest.mark.parametrize("op,low,high", [("Asin", -1, 1), ("Acos", -1, 1), ("Atan", -50, 50), ("Sinh", -5, 5),
                                         ("Cosh", -5, 5), ("Asinh", -50, 50), ("Acosh", 1, 50),
                                         ("Atanh", -0.999, 0.999)])
def test_trigonometric_accuracy_over_the_domain(op, low, high, tmp_path):
    x = np.concatenate([np.linspace(low, high, 997), [low, high, 1e-6 * (high > 0), 1e-3 * (high > 0)]])
    x = np.clip(x, low, high).astype(np.float32)
    model = _model(helper.make_node(op, ["x"], ["y"]), {"x": x})
    got = tw.compile(model, [x], target=AVX2, records=tmp_path / "r.db", progress=False)(x)
    want = getattr(np, "arc" + op[1:].lower() if op.startswith("A") else op.lower())(x.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)


def test_gather_nd_with_batch_dims(tmp_path):
    data, idx = _x(2, 3, 4, 5), np.array([[[1, -1], [0, 2]], [[2, 0], [-3, 3]]], np.int64)
    node = helper.make_node("GatherND", ["data", "idx"], ["y"], batch_dims=1)
    _check(_model(node, {"data": data, "idx": idx}), {"data": data, "idx": idx}, tmp_path, rtol=0, atol=0)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatters(reduction, tmp_path):
    data, upd = _x(4, 3, 2), _x(3, 3, 2)
    idx = np.array([[1], [3], [1]] if reduction != "none" else [[1], [3], [-4]], np.int64)
    node = helper.make_node("ScatterND", ["data", "idx", "upd"], ["y"], reduction=reduction)
    inputs = {"data": data, "idx": idx, "upd": upd}
    _check(_model(node, inputs), inputs, tmp_path)
    idx2 = RNG.integers(-4, 4, (2, 3, 2)).astype(np.int64)
    if reduction == "none":
        idx2 = np.array([[[0, 1], [2, 3], [-1, 1]], [[3, 2], [1, 0], [0, -2]]], np.int64)  # no duplicates
    node = helper.make_node("ScatterElements", ["data", "idx", "upd"], ["y"], axis=0, reduction=reduction)
    inputs = {"data": data, "idx": idx2, "upd": _x(2, 3, 2)}
    _check(_model(node, inputs), inputs, tmp_path)


def test_scatter_index_out_of_range_at_run_time_writes_nothing(tmp_path):
    data, upd = _x(4, 2), _x(2, 2)
    node = helper.make_node("ScatterND", ["data", "idx", "upd"], ["y"])
    idx = np.array([[1], [2]], np.int64)
    module = tw.compile(_model(node, {"data": data, "idx": idx, "upd": upd}), [data, idx, upd], target=AVX2,
                        records=tmp_path / "r.db", progress=False)
    got = module(data, np.array([[1], [9]], np.int64), upd)
    want = data.copy()
    want[1] = upd[0]
    np.testing.assert_array_equal(got, want)


def test_old_opset_is_converted(tmp_path):
    x = _x(2, 3)
    model = _model(helper.make_node("Shrink", ["x"], ["y"], lambd=0.5, bias=0.1), {"x": x}, opset=9)
    _check(model, {"x": x}, tmp_path)


def test_unconvertible_opset_names_the_converter(tmp_path):
    x = _x(2, 3)
    model = _model(helper.make_node("Pad", ["x"], ["y"], paddings=[0, 0, 1, 1]), {"x": x}, opset=1)
    with pytest.raises(UnsupportedOpError, match="opset 1, which onnx.version_converter could not convert"):
        tw.compile(model, [x], target=AVX2, records=tmp_path / "r.db", progress=False)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_windows(op, periodic, tmp_path):
    x = _x(7)
    nodes = [helper.make_node(op, ["size"], ["w"], periodic=periodic), helper.make_node("Add", ["x", "w"], ["y"])]
    _check(_model(nodes, {"x": x}, {"size": np.array(7, np.int64)}, opset=17), {"x": x}, tmp_path)


def test_center_crop_pad_reverse_sequence_affine_grid(tmp_path):
    x, lens = _x(5, 3, 4), np.array([5, 1, 3], np.int64)
    theta = _x(2, 2, 3)
    nodes = [helper.make_node("CenterCropPad", ["x", "shape"], ["y"], axes=[0, 2]),
             helper.make_node("ReverseSequence", ["x", "lens"], ["r"], time_axis=0, batch_axis=1),
             helper.make_node("AffineGrid", ["theta", "size"], ["g"], align_corners=1)]
    model = _model(nodes, {"x": x, "lens": lens, "theta": theta},
                   {"shape": np.array([2, 7], np.int64), "size": np.array([2, 1, 3, 4], np.int64)},
                   outputs=("y", "r", "g"), opset=20)
    _check(model, {"x": x, "lens": lens, "theta": theta}, tmp_path)


@pytest.mark.parametrize("activation", ["none", "silu"])
def test_causal_conv_with_state_and_swiglu(activation, tmp_path):
    x, w, b, past = _x(2, 3, 6), _x(3, 1, 4), _x(3), _x(2, 3, 3)
    nodes = [helper.make_node("CausalConvWithState", ["x", "w", "b", "past"], ["c", "state"], activation=activation),
             helper.make_node("SwiGLU", ["c", "x"], ["y"], alpha=1.5)]
    inputs = {"x": x, "past": past}
    _check(_model(nodes, inputs, {"w": w, "b": b}, outputs=("y", "state"), opset=28), inputs, tmp_path, rtol=1e-5)


@pytest.mark.parametrize("op,attrs", [
    ("LSTM", dict(direction="bidirectional", hidden_size=3)),
    ("LSTM", dict(hidden_size=3, clip=0.8, input_forget=1)),
    ("GRU", dict(hidden_size=3, linear_before_reset=1, direction="reverse")),
    ("GRU", dict(hidden_size=3, activations=["HardSigmoid", "Tanh"], activation_alpha=[0.3], activation_beta=[0.4])),
    ("RNN", dict(hidden_size=3, activations=["Relu"])),
])
def test_recurrent_with_sequence_lens(op, attrs, tmp_path):
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    d = 2 if attrs.get("direction") == "bidirectional" else 1
    seq, batch, h = 5, 3, 3
    x = _x(batch, seq, 4) if attrs.get("layout") else _x(seq, batch, 4)
    w, r, b = 0.5 * _x(d, gates * h, 4), 0.5 * _x(d, gates * h, h), 0.1 * _x(d, 2 * gates * h)
    lens = np.array([5, 2, 4], np.int32)
    outs = ("y", "y_h") + (("y_c",) if op == "LSTM" else ())
    node = helper.make_node(op, ["x", "w", "r", "b", "lens"], list(outs), **attrs)
    vis = {"x": x, "lens": lens}
    # ONNX Runtime: the reference evaluator ignores sequence_lens
    _check(_model(node, vis, {"w": w, "r": r, "b": b}, outputs=outs), vis, tmp_path, rtol=1e-4, atol=1e-5, ort=True)


def test_recurrent_with_run_time_weights_matches(tmp_path):
    x, w, r = _x(4, 2, 3), 0.5 * _x(1, 8, 3), 0.5 * _x(1, 8, 2)
    node = helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=2)
    _check(_model(node, {"x": x, "w": w, "r": r}), {"x": x, "w": w, "r": r}, tmp_path, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
def test_linear_attention_update_rules_with_grouped_heads(rule, tmp_path):
    q, k, v = _x(2, 4, 4 * 3), 0.5 * _x(2, 4, 2 * 3), _x(2, 4, 2 * 5)
    inputs = {"q": q, "k": k, "v": v, "past": 0.1 * _x(2, 2, 3, 5)}
    names = ["q", "k", "v", "past", "", ""]
    if rule in ("gated", "gated_delta"):
        inputs["decay"], names[4] = -np.abs(_x(2, 4, 2)), "decay"
    if rule in ("delta", "gated_delta"):
        inputs["beta"], names[5] = RNG.uniform(0, 1, (2, 4, 2)).astype(np.float32), "beta"
    node = helper.make_node("LinearAttention", names, ["y", "state"], q_num_heads=4, kv_num_heads=2,
                            update_rule=rule)
    _check(_model(node, inputs, outputs=("y", "state"), opset=27), inputs, tmp_path, rtol=1e-4, atol=1e-5)


def test_col2im_and_compress(tmp_path):
    cols, cond = _x(2, 2 * 6, 12), np.array([1, 0, 1], bool)
    _TYPES[np.dtype("bool")] = TensorProto.BOOL
    nodes = [helper.make_node("Col2Im", ["cols", "image", "block"], ["y"], strides=[2, 1], pads=[1, 0, 0, 1],
                              dilations=[1, 2]),
             helper.make_node("Compress", ["y", "cond"], ["c"], axis=2)]
    inits = {"image": np.array([5, 7], np.int64), "block": np.array([2, 3], np.int64)}
    inputs = {"cols": cols, "cond": cond}
    model = _model(nodes, inputs, inits, outputs=("y", "c"), opset=18)
    _check(model, inputs, tmp_path)
    module = tw.compile(model, list(inputs.values()), target=AVX2, records=tmp_path / "r.db", progress=False)
    with pytest.raises(tw.ShapeError, match="input 'cond' holds"):  # the condition fixed the output's shape
        module(cols, np.array([1, 1, 1], bool))


@pytest.mark.parametrize("order", [0, 1])
def test_max_pool_indices(order, tmp_path):
    x = _x(2, 3, 6, 7)
    x[0, 0, :2, :2] = 5.0  # a tie inside one window: the first position wins
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                            storage_order=order)
    _check(_model(node, {"x": x}, outputs=("y", "i")), {"x": x}, tmp_path, ort=True)


def test_batch_norm_training_mode_and_running_statistics(tmp_path):
    x = _x(4, 3, 5, 2)
    inits = {"s": _x(3), "b": _x(3), "m": _x(3), "v": np.abs(_x(3)) + 0.5}
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"], training_mode=1,
                            momentum=0.8)
    _check(_model(node, {"x": x}, inits, outputs=("y", "rm", "rv"), opset=15), {"x": x}, tmp_path, rtol=1e-4,
           atol=1e-5)

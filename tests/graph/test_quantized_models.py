"""int8 models from ONNX: QDQ chains (what ONNX Runtime's quantize_static writes) and QLinearConv become
`qconv2d`, whose reference is exact integer arithmetic; compiled modules match that reference bit for
bit (packed and tensorized, or plain) up to the float tail after the last dequantize, which GCC
may contract into a fused multiply-add."""

import importlib

import numpy as np
import pytest
from synthetic_targets import AVX2, host_runs

import tilewright as tw
from tilewright.errors import ShapeError, TilewrightError

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tilewright.graph.frontend.onnx import from_onnx  # noqa: E402

reference = importlib.import_module("tilewright.graph.reference")
optimize = importlib.import_module("tilewright.graph.optimize")
fusion = importlib.import_module("tilewright.graph.fusion")

runs_avx2 = pytest.mark.skipif(not host_runs(AVX2), reason="the host cannot run AVX2 kernels")


def _init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def _qdq_model(rng, c=8, o=16, hw=9, w_max=127, x_zero=3, pads=(1, 1, 1, 1), relu=True, residual=False, wq=None):
    """x -> Q -> DQ -> Conv(DQ(w per-channel s8), DQ(bias int32)) -> [Relu] -> Q -> DQ [-> + DQ(Q(x))] -> out."""
    sx, sy = np.float32(0.05), np.float32(0.08)
    sw = (rng.random(o).astype(np.float32) * 0.01 + 0.002).astype(np.float32) if wq is None else \
        np.full(o, 0.002, np.float32)
    if wq is None:
        wq = rng.integers(-w_max, w_max + 1, (o, c, 3, 3)).astype(np.int8)
    bq = rng.integers(-2000, 2000, o).astype(np.int32)
    inits = [_init("sx", sx), _init("zx", np.uint8(x_zero)), _init("wq", wq), _init("sw", sw),
             _init("zw", np.zeros(o, np.int8)), _init("bq", bq), _init("sb", (sx * sw).astype(np.float32)),
             _init("zb", np.zeros(o, np.int32)), _init("sy", sy), _init("zy", np.uint8(0 if relu else 128))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"], axis=0),
             helper.make_node("DequantizeLinear", ["bq", "sb", "zb"], ["bd"], axis=0),
             helper.make_node("Conv", ["xd", "wd", "bd"], ["conv"], pads=list(pads), kernel_shape=[3, 3])]
    y = "conv"
    if relu:
        nodes.append(helper.make_node("Relu", ["conv"], ["relu"]))
        y = "relu"
    nodes += [helper.make_node("QuantizeLinear", [y, "sy", "zy"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["out" if not residual else "yd"])]
    if residual:  # the quantized input read twice: by the conv and, dequantized, by the add
        nodes.append(helper.make_node("Add", ["yd", "xd"], ["out"]))
    oh = hw + pads[0] + pads[2] - 2
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, o, oh, oh])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _oracle(model, x):
    """The QDQ model in float64 (exact for these integers), quantized as ONNX says."""
    init = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    import torch

    xq = np.clip(np.rint(x / init["sx"]) + init["zx"], 0, 255)
    xd = (xq - init["zx"]) * np.float64(init["sx"])
    wd = init["wq"].astype(np.float64) * init["sw"].astype(np.float64)[:, None, None, None]
    bd = init["bq"] * init["sb"].astype(np.float64)
    conv = next(n for n in model.graph.node if n.op_type == "Conv")
    pads = list(next(a.ints for a in conv.attribute if a.name == "pads"))
    xp = np.pad(xd, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    y = torch.nn.functional.conv2d(torch.from_numpy(xp), torch.from_numpy(wd), torch.from_numpy(bd)).numpy()
    if any(n.op_type == "Relu" for n in model.graph.node):
        y = np.maximum(y, 0)
    return np.clip(np.rint(y / np.float64(init["sy"])) + init["zy"], 0, 255)


def test_qdq_conv_becomes_one_qconv2d_whose_reference_is_exact(rng):
    model = _qdq_model(rng)
    graph = optimize.optimize(from_onnx(model))
    ops = [n.op for n in graph.nodes if n.op != "constant"]
    assert ops.count("qconv2d") == 1 and "conv2d" not in ops, ops
    x = rng.standard_normal((1, 8, 9, 9)).astype(np.float32) * 3
    qconv = next(n for n in graph.nodes if n.op == "qconv2d")
    assert qconv.attr("pad_value") == 3 and qconv.attr("relu")
    got = reference.run_reference(graph, [x])[0]
    sy = np.float32(0.08)
    want = (_oracle(model, x.astype(np.float64)) - 0) * sy
    assert np.mean(np.abs(got - want) <= 1e-6) > 0.999  # rounding ties aside: the same integers


@runs_avx2
@pytest.mark.parametrize("layout", ["NCHWc", "NCHW"])
@pytest.mark.parametrize("w_max", [127, 64], ids=["8-bit-weights", "7-bit-weights"])
def test_compiled_int8_model_is_bit_exact(rng, tmp_path, layout, w_max):
    graph = from_onnx(_qdq_model(rng, o=8, w_max=w_max, residual=True))
    module = tw.compile(graph, target=AVX2, layout=layout, records=tmp_path / "r.sqlite", progress=False)
    x = rng.standard_normal((1, 8, 9, 9)).astype(np.float32) * 3
    got, want = np.asarray(module(x)), reference.run_reference(optimize.optimize(graph), [x])[0]
    # the integers are exact; the float tail (dequantize, add) may round a product and a sum once (FMA)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)
    sources = " ".join(k.source for k in module.kernels.values())
    if layout == "NCHWc":  # tensorized: vpmaddubsw only where the weights' range makes it exact
        assert ("maddubs" in sources) == (w_max <= 64)
        assert "madd_epi16" in sources


@runs_avx2
def test_adversarial_extremes_do_not_saturate(tmp_path):
    """x = 255 against weight pairs (-128, -128) and (127, 127): a vpmaddubsw pair sum would saturate at
    -32768 and 32767 (-2 per tap instead of -1020), which moves every output; the exact spelling is chosen."""
    wq = np.tile(np.array([-128, -128, 127, 127], np.int8), 2).reshape(1, 8, 1, 1).repeat(16, 0).repeat(3, 2)
    model = _qdq_model(np.random.default_rng(1), x_zero=0, relu=False, wq=wq.repeat(3, 3))
    graph = from_onnx(model)
    module = tw.compile(graph, target=AVX2, layout="NCHWc", records=tmp_path / "r.sqlite", progress=False)
    x = np.full((1, 8, 9, 9), 1e3, np.float32)  # quantizes to 255
    got = np.asarray(module(x))
    want = reference.run_reference(optimize.optimize(graph), [x])[0]
    assert np.array_equal(got, want)
    assert want[0, :, 4, 4].max() < np.float32(0.08) * (128 - 128 - 5)  # a saturated sum would give about 0


def test_qlinear_conv_imports_as_qconv2d_and_matches_the_qdq_form(rng):
    wq = rng.integers(-64, 65, (8, 4, 3, 3)).astype(np.int8)
    sw = np.full(8, 0.01, np.float32)
    inits = [_init("sx", np.float32(0.05)), _init("zx", np.uint8(7)), _init("w", wq), _init("sw", sw),
             _init("zw", np.zeros(8, np.int8)), _init("sy", np.float32(0.1)), _init("zy", np.uint8(5)),
             _init("b", rng.integers(-99, 99, 8).astype(np.int32))]
    node = helper.make_node("QLinearConv", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy", "b"], ["y"],
                            pads=[1, 1, 1, 1], strides=[2, 2])
    g = helper.make_graph([node], "ql", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 4, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 8, 4, 4])], inits)
    graph = from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    assert [n.op for n in graph.nodes if n.op != "constant"] == ["qconv2d"]
    x = rng.integers(0, 256, (1, 4, 8, 8)).astype(np.uint8)
    got = reference.run_reference(graph, [x])[0]
    acc = reference.conv2d(np.pad(x.astype(np.int64) - 7, ((0, 0), (0, 0), (1, 1), (1, 1))), wq.astype(np.int64),
                           stride=(2, 2))
    acc = acc + numpy_helper.to_array(inits[-1]).reshape(1, -1, 1, 1)
    want = np.clip(np.rint(acc.astype(np.float32) * np.float32(np.float32(0.05) * np.float32(0.01) / np.float32(0.1)))
                   + 5, 0, 255)
    assert np.array_equal(got, want)


def test_bad_quantization_schemes_are_named():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 2, 2])
    y = helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 4, 2, 2])
    blocked = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1, block_size=2)
    g = helper.make_graph([blocked], "b", [x], [y], [_init("s", np.ones((1, 2, 2, 2), np.float32)),
                                                    _init("z", np.zeros((1, 2, 2, 2), np.uint8))])
    with pytest.raises(TilewrightError, match="block_size"):
        from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]))
    from tilewright.graph.fold_qdq import qconv_params

    with pytest.raises(ShapeError, match="outside int8"):
        qconv_params(0.1, 0, np.full((2, 1, 1, 1), 255, np.uint8), 0.1, 0, 0.1, where="conv 'c'")
    with pytest.raises(ShapeError, match="per-group"):
        qconv_params(0.1, 0, np.zeros((4, 1, 1, 1), np.int8), np.ones(2, np.float32), 0, 0.1, where="conv 'c'")


def test_shared_dequantize_joins_its_reader_as_a_prologue(rng):
    graph = optimize.optimize(from_onnx(_qdq_model(rng, o=8, residual=True)))
    groups = fusion.fuse(graph).groups
    with_add = next(g for g in groups if any(n.op == "add" for n in g.nodes))
    assert [n.op for n in with_add.nodes].count("dequantize") == 2  # the conv's epilogue and the shared input's
    assert not any(g.nodes[-1].op == "dequantize" and len(g.nodes) == 1 for g in groups)


@pytest.mark.parametrize("op", ["Gemm", "MatMul"])
def test_qdq_dense_layers_become_qdense(rng, tmp_path, op):
    """Gemm (weight [N, K], transB) and MatMul (weight [K, N], per-channel along axis 1) with DequantizeLinear
    weights: transposed on their integers at import, folded into one int8 dense layer."""
    n, k = 16, 32
    wq = rng.integers(-64, 65, (n, k)).astype(np.int8)
    sw = (rng.random(n) * 0.01 + 0.001).astype(np.float32)
    w_init = wq if op == "Gemm" else np.ascontiguousarray(wq.T)
    inits = [_init("sx", np.float32(0.05)), _init("zx", np.uint8(9)), _init("wq", w_init), _init("sw", sw),
             _init("zw", np.zeros(n, np.int8)), _init("sy", np.float32(0.2)), _init("zy", np.uint8(128))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"], axis=0 if op == "Gemm" else 1)]
    if op == "Gemm":
        inits += [_init("bq", rng.integers(-500, 500, n).astype(np.int32)), _init("sb", np.float32(0.05) * sw),
                  _init("zb", np.zeros(n, np.int32))]
        nodes += [helper.make_node("DequantizeLinear", ["bq", "sb", "zb"], ["bd"], axis=0),
                  helper.make_node("Gemm", ["xd", "wd", "bd"], ["y"], transB=1)]
    else:
        nodes.append(helper.make_node("MatMul", ["xd", "wd"], ["y"]))
    nodes += [helper.make_node("QuantizeLinear", ["y", "sy", "zy"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["out"])]
    g = helper.make_graph(nodes, "qd", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, k])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, n])], inits)
    graph = from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    optimized = optimize.optimize(graph)
    assert [m.op for m in optimized.nodes if m.op not in ("constant", "quantize", "dequantize")] == ["qdense"]
    x = (rng.standard_normal((2, k)) * 3).astype(np.float32)
    want = reference.run_reference(optimized, [x])[0]
    xq = np.clip(np.rint(x / np.float32(0.05)) + 9, 0, 255).astype(np.int64)
    acc = (xq - 9) @ wq.astype(np.int64).T
    float_y = acc * (np.float64(0.05) * sw) + (numpy_helper.to_array(inits[-3]) * np.float64(0.05) * sw
                                               if op == "Gemm" else 0)
    oracle = (np.clip(np.rint(float_y / 0.2) + 128, 0, 255) - 128) * np.float32(0.2)
    assert np.mean(np.abs(want - oracle) < 1e-6) > 0.95  # the same integers but for rounding ties
    if host_runs(AVX2):
        module = tw.compile(graph, target=AVX2, records=tmp_path / "r.sqlite", progress=False)
        np.testing.assert_allclose(np.asarray(module(x)), want, rtol=1e-6, atol=0)


def test_max_pool_between_equal_quantizations_runs_on_the_integers(rng, tmp_path):
    inits = [_init("s", np.float32(0.1)), _init("z", np.uint8(20)), _init("s2", np.float32(0.2))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             helper.make_node("MaxPool", ["xd"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["p", "s", "z"], ["pq"]),
             helper.make_node("DequantizeLinear", ["pq", "s", "z"], ["pd"]),
             helper.make_node("MaxPool", ["pd"], ["p2"], kernel_shape=[2, 2]),  # another scale after: stays float
             helper.make_node("QuantizeLinear", ["p2", "s2", "z"], ["out"])]
    g = helper.make_graph(nodes, "mp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 9, 9])],
                          [helper.make_tensor_value_info("out", TensorProto.UINT8, [1, 8, 2, 2])], inits)
    graph = from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    optimized = optimize.optimize(graph)
    pools = [n for n in optimized.nodes if n.op == "max_pool2d"]
    assert [optimized.type_of(n.inputs[0]).dtype for n in pools] == ["uint8", "float32"]
    x = (rng.standard_normal((1, 8, 9, 9)) * 5).astype(np.float32)
    before = reference.run_reference(graph, [x])[0]  # the model as written, every op in float
    assert np.array_equal(reference.run_reference(optimized, [x])[0], before)
    if host_runs(AVX2):
        module = tw.compile(graph, target=AVX2, layout="NCHWc", records=tmp_path / "r.sqlite", progress=False)
        assert np.array_equal(np.asarray(module(x)), before)


def test_qlinear_matmul_imports_as_qdense(rng):
    k, n = 8, 16
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    inits = [_init("sa", np.float32(0.02)), _init("za", np.uint8(100)), _init("b", b),
             _init("sb", np.full(n, 0.01, np.float32)), _init("zb", np.zeros(n, np.int8)),
             _init("sy", np.float32(0.05)), _init("zy", np.uint8(7))]
    node = helper.make_node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"])
    g = helper.make_graph([node], "qm", [helper.make_tensor_value_info("a", TensorProto.UINT8, [3, k])],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, [3, n])], inits)
    graph = from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    assert [m.op for m in graph.nodes if m.op != "constant"] == ["qdense"]
    a = rng.integers(0, 256, (3, k)).astype(np.uint8)
    acc = (a.astype(np.int64) - 100) @ b.astype(np.int64)
    mult = np.float32(np.float32(0.02) * np.float32(0.01)) / np.float32(0.05)
    want = np.clip(np.rint(acc.astype(np.float32) * mult) + 7, 0, 255)
    assert np.array_equal(reference.run_reference(graph, [a])[0], want)

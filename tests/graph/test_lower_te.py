import numpy as np
import pytest
from graph_cases import Builder, attention, conv_bias_relu, dense_gelu, make_group, random_inputs, torch_values

import tilewright as tw
from tilewright.graph.lower_te import group_program, sanitize


def check_group(graph, outs, name="grp", rtol=1e-4, atol=1e-4):
    """Lower the nodes writing `outs` as one group, build with the default schedule, compare with PyTorch."""
    group = make_group(graph, name, outs)
    prog = group_program(graph, group)
    assert [t.name for t in prog.inputs] == [sanitize(v) for v in group.inputs]
    env = torch_values(graph, random_inputs(graph))
    kernel = tw.build(list(prog.args), target="cpu")
    arrays = [np.array(env[v], dtype=np.float32, order="C") for v in group.inputs]
    results = [np.empty(t.shape, np.float32) for t in prog.outputs]
    kernel(*arrays, *results)
    for v, got in zip(group.outputs, results):
        np.testing.assert_allclose(got, env[v], rtol=rtol, atol=atol, err_msg=v)
    return prog


def test_conv_bias_relu():
    prog = check_group(conv_bias_relu(), ["conv", "out"])
    assert [t.name for t in prog.args] == ["x", "w", "b", "out"]


def test_asymmetric_padding_strided_and_depthwise_conv():
    b = Builder()
    x = b.input("x.0", (1, 4, 7, 7))
    w, dw = b.const("w", (6, 4, 3, 3)), b.const("dw", (6, 1, 3, 3))
    y = b.op("conv2d", [x, w], "y", (1, 6, 3, 3), padding=(0, 0, 1, 1), stride=(2, 2))
    b.op("conv2d", [y, dw], "z", (1, 6, 3, 3), padding=(1, 1, 1, 1), groups=6)
    g = b.graph("z")
    check_group(g, ["y"])
    check_group(g, ["z"])


def test_dense_gelu_and_nd_dense():
    check_group(dense_gelu(), ["fc", "out"])
    check_group(attention(), ["q"])


def test_attention_ops():
    g = attention()
    check_group(g, ["q_h", "q_t"])
    check_group(g, ["scores", "scaled", "probs"])
    check_group(g, ["ctx", "ctx_t", "ctx_m", "res", "out"])


def test_pool_mean_concat_clip_batchnorm():
    b = Builder()
    x = b.input("x", (1, 3, 6, 6))
    m, v = b.const("mean", (3,)), b.const("var", array=np.abs(np.random.default_rng(3).standard_normal(3)) + 0.5)
    gw, gb = b.const("gamma", (3,)), b.const("beta", (3,))
    y = b.op("batch_norm", [x, gw, gb, m, v], "bn", (1, 3, 6, 6), eps=1e-5)
    y = b.op("clip", [y], "relu6", (1, 3, 6, 6), min=0.0, max=0.5)
    p = b.op("max_pool2d", [y], "mp", (1, 3, 3, 3), kernel=(3, 3), stride=(2, 2), padding=(0, 0, 1, 1))
    c = b.op("concat", [p, p, b.op("sigmoid", [p], "sg", (1, 3, 3, 3))], "cat", (1, 9, 3, 3), axis=1)
    b.op("mean", [c], "gap", (1, 9, 1, 1), axes=(2, 3), keepdims=True)
    g = b.graph("gap")
    check_group(g, ["bn", "relu6"])
    check_group(g, ["mp", "sg", "cat", "gap"])


def test_unknown_op_names_node():
    b = Builder()
    x = b.input("x", (2, 2))
    b.op("sqrt", [x], "y", (2, 2))
    g = b.graph("y")
    from tilewright.graph import lower_te

    saved = lower_te._LOWER.pop("sqrt")
    try:
        with pytest.raises(tw.ShapeError, match="node 'y': op 'sqrt'"):
            group_program(g, make_group(g, "grp", ["y"]))
    finally:
        lower_te._LOWER["sqrt"] = saved


@pytest.mark.parametrize("ceil_mode", [False, True])
def test_avg_pool_with_uneven_padding_divides_by_the_real_elements(ceil_mode):
    """ONNX SAME_* average pooling (count_include_pad=0) pads more on one side; the border windows
    must divide by the count of real elements, as the reference (checked against ONNX Runtime) does."""
    from tilewright.graph.infer import infer_types
    from tilewright.graph.reference import run_reference

    b = Builder()
    x = b.input("x", (1, 2, 6, 6))
    b.op("avg_pool2d", [x], "ap", (1, 2, 3, 3), kernel=(3, 3), stride=(2, 2), padding=(0, 0, 1, 1),
         count_include_pad=False, ceil_mode=ceil_mode)
    g = infer_types(b.graph("ap"))
    prog = group_program(g, make_group(g, "grp", ["ap"]))
    kernel = tw.build(list(prog.args), target="cpu")
    xs = random_inputs(g)[0]
    got = np.empty(prog.outputs[0].shape, np.float32)
    kernel(xs, got)
    np.testing.assert_allclose(got, run_reference(g, [xs])[0], rtol=1e-5, atol=1e-6)

"""Packed 3x3 stride-1 convolutions become Winograd F(4x4, 3x3): input transform, batched
matmul with weights transformed once, output transform with the conv's bias and epilogue."""

import numpy as np
import pytest
from graph_cases import Builder, random_inputs

from tilewright.errors import ShapeError
from tilewright.graph import Node
from tilewright.graph.compile import compile as tw_compile
from tilewright.graph.fusion import fuse
from tilewright.graph.infer import infer_node, infer_types
from tilewright.graph.kernel_graph import kernel_graph
from tilewright.graph.reference import run_reference
from tilewright.graph.winograd import winograd_convs


def residual_block(c=32, h=8, stride=1, groups=1):
    """relu(conv3x3(x) + bias + x), plus a 1x1 conv beside it that no rewrite touches."""
    b = Builder("block")
    x = b.input("x", (1, c, h, h))
    oh = (h - 1) // stride + 1
    y = b.op("conv2d", [x, b.const("w", (c, c // groups, 3, 3)), b.const("bias", (c,))], "conv", (1, c, oh, oh),
             stride=(stride, stride), padding=(1, 1, 1, 1), groups=groups)
    if stride == 1:
        y = b.op("add", [y, x], "sum", (1, c, oh, oh))
    y = b.op("relu", [y], "act", (1, c, oh, oh))
    b.op("conv2d", [y, b.const("w1", (c, c, 1, 1))], "out", (1, c, oh, oh))
    return b.graph("out")


def ops_of(graph):
    return [n.op for n in graph.nodes if n.op != "constant"]


@pytest.mark.parametrize("h", [8, 14, 7])  # whole tiles; a partial last tile on each side; 7x7 (ResNet's last)
def test_rewritten_graph_matches_the_direct_reference(h):
    graph = residual_block(h=h)
    packed = kernel_graph(graph, "NCHWc", 8, winograd=False)
    wino = winograd_convs(packed)
    assert ops_of(wino).count("winograd_input") == 1 and ops_of(wino).count("winograd_output") == 1
    assert ops_of(wino).count("conv2d") == 1  # the 1x1 stays direct
    mm = next(n for n in wino.nodes if n.op == "matmul")
    assert wino.type_of(mm.outputs[0]).shape == (36, ((h + 3) // 4) ** 2, 32)
    inputs = random_inputs(graph)
    np.testing.assert_allclose(run_reference(wino, inputs)[0], run_reference(graph, inputs)[0], rtol=1e-4,
                               atol=1e-4)


def test_the_epilogue_fuses_into_the_output_transform():
    wino = kernel_graph(residual_block(h=8), "NCHWc", 8)
    group = next(g for g in fuse(wino).groups if any(n.op == "winograd_output" for n in g.nodes))
    assert [n.op for n in group.nodes] == ["winograd_output", "add", "relu"]


def test_ineligible_convolutions_stay_direct():
    for graph in (residual_block(stride=2), residual_block(groups=2), residual_block(c=16)):
        packed = kernel_graph(graph, "NCHWc", 8, winograd=False)
        assert winograd_convs(packed) is packed
    plain = residual_block()
    assert winograd_convs(plain) is plain  # NCHW: not rewritten
    assert "winograd_input" not in ops_of(kernel_graph(residual_block(), "NCHWc", 8, winograd=False))


def test_compiled_winograd_model_matches_the_reference(tmp_path):
    graph = residual_block(h=14)
    module = tw_compile(graph, trials=0, records=tmp_path / "r.db", layout="NCHWc")
    assert any(n.op == "winograd_output" for s in module.steps for n in s.group.nodes)
    inputs = random_inputs(graph)
    np.testing.assert_allclose(module(*inputs), run_reference(graph, inputs)[0], rtol=1e-4, atol=1e-4)


def test_winograd_op_type_errors_name_what_is_valid():
    x = Node("winograd_input", ("x",), ("v",), {"padding": (1, 1, 1, 1)})
    from tilewright.graph.ir import TensorType

    assert infer_node(x, [TensorType((1, 4, 10, 10, 8), "float32")])[0].shape == (36, 9, 32)
    with pytest.raises(ShapeError, match="5-D NCHW"):
        infer_node(x, [TensorType((1, 32, 10, 10), "float32")])
    out = Node("winograd_output", ("m",), ("y",), {"shape": (1, 4, 10, 10, 8)})
    with pytest.raises(ShapeError, match=r"m of shape \(36, 9, 32\)"):
        infer_node(out, [TensorType((36, 8, 32), "float32")])


def _conv_name(graph):
    from tilewright.graph.winograd import eligible

    return next(n.name for n in graph.nodes if eligible(graph, n))


@pytest.mark.parametrize("h,k", [(8, 2), (14, 4)])  # whole tiles; cropped tiles
def test_sliced_winograd_matches_the_reference_and_writes_in_place(h, k):
    graph = residual_block(h=h)
    packed = kernel_graph(graph, "NCHWc", 8, winograd=False)
    sliced = winograd_convs(packed, chunks={_conv_name(packed): k})
    mms = [n for n in sliced.nodes if n.op == "matmul"]
    assert len(mms) == k and all(sliced.type_of(m.outputs[0]).shape[2] == 32 // k for m in mms)
    part = fuse(sliced)
    concat = next(g for g in part.groups if g.nodes[0].op == "concat")
    assert concat.is_view
    if h == 8:  # each slice's output transform applies the epilogue as it writes
        outs = [g for g in part.groups if g.nodes[0].op == "winograd_output"]
        assert len(outs) == k and all([n.op for n in g.nodes] == ["winograd_output", "add", "relu"] for g in outs)
    inputs = random_inputs(graph)
    np.testing.assert_allclose(run_reference(sliced, inputs)[0], run_reference(graph, inputs)[0], rtol=1e-4,
                               atol=1e-4)
    from tilewright.graph.module import build_module

    module = build_module(part, "cpu")
    np.testing.assert_allclose(module(*inputs), run_reference(graph, inputs)[0], rtol=1e-4, atol=1e-4)


def test_convs_are_sliced_only_where_their_products_set_the_peak():
    from tilewright.graph.memory_plan import live_bound
    from tilewright.graph.winograd_chunks import MIN_GAIN, chunked_winograd_convs

    def widening(c, o, h):  # a 3x3 conv to many more channels: its products dwarf everything else
        b = Builder("widen")
        x = b.input("x", (1, c, h, h))
        y = b.op("conv2d", [x, b.const("w", (o, c, 3, 3)), b.const("bias", (o,))], "conv", (1, o, h, h),
                 padding=(1, 1, 1, 1))
        y = b.op("relu", [y], "act", (1, o, h, h))
        b.op("conv2d", [y, b.const("w1", (8, o, 1, 1))], "out", (1, 8, h, h))
        return kernel_graph(b.graph("out"), "NCHWc", 8, winograd=False)

    packed = widening(32, 128, 16)
    whole, sliced = winograd_convs(packed), chunked_winograd_convs(packed)
    assert sum(n.op == "matmul" for n in sliced.nodes) > 1
    assert live_bound(fuse(sliced))[0] < (1 - MIN_GAIN) * live_bound(fuse(whole))[0]
    inputs = random_inputs(packed)
    np.testing.assert_allclose(run_reference(sliced, inputs)[0], run_reference(packed, inputs)[0], rtol=1e-4,
                               atol=1e-4)
    block = kernel_graph(residual_block(h=8), "NCHWc", 8, winograd=False)  # products no larger than the rest
    assert sum(n.op == "matmul" for n in chunked_winograd_convs(block).nodes) == 1


def test_conv_reading_another_block_than_it_writes_stays_direct():
    """With a narrow block, a 3x3 conv may read 16-channel blocks and write 8 (48 -> 40 channels):
    the Winograd transforms keep one block, so it runs direct, and the graph still matches."""
    b = Builder("mixed_blocks")
    x = b.input("x", (1, 48, 12, 12))
    a = b.op("conv2d", [x, b.const("w0", (48, 48, 1, 1))], "c0", (1, 48, 12, 12))
    b.op("conv2d", [a, b.const("w1", (40, 48, 3, 3)), b.const("b1", (40,))], "c1", (1, 40, 12, 12),
         padding=(1, 1, 1, 1))
    graph = infer_types(b.graph("c1"))
    packed = kernel_graph(graph, "NCHWc", 16, winograd=True, narrow=8)
    assert [n.attr("layout") for n in packed.nodes if n.op == "conv2d"] == ["NCHW16c", "NCHW8c"]
    inputs = random_inputs(graph)
    for got, want in zip(run_reference(packed, inputs), run_reference(graph, inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)

"""Strided 1x1 convolutions become a subsampling slice and a stride-1 GEMM; the
`slice` op on its own: types, errors, reference, lowering."""

import numpy as np
import pytest
from graph_cases import Builder, random_inputs

from tilewright.errors import ShapeError
from tilewright.graph import Node
from tilewright.graph.compile import compile as tw_compile
from tilewright.graph.infer import infer_node
from tilewright.graph.kernel_graph import kernel_graph
from tilewright.graph.reference import run_reference
from tilewright.graph.subsample import subsample_strided_pointwise


def downsample_block(c=4, o=8, h=7):
    """A ResNet downsample: a strided 1x1 shortcut and a strided 3x3 main branch, added;
    a second strided 1x1 reads the same input (the pass shares one slice)."""
    b = Builder("downsample")
    x = b.input("x", (1, c, h, h))
    oh = (h + 1) // 2
    short = b.op("conv2d", [x, b.const("ws", (o, c, 1, 1)), b.const("bs", (o,))], "short", (1, o, oh, oh),
                 stride=(2, 2))
    main = b.op("conv2d", [x, b.const("wm", (o, c, 3, 3))], "main", (1, o, oh, oh), stride=(2, 2),
                padding=(1, 1, 1, 1))
    other = b.op("conv2d", [x, b.const("wo", (o, c, 1, 1))], "other", (1, o, oh, oh), stride=(2, 2))
    s = b.op("add", [short, main], "sum", (1, o, oh, oh))
    s = b.op("add", [s, other], "sum2", (1, o, oh, oh))
    b.op("relu", [s], "out", (1, o, oh, oh))
    return b.graph("out")


def test_strided_pointwise_convs_read_one_shared_slice_and_match_the_reference():
    graph = downsample_block()
    split = subsample_strided_pointwise(graph)
    slices = [n for n in split.nodes if n.op == "slice"]
    assert len(slices) == 1 and slices[0].attr("step") == (1, 1, 2, 2)
    assert split.type_of(slices[0].outputs[0]).shape == (1, 4, 4, 4)  # 7 -> every other row: 4
    convs = {n.outputs[0]: n for n in split.nodes if n.op == "conv2d"}
    assert convs["short"].attr("stride") == (1, 1) and convs["short"].inputs[0] == slices[0].outputs[0]
    assert convs["other"].inputs[0] == slices[0].outputs[0]
    assert convs["main"].attr("stride") == (2, 2) and convs["main"].inputs[0] == "x"  # 3x3: untouched
    inputs = random_inputs(graph)
    np.testing.assert_allclose(run_reference(split, inputs)[0], run_reference(graph, inputs)[0], rtol=1e-5, atol=1e-5)


def test_padded_and_packed_pointwise_convs_are_left_alone():
    b = Builder("padded")
    x = b.input("x", (1, 4, 6, 6))
    b.op("conv2d", [x, b.const("w", (4, 4, 1, 1))], "y", (1, 4, 4, 4), stride=(2, 2), padding=(1, 1, 1, 1))
    graph = b.graph("y")
    assert subsample_strided_pointwise(graph) is graph
    packed = kernel_graph(downsample_block(c=8, o=8), "NCHWc", 8)
    assert not any(n.op == "slice" for n in packed.nodes)  # packed convs keep their stride


def test_compiled_downsample_matches_the_reference(tmp_path):
    graph = downsample_block(c=8, o=16, h=9)
    module = tw_compile(graph, trials=0, records=tmp_path / "r.db", layout="NCHW")
    assert any(n.op == "slice" for s in module.steps for n in s.group.nodes)
    inputs = random_inputs(graph)
    np.testing.assert_allclose(module(*inputs), run_reference(graph, inputs)[0], rtol=1e-4, atol=1e-4)


def test_slice_op_types_reference_and_errors(tmp_path):
    b = Builder("slice")
    x = b.input("x", (2, 5, 9))
    b.op("slice", [x], "y", (2, 2, 4), begin=(0, 1, 2), end=(2, 5, 9), step=(1, 3, 2))
    graph = b.graph("y")
    assert infer_node(graph.nodes[0], [graph.type_of("x")])[0].shape == (2, 2, 4)
    arr = np.arange(90, dtype=np.float32).reshape(2, 5, 9)
    np.testing.assert_array_equal(run_reference(graph, [arr])[0], arr[:, 1:5:3, 2:9:2])
    module = tw_compile(graph, trials=0, records=tmp_path / "r.db")
    np.testing.assert_array_equal(module(arr), arr[:, 1:5:3, 2:9:2])
    bad = Node("slice", ("x",), ("y",), {"begin": (0, 0, 0), "end": (2, 6, 9), "step": (1, 1, 1)})
    with pytest.raises(ShapeError, match=r"dimension 1: begin 0, end 6, step 1 is not a slice of size 5"):
        infer_node(bad, [graph.type_of("x")])

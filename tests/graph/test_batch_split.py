"""graph/batch_split.py proves, op by op, that a graph computes each slice of a dimension on its own,
and refuses, naming the node, every op that mixes slices."""

import numpy as np
import pytest

from tilewright.graph.batch_split import Carried, NotSeparable, carried_axes
from tilewright.graph.infer import infer_types
from tilewright.graph.ir import Graph, Node, TensorType


def _graph(nodes, inputs, outputs, constants=None):
    types = dict(inputs)
    constants = constants or {}
    for name, array in constants.items():
        types[name] = TensorType(array.shape, array.dtype.name)
    nodes = [Node("constant", (), (c,)) for c in constants] + nodes
    return infer_types(Graph(nodes, list(inputs), outputs, types, constants))


X = {"x": TensorType((4, 6, 8))}
W = {"w": np.ones((5, 8), np.float32)}


def test_transformer_like_chain_keeps_the_batch_axis():
    g = _graph([Node("dense", ("x", "w"), ("h",)), Node("softmax", ("h",), ("s",), {"axis": -1}),
                Node("reshape", ("s",), ("r",), {"shape": (24, 5)}), Node("relu", ("r",), ("y",)),
                Node("permute", ("s",), ("t",), {"dims": (2, 0, 1)})], X, ["y", "t"], W)
    inputs, outputs = carried_axes(g, {"x": 0}, 4)
    assert inputs == {"x": Carried(0)}
    assert outputs == [Carried(0, 6), Carried(1)]  # [B * 6, 5] rows in blocks of 6; the batch moved to axis 1


@pytest.mark.parametrize("node, what", [
    (Node("mean", ("x",), ("y",), {"axes": (0,)}), "reduces over"),
    (Node("softmax", ("x",), ("y",), {"axis": 0}), "normalizes over"),
    (Node("reshape", ("x",), ("y",), {"shape": (6, 4, 8)}), "splitting"),
    (Node("slice", ("x",), ("y",), {"begin": (1, 0, 0), "end": (4, 6, 8), "step": (1, 1, 1)}), "slices"),
    (Node("concat", ("x", "x"), ("y",), {"axis": 0}), "concatenates along"),
])
def test_ops_that_mix_slices_are_refused_by_name(node, what):
    g = _graph([node], X, ["y"])
    with pytest.raises(NotSeparable, match=f"node 'y' .*{what}"):
        carried_axes(g, {"x": 0}, 4)


def test_outer_product_and_contraction_over_the_batch_are_refused():
    g = _graph([Node("permute", ("x",), ("xt",), {"dims": (0, 2, 1)}), Node("matmul", ("x", "xt"), ("y",))],
               X, ["y"])
    assert carried_axes(g, {"x": 0}, 4)[1] == [Carried(0)]  # a batched matmul keeps slices apart
    g = _graph([Node("matmul", ("x", "x2"), ("y",))], {"x": TensorType((4, 6)), "x2": TensorType((6, 4))}, ["y"])
    with pytest.raises(NotSeparable, match="pairs every slice"):
        carried_axes(g, {"x": 0, "x2": 1}, 4)
    g = _graph([Node("permute", ("x",), ("xt",), {"dims": (1, 0)}), Node("matmul", ("xt", "x"), ("y",))],
               {"x": TensorType((4, 6))}, ["y"])
    with pytest.raises(NotSeparable, match="contracts over"):
        carried_axes(g, {"x": 0}, 4)


def test_a_constant_is_free_where_every_slice_reads_the_same_values():
    same = {"c": np.tile(np.arange(48, dtype=np.float32).reshape(1, 6, 8), (4, 1, 1))}
    g = _graph([Node("add", ("x", "c"), ("y",))], X, ["y"], same)
    assert carried_axes(g, {"x": 0}, 4)[1] == [Carried(0)]
    differs = {"c": np.arange(4 * 48, dtype=np.float32).reshape(4, 6, 8)}
    g = _graph([Node("add", ("x", "c"), ("y",))], X, ["y"], differs)
    with pytest.raises(NotSeparable, match="reads 'c', which differs"):
        carried_axes(g, {"x": 0}, 4)


def test_a_convolution_is_independent_along_its_batch_axis_only():
    g = _graph([Node("conv2d", ("x", "w"), ("y",))], {"x": TensorType((2, 3, 8, 8))}, ["y"],
               {"w": np.ones((4, 3, 3, 3), np.float32)})
    with pytest.raises(NotSeparable, match="only its batch axis 0"):
        carried_axes(g, {"x": 2}, 8)
    assert carried_axes(g, {"x": 0}, 2)[1] == [Carried(0)]

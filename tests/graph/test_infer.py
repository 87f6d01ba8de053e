"""Shape and dtype inference: output types of every op family, and errors that name the node."""

import numpy as np
import pytest

from tilewright.errors import ShapeError
from tilewright.graph import Graph, Node, TensorType
from tilewright.graph.infer import infer_types


def infer(op, shapes, attrs=None, name="n"):
    ins = [f"x{i}" for i in range(len(shapes))]
    g = Graph([Node(op, ins, ("y",), attrs or {}, name=name)], ins, ["y"],
              {v: TensorType(s) for v, s in zip(ins, shapes)})
    return infer_types(g).types["y"].shape


def test_conv2d_shapes():
    assert infer("conv2d", [(1, 3, 224, 224), (64, 3, 7, 7)], {"stride": (2, 2), "padding": (3, 3, 3, 3)}) == \
        (1, 64, 112, 112)
    assert infer("conv2d", [(2, 32, 10, 10), (32, 1, 3, 3), (32,)], {"groups": 32, "padding": (1, 1, 1, 1)}) == \
        (2, 32, 10, 10)
    assert infer("conv2d", [(1, 4, 10, 10), (8, 4, 3, 3)], {"dilation": (2, 2), "padding": (0, 1, 2, 1)}) == \
        (1, 8, 8, 8)


def test_conv2d_errors():
    with pytest.raises(ShapeError, match=r"node 'conv1' \(conv2d\).*float32\[1, 3, 8, 8\].*weight.shape\[1\] == 3"):
        infer("conv2d", [(1, 3, 8, 8), (4, 2, 3, 3)], name="conv1")
    with pytest.raises(ShapeError, match="groups=2 must divide"):
        infer("conv2d", [(1, 3, 8, 8), (4, 1, 3, 3)], {"groups": 2})
    with pytest.raises(ShapeError, match="bias must have shape \\(4,\\)"):
        infer("conv2d", [(1, 3, 8, 8), (4, 3, 3, 3), (5,)])
    with pytest.raises(ShapeError, match="does not fit"):
        infer("conv2d", [(1, 3, 2, 2), (4, 3, 3, 3)])


def test_dense_matmul():
    assert infer("dense", [(2, 128, 768), (3072, 768), (3072,)]) == (2, 128, 3072)
    assert infer("matmul", [(1, 12, 128, 64), (1, 12, 64, 128)]) == (1, 12, 128, 128)
    assert infer("matmul", [(4, 1, 3, 5), (2, 5, 6)]) == (4, 2, 3, 6)
    assert infer("matmul", [(3, 5), (5,)]) == (3,)
    with pytest.raises(ShapeError, match=r"contracted dimensions differ \(5 vs 4\)"):
        infer("matmul", [(3, 5), (4, 6)])
    with pytest.raises(ShapeError, match="batch dimensions"):
        infer("matmul", [(2, 3, 5), (3, 5, 6)])
    with pytest.raises(ShapeError, match="weight\\[N, K\\]"):
        infer("dense", [(2, 7), (3, 6)])


def test_pools_and_reductions():
    pool = {"kernel": (3, 3), "stride": (2, 2), "padding": (1, 1, 1, 1)}
    assert infer("max_pool2d", [(1, 64, 112, 112)], pool) == (1, 64, 56, 56)
    assert infer("max_pool2d", [(1, 8, 10, 10)], {"kernel": 3, "stride": 2, "ceil_mode": True}) == (1, 8, 5, 5)
    assert infer("max_pool2d", [(1, 8, 10, 10)], {"kernel": 3, "stride": 2}) == (1, 8, 4, 4)
    assert infer("avg_pool2d", [(1, 8, 7, 7)], {"kernel": (7, 7)}) == (1, 8, 1, 1)
    assert infer("mean", [(1, 8, 7, 7)], {"axes": (2, 3)}) == (1, 8, 1, 1)
    assert infer("mean", [(1, 8, 7, 7)], {"axes": (-1,), "keepdims": False}) == (1, 8, 7)
    assert infer("mean", [(2, 3)]) == (1, 1)
    assert infer("softmax", [(2, 3)], {"axis": -1}) == (2, 3)
    assert infer("layer_norm", [(1, 128, 768), (768,), (768,)]) == (1, 128, 768)
    with pytest.raises(ShapeError, match="axis 2 is out of range; valid: -2..1"):
        infer("softmax", [(2, 3)], {"axis": 2})
    with pytest.raises(ShapeError, match="weight and bias must have shape \\(768,\\)"):
        infer("layer_norm", [(1, 128, 768), (512,)])
    with pytest.raises(ShapeError, match="'kernel' is required|missing required"):
        infer("max_pool2d", [(1, 8, 10, 10)])


def test_layout_ops():
    assert infer("reshape", [(1, 128, 768)], {"shape": (1, 128, 12, -1)}) == (1, 128, 12, 64)
    assert infer("permute", [(1, 128, 12, 64)], {"dims": (0, 2, 1, 3)}) == (1, 12, 128, 64)
    assert infer("pad", [(1, 3, 8, 8)], {"pads": (0, 0, 1, 1, 0, 0, 2, 2)}) == (1, 3, 11, 11)
    assert infer("concat", [(1, 3, 8, 8), (1, 5, 8, 8)], {"axis": 1}) == (1, 8, 8, 8)
    with pytest.raises(ShapeError, match="at most one -1"):
        infer("reshape", [(4, 6)], {"shape": (-1, -1)})
    with pytest.raises(ShapeError, match="holds 20 elements, the input 24"):
        infer("reshape", [(4, 6)], {"shape": (4, 5)})
    with pytest.raises(ShapeError, match="cannot infer the -1"):
        infer("reshape", [(4, 6)], {"shape": (5, -1)})
    with pytest.raises(ShapeError, match="permutation of 0..2"):
        infer("permute", [(1, 2, 3)], {"dims": (0, 1, 1)})
    with pytest.raises(ShapeError, match="must match except along axis 1"):
        infer("concat", [(1, 3, 8, 8), (1, 5, 8, 7)], {"axis": 1})


def test_broadcast_and_dtypes():
    assert infer("add", [(1, 64, 8, 8), (64, 1, 1)]) == (1, 64, 8, 8)
    assert infer("mul", [(3, 1), (1, 4)]) == (3, 4)
    with pytest.raises(ShapeError, match=r"node 'n' \(add\).*do not broadcast"):
        infer("add", [(3, 4), (5,)])


def test_arity_attrs_and_unknown_ops():
    with pytest.raises(ShapeError, match=r"takes inputs \(x, weight, bias\?\), got 1"):
        infer("conv2d", [(1, 3, 8, 8)])
    with pytest.raises(ShapeError, match=r"unknown attributes \['alpha'\]"):
        infer("relu", [(3,)], {"alpha": 1.0})
    with pytest.raises(ShapeError, match="unknown graph op 'frobnicate'; supported: .*conv2d"):
        infer("frobnicate", [(3,)])


def test_constants_and_whole_graph():
    w = np.zeros((4, 3, 3, 3), np.float32)
    nodes = [Node("constant", (), ("w",)), Node("conv2d", ("x", "w"), ("c",), {"padding": (1, 1, 1, 1)}),
             Node("relu", ("c",), ("y",))]
    g = infer_types(Graph(nodes, ["x"], ["y"], {"x": TensorType((1, 3, 8, 8))}, {"w": w}))
    assert g.types["w"] == TensorType((4, 3, 3, 3)) and g.types["y"] == TensorType((1, 4, 8, 8))
    with pytest.raises(ShapeError, match="input 'x' has no type"):
        infer_types(Graph(nodes, ["x"], ["y"], {}, {"w": w}))

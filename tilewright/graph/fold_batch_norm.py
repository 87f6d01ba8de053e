"""Batch norm at inference is an affine map per channel, so it costs nothing
when folded into the convolution (or dense layer) before it, and one fusable
multiply-add otherwise."""

from __future__ import annotations

import numpy as np

from .ir import FreshNames, Graph, Node, TensorType


def _foldable_producer(graph: Graph, bn: Node) -> Node | None:
    """The conv2d/dense writing the batch norm's input when the batch norm is its only reader."""
    x = bn.inputs[0]
    prod = graph.producer(x)
    if prod is None or prod.op not in ("conv2d", "dense") or x in graph.outputs or len(graph.consumers(x)) != 1:
        return None
    if not all(graph.is_constant(v) for v in prod.inputs[1:]):
        return None
    if prod.op == "dense" and len(graph.type_of(x).shape) != 2:
        return None  # batch norm's axis 1 is the dense layer's output features only for 2-D outputs
    return prod


def fold_batch_norm(graph: Graph) -> Graph:
    """After this pass no batch_norm with constant parameters remains. One that
    reads the only use of a conv2d or 2-D dense output (with constant weights)
    is folded into that layer: the layer gets new constant weight and bias
    (a bias is created if absent) and writes the batch norm's output value.
    Any other becomes `mul` by a constant scale and `add` of a constant shift,
    both shaped (C, 1, ..., 1) so they broadcast over axis 1 and fuse as
    injective ops. Needs `graph.types` for the values batch norms read."""
    fresh = FreshNames.of(graph)
    constants, types = dict(graph.constants), dict(graph.types)
    folded: dict[int, tuple[Node, list[Node]]] = {}  # id(producer) -> (new producer, its new constants)
    drop: set[int] = set()
    replaced: dict[int, list[Node]] = {}

    def const(base: str, arr: np.ndarray) -> Node:
        v = fresh(base)
        constants[v] = np.ascontiguousarray(arr)
        types[v] = TensorType(arr.shape, arr.dtype.name)
        return Node("constant", (), (v,))

    for bn in graph.nodes:
        if bn.op != "batch_norm" or not all(graph.is_constant(v) for v in bn.inputs[1:]):
            continue
        gamma, beta, mean, var = (graph.constants[v].astype(np.float64) for v in bn.inputs[1:])
        scale = gamma / np.sqrt(var + float(bn.attr("eps", 1e-5)))
        shift = beta - mean * scale
        dtype = np.dtype(graph.type_of(bn.inputs[0]).dtype)
        prod = _foldable_producer(graph, bn)
        if prod is not None:
            w = graph.constants[prod.inputs[1]].astype(np.float64)
            b = graph.constants[prod.inputs[2]].astype(np.float64) if len(prod.inputs) > 2 else 0.0
            w_new = w * scale.reshape((-1,) + (1,) * (w.ndim - 1))
            new = [const(f"{prod.name}_weight_bn", w_new.astype(dtype)),
                   const(f"{prod.name}_bias_bn", (b * scale + shift).astype(dtype))]
            layer = prod.replace(inputs=(prod.inputs[0], new[0].outputs[0], new[1].outputs[0]), outputs=bn.outputs)
            folded[id(prod)] = (layer, new)
            drop.add(id(bn))
            continue
        ndim = len(graph.type_of(bn.inputs[0]).shape)
        shape = (-1,) + (1,) * max(ndim - 2, 0)
        s, t = const(f"{bn.name}_scale", scale.reshape(shape).astype(dtype)), \
            const(f"{bn.name}_shift", shift.reshape(shape).astype(dtype))
        mid = fresh(f"{bn.name}_scaled")
        replaced[id(bn)] = [s, t, Node("mul", (bn.inputs[0], s.outputs[0]), (mid,), name=mid),
                            Node("add", (mid, t.outputs[0]), bn.outputs, name=bn.name)]

    nodes = []
    for node in graph.nodes:
        if id(node) in drop:
            continue
        if id(node) in folded:
            layer, new = folded[id(node)]
            nodes.extend(new)
            nodes.append(layer)
        else:
            nodes.extend(replaced.get(id(node), [node]))
    return graph.replace(nodes=nodes, types=types, constants=constants)

"""Exporter idioms rewritten into the opset's own ops: ONNX writes a layer's
bias as a separate Add and, before opset 20, GELU as x * 0.5 * (1 + erf(x / sqrt 2)).
As single ops they lower to one expression and leave the epilogue to the rest
(a GELU spelt out reads x twice, which ends a fusion chain)."""

from __future__ import annotations

import numpy as np

from .ir import FreshNames, Graph, Node, TensorType


def _scalar(graph: Graph, value: str, target: float) -> bool:
    if not graph.is_constant(value):
        return False
    a = np.asarray(graph.constants[value])
    return a.size == 1 and bool(np.isclose(float(a.ravel()[0]), target, rtol=1e-6, atol=1e-7))


def _only_reader(graph: Graph, value: str) -> Node | None:
    readers = graph.consumers(value)
    if value in graph.outputs or not readers or any(r is not readers[0] for r in readers):
        return None
    return readers[0]


def _other(node: Node, value: str) -> str | None:
    """The other input of a binary node that reads `value` once."""
    if len(node.inputs) != 2 or node.inputs.count(value) != 1:
        return None
    return node.inputs[1] if node.inputs[0] == value else node.inputs[0]


def _gelu_at(graph: Graph, erf: Node) -> tuple[str, Node] | None:
    """(x, the node whose output is gelu(x)) for an erf that is part of an erf-GELU."""
    scaled = graph.producer(erf.inputs[0])
    if scaled is None or scaled.op not in ("div", "mul") or _only_reader(graph, erf.inputs[0]) is not erf:
        return None
    x, c = scaled.inputs
    if scaled.op == "mul" and graph.is_constant(x):
        x, c = c, x
    if not (_scalar(graph, c, np.sqrt(2.0)) if scaled.op == "div" else _scalar(graph, c, 1 / np.sqrt(2.0))):
        return None
    plus = _only_reader(graph, erf.outputs[0])
    if plus is None or plus.op != "add" or not _scalar(graph, _other(plus, erf.outputs[0]) or "", 1.0):
        return None
    m1 = _only_reader(graph, plus.outputs[0])
    if m1 is None or m1.op != "mul":
        return None
    y = _other(m1, plus.outputs[0])
    if y == x or (y is not None and _scalar(graph, y, 0.5)):  # (x * p) * 0.5 or (p * 0.5) * x
        m2 = _only_reader(graph, m1.outputs[0])
        z = _other(m2, m1.outputs[0]) if m2 is not None and m2.op == "mul" else None
        ok = z is not None and (_scalar(graph, z, 0.5) if y == x else z == x)
        return (x, m2) if ok else None
    half = graph.producer(y) if y is not None else None  # (x * 0.5) * p
    if half is not None and half.op == "mul" and _other(half, x) is not None and _scalar(graph, _other(half, x), 0.5):
        return x, m1
    return None


def recognize_gelu(graph: Graph) -> Graph:
    """After this pass an erf-GELU spelt out in elementwise ops (x / sqrt 2 or
    x * (1/sqrt 2), erf, + 1, times x and 0.5 in any association) is one `gelu`
    node writing the same value; the spelt-out nodes no longer needed are dropped
    by dead-code elimination."""
    final: dict[int, Node] = {}
    for node in graph.nodes:
        if node.op == "erf":
            hit = _gelu_at(graph, node)
            if hit is not None:
                x, last = hit
                final[id(last)] = Node("gelu", (x,), last.outputs, {"approximate": "none"}, name=last.name)
    if not final:
        return graph
    from .cleanup import eliminate_dead_code

    return eliminate_dead_code(graph.replace(nodes=[final.get(id(n), n) for n in graph.nodes]))


def _bias_vector(graph: Graph, layer: Node, add: Node) -> np.ndarray | None:
    """The bias that `add` puts on each output channel of `layer`, or None if it is no per-channel constant."""
    c = _other(add, layer.outputs[0])
    if c is None or not graph.is_constant(c):
        return None
    arr = np.asarray(graph.constants[c])
    out = graph.type_of(layer.outputs[0]).shape
    if graph.type_of(add.outputs[0]).shape != out or arr.ndim > len(out):
        return None
    channels = out[-1] if layer.op == "dense" else out[1]
    axis = len(out) - 1 if layer.op == "dense" else 1
    full = (1,) * (len(out) - arr.ndim) + arr.shape
    if any(d != 1 for i, d in enumerate(full) if i != axis):
        return None
    return np.broadcast_to(arr.reshape(-1) if arr.size > 1 else arr.reshape(1), (channels,))


def fold_bias_add(graph: Graph) -> Graph:
    """After this pass no conv2d or dense whose weight (and bias, if any) is
    constant has its output read only by an `add` of a per-channel constant:
    the add is the layer's bias (summed with an existing one), and the layer
    writes the add's output value."""
    types, constants = dict(graph.types), dict(graph.constants)
    fresh = FreshNames.of(graph)
    new: dict[int, list[Node]] = {}
    gone: set[int] = set()
    for layer in graph.nodes:
        if layer.op not in ("conv2d", "dense") or not all(graph.is_constant(v) for v in layer.inputs[1:]):
            continue
        add = _only_reader(graph, layer.outputs[0])
        bias = _bias_vector(graph, layer, add) if add is not None and add.op == "add" else None
        if bias is None:
            continue
        if len(layer.inputs) > 2:
            bias = bias + graph.constants[layer.inputs[2]]
        dtype = np.dtype(graph.type_of(layer.outputs[0]).dtype)
        name = fresh(f"{layer.name}_bias")
        constants[name] = np.ascontiguousarray(bias, dtype=dtype)
        types[name] = TensorType(bias.shape, dtype.name)
        new[id(layer)] = [Node("constant", (), (name,)),
                          layer.replace(inputs=(layer.inputs[0], layer.inputs[1], name), outputs=add.outputs)]
        gone.add(id(add))
    nodes = [m for n in graph.nodes if id(n) not in gone for m in new.get(id(n), [n])]
    return graph.replace(nodes=nodes, types=types, constants=constants)

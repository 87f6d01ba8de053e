"""Constant folding: a node that reads only constants is run once, at compile
time, by the NumPy oracle, and becomes a constant (TVM section 2). This is how
weights the exporter reshaped, permuted, transposed or cast reach the kernels
ready to use."""

from __future__ import annotations

import numpy as np

from .ir import Graph, Node, TensorType
from .reference import evaluate_node


def fold_constants(graph: Graph) -> Graph:
    """After this pass no node other than a constant has all of its inputs
    constant: each such node is now a constant node (same name, same output
    value) whose array, evaluated by `reference.evaluate_node`, is in
    `graph.constants` and whose type matches the array. Graph outputs that are
    computed from constants alone become constants too."""
    constants = dict(graph.constants)
    types = dict(graph.types)
    nodes = []
    for node in graph.nodes:
        if node.op != "constant" and node.inputs and all(v in constants for v in node.inputs):
            for v, arr in zip(node.outputs, evaluate_node(node, [constants[v] for v in node.inputs])):
                arr = np.ascontiguousarray(arr)
                constants[v] = arr
                types[v] = TensorType(arr.shape, arr.dtype.name)
                nodes.append(Node("constant", (), (v,), name=node.name))
            continue
        nodes.append(node)
    return graph.replace(nodes=nodes, types=types, constants=constants)

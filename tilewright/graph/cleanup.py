"""Clean-up passes: dead-code elimination and common-subexpression elimination."""

from __future__ import annotations

import hashlib

import numpy as np

from .ir import Graph, Node


def eliminate_dead_code(graph: Graph) -> Graph:
    """After this pass every node writes a value that some graph output depends
    on; graph inputs stay (they are the model's signature) even if unread."""
    live = set(graph.outputs)
    kept = []
    for node in reversed(graph.nodes):
        if any(v in live for v in node.outputs):
            kept.append(node)
            live.update(node.inputs)
    return graph.replace(nodes=reversed(kept))


def _hashable(v):
    if isinstance(v, (tuple, list)):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    if isinstance(v, float) and v != v:
        return "nan"
    return v


def _constant_key(arr: np.ndarray) -> tuple:
    arr = np.ascontiguousarray(arr)
    return arr.dtype.str, arr.shape, hashlib.blake2b(arr.tobytes(), digest_size=16).digest()


def eliminate_common_subexpressions(graph: Graph) -> Graph:
    """After this pass no two nodes compute the same thing: nodes with the same
    op, the same (renamed) inputs and the same attributes are one node, and
    constants with identical arrays (dtype, shape, bytes) are one constant.
    Readers of a removed value read the kept one; a node that writes a graph
    output is never removed, so the outputs keep their names."""
    rename: dict[str, str] = {}
    seen: dict[tuple, Node] = {}
    outputs = set(graph.outputs)
    nodes = []
    for node in graph.nodes:
        node = node.replace(inputs=tuple(rename.get(v, v) for v in node.inputs)) \
            if any(v in rename for v in node.inputs) else node
        if node.op == "constant":
            key = ("constant",) + _constant_key(graph.constants[node.outputs[0]])
        else:
            key = (node.op, node.inputs, _hashable(dict(node.attrs)))
        kept = seen.get(key)
        if kept is not None and not outputs.intersection(node.outputs) and len(kept.outputs) == len(node.outputs):
            rename.update(zip(node.outputs, kept.outputs))
            continue
        seen.setdefault(key, node)
        nodes.append(node)
    return graph.replace(nodes=nodes)

"""Elementwise epilogues moved above an in-place concat: e(concat(a, b), r) becomes
concat(e(a, r[:, A]), e(b, r[:, B])), so each part's kernel applies the epilogue
(bias, activation, residual add) as it writes its slice, and fusion still sees a
complex op followed by its epilogue. The other inputs are sliced along the concat
axis where they span it (a constant is cut here; an activation gets a `slice`,
a view when contiguous) and read whole where they broadcast over it."""

from __future__ import annotations

import numpy as np

from .fusion import is_elementwise
from .infer import infer_types
from .ir import FreshNames, Graph, Node
from .opset import BROADCASTING
from .views import concat_offsets


def push_epilogues(graph: Graph) -> Graph:
    """`graph` with every elementwise op that alone reads an in-place concat's output moved
    above it, repeatedly (the new concat is in place too, so a chain of epilogues moves)."""
    while True:
        moved = _push_one(graph)
        if moved is None:
            return graph
        graph = moved


def _push_one(graph: Graph) -> Graph | None:
    for node in graph.nodes:
        if concat_offsets(graph, node) is None:
            continue
        out = node.outputs[0]
        readers = graph.consumers(out)
        if len(readers) != 1 or not is_elementwise(readers[0]) or len(readers[0].outputs) != 1:
            continue
        e = readers[0]
        if len(e.inputs) > 1 and e.op not in BROADCASTING:  # e.g. batch_norm: its parameters index axis 1
            continue
        if graph.type_of(e.outputs[0]).shape != graph.type_of(out).shape:
            continue
        return _split(graph, node, e)
    return None


def _split(graph: Graph, concat: Node, e: Node) -> Graph:
    names = FreshNames.of(graph)
    constants = dict(graph.constants)
    out_shape = graph.type_of(concat.outputs[0]).shape
    axis = int(concat.attr("axis", 0)) % len(out_shape)
    nodes = [n for n in graph.nodes if n is not concat and n is not e]
    parts = []
    start = 0
    for i, part in enumerate(concat.inputs):
        extent = graph.type_of(part).shape[axis]
        inputs, new = [], []
        for v in e.inputs:
            if v == concat.outputs[0]:
                inputs.append(part)
                continue
            shape = graph.type_of(v).shape
            d = axis - (len(out_shape) - len(shape))  # v's dimension along the concat axis, if it has one
            if d < 0 or shape[d] == 1:
                inputs.append(v)  # broadcast over the axis: every part reads it whole
                continue
            begin = tuple(start if j == d else 0 for j in range(len(shape)))
            end = tuple(start + extent if j == d else n for j, n in enumerate(shape))
            cut = names(f"{v}_{i}")
            if v in graph.constants:
                box = tuple(slice(b, t) for b, t in zip(begin, end))
                constants[cut] = np.ascontiguousarray(graph.constants[v][box])
                new.append(Node("constant", (), (cut,), name=cut))
            else:
                new.append(Node("slice", (v,), (cut,), {"begin": begin, "end": end, "step": (1,) * len(shape)},
                                name=names(f"{e.name}_slice_{i}")))
            inputs.append(cut)
        value = names(f"{e.outputs[0]}_{i}")
        new.append(e.replace(inputs=tuple(inputs), outputs=(value,), name=names(f"{e.name}_{i}")))
        parts.append(value)
        start += extent
        # right after what it reads, so the part's epilogue runs before the next part is computed
        written = {v: j for j, n in enumerate(nodes) for v in n.outputs}
        at = max((written[v] for n in new for v in n.inputs if v in written), default=-1) + 1
        nodes[at:at] = new
    written = {v: j for j, n in enumerate(nodes) for v in n.outputs}
    at = max(written[v] for v in parts) + 1
    nodes.insert(at, concat.replace(inputs=tuple(parts), outputs=e.outputs, name=names(f"{concat.name}_{e.name}")))
    return infer_types(graph.replace(nodes=nodes, constants=constants))


__all__ = ["push_epilogues"]

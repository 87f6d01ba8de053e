"""Reshapes out of the way of fusion. Exporters flatten a 3-D activation to 2-D
around every linear layer and batched matmul (view -> addmm -> view), so the
bias, activation and residual add after the layer read a reshape, not the
layer, and cannot be its epilogue. `dense` and `matmul` take leading batch
dimensions themselves, so the reshapes can move past them and then cancel."""

from __future__ import annotations

from .cleanup import eliminate_dead_code
from .ir import FreshNames, Graph, Node, TensorType


def _unmerged_source(graph: Graph, value: str, keep: int) -> str | None:
    """The input of the reshape writing `value` when that reshape only merges or
    splits dimensions before its last `keep` ones (which it leaves as they are)."""
    r = graph.producer(value)
    if r is None or r.op != "reshape":
        return None
    src, out = graph.type_of(r.inputs[0]).shape, graph.type_of(value).shape
    if len(src) < keep or len(out) < keep or src[-keep:] != out[-keep:] or src == out:
        return None
    return r.inputs[0]


def _lift(graph: Graph, node: Node) -> tuple[str, ...] | None:
    """New inputs for a dense/matmul that read the reshapes' sources instead, or None."""
    if node.op == "dense":
        src = _unmerged_source(graph, node.inputs[0], 1)
        return None if src is None else (src,) + node.inputs[1:]
    if node.op != "matmul":
        return None
    a, b = node.inputs
    ta, tb = graph.type_of(a).shape, graph.type_of(b).shape
    if len(tb) == 2 and len(ta) == 2:  # (M, K) @ (K, N) with M a merge of batch and rows
        src = _unmerged_source(graph, a, 1)
        return None if src is None else (src, b)
    sa, sb = _unmerged_source(graph, a, 2), _unmerged_source(graph, b, 2)
    if sa is None or sb is None or ta[:-2] != tb[:-2]:
        return None
    batch_a, batch_b = graph.type_of(sa).shape[:-2], graph.type_of(sb).shape[:-2]
    return (sa, sb) if batch_a == batch_b else None


def _lift_through_layers(graph: Graph) -> Graph:
    fresh = FreshNames.of(graph)
    types = dict(graph.types)
    nodes = []
    for node in graph.nodes:
        ins = _lift(graph, node) if node.op in ("dense", "matmul") else None
        if ins is None:
            nodes.append(node)
            continue
        shapes = [types[v].shape for v in ins]
        out = types[node.outputs[0]]
        if node.op == "dense":
            shape = shapes[0][:-1] + (out.shape[-1],)
        else:
            shape = shapes[0][:-1] + (shapes[1][-1],)
        mid = fresh(node.outputs[0] + "_nd")
        types[mid] = TensorType(shape, out.dtype)
        nodes.append(node.replace(inputs=ins, outputs=(mid,)))
        nodes.append(Node("reshape", (mid,), node.outputs, {"shape": out.shape}, name=mid + "_view"))
    return graph.replace(nodes=nodes, types=types)


def _compose_and_drop(graph: Graph) -> Graph:
    rename: dict[str, str] = {}
    written: dict[str, Node] = {}
    outputs = set(graph.outputs)
    nodes = []
    for node in graph.nodes:
        if any(v in rename for v in node.inputs):
            node = node.replace(inputs=tuple(rename.get(v, v) for v in node.inputs))
        src = written.get(node.inputs[0]) if node.inputs else None
        if node.op == "reshape" and src is not None and src.op == "reshape":
            node = node.replace(inputs=src.inputs)
        if node.op == "permute" and src is not None and src.op == "permute":
            dims = tuple(int(src.attr("dims")[int(d)]) for d in node.attr("dims"))
            node = node.replace(inputs=src.inputs, attrs=dict(node.attrs, dims=dims))
        same = (node.op == "reshape" and graph.type_of(node.inputs[0]) == graph.type_of(node.outputs[0])) or \
            (node.op == "permute" and tuple(int(d) for d in node.attr("dims")) == tuple(range(len(node.attr("dims")))))
        if same and node.outputs[0] not in outputs:
            rename[node.outputs[0]] = node.inputs[0]
            continue
        nodes.append(node)
        for v in node.outputs:
            written[v] = node
    outs = [rename.get(v, v) for v in graph.outputs]
    return graph.replace(nodes=nodes, outputs=outs)


def simplify_reshapes(graph: Graph) -> Graph:
    """After this pass (which needs `graph.types`): no dense reads a reshape that
    keeps its last dimension, and no matmul reads reshapes that keep its last two
    dimensions and only merge equal batch dimensions; such a layer reads the
    reshapes' sources and a reshape after it restores its old output shape. No
    reshape reads a reshape and no permute a permute (they are composed); no
    reshape or permute that changes nothing remains, unless it writes a graph
    output; nodes left unread are dropped. Outputs keep their names and values."""
    return eliminate_dead_code(_compose_and_drop(_lift_through_layers(graph)))

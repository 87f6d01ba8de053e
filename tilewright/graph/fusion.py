"""Operator fusion (TVM section 2, Figure 4): the graph cut into groups, each
compiled as one kernel so intermediates never go to memory.

The rules, applied greedily in topological order; a node joins the group that
wrote one of its inputs when that input is the group's latest value, is read
by this node only and is not a graph output:
- an elementwise op (same shape as that input; other inputs broadcast) joins a
  complex-out-fusable group (conv2d/dense/matmul and its epilogue so far: bias,
  batch-norm scale/shift, activation, a residual add), a reduction group, or an
  injective group;
- any injective op (reshape, permute, pad, concat too) joins an injective group;
- a reduction joins an injective group (the chain feeds the reduction);
- a complex op always starts a group;
- a `dequantize` (or a bfloat16 -> float32 cast) of an activation whose one reader is elementwise or a reduction
  joins that reader's group as a prologue where the activation has other readers
  or the reader joins a later input's chain (reading uint8 there moves a quarter
  of the bytes of a float32 temporary).
A group is therefore a chain: everything but its last value is read inside it
only, which keeps the groups acyclic. Constants are never members (they are
group inputs). A group of reshapes only is a view (`Group.is_view`), and so is a
slice or concat that `views.py` finds needs no copy: it is a group alone."""

from __future__ import annotations

from .cleanup import eliminate_dead_code
from .fold_pad import fold_pad_into_conv
from .infer import infer_types
from .ir import Graph, Node
from .opset import OPS, Pattern
from .partition import Group, Partition
from .views import is_view_node

# Injective ops that change how elements are indexed: they cannot be a pointwise epilogue.
_NOT_ELEMENTWISE = frozenset({"reshape", "permute", "pad", "concat", "slice", "layout_transform"})


def is_elementwise(node: Node) -> bool:
    return OPS[node.op].pattern == Pattern.INJECTIVE and node.op not in _NOT_ELEMENTWISE


class _Chain:
    def __init__(self, node: Node, view: bool = False):
        self.nodes = [node]
        self.pattern = OPS[node.op].pattern
        self.last = node.outputs[0] if len(node.outputs) == 1 else None
        self.view = view

    def accepts(self, node: Node, via: str, graph: Graph) -> bool:
        if self.view:
            return False
        pattern = OPS[node.op].pattern
        if pattern == Pattern.INJECTIVE:
            if self.pattern == Pattern.INJECTIVE:
                return True
            return self.pattern in (Pattern.COMPLEX, Pattern.REDUCTION) and is_elementwise(node) \
                and graph.type_of(node.outputs[0]).shape == graph.type_of(via).shape
        return pattern == Pattern.REDUCTION and self.pattern == Pattern.INJECTIVE

    def add(self, node: Node):
        self.nodes.append(node)
        self.last = node.outputs[0] if len(node.outputs) == 1 else None
        self.pattern = max(self.pattern, OPS[node.op].pattern)


def _anchor(nodes: list[Node], graph: Graph) -> Node:
    for pattern in (Pattern.COMPLEX, Pattern.REDUCTION):
        for n in nodes:
            if OPS[n.op].pattern == pattern:
                return n
    return max(nodes, key=lambda n: graph.type_of(n.outputs[0]).size)


def _name(index: int, nodes: list[Node]) -> str:
    ops: list[str] = []
    for n in nodes:
        if n.op not in ops:
            ops.append(n.op)
    return f"g{index}_" + "_".join(ops[:4]) + ("_etc" if len(ops) > 4 else "")


def _is_prologue(graph: Graph, node: Node, outputs: set[str], position: dict[str, int]) -> bool:
    """A dequantize (or a bfloat16 -> float32 cast) read as uint8 (bfloat16) by its reader's group rather
    than written as float32 by its writer's:
    where its input has other readers, or where the reader (a residual add) will join the chain of a
    later input anyway."""
    widening = node.op == "cast" and graph.type_of(node.inputs[0]).dtype == "bfloat16" \
        and node.attr("dtype") == "float32"
    if not (node.op == "dequantize" or widening) or graph.is_constant(node.inputs[0]) or node.outputs[0] in outputs:
        return False
    readers = graph.consumers(node.outputs[0])
    if len(readers) != 1:
        return False
    reader, mine = readers[0], position[node.outputs[0]]
    elementwise = is_elementwise(reader) and reader.op != "dequantize"
    if len(graph.consumers(node.inputs[0])) > 1:
        return elementwise or OPS[reader.op].pattern == Pattern.REDUCTION
    return elementwise and any(position.get(v, -1) > mine and not graph.is_constant(v) for v in reader.inputs)


def fuse(graph: Graph) -> Partition:
    """The partition of `graph` (zero pads first folded into the convolutions
    that read them, dead nodes dropped, types inferred if missing) into fused
    groups in topological order; every non-constant node is in exactly one
    group, and `Partition.graph` is the graph the groups refer to."""
    graph = eliminate_dead_code(fold_pad_into_conv(graph))
    if any(v not in graph.types for n in graph.nodes for v in n.outputs):
        graph = infer_types(graph)
    outputs = set(graph.outputs)
    chain_of: dict[str, _Chain] = {}  # value -> the chain whose last value it is
    chains: list[_Chain] = []
    position = {v: i for i, n in enumerate(graph.nodes) for v in n.outputs}
    prologue: dict[str, Node] = {}  # value -> the dequantize writing it, waiting for its reader's group
    for node in graph.nodes:
        if node.op == "constant":
            continue
        if _is_prologue(graph, node, outputs, position):
            prologue[node.outputs[0]] = node
            continue
        best, best_key = None, None
        view = is_view_node(graph, node)
        if OPS[node.op].pattern != Pattern.COMPLEX and not view:
            for v in dict.fromkeys(node.inputs):
                c = chain_of.get(v)
                if c is None or c.last != v or v in outputs or any(r is not node for r in graph.consumers(v)):
                    continue
                key = (c.pattern, position[v])  # a complex group first; on a tie, continue the latest chain
                if c.accepts(node, v, graph) and (best_key is None or key > best_key):
                    best, best_key = c, key
        if best is None:
            best = _Chain(node, view)
            chains.append(best)
        else:
            best.add(node)
        for v in dict.fromkeys(node.inputs):
            if v in prologue:
                best.nodes.insert(best.nodes.index(node), prologue.pop(v))
        for v in node.outputs:
            chain_of[v] = best
    order = {id(n): i for i, n in enumerate(graph.nodes)}
    chains.sort(key=lambda c: order[id(c.nodes[-1])])
    groups = []
    for i, c in enumerate(chains):
        written = {v for n in c.nodes for v in n.outputs}
        members = {id(n) for n in c.nodes}
        inputs = tuple(dict.fromkeys(v for n in c.nodes for v in n.inputs if v not in written))
        outs = tuple(v for n in c.nodes for v in n.outputs
                     if v in outputs or any(id(r) not in members for r in graph.consumers(v)))
        groups.append(Group(_name(i, c.nodes), tuple(c.nodes), inputs, outs, _anchor(c.nodes, graph),
                            Pattern(max(OPS[n.op].pattern for n in c.nodes)), c.view))
    return Partition(graph, tuple(groups))

"""Where a program's main node is computed, for every target's space: the
anchor is the chain of elementwise consumers of the main node ending at an
output (bias, activation, residual add: inlined into it, so the epilogue runs
on the accumulators), and the main node's elementwise producers (padding,
packing) are the stages a space may inline or place."""

from __future__ import annotations

from ..analysis.graph import MiniGraph, Node, is_placeholder
from ..ir.expr import Const, Load


def loads_of(consumer: Node, tensor) -> list[Load]:
    """The loads of `tensor` in `consumer`'s body."""
    from ..ir.traverse import walk

    return [n for n in walk(consumer.tensor.op.body) if isinstance(n, Load) and n.tensor is tensor]


def _same_index(index, axis) -> bool:
    """`index` is `axis`, or the constant 0 on an extent-1 axis (how broadcasting reads a size-1 dim)."""
    return index is axis or (axis.extent == 1 and isinstance(index, Const) and index.value == 0)


def elementwise_reader(node: Node, consumer: Node) -> bool:
    """`consumer` reads `node` at exactly its own indices (a pointwise epilogue)."""
    if [lp.extent for lp in consumer.spatial] != [lp.extent for lp in node.spatial] or consumer.reduce:
        return False
    axes = consumer.tensor.op.axis
    for n in loads_of(consumer, node.tensor):
        if len(n.indices) != len(axes) or not all(_same_index(i, a) for i, a in zip(n.indices, axes)):
            return False
    return True


def anchor_chain(g: MiniGraph) -> tuple[Node, tuple[Node, ...]]:
    """(anchor, the elementwise nodes between the main node and it)."""
    main = g.main
    anchor, inlined = main, []
    while not anchor.is_output and len(anchor.consumers) == 1:
        nxt = g.node(anchor.consumers[0])
        if not nxt.injective or not elementwise_reader(anchor, nxt):
            break
        if anchor is not main:
            inlined.append(anchor)
        anchor = nxt
    return anchor, tuple(inlined)


def elementwise_producers(g: MiniGraph) -> tuple[Node, ...]:
    """The main node's injective producers read by it alone (padding, packing)."""
    return tuple(g.node(t) for t in g.main.inputs
                 if not is_placeholder(t) and g.node(t).injective and len(g.node(t).consumers) == 1)


__all__ = ["anchor_chain", "elementwise_producers", "elementwise_reader", "loads_of"]

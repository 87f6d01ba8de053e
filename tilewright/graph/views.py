"""Nodes that need no kernel because their output is a byte range of memory that
exists anyway (C-contiguous arrays, so a range is contiguous when every dimension
before the first one it cuts has extent 1 and every one after is whole):
- a `slice` with step 1 that keeps such a range of its input is that range;
- a `concat` whose parts are such ranges of its output is written in place: each
  part's producer writes straight into the output, and no copy runs.
Fusion gives each a group of its own (`Group.is_view`) and the memory plan aliases
the values at a byte offset (`memory_plan.py`)."""

from __future__ import annotations

import math

import numpy as np

from .ir import Graph, Node

# Ops whose output may itself be an alias (or is a constant): a concat cannot move it.
_NOT_PART = frozenset({"reshape", "concat", "constant"})


def _range_start(shape: tuple[int, ...], begin: tuple[int, ...], end: tuple[int, ...]) -> int | None:
    """The element offset of box [begin, end) in a C-contiguous array of `shape`, if
    the box is one contiguous range; else None."""
    cut = next((d for d, (b, e, n) in enumerate(zip(begin, end, shape)) if (b, e) != (0, n)), None)
    if cut is None:
        return 0
    if any(e - b != 1 for b, e in zip(begin[:cut], end[:cut])):
        return None
    if any((b, e) != (0, n) for b, e, n in zip(begin[cut + 1:], end[cut + 1:], shape[cut + 1:])):
        return None
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    return sum(b * s for b, s in zip(begin, strides))


def slice_offset(graph: Graph, node: Node) -> int | None:
    """Byte offset of a contiguous `slice` in its input; None if it is not one (or is a graph output)."""
    if node.op != "slice" or any(int(s) != 1 for s in node.attr("step")) or node.outputs[0] in graph.outputs:
        return None
    t = graph.type_of(node.inputs[0])
    start = _range_start(t.shape, tuple(int(b) for b in node.attr("begin")), tuple(int(e) for e in node.attr("end")))
    return None if start is None else start * np.dtype(t.dtype).itemsize


def concat_offsets(graph: Graph, node: Node) -> tuple[int, ...] | None:
    """Byte offset of each part in the output of a `concat` written in place, or None when
    it cannot be: a part is a graph input, output, constant or view, is read by anything
    else, or repeats; the output is a graph output; the parts are not contiguous ranges."""
    if node.op != "concat" or node.outputs[0] in graph.outputs or len(set(node.inputs)) != len(node.inputs):
        return None
    out = graph.type_of(node.outputs[0])
    axis = int(node.attr("axis", 0)) % len(out.shape)
    if any(n != 1 for n in out.shape[:axis]):
        return None
    for v in node.inputs:
        producer = graph.producer(v)
        if (producer is None or producer.op in _NOT_PART or slice_offset(graph, producer) is not None
                or v in graph.outputs
                or any(c is not node for c in graph.consumers(v))):
            return None
    offsets, at = [], 0
    for v in node.inputs:
        offsets.append(at)
        at += graph.type_of(v).nbytes
    return tuple(offsets)


def is_view_node(graph: Graph, node: Node) -> bool:
    return slice_offset(graph, node) is not None or concat_offsets(graph, node) is not None


__all__ = ["slice_offset", "concat_offsets", "is_view_node"]

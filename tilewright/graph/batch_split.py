"""Whether a graph computes each slice of one input dimension on its own (a batch): proved on the graph,
op by op, so that a dynamic module may run a batch of any size as slices on kernels compiled for a few
sizes (graph/dynamic.py).

A value either does not depend on the dimension ("free": constants and what is computed from them
alone) or carries it at one axis as that axis's outermost factor: `Carried(axis, inner)` means the
axis has `size * inner` entries, slice b of the dimension owning entries [b * inner, (b + 1) * inner).
Every op maps its carried inputs onto its output by a rule below; an op that mixes slices (a reduction,
normalization, slice, pad or concatenation across the carried axis, a contraction over it) or one without
a rule makes the graph not separable, and `carried_axes` raises NotSeparable naming the node."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .infer import reduce_axes, reshape_target
from .ir import Graph, Node
from .logic_ops import BINARY as LOGIC
from .opset import _UNARY, BROADCASTING

_ELEMENTWISE = frozenset({*_UNARY, "leaky_relu", "gelu", "clip", "cast", "logical_not", "where", "mod"})
_BATCH_FIRST = frozenset({"conv2d", "qconv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d"})
_ROWWISE = frozenset({"dense", "qdense", "matmul_integer"})


class NotSeparable(Exception):
    """Why a graph mixes the slices of a dimension; the message names the node."""


@dataclass(frozen=True)
class Carried:
    axis: int
    inner: int = 1


def carried_axes(graph: Graph, inputs: dict[str, int], size: int) -> tuple[dict[str, Carried | None], list]:
    """(each graph input's Carried or None, each graph output's Carried or None) for the dimension of
    `size` entries found at `inputs` (input name -> axis); NotSeparable where a node mixes its slices.
    `size` should be at least 2, so that no broadcast of length 1 hides the dimension."""
    state: dict[str, Carried | None] = {}
    for name in graph.inputs:
        state[name] = Carried(inputs[name]) if name in inputs else None
    for node in graph.nodes:
        if node.op == "constant":
            state[node.outputs[0]] = None
            continue
        ins = [state[v] for v in node.inputs]
        if all(c is None for c in ins):
            state[node.outputs[0]] = None
            continue
        state[node.outputs[0]] = _rule(graph, node, ins, size)
    return ({v: state[v] for v in graph.inputs}, [state[v] for v in graph.outputs])


def _fail(node: Node, why: str) -> NotSeparable:
    return NotSeparable(f"node '{node.name}' ({node.op}) {why}")


def _rule(graph: Graph, node: Node, ins: list[Carried | None], size: int) -> Carried:
    op, c = node.op, ins[0]
    shapes = [graph.type_of(v).shape for v in node.inputs]
    if op in _ELEMENTWISE or op in BROADCASTING or op in LOGIC or op in ("quantize", "dequantize"):
        return _broadcast(graph, node, ins, size)
    if op == "embedding":  # (weight, ids): the ids' axes come first in the output
        if c is not None:
            raise _fail(node, "reads the dimension in its table")
        return ins[1]
    if any(x is not None for x in ins[1:]) and op not in ("matmul", "concat"):
        raise _fail(node, "reads the dimension in an operand other than its data input")
    rank = len(shapes[0])
    if op in _BATCH_FIRST:
        if c.axis != 0:
            raise _fail(node, f"carries the dimension at axis {c.axis}; only its batch axis 0 is independent")
        return c
    if op == "batch_norm":
        if c.axis == 1:
            raise _fail(node, "normalizes per channel along the dimension")
        return c
    if op in _ROWWISE:
        if c.axis == rank - 1:
            raise _fail(node, "contracts over the dimension")
        return c
    if op == "matmul":
        return _matmul(graph, node, ins, size)
    if op == "layer_norm":
        if c.axis >= rank - int(node.attr("axes", 1)):
            raise _fail(node, "normalizes over the dimension")
        return c
    if op == "softmax":
        if c.axis == int(node.attr("axis", -1)) % rank:
            raise _fail(node, "normalizes over the dimension")
        return c
    if op in ("mean", "reduce_max", "reduce_min", "reduce_sum", "reduce_prod"):
        axes = reduce_axes(node, rank)
        if c.axis in axes:
            raise _fail(node, "reduces over the dimension")
        keep = node.attr("keepdims", True)
        return c if keep else Carried(c.axis - sum(a < c.axis for a in axes), c.inner)
    if op == "permute":
        dims = [int(d) % rank for d in node.attr("dims")]
        return Carried(dims.index(c.axis), c.inner)
    if op == "reshape":
        return _reshape(graph, node, c, size)
    if op == "pad":
        pads = node.attr("pads")
        if int(pads[c.axis]) or int(pads[c.axis + rank]):
            raise _fail(node, "pads the dimension")
        return c
    if op == "slice":
        begin, end, step = node.attr("begin"), node.attr("end"), node.attr("step")
        full = shapes[0][c.axis]
        if (int(begin[c.axis]), min(int(end[c.axis]), full), int(step[c.axis]) if step else 1) != (0, full, 1):
            raise _fail(node, "slices the dimension")
        return c
    if op == "concat":
        return _concat(graph, node, ins, size)
    if op == "layout_transform":
        if c.axis != 0:
            raise _fail(node, "re-packs the dimension")
        return c
    raise _fail(node, "has no rule saying how its output depends on the dimension")


def _broadcast(graph: Graph, node: Node, ins: list[Carried | None], size: int) -> Carried:
    """Inputs aligned on their last axes (NumPy); a free operand may broadcast along the carried axis
    or be a constant equal in every slice; a per-axis scale (quantize) must not run along it."""
    out_shape = graph.type_of(node.outputs[0]).shape
    rank = len(out_shape)
    found = None
    for v, c in zip(node.inputs, ins):
        shape = graph.type_of(v).shape
        if c is None:
            continue
        here = Carried(c.axis + rank - len(shape), c.inner)
        if found not in (None, here):
            raise _fail(node, "meets the dimension at two different axes")
        found = here
    if node.op in ("quantize", "dequantize") and len(graph.type_of(node.inputs[1]).shape) == 1 \
            and graph.type_of(node.inputs[1]).shape[0] > 1 and int(node.attr("axis", 1)) % rank == found.axis:
        raise _fail(node, "scales each slice of the dimension differently")
    for v, c in zip(node.inputs, ins):
        if c is None:
            _check_free(graph, node, v, found.axis - (rank - len(graph.type_of(v).shape)), found.inner, size)
    return found


def _check_free(graph: Graph, node: Node, value: str, axis: int, inner: int, size: int) -> None:
    """A free operand meeting the carried axis: of length 1 there, or a constant whose slices are equal."""
    shape = graph.type_of(value).shape
    if axis < 0 or shape[axis] == 1:
        return
    array = graph.constants.get(value)
    if array is not None:
        blocks = np.asarray(array).reshape(shape[:axis] + (size, inner) + shape[axis + 1:])
        if (blocks == np.take(blocks, [0], axis=axis)).all():
            return
    raise _fail(node, f"reads '{value}', which differs from one slice of the dimension to the next")


def _matmul(graph: Graph, node: Node, ins: list[Carried | None], size: int) -> Carried:
    """a[..., M, K] @ b[..., K, N]: the dimension may be a (broadcast) batch axis of both, M of a or N of b."""
    ranks = [len(graph.type_of(v).shape) for v in node.inputs]
    if min(ranks) < 2:
        raise _fail(node, "multiplies a vector (no rule for 1-D operands)")
    rank = max(ranks)
    found = []
    for i, (c, r) in enumerate(zip(ins, ranks)):
        if c is None:
            continue
        if c.axis == (r - 1 if i == 0 else r - 2):
            raise _fail(node, "contracts over the dimension")
        found.append(Carried(c.axis + rank - r, c.inner))
    if len(set(found)) > 1 or (len(found) == 2 and found[0].axis >= rank - 2):
        raise _fail(node, "pairs every slice of one operand with every slice of the other")
    out = found[0]
    if out.axis < rank - 2:  # a batch axis: a free operand must not differ along it
        for v, c, r in zip(node.inputs, ins, ranks):
            if c is None:
                _check_free(graph, node, v, out.axis - (rank - r), out.inner, size)
    return out


def _reshape(graph: Graph, node: Node, c: Carried, size: int) -> Carried:
    """Row-major: the dimension's slices stay contiguous blocks after any prefix of the same volume; the
    output axis at that prefix must hold a whole number of slices."""
    src = graph.type_of(node.inputs[0])
    shape = reshape_target(node, src)
    prefix = int(np.prod(src.shape[:c.axis], dtype=np.int64))
    volume = 1
    for j, d in enumerate(shape):
        if volume == prefix and d % size == 0:
            return Carried(j, d // size)
        volume *= d
        if volume > prefix:
            break
    raise _fail(node, f"reshapes {list(src.shape)} to {list(shape)}, splitting the dimension's slices")


def _concat(graph: Graph, node: Node, ins: list[Carried | None], size: int) -> Carried:
    rank = len(graph.type_of(node.outputs[0]).shape)
    axis = int(node.attr("axis", 0)) % rank
    found = {c for c in ins if c is not None}
    if len(found) > 1:
        raise _fail(node, "meets the dimension at two different axes")
    out = found.pop()
    if out.axis == axis:
        raise _fail(node, "concatenates along the dimension")
    for v, c in zip(node.inputs, ins):
        if c is None:
            _check_free(graph, node, v, out.axis, out.inner, size)
    return out

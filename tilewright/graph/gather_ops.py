"""Gathers of run-time data at run-time indices, with their types, NumPy reference and lowering to te,
one table each for `infer`, `reference` and `lower_te` (specs in `opset`):

- `take(x, indices)`, attr `axis`: NumPy's take (ONNX Gather): x's axis replaced by indices' shape;
- `take_along(x, indices)`, attr `axis`: ONNX GatherElements (NumPy's take_along_axis): out has the
  indices' shape, out[i] = x[i with i[axis] replaced by indices[i]].

Negative indices count from the end. Indices that are graph inputs are checked by the Module before any
kernel runs, as an embedding's ids are, and constant ones by the frontend; the kernels clamp, which only
proves their reads in bounds."""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..te import compute, if_then_else
from ..te import max as te_max
from ..te import min as te_min
from .ir import Node, TensorType


def _fail(node: Node, ins, why: str) -> ShapeError:
    return ShapeError(f"node '{node.name}' ({node.op}) with inputs ({', '.join(str(t) for t in ins)}): {why}")


def gather_axis(node: Node, ndim: int, ins=()) -> int:
    axis = int(node.attr("axis", 0))
    if not -ndim <= axis < ndim:
        raise _fail(node, ins, f"axis {axis} is out of range for {ndim} axes")
    return axis % ndim


def _check(node: Node, ins):
    x, idx = ins
    if not x.shape:
        raise _fail(node, ins, "x must have at least one axis")
    if not idx.dtype.startswith("int"):
        raise _fail(node, ins, f"indices must be signed integers, got {idx.dtype}")
    return gather_axis(node, len(x.shape), ins)


def _take_type(node: Node, ins):
    axis = _check(node, ins)
    x, idx = ins
    return [TensorType(x.shape[:axis] + idx.shape + x.shape[axis + 1:], x.dtype)]


def _take_along_type(node: Node, ins):
    axis = _check(node, ins)
    x, idx = ins
    if len(idx.shape) != len(x.shape) or any(i > d for k, (i, d) in enumerate(zip(idx.shape, x.shape)) if k != axis):
        raise _fail(node, ins, "indices must have x's rank and no axis longer than x's, except along `axis`")
    return [TensorType(idx.shape, x.dtype)]


TYPES = {"take": _take_type, "take_along": _take_along_type}


def _wrapped(idx: np.ndarray, extent: int) -> np.ndarray:
    idx = idx.astype(np.int64)
    return np.where(idx < 0, idx + extent, idx)


REFERENCE = {
    "take": lambda n, x, idx: np.take(x, _wrapped(idx, x.shape[gather_axis(n, x.ndim)]), axis=gather_axis(n, x.ndim),
                                      mode="raise"),
    "take_along": lambda n, x, idx: np.take_along_axis(x, _wrapped(idx, x.shape[gather_axis(n, x.ndim)]),
                                                       axis=gather_axis(n, x.ndim)),
}


def _index(k, extent: int):
    k = k.astype("int32")
    return te_max(te_min(if_then_else(k < 0, k + extent, k), extent - 1), 0)


def _lower_take(node: Node, a: list, name: str):
    x, idx = a
    axis = gather_axis(node, x.ndim)
    shape = x.shape[:axis] + idx.shape + x.shape[axis + 1:]

    def body(*i):
        at = _index(idx[i[axis:axis + idx.ndim]], x.shape[axis])
        return x[(*i[:axis], at, *i[axis + idx.ndim:])]
    return compute(shape, body, name=name)


def _lower_take_along(node: Node, a: list, name: str):
    x, idx = a
    axis = gather_axis(node, x.ndim)
    return compute(idx.shape, lambda *i: x[(*i[:axis], _index(idx[i], x.shape[axis]), *i[axis + 1:])], name=name)


LOWER = {"take": _lower_take, "take_along": _lower_take_along}


def checked_indices(graph) -> list[tuple[int, int, bool, str]]:
    """(input position, extent, negative wraps, node) of every take / take_along whose indices are a graph input."""
    return [(graph.inputs.index(n.inputs[1]), graph.type_of(n.inputs[0]).shape[gather_axis(n, len(
        graph.type_of(n.inputs[0]).shape))], True, n.name)
            for n in graph.nodes if n.op in TYPES and n.inputs[1] in graph.inputs]


__all__ = ["TYPES", "REFERENCE", "LOWER", "checked_indices"]

"""Comparisons, logic and selection, with their types, NumPy reference and lowering to te, one table
each for `infer`, `reference` and `lower_te` (specs in `opset`). All broadcast as NumPy does:

- `equal`, `less`, `less_equal`, `greater`, `greater_equal` (a, b of one dtype) -> bool;
- `logical_and`, `logical_or`, `logical_xor` (bool, bool) -> bool; `logical_not` (bool) -> bool;
- `where(cond, a, b)`: a where cond holds, else b (cond bool, a and b of one dtype)."""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ops.elementwise import broadcast_index
from ..te import compute, logical_and, logical_not, logical_or, select
from .ir import Node, TensorType

COMPARE = {"equal": (np.equal, lambda x, y: x == y), "less": (np.less, lambda x, y: x < y),
           "less_equal": (np.less_equal, lambda x, y: x <= y), "greater": (np.greater, lambda x, y: x > y),
           "greater_equal": (np.greater_equal, lambda x, y: x >= y)}
LOGIC = {"logical_and": (np.logical_and, lambda x, y: logical_and(x, y)),
         "logical_or": (np.logical_or, lambda x, y: logical_or(x, y)),
         "logical_xor": (np.logical_xor, lambda x, y: x != y)}
BINARY = frozenset({*COMPARE, *LOGIC})


def _fail(node: Node, ins, why: str) -> ShapeError:
    return ShapeError(f"node '{node.name}' ({node.op}) with inputs ({', '.join(str(t) for t in ins)}): {why}")


def _shape(node: Node, ins) -> tuple[int, ...]:
    from .infer import broadcast_shapes

    shape = ins[0].shape
    for t in ins[1:]:
        shape = broadcast_shapes(shape, t.shape)
        if shape is None:
            raise _fail(node, ins, "shapes do not broadcast (NumPy rules: trailing dims equal or 1)")
    return shape


def _binary_type(node: Node, ins):
    if node.op in LOGIC and any(t.dtype != "bool" for t in ins):
        raise _fail(node, ins, "takes bool inputs")
    if node.op in COMPARE and ins[0].dtype != ins[1].dtype:
        raise _fail(node, ins, "compares inputs of one dtype; cast one of them")
    return [TensorType(_shape(node, ins), "bool")]


def _not_type(node: Node, ins):
    if ins[0].dtype != "bool":
        raise _fail(node, ins, "takes a bool input")
    return [ins[0]]


def _where_type(node: Node, ins):
    if ins[0].dtype != "bool" or ins[1].dtype != ins[2].dtype:
        raise _fail(node, ins, "takes a bool condition and two values of one dtype")
    return [TensorType(_shape(node, ins), ins[1].dtype)]


TYPES = {**{op: _binary_type for op in BINARY}, "logical_not": _not_type, "where": _where_type}

def _reference_binary(fn):
    return lambda node, a, b: fn(a, b)


REFERENCE = {
    **{op: _reference_binary(fn) for op, (fn, _) in {**COMPARE, **LOGIC}.items()},
    "logical_not": lambda n, a: np.logical_not(a),
    "where": lambda n, c, a, b: np.where(c, a, b),
}


def _lower_binary(te_fn):
    def lower(node: Node, a: list, name: str):
        shape = _shape(node, [TensorType(t.shape) for t in a])
        return compute(shape, lambda *i: te_fn(a[0][broadcast_index(a[0].shape, i)],
                                               a[1][broadcast_index(a[1].shape, i)]), name=name)
    return lower


def _lower_where(node: Node, a: list, name: str):
    shape = _shape(node, [TensorType(t.shape) for t in a])
    c, x, y = a
    return compute(shape, lambda *i: select(c[broadcast_index(c.shape, i)], x[broadcast_index(x.shape, i)],
                                            y[broadcast_index(y.shape, i)]), name=name)


LOWER = {
    **{op: _lower_binary(te_fn) for op, (_, te_fn) in {**COMPARE, **LOGIC}.items()},
    "logical_not": lambda n, a, name: compute(a[0].shape, lambda *i: logical_not(a[0][i]), name=name),
    "where": _lower_where,
}

__all__ = ["TYPES", "REFERENCE", "LOWER", "BINARY"]

"""Sums and products over axes, what ONNX's Reduce family is built from (ReduceSum, ReduceSumSquare,
ReduceL1, ReduceL2 and ReduceLogSumExp are a sum after or before elementwise ops; ReduceProd a product),
with their NumPy reference and lowering to te, one table each for `infer`, `reference` and `lower_te`
(specs in `opset`): `reduce_sum(x)` / `reduce_prod(x)`, attrs `axes`, `keepdims`, as `mean` takes them.
Integer inputs sum and multiply in their own dtype, wrapping as NumPy's do."""

from __future__ import annotations

import numpy as np

from ..te import comm_reducer
from ..te import sum as te_sum
from .integer_ops import reduce_over
from .ir import Node

prod = comm_reducer(lambda x, y: x * y, lambda t: 1, name="prod")


def _axes(node: Node, ndim: int) -> tuple[int, ...]:
    from .infer import reduce_axes

    return reduce_axes(node, ndim)


def _reference(fn):
    def run(node: Node, x):
        keep = bool(node.attr("keepdims", True))
        return fn(x, axis=_axes(node, x.ndim), keepdims=keep).astype(x.dtype, copy=False)
    return run


def _lower(reducer):
    def lower(node: Node, a: list, name: str):
        return reduce_over(a[0], _axes(node, a[0].ndim), bool(node.attr("keepdims", True)), reducer, name)
    return lower


REFERENCE = {"reduce_sum": _reference(np.sum), "reduce_prod": _reference(np.prod)}
LOWER = {"reduce_sum": _lower(te_sum), "reduce_prod": _lower(prod)}

__all__ = ["REFERENCE", "LOWER"]

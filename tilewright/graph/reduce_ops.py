"""Sums and products over axes, what ONNX's Reduce family is built from (ReduceSum, ReduceSumSquare,
ReduceL1, ReduceL2 and ReduceLogSumExp are a sum after or before elementwise ops; ReduceProd a product),
with their NumPy reference and lowering to te, one table each for `infer`, `reference` and `lower_te`
(specs in `opset`): `reduce_sum(x)` / `reduce_prod(x)`, attrs `axes`, `keepdims`, as `mean` takes them;
`cumsum(x)` / `cumprod(x)`, attrs `axis`, `exclusive`, `reverse` (ONNX CumSum / CumProd: each entry the
sum (product) of those before it, itself included unless exclusive, counted from the end with reverse).
Integer inputs sum and multiply in their own dtype, wrapping as NumPy's do."""

from __future__ import annotations

import numpy as np

from ..te import comm_reducer, compute, reduce_axis, select
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


def _cumsum_axis(node: Node, ndim: int) -> int:
    return int(node.attr("axis", 0)) % ndim


def _reference_scan(fn, identity):
    def run(node: Node, x):
        axis = _cumsum_axis(node, x.ndim)
        y = np.flip(x, axis) if node.attr("reverse", 0) else x
        total = fn(y, axis=axis, dtype=x.dtype)
        if node.attr("exclusive", 0):
            total = np.concatenate([np.full_like(np.take(total, [0], axis=axis), identity),
                                    np.take(total, range(x.shape[axis] - 1), axis=axis)], axis=axis)
        return np.flip(total, axis) if node.attr("reverse", 0) else total
    return run


def _lower_scan(reducer, identity):
    """out[i] = the reduction over k of x[k] where k precedes i (by the attributes): a masked full reduction,
    n^2 operations along the axis."""
    def lower(node: Node, a: list, name: str):
        x = a[0]
        axis = _cumsum_axis(node, x.ndim)
        k = reduce_axis(x.shape[axis], "k")
        exclusive, reverse = bool(node.attr("exclusive", 0)), bool(node.attr("reverse", 0))

        def body(*i):
            at = i[axis]
            if reverse:
                keep = (k > at) if exclusive else (k >= at)
            else:
                keep = (k < at) if exclusive else (k <= at)
            return reducer(select(keep, x[(*i[:axis], k, *i[axis + 1:])], identity), axis=k)
        return compute(x.shape, body, name=name)
    return lower


REFERENCE = {"reduce_sum": _reference(np.sum), "reduce_prod": _reference(np.prod),
             "cumsum": _reference_scan(np.cumsum, 0), "cumprod": _reference_scan(np.cumprod, 1)}
LOWER = {"reduce_sum": _lower(te_sum), "reduce_prod": _lower(prod), "cumsum": _lower_scan(te_sum, 0),
         "cumprod": _lower_scan(prod, 1)}

__all__ = ["REFERENCE", "LOWER"]

"""Integer value ranges of tensors and expressions, by interval arithmetic: what
a placeholder promises (`value_range`) or its dtype holds, carried through
elementwise computes (a padding select adds its constant, a clamp narrows).
Used to prove that an intrinsic exact only on a range (a saturating 16-bit
pair sum) cannot saturate; None where nothing is known."""

from __future__ import annotations

from ..ir.expr import Binary, Cast, Const, Expr, Load, Reduce, Select
from ..te.tensor import PlaceholderOp
from .simplify import interval

Range = tuple[int, int]


def _dtype_range(dtype) -> Range | None:
    return dtype.int_range if dtype.is_int else None


def tensor_range(tensor, memo: dict | None = None) -> Range | None:
    """The range of every element of `tensor` (a te tensor)."""
    memo = {} if memo is None else memo
    if id(tensor) in memo:
        return memo[id(tensor)]
    memo[id(tensor)] = _dtype_range(tensor.dtype)  # a cycle cannot occur; this guards re-entry
    op = tensor.op
    if isinstance(op, PlaceholderOp):
        out = op.value_range or _dtype_range(tensor.dtype)
    elif isinstance(op.body, Reduce):
        out = _dtype_range(tensor.dtype)
    else:
        out = expr_range(op.body, lambda t: tensor_range(t, memo))
    memo[id(tensor)] = out
    return out


def expr_range(e: Expr, range_of) -> Range | None:
    """The range of `e`; `range_of(tensor_or_buffer)` gives a read's."""
    if isinstance(e, Const):
        return (int(e.value), int(e.value)) if e.dtype.is_int else None
    if isinstance(e, Load):
        return range_of(e.tensor)
    if isinstance(e, Cast):
        inner = expr_range(e.value, range_of)
        dt = _dtype_range(e.dtype)
        if inner is None or dt is None or not e.value.dtype.is_int:
            return dt
        return inner if dt[0] <= inner[0] and inner[1] <= dt[1] else dt  # wraps otherwise
    if isinstance(e, Select):
        t, f = expr_range(e.t, range_of), expr_range(e.f, range_of)
        return None if t is None or f is None else (min(t[0], f[0]), max(t[1], f[1]))
    if isinstance(e, Binary) and e.dtype.is_int:
        a, b = expr_range(e.a, range_of), expr_range(e.b, range_of)
        if a is None or b is None:
            return _dtype_range(e.dtype)
        out = interval(e.op, a, b)
        dt = _dtype_range(e.dtype)
        if out is None or out[0] < dt[0] or out[1] > dt[1]:
            return dt
        return out
    return _dtype_range(e.dtype)


__all__ = ["expr_range", "tensor_range"]

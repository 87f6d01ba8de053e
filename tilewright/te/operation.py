"""`placeholder`, `reduce_axis` and `compute`: the user's way to describe tensors,
with every structural rule checked when the tensor is built."""

from __future__ import annotations

import inspect
import itertools
import weakref
from collections.abc import Callable

from ..errors import ExprError, NameConflictError, ShapeError
from ..ir.arith import as_expr
from ..ir.dtype import as_dtype
from ..ir.expr import AxisKind, Expr, IterVar, Reduce, Var
from ..ir.traverse import loaded_tensors, walk
from .tensor import ComputeOp, PlaceholderOp, Tensor

_auto_names = itertools.count()
# id(reduce axis) -> (weakref to it, name of the compute that reduces over it)
_reduce_owner: dict[int, tuple[weakref.ref, str]] = {}


def _name(name, default: str) -> str:
    if name is None:
        return f"{default}{next(_auto_names)}"
    if not isinstance(name, str) or not name:
        raise NameConflictError(f"a name must be a non-empty string, got {name!r}")
    return name


def _check_extent(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            import numpy as np

            if isinstance(value, np.integer):
                value = int(value)
        except ImportError:  # pragma: no cover
            pass
    if isinstance(value, bool) or not isinstance(value, int):
        raise ShapeError(f"{what} must be a positive int, got {value!r} ({type(value).__name__}); shapes are static")
    if value <= 0:
        raise ShapeError(f"{what} must be positive, got {value}")
    return value


def _shape(shape, tensor: str) -> tuple[int, ...]:
    if not isinstance(shape, (list, tuple)):
        shape = (shape,)
    return tuple(_check_extent(n, f"tensor '{tensor}' axis {d} extent") for d, n in enumerate(shape))


def placeholder(shape, dtype="float32", name: str | None = None, value_range=None) -> Tensor:
    """An input tensor of static `shape` and `dtype`. `value_range` (integer dtypes): (lo, hi), a
    promise that every element lies in it (7-bit activations: (0, 127)); intrinsics that are exact
    only on a range (intrin/) may then be used."""
    name = _name(name, "placeholder")
    shape = _shape(shape, name)
    d = as_dtype(dtype, f"dtype of placeholder '{name}'")
    if value_range is not None:
        if not d.is_int:
            raise ShapeError(f"placeholder '{name}': value_range applies to integer dtypes, not {d}")
        lo, hi = (int(v) for v in value_range)
        if not d.int_range[0] <= lo <= hi <= d.int_range[1]:
            raise ShapeError(f"placeholder '{name}': value_range {(lo, hi)} must be an interval within {d}'s "
                             f"{d.int_range}")
        value_range = (lo, hi)
    return Tensor(PlaceholderOp(name, shape, d, value_range), shape, d)


def reduce_axis(dom, name: str | None = None) -> IterVar:
    """A reduction axis over `range(extent)` or `range(begin, end)`."""
    name = _name(name, "rv")
    if isinstance(dom, (list, tuple)):
        if len(dom) != 2:
            raise ShapeError(f"reduce_axis '{name}': give an extent or (begin, end), got {dom!r}")
        begin, end = dom
        if isinstance(begin, bool) or not isinstance(begin, int):
            raise ShapeError(f"reduce_axis '{name}': begin must be an int, got {begin!r}")
        if not isinstance(end, int) or isinstance(end, bool) or end <= begin:
            raise ShapeError(f"reduce_axis '{name}': range ({begin}, {end}) is empty; need end > begin")
        extent = end - begin
    else:
        begin, extent = 0, _check_extent(dom, f"reduce_axis '{name}' extent")
    return IterVar(name, begin=begin, extent=extent, kind=AxisKind.REDUCE)


def _param_names(fcompute: Callable, ndim: int, tensor: str) -> list[str]:
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        params = []
    if any(p.kind is p.VAR_POSITIONAL for p in params) or not params:
        return [f"ax{d}" for d in range(ndim)]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) != ndim:
        raise ShapeError(
            f"compute '{tensor}': fcompute takes {len(positional)} index argument(s) "
            f"({', '.join(p.name for p in positional)}) but the shape has {ndim} dimension(s)"
        )
    return [p.name for p in positional]


def compute(shape, fcompute: Callable, name: str | None = None, attrs: dict | None = None) -> Tensor:
    """A tensor whose element at index (i, j, ...) is `fcompute(i, j, ...)`.
    The body may be one reduction (tw.sum/max/min or a comm_reducer) at the top."""
    name = _name(name, "compute")
    shape = _shape(shape, name)
    names = _param_names(fcompute, len(shape), name)
    axes = tuple(IterVar(n, extent=e) for n, e in zip(names, shape))
    body = fcompute(*axes)
    if isinstance(body, (list, tuple)):
        raise ExprError(f"compute '{name}': fcompute returned {len(body)} values; one compute has one output")
    body = as_expr(body, context=f"compute '{name}'")
    reduce_axes = _validate_body(name, axes, body)
    _claim_reduce_axes(name, reduce_axes)
    op = ComputeOp(name, axes, reduce_axes, body, dict(attrs or {}), tuple(loaded_tensors(body)))
    return Tensor(op, shape, body.dtype)


def _validate_body(name: str, axes: tuple[IterVar, ...], body: Expr) -> tuple[IterVar, ...]:
    own = {id(a) for a in axes}
    reduce_axes: tuple[IterVar, ...] = ()
    if isinstance(body, Reduce):
        reduce_axes = body.axes
    for node in walk(body):
        if isinstance(node, Reduce) and node is not body:
            raise ExprError(
                f"compute '{name}': a {node.combiner.name}() reduction must be the whole body of its compute, "
                f"not part of a larger expression; compute it in its own stage and use that tensor here"
            )
    reduced = {id(a) for a in reduce_axes}
    if isinstance(body, Reduce):
        parts = [(body.source, True)] + ([(body.condition, True)] if body.condition is not None else [])
    else:
        parts = [(body, False)]
    for part, inside in parts:
        for node in walk(part):
            if not isinstance(node, Var):
                continue
            if not isinstance(node, IterVar):
                raise ExprError(
                    f"compute '{name}': unknown variable '{node.name}'; only this compute's axes may appear")
            if node.kind is AxisKind.REDUCE:
                if not inside:
                    raise ExprError(
                        f"compute '{name}': reduce axis '{node.name}' is used outside a reducer; "
                        f"wrap the expression in tw.sum/max/min(..., axis={node.name})"
                    )
                if id(node) not in reduced:
                    raise ExprError(
                        f"compute '{name}': reduce axis '{node.name}' appears in the reduction but is not in its "
                        f"axis list [{', '.join(a.name for a in reduce_axes)}]; add it"
                    )
            elif id(node) not in own:
                raise ExprError(
                    f"compute '{name}': axis '{node.name}' belongs to another compute; use this compute's "
                    f"index arguments ({', '.join(a.name for a in axes)})"
                )
    all_names = [a.name for a in axes + reduce_axes]
    dup = sorted({n for n in all_names if all_names.count(n) > 1})
    if dup:
        raise NameConflictError(f"compute '{name}': axis name(s) {dup} are used twice; give every axis its own name")
    return reduce_axes


def _claim_reduce_axes(name: str, reduce_axes: tuple[IterVar, ...]) -> None:
    for axis in reduce_axes:
        entry = _reduce_owner.get(id(axis))
        if entry is not None and entry[0]() is axis:
            raise ExprError(
                f"compute '{name}': reduce axis '{axis.name}' is already reduced by compute '{entry[1]}'; "
                f"create a new tw.reduce_axis for each reduction"
            )
    for axis in reduce_axes:
        key = id(axis)
        _reduce_owner[key] = (weakref.ref(axis, lambda _r, k=key: _reduce_owner.pop(k, None)), name)

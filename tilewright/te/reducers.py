"""Commutative reducers: sum, max, min, and `comm_reducer` to declare others.

A reducer called with `axis=` builds a Reduce node; called with two values and no
axis, it combines them elementwise (so `tw.max(a, b)` is the larger of a and b).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from ..errors import ExprError
from ..ir import arith
from ..ir.dtype import DType
from ..ir.expr import AxisKind, BinOp, Combiner, Const, IterVar, Reduce, Var
from ..ir.traverse import substitute

_counter = itertools.count()


class Reducer:
    def __init__(self, name: str, fcombine: Callable, fidentity: Callable[[DType], object]):
        self.name = name
        self._fcombine = fcombine
        self._fidentity = fidentity

    def combiner(self, dtype: DType) -> Combiner:
        n = next(_counter)
        lhs, rhs = Var(f"lhs{n}", dtype), Var(f"rhs{n}", dtype)
        result = arith.as_expr(self._fcombine(lhs, rhs), dtype, f"reducer {self.name}")
        if result.dtype != dtype:
            raise ExprError(
                f"reducer {self.name} combines two {dtype} values into {result.dtype}; it must keep {dtype}")
        identity = self._fidentity(dtype)
        identity = arith.const(identity.value if isinstance(identity, Const) else identity, dtype)
        return Combiner(self.name, lhs, rhs, result, identity)

    def __call__(self, expr, axis=None, where=None, *, init=None):
        if axis is not None and not _is_axis_list(axis):
            if where is not None:
                raise ExprError(f"{self.name}(a, b) combines two values; it takes no `where`")
            a, b, dtype = arith.operands(expr, axis, self.name)
            c = self.combiner(dtype)
            return substitute(c.result, {c.lhs: arith.coerce(a, dtype), c.rhs: arith.coerce(b, dtype)})
        if axis is None:
            raise ExprError(
                f"{self.name}() needs `axis=` (a tw.reduce_axis or a list of them) to reduce, "
                f"or two values to combine elementwise"
            )
        axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
        if not axes:
            raise ExprError(f"{self.name}(): axis list is empty")
        for a in axes:
            if a.kind is not AxisKind.REDUCE:
                raise ExprError(
                    f"{self.name}(): axis '{a.name}' is a spatial axis of a compute; reduce over a "
                    f"tw.reduce_axis(...) instead"
                )
        if len({id(a) for a in axes}) != len(axes):
            raise ExprError(f"{self.name}(): axis list repeats an axis: {[a.name for a in axes]}")
        source = arith.as_expr(expr, context=self.name)
        cond = None
        if where is not None:
            cond = arith.as_expr(where, context=f"{self.name}(where=)")
            if not cond.dtype.is_bool:
                raise ExprError(f"{self.name}(where=...) must be a bool condition, got {cond.dtype}")
        if init is not None:
            raise ExprError(f"{self.name}(): init= is not supported; add the initial value in a consumer stage")
        return Reduce(self.combiner(source.dtype), source, axes, cond, source.dtype, origin=self.name)


def _is_axis_list(axis) -> bool:
    if isinstance(axis, IterVar):
        return True
    return isinstance(axis, (list, tuple)) and all(isinstance(a, IterVar) for a in axis) and len(axis) > 0


def comm_reducer(fcombine: Callable, fidentity: Callable[[DType], object], name: str = "reduce") -> Reducer:
    """Declare a reducer: `fcombine(x, y)` must be commutative and associative and
    `fidentity(dtype)` its neutral element, e.g.
    `prod = tw.comm_reducer(lambda x, y: x * y, lambda t: 1, name="prod")`."""
    return Reducer(name, fcombine, fidentity)


sum = Reducer("sum", lambda x, y: arith.binary(BinOp.ADD, x, y), lambda t: 0)  # noqa: A001
max = Reducer("max", lambda x, y: arith.binary(BinOp.MAX, x, y), lambda t: t.lowest)  # noqa: A001
min = Reducer("min", lambda x, y: arith.binary(BinOp.MIN, x, y), lambda t: t.highest)  # noqa: A001

"""Elementwise functions on expressions: math intrinsics, selects, casts, integer
division variants and logic."""

from __future__ import annotations

from functools import reduce as _fold

from ..errors import ExprError
from ..ir import arith
from ..ir.dtype import bool_
from ..ir.expr import BinOp, Expr, Intrinsic, UnOp

const = arith.const
cast = arith.cast


def if_then_else(cond, t, f) -> Expr:
    """`t` where `cond` holds, else `f`; the other branch is never evaluated, so a
    guarded out-of-range read is fine (this is how padding is written)."""
    return arith.select(cond, t, f)


select = if_then_else


def _unary(func: Intrinsic):
    def fn(x) -> Expr:
        return arith.call(func, x)

    fn.__name__ = func.value
    fn.__doc__ = f"Elementwise {func.value}."
    return fn


exp = _unary(Intrinsic.EXP)
log = _unary(Intrinsic.LOG)
sqrt = _unary(Intrinsic.SQRT)
rsqrt = _unary(Intrinsic.RSQRT)
tanh = _unary(Intrinsic.TANH)
erf = _unary(Intrinsic.ERF)
sigmoid = _unary(Intrinsic.SIGMOID)
abs = _unary(Intrinsic.ABS)  # noqa: A001
floor = _unary(Intrinsic.FLOOR)
ceil = _unary(Intrinsic.CEIL)
round = _unary(Intrinsic.ROUND)  # noqa: A001
sin = _unary(Intrinsic.SIN)
cos = _unary(Intrinsic.COS)


def pow(x, y) -> Expr:  # noqa: A001
    return arith.call(Intrinsic.POW, x, y)


def floordiv(a, b) -> Expr:
    return arith.binary(BinOp.FLOORDIV, a, b)


def floormod(a, b) -> Expr:
    return arith.binary(BinOp.FLOORMOD, a, b)


def truncdiv(a, b) -> Expr:
    return arith.binary(BinOp.TRUNCDIV, a, b)


def truncmod(a, b) -> Expr:
    return arith.binary(BinOp.TRUNCMOD, a, b)


def _as_bool(x, what: str) -> Expr:
    e = arith.as_expr(x, bool_, what)
    if not e.dtype.is_bool:
        raise ExprError(f"{what} takes bool conditions, got {e.dtype} `{e}`")
    return e


def logical_and(*conds) -> Expr:
    if not conds:
        return arith.const(True)
    return _fold(lambda a, b: arith.binary(BinOp.AND, a, b), [_as_bool(c, "logical_and") for c in conds])


def logical_or(*conds) -> Expr:
    if not conds:
        return arith.const(False)
    return _fold(lambda a, b: arith.binary(BinOp.OR, a, b), [_as_bool(c, "logical_or") for c in conds])


def logical_not(cond) -> Expr:
    return arith.unary(UnOp.NOT, _as_bool(cond, "logical_not"))


all = logical_and  # noqa: A001  (TVM spelling: tvm.tir.all)
any = logical_or  # noqa: A001

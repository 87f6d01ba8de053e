"""Typed constructors for expression nodes: literal conversion, dtype checks and
promotion (rules in `dtype`). Everything that builds a node from user values
goes through here, so every dtype error is raised in one place."""

from __future__ import annotations

import numbers

import numpy as np

from ..errors import DTypeError, ExprError
from .dtype import DType, as_dtype, bool_, default_literal_dtype, literal_fits, promote_or_raise
from .expr import Binary, BinOp, Call, Cast, CmpOp, Compare, Const, Expr, Intrinsic, Select, Unary, UnOp


def _python_scalar(value):
    if isinstance(value, np.generic):
        return value.item()
    return value


def const(value, dtype=None) -> Const:
    """A constant; without a dtype, ints are int32 (int64 if large), floats float32."""
    value = _python_scalar(value)
    if not isinstance(value, (bool, int, float)):
        raise DTypeError(f"cannot make a constant from {value!r} of type {type(value).__name__}")
    d = default_literal_dtype(value) if dtype is None else as_dtype(dtype)
    if not literal_fits(value, d):
        raise DTypeError(f"constant {value!r} does not fit dtype {d}; cast or pick another dtype")
    if d.is_bool:
        value = bool(value)
    elif d.is_int:
        value = int(value)
    else:
        value = float(value)
    return Const(value, d)


def as_expr(value, like: DType | None = None, context: str = "expression") -> Expr:
    """Convert a Python/NumPy scalar to a Const taking `like`'s dtype if it fits."""
    if isinstance(value, Expr):
        return value
    if hasattr(value, "op") and hasattr(value, "shape"):  # a te Tensor
        raise ExprError(
            f"{context}: tensor '{value.name}' is used as a scalar; index it, e.g. "
            f"{value.name}[{', '.join(f'i{n}' for n in range(len(value.shape)))}]"
        )
    value = _python_scalar(value)
    if not isinstance(value, numbers.Number) or isinstance(value, complex):
        raise ExprError(f"{context}: cannot use {value!r} ({type(value).__name__}) in an expression")
    if like is None:
        return const(value)
    if literal_fits(value, like):
        return const(value, like)
    if like.is_int and isinstance(value, int) and not isinstance(value, bool):
        raise DTypeError(f"{context}: literal {value} does not fit {like} (range {like.int_range}); cast first")
    raise DTypeError(
        f"{context}: literal {value!r} cannot take dtype {like} without a cast; "
        f"write tw.cast(x, '{default_literal_dtype(value)}') or use a literal of kind {like.kind.value}"
    )


def operands(a, b, context: str) -> tuple[Expr, Expr, DType]:
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        a = as_expr(a, context=context)
    if isinstance(a, Expr):
        b = as_expr(b, a.dtype, context)
    else:
        a = as_expr(a, b.dtype, context)
    return a, b, promote_or_raise(a.dtype, b.dtype, context)


def coerce(e: Expr, d: DType) -> Expr:
    return e if e.dtype == d else Cast(e, d)


def binary(op: BinOp, a, b) -> Expr:
    context = f"operator {op.value}"
    a, b, d = operands(a, b, context)
    if op in (BinOp.AND, BinOp.OR, BinOp.XOR):
        if d.is_float:
            raise DTypeError(f"{context} needs bool (logical) or integer (bitwise) operands, got {d}")
    elif d.is_bool:
        raise DTypeError(f"{context} is not defined on bool; cast to an integer dtype first")
    if op is BinOp.DIV and not d.is_float:
        raise DTypeError(
            f"operator / on integer dtype {d}: use // (floor division), tw.truncdiv, or cast to a float dtype"
        )
    if op in (BinOp.TRUNCDIV, BinOp.SHL, BinOp.SHR) and not d.is_int:
        raise DTypeError(f"{op.value} needs integer operands, got {d}")
    if op is BinOp.TRUNCMOD and not (d.is_int or d.is_float):  # on floats, C's fmod
        raise DTypeError(f"{op.value} needs integer or float operands, got {d}")
    a, b = coerce(a, d), coerce(b, d)
    if op in _INT_DIVISIONS and d.is_int and _is_literal(b, 0):
        # a data zero gives x // 0 == 0 and x % 0 == x (reference and kernels); a literal one is a bug
        raise ExprError(f"operator {op.value} by the constant 0 on {d}: `{a} {op.value} 0` has no value; "
                        f"divide by a nonzero constant or guard the divisor with tw.if_then_else")
    # Fold only identities that keep formulas readable (x + 0, x * 1, x // 1);
    # real simplification is the lowering's job.
    if _is_literal(b, 0) and op in (BinOp.ADD, BinOp.SUB) and not d.is_float:
        return a
    if _is_literal(a, 0) and op is BinOp.ADD and not d.is_float:
        return b
    if _is_literal(b, 1) and op in (BinOp.MUL, BinOp.FLOORDIV) and not d.is_float:
        return a
    if _is_literal(a, 1) and op is BinOp.MUL and not d.is_float:
        return b
    return Binary(op, a, b, d)


_INT_DIVISIONS = (BinOp.FLOORDIV, BinOp.FLOORMOD, BinOp.TRUNCDIV, BinOp.TRUNCMOD)


def _is_literal(e: Expr, value) -> bool:
    return isinstance(e, Const) and not e.dtype.is_bool and e.value == value


def compare(op: CmpOp, a, b) -> Expr:
    a, b, d = operands(a, b, f"comparison {op.value}")
    return Compare(op, coerce(a, d), coerce(b, d), bool_)


def unary(op: UnOp, a) -> Expr:
    a = as_expr(a, context=f"operator {op.value}")
    if op is UnOp.NEG and a.dtype.is_bool:
        raise DTypeError("unary - is not defined on bool; use ~ for logical not")
    if op is UnOp.NOT and a.dtype.is_float:
        raise DTypeError(f"~ needs a bool or integer operand, got {a.dtype}")
    return Unary(op, a, a.dtype)


def cast(value, dtype) -> Expr:
    d = as_dtype(dtype)
    e = as_expr(value, d if not isinstance(value, Expr) else None, "cast")
    return e if e.dtype == d else Cast(e, d)


def select(cond, t, f) -> Expr:
    cond = as_expr(cond, bool_, "if_then_else condition")
    if not cond.dtype.is_bool:
        raise DTypeError(
            f"if_then_else condition must be bool, got {cond.dtype}; compare it, e.g. `x != 0`"
        )
    t, f, d = operands(t, f, "if_then_else branches")
    return Select(cond, coerce(t, d), coerce(f, d), d)


_FLOAT_ONLY = {
    Intrinsic.EXP, Intrinsic.LOG, Intrinsic.SQRT, Intrinsic.RSQRT, Intrinsic.TANH, Intrinsic.ERF,
    Intrinsic.SIGMOID, Intrinsic.FLOOR, Intrinsic.CEIL, Intrinsic.ROUND, Intrinsic.SIN, Intrinsic.COS,
    Intrinsic.POW,
}


def call(func: Intrinsic, *args) -> Expr:
    if func is Intrinsic.POW:
        a, b, d = operands(args[0], args[1], "pow")
        args = (coerce(a, d), coerce(b, d))
    else:
        args = tuple(as_expr(a, context=func.value) for a in args)
        d = args[0].dtype
    if func in _FLOAT_ONLY and not d.is_float:
        raise DTypeError(f"{func.value} needs a floating-point argument, got {d}; cast it first")
    if func is Intrinsic.ABS and d.is_bool:
        raise DTypeError("abs is not defined on bool")
    return Call(func, args, d)

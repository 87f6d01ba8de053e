"""Readable text for expressions, with only the parentheses precedence needs."""

from __future__ import annotations

from .expr import (
    Binary,
    BinOp,
    Broadcast,
    Call,
    Cast,
    Compare,
    Const,
    Expr,
    Load,
    Ramp,
    Reduce,
    Select,
    Unary,
    UnOp,
    Var,
)

# Python's precedence, so a printed formula reads as Python would parse it.
_INFIX_PREC = {
    BinOp.OR: 5, BinOp.XOR: 6, BinOp.AND: 7,
    BinOp.SHL: 8, BinOp.SHR: 8,
    BinOp.ADD: 9, BinOp.SUB: 9,
    BinOp.MUL: 10, BinOp.DIV: 10, BinOp.FLOORDIV: 10, BinOp.FLOORMOD: 10,
}
_LOGICAL = {BinOp.OR: ("or", 1), BinOp.AND: ("and", 2)}
_NOT_PREC = 3
_CMP_PREC = 4
_UNARY_PREC = 11
_ATOM = 12


def _const_str(c: Const) -> str:
    if c.dtype.is_bool:
        return "True" if c.value else "False"
    if c.dtype.is_float:
        text = repr(float(c.value))
        return text if c.dtype.name == "float32" else f"{c.dtype.name}({text})"
    if c.dtype.name in ("int32",):
        return str(c.value)
    return f"{c.dtype.name}({c.value})"


def _str(e: Expr) -> tuple[str, int]:
    if isinstance(e, Const):
        return _const_str(e), (_ATOM if e.value >= 0 or e.dtype.is_bool else _UNARY_PREC)
    if isinstance(e, Var):
        return e.name, _ATOM
    if isinstance(e, Load):
        return f"{e.tensor.name}[{', '.join(expr_str(i) for i in e.indices)}]", _ATOM
    if isinstance(e, Binary):
        if e.dtype.is_bool and e.op in _LOGICAL:
            word, prec = _LOGICAL[e.op]
            return f"{_wrap(e.a, prec, False)} {word} {_wrap(e.b, prec, True)}", prec
        prec = _INFIX_PREC.get(e.op)
        if prec is None:
            return f"{e.op.value}({expr_str(e.a)}, {expr_str(e.b)})", _ATOM
        return f"{_wrap(e.a, prec, False)} {e.op.value} {_wrap(e.b, prec, True)}", prec
    if isinstance(e, Compare):
        return f"{_wrap(e.a, _CMP_PREC, True)} {e.op.value} {_wrap(e.b, _CMP_PREC, True)}", _CMP_PREC
    if isinstance(e, Unary):
        if e.op is UnOp.NOT and e.dtype.is_bool:
            return f"not {_wrap(e.a, _NOT_PREC, True)}", _NOT_PREC
        return f"{e.op.value}{_wrap(e.a, _UNARY_PREC, True)}", _UNARY_PREC
    if isinstance(e, Cast):
        return f"{e.dtype.name}({expr_str(e.value)})", _ATOM
    if isinstance(e, Select):
        return f"if_then_else({expr_str(e.cond)}, {expr_str(e.t)}, {expr_str(e.f)})", _ATOM
    if isinstance(e, Call):
        return f"{e.func.value}({', '.join(expr_str(a) for a in e.args)})", _ATOM
    if isinstance(e, Reduce):
        axes = ", ".join(f"{a.name}:{_range_str(a)}" for a in e.axes)
        where = "" if e.condition is None else f", where={expr_str(e.condition)}"
        return f"{e.combiner.name}({expr_str(e.source)}, axis=[{axes}]{where})", _ATOM
    if isinstance(e, Ramp):
        return f"ramp({expr_str(e.base)}, {e.stride}, {e.lanes})", _ATOM
    if isinstance(e, Broadcast):
        return f"x{e.lanes}({expr_str(e.value)})", _ATOM
    return f"<{type(e).__name__}>", _ATOM


def _range_str(axis) -> str:
    return f"{axis.extent}" if axis.begin == 0 else f"{axis.begin}..{axis.end}"


def _wrap(e: Expr, prec: int, right: bool) -> str:
    text, p = _str(e)
    # Left-associative: a right operand of equal precedence needs parentheses.
    return f"({text})" if p < prec or (right and p == prec) else text


def expr_str(e: Expr) -> str:
    return _str(e)[0]

"""Vectorized NumPy evaluation of one expression over a box of its axes.

Each axis is bound to an `arange` shaped to broadcast along its own dimension,
so a subexpression costs memory only for the axes it depends on. Under a
Select, loads are bounds-checked only where the branch is taken; out-of-range
indices elsewhere are clamped and never observed.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import EvaluationError
from ..ir.dtype import DType, bfloat16
from ..ir.expr import (
    Binary,
    BinOp,
    Call,
    Cast,
    CmpOp,
    Compare,
    Const,
    Expr,
    Intrinsic,
    Load,
    Reduce,
    Select,
    Unary,
    UnOp,
    Var,
)
from .values import round_to_bfloat16, to_storage

_erf = np.frompyfunc(math.erf, 1, 1)


def _fix(value: np.ndarray, dtype: DType) -> np.ndarray:
    """Bring an intermediate result to `dtype`'s storage (rounding bfloat16)."""
    if dtype == bfloat16:
        return round_to_bfloat16(value)
    if value.dtype != dtype.numpy:
        return to_storage(value, dtype)
    return value


def _truncdiv(a, b):
    return (a - np.fmod(a, b)) // np.where(b == 0, 1, b)


_INT_DIVISIONS = (BinOp.FLOORDIV, BinOp.FLOORMOD, BinOp.TRUNCDIV, BinOp.TRUNCMOD)


def _int_division(op: BinOp, a, b):
    """Integer division as the kernels compute it: x / 0 == 0 and x % 0 == x (so a == (a/b)*b + a%b
    holds), MIN / -1 wraps to MIN; never a trap."""
    zero = b == 0
    safe = np.where(zero, np.ones_like(b), b)
    if op is BinOp.FLOORDIV:
        return np.where(zero, np.zeros_like(a), np.floor_divide(a, safe))
    if op is BinOp.TRUNCDIV:
        return np.where(zero, np.zeros_like(a), _truncdiv(a, safe))
    rest = np.mod(a, safe) if op is BinOp.FLOORMOD else np.fmod(a, safe)
    return np.where(zero, a, rest)


def shift(a, b, left: bool) -> np.ndarray:
    """a << b or a >> b (arithmetic for signed a), as NumPy and ONNX define them and the kernels compute:
    a count outside [0, bits) leaves 0, or -1 for a right shift of a negative a; left shifts wrap."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    bits = a.dtype.itemsize * 8
    valid = (b >= 0) & (b < bits)
    count = np.where(valid, b, 0)
    if left:
        unsigned = np.dtype(f"u{a.dtype.itemsize}")
        out = np.left_shift(a.astype(unsigned), count.astype(unsigned)).astype(a.dtype)
        return np.where(valid, out, np.zeros_like(a))
    fill = np.where(a < 0, -1, 0).astype(a.dtype) if a.dtype.kind == "i" else np.zeros_like(a)
    return np.where(valid, np.right_shift(a, count.astype(a.dtype)), fill)


_BINARY = {
    BinOp.ADD: np.add, BinOp.SUB: np.subtract, BinOp.MUL: np.multiply, BinOp.DIV: np.true_divide,
    BinOp.FLOORMOD: np.mod, BinOp.TRUNCMOD: np.fmod, BinOp.TRUNCDIV: _truncdiv,
    BinOp.MIN: np.minimum, BinOp.MAX: np.maximum, BinOp.XOR: np.bitwise_xor,
    BinOp.SHL: lambda a, b: shift(a, b, True), BinOp.SHR: lambda a, b: shift(a, b, False),
}
_COMPARE = {
    CmpOp.LT: np.less, CmpOp.LE: np.less_equal, CmpOp.GT: np.greater, CmpOp.GE: np.greater_equal,
    CmpOp.EQ: np.equal, CmpOp.NE: np.not_equal,
}


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


_CALL = {
    Intrinsic.EXP: np.exp, Intrinsic.LOG: np.log, Intrinsic.SQRT: np.sqrt,
    Intrinsic.RSQRT: lambda x: 1 / np.sqrt(x), Intrinsic.TANH: np.tanh,
    Intrinsic.ERF: lambda x: _erf(x).astype(x.dtype), Intrinsic.SIGMOID: _sigmoid,
    Intrinsic.ABS: np.abs, Intrinsic.POW: np.power, Intrinsic.FLOOR: np.floor, Intrinsic.CEIL: np.ceil,
    Intrinsic.ROUND: np.rint, Intrinsic.SIN: np.sin, Intrinsic.COS: np.cos,
}


class ExprEvaluator:
    """Evaluates expressions given `bindings` (var -> array) and `tensors`
    (tensor -> full array). `stage` names the compute for error messages."""

    def __init__(self, bindings: dict[int, np.ndarray], tensors: dict[int, np.ndarray], stage: str, ndim: int):
        self.bindings = bindings
        self.tensors = tensors
        self.stage = stage
        self.ndim = ndim

    def __call__(self, e: Expr, mask: np.ndarray | None = None) -> np.ndarray:
        with np.errstate(all="ignore"):
            return self._eval(e, mask)

    def _eval(self, e: Expr, mask) -> np.ndarray:
        if isinstance(e, Const):
            return np.full((1,) * self.ndim, e.value, dtype=e.dtype.numpy)
        if isinstance(e, Var):
            try:
                return self.bindings[id(e)]
            except KeyError:
                raise EvaluationError(f"compute '{self.stage}': variable '{e.name}' has no value here") from None
        if isinstance(e, Load):
            return self._load(e, mask)
        if isinstance(e, Binary):
            return self._binary(e, mask)
        if isinstance(e, Compare):
            return _COMPARE[e.op](self._eval(e.a, mask), self._eval(e.b, mask))
        if isinstance(e, Unary):
            a = self._eval(e.a, mask)
            if e.op is UnOp.NEG:
                return _fix(np.negative(a), e.dtype)
            return np.logical_not(a) if e.dtype.is_bool else np.invert(a)
        if isinstance(e, Cast):
            return to_storage(self._eval(e.value, mask), e.dtype)
        if isinstance(e, Select):
            return self._select(e, mask)
        if isinstance(e, Call):
            args = [self._eval(a, mask) for a in e.args]
            if e.dtype == bfloat16:
                args = [a.astype(np.float32) for a in args]
            return _fix(np.asarray(_CALL[e.func](*args)), e.dtype)
        if isinstance(e, Reduce):
            raise EvaluationError(f"compute '{self.stage}': a reduction may only be the whole body of a compute")
        raise EvaluationError(f"compute '{self.stage}': cannot evaluate node {type(e).__name__}")

    def _binary(self, e: Binary, mask) -> np.ndarray:
        a, b = self._eval(e.a, mask), self._eval(e.b, mask)
        op = e.op
        if op in _INT_DIVISIONS and e.dtype.is_int:
            out = _int_division(op, a, b)
        elif op is BinOp.FLOORDIV:
            out = np.floor(a / b)
        elif op is BinOp.AND:
            out = np.logical_and(a, b) if e.dtype.is_bool else np.bitwise_and(a, b)
        elif op is BinOp.OR:
            out = np.logical_or(a, b) if e.dtype.is_bool else np.bitwise_or(a, b)
        elif op is BinOp.XOR and e.dtype.is_bool:
            out = np.logical_xor(a, b)
        else:
            out = _BINARY[op](a, b)
        return _fix(np.asarray(out), e.dtype)

    def _select(self, e: Select, mask) -> np.ndarray:
        cond = self._eval(e.cond, mask)
        t_mask = cond if mask is None else np.logical_and(mask, cond)
        f_mask = np.logical_not(cond) if mask is None else np.logical_and(mask, np.logical_not(cond))
        t = self._eval(e.t, t_mask) if t_mask.any() else None
        f = self._eval(e.f, f_mask) if f_mask.any() else None
        if t is None and f is None:
            return np.zeros((1,) * self.ndim, dtype=e.dtype.numpy)
        if t is None:
            return f
        if f is None:
            return t
        return np.where(cond, t, f)

    def _load(self, e: Load, mask) -> np.ndarray:
        tensor = e.tensor
        try:
            data = self.tensors[id(tensor)]
        except KeyError:
            raise EvaluationError(f"compute '{self.stage}' reads '{tensor.name}', which has no value") from None
        indices = []
        for dim, index_expr in enumerate(e.indices):
            idx = self._eval(index_expr, mask)
            extent = data.shape[dim]
            bad = (idx < 0) | (idx >= extent)
            if mask is not None:
                bad = np.logical_and(bad, mask)
            if bad.any():
                shape = np.broadcast_shapes(bad.shape, idx.shape)
                value = np.broadcast_to(idx, shape)[np.broadcast_to(bad, shape)][0]
                raise EvaluationError(
                    f"compute '{self.stage}' reads '{tensor.name}' out of bounds: axis {dim} index {int(value)} "
                    f"(`{index_expr}`) is outside [0, {extent}); guard the read with tw.if_then_else or pad the input"
                )
            if mask is not None:
                idx = np.clip(idx, 0, extent - 1)
            indices.append(idx)
        if not indices:
            return np.reshape(data, (1,) * self.ndim)
        return data[tuple(indices)]

"""Storage flattening: after it, every Load and Store of a buffer has one
index, the row-major offset."""

from __future__ import annotations

from dataclasses import replace

from ..ir import arith
from ..ir.expr import BinOp, Expr, Load
from ..ir.stmt import Buffer, Stmt, Store
from ..ir.stmt_functor import map_stmt
from ..ir.traverse import transform


def flat_index(buffer: Buffer, indices: tuple[Expr, ...]) -> Expr:
    out: Expr | None = None
    for extent, index in zip(buffer.shape, indices):
        out = index if out is None else arith.binary(BinOp.ADD, arith.binary(BinOp.MUL, out, extent), index)
    return out if out is not None else arith.const(0)


def dense_strides(shape) -> tuple[int, ...]:
    """Row-major strides, in elements, of a dense array of `shape`."""
    out, n = [], 1
    for d in reversed(shape):
        out.append(n)
        n *= d
    return tuple(reversed(out))


def _flatten_expr(e: Expr) -> Expr:
    def fn(n: Expr):
        if isinstance(n, Load) and isinstance(n.tensor, Buffer) and len(n.indices) != 1:
            return replace(n, indices=(flat_index(n.tensor, n.indices),))
        return None

    return transform(e, fn)


def flatten(stmt: Stmt) -> Stmt:
    def fs(s: Stmt):
        if isinstance(s, Store) and len(s.indices) != 1:
            return replace(s, indices=(flat_index(s.buffer, s.indices),))
        return None

    return map_stmt(stmt, fs, _flatten_expr)

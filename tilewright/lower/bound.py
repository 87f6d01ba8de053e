"""Bound inference: which region of a producer a consumer's loop iteration reads.

An interval is (lo, width): lo an expression over the loops that are fixed at
the attach point, width a constant, so the region has a constant size and its
buffer can be allocated statically. The result is conservative (a superset);
reads whose indices cannot be bounded (data-dependent) take the whole axis.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import arith
from ..ir.expr import Binary, BinOp, Cast, Const, Expr, Load, Var
from ..ir.traverse import walk
from .simplify import Ranges, const_bounds, simplify


@dataclass(frozen=True)
class Interval:
    lo: Expr
    width: int  # hi = lo + width


def interval(e: Expr, ranged: Ranges) -> Interval | None:
    """Interval of integer `e` when vars in `ranged` sweep their (lo, hi) and
    every other var is fixed."""
    if isinstance(e, Const) and e.dtype.is_int:
        return Interval(e, 0)
    if isinstance(e, Var):
        if id(e) in ranged:
            lo, hi = ranged[id(e)]
            return Interval(Const(lo, e.dtype), hi - lo)
        return Interval(e, 0)
    if isinstance(e, Cast) and e.dtype.is_int and e.value.dtype.is_int:
        return interval(e.value, ranged)
    if not isinstance(e, Binary) or not e.dtype.is_int:
        return None
    a, b = interval(e.a, ranged), interval(e.b, ranged)
    if a is None or b is None:
        return None
    op = e.op
    if a.width == 0 and b.width == 0:  # both fixed: the value itself
        return Interval(arith.binary(op, a.lo, b.lo), 0)
    if op is BinOp.ADD:
        return Interval(arith.binary(BinOp.ADD, a.lo, b.lo), a.width + b.width)
    if op is BinOp.SUB:
        return Interval(arith.binary(BinOp.SUB, a.lo, arith.binary(BinOp.ADD, b.lo, b.width)), a.width + b.width)
    if op is BinOp.MUL:
        for x, y in ((a, b), (b, a)):
            if y.width == 0 and isinstance(y.lo, Const):
                c = int(y.lo.value)
                if c >= 0:
                    return Interval(arith.binary(BinOp.MUL, x.lo, c), x.width * c)
                return Interval(arith.binary(BinOp.MUL, arith.binary(BinOp.ADD, x.lo, x.width), c), -x.width * c)
        return None
    if op in (BinOp.FLOORDIV, BinOp.FLOORMOD) and b.width == 0 and isinstance(b.lo, Const) and b.lo.value > 0:
        c = int(b.lo.value)
        if isinstance(a.lo, Const):  # exact when the bounds are constants
            lo, hi = int(a.lo.value), int(a.lo.value) + a.width
            if op is BinOp.FLOORDIV:
                return Interval(Const(lo // c, e.dtype), hi // c - lo // c)
            if lo // c == hi // c:
                return Interval(Const(lo % c, e.dtype), a.width)
            return Interval(Const(0, e.dtype), c - 1)
        if op is BinOp.FLOORDIV:
            return Interval(arith.binary(BinOp.FLOORDIV, a.lo, c), a.width // c + 1)
        return Interval(Const(0, e.dtype), c - 1)
    if op in (BinOp.MIN, BinOp.MAX):
        return Interval(arith.binary(op, a.lo, b.lo), max(a.width, b.width))
    return None


def union(a: Interval | None, b: Interval | None, ranges: Ranges) -> Interval | None:
    if a is None or b is None:
        return None
    diff = simplify(arith.binary(BinOp.SUB, b.lo, a.lo), ranges)
    if isinstance(diff, Const):
        d = int(diff.value)
        lo, hi = min(0, d), max(a.width, d + b.width)
        return Interval(a.lo if d >= 0 else b.lo, hi - lo)
    return None


@dataclass(frozen=True)
class Region:
    """Per axis of a producer: the first index (expression) and the extent."""

    begins: tuple[Expr, ...]
    extents: tuple[int, ...]


def required_region(tensor, exprs: list[Expr], ranged: Ranges, fixed_ranges: Ranges) -> Region:
    """The region of `tensor` read by `exprs` (expressions over loop vars) while
    the vars in `ranged` sweep and the others stay fixed; clamped to the tensor."""
    per_axis: list[Interval | None] = [None] * tensor.ndim
    seen = [False] * tensor.ndim
    all_ranges = {**fixed_ranges, **ranged}
    for node in (n for e in exprs for n in walk(e)):
        if not (isinstance(node, Load) and node.tensor is tensor):
            continue
        for d, index in enumerate(node.indices):
            iv = interval(simplify(index, all_ranges), ranged)
            per_axis[d] = iv if not seen[d] else union(per_axis[d], iv, all_ranges)
            seen[d] = True
    begins, extents = [], []
    for d, n in enumerate(tensor.shape):
        iv = per_axis[d]
        if iv is None or iv.width + 1 >= n:
            begins.append(Const(0, _index_dtype()))
            extents.append(n)
            continue
        extent = iv.width + 1
        lo = simplify(iv.lo, fixed_ranges)
        b = const_bounds(lo, fixed_ranges)
        if b is None or b[0] < 0 or b[1] > n - extent:  # keep the region inside the tensor
            lo = simplify(arith.binary(BinOp.MIN, arith.binary(BinOp.MAX, lo, 0), n - extent), fixed_ranges)
        begins.append(lo)
        extents.append(extent)
    return Region(tuple(begins), tuple(extents))


def _index_dtype():
    from ..ir.dtype import int32

    return int32

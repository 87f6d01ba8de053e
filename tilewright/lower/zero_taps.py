"""Skipping the taps of a reduction that read a zero border (a padded input's padding).

A root stage written `if_then_else(bounds, x[...], 0)` (a padding copy) is zero outside
a box. A reduce loop whose body only accumulates products with a read of that buffer
adds nothing for the taps whose reads all fall outside the box, so its range is
narrowed to the taps that can read inside it, per iteration of the loops around it:
a 3x3 conv's rh loop runs over [1, 3) for the first output row and [0, 2) for the
last. The bounds hold for every iteration of the loops inside (the register tile), so
a tile whose rows straddle the border keeps the taps any of its rows needs. Exact for
finite operands (0 * w is 0); PyTorch's convolutions skip these taps too.

Runs before `flatten`, on buffer reads still indexed per dimension.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import arith
from ..ir.expr import Binary, BinOp, CmpOp, Compare, Const, Expr, Load, Select, Var
from ..ir.stmt import Allocate, For, ForKind, IfThenElse, LetStmt, Seq, Stmt, Store
from ..ir.stmt_functor import walk_stmt
from ..ir.traverse import free_vars, structural_key
from .partition import conjuncts
from .simplify import const_bounds, to_linear

Box = dict[int, tuple[int, int]]  # dimension -> [lo, hi) outside which the buffer is zero


def zero_box(op, shape) -> Box | None:
    """The box of a stage whose body is `select(conjunction of axis bounds, value, 0)`."""
    body = getattr(op, "body", None)
    if not isinstance(body, Select) or not isinstance(body.f, Const) or body.f.value != 0:
        return None
    box: Box = {}
    axes = {id(a): n for n, a in enumerate(op.axis)}
    for c in conjuncts(body.cond):
        bound = _axis_bound(c, axes)
        if bound is not None:
            dim, lo, hi = bound
            old_lo, old_hi = box.get(dim, (0, shape[dim]))
            box[dim] = (old_lo if lo is None else max(old_lo, lo), old_hi if hi is None else min(old_hi, hi))
    box = {d: b for d, b in box.items() if b != (0, shape[d])}
    return box or None


def _axis_bound(c: Expr, axes: dict) -> tuple[int, int | None, int | None] | None:
    """(dim, lo, hi) from `axis + k op 0`-shaped comparisons; None for anything else."""
    if not isinstance(c, Compare) or c.op not in (CmpOp.GE, CmpOp.GT, CmpOp.LT, CmpOp.LE):
        return None
    lin = to_linear(c.a).add(to_linear(c.b), -1)  # c.a - c.b  op  0
    if len(lin.terms) != 1:
        return None
    ((atom, coef),) = lin.terms.values()
    if id(atom) not in axes or coef not in (1, -1):
        return None
    k, op = lin.const, c.op
    if coef == -1:  # -axis + k op 0  <=>  axis - k  op'  0
        k = -k
        op = {CmpOp.GE: CmpOp.LE, CmpOp.GT: CmpOp.LT, CmpOp.LE: CmpOp.GE, CmpOp.LT: CmpOp.GT}[op]
    lo, hi = {CmpOp.GE: (-k, None), CmpOp.GT: (-k + 1, None), CmpOp.LT: (None, -k), CmpOp.LE: (None, -k + 1)}[op]
    return axes[id(atom)], lo, hi


def skip_zero_taps(body: Stmt, boxes: dict[int, Box]) -> Stmt:
    """`body` with reduce loops narrowed to the taps that can read inside a zero box
    (`boxes`: id(buffer) -> its box)."""
    if not boxes:
        return body

    def visit(s: Stmt, ranges: dict) -> Stmt:
        if isinstance(s, For):
            inner = dict(ranges)
            if isinstance(s.begin, Const) and isinstance(s.extent, Const):
                inner[id(s.var)] = (int(s.begin.value), int(s.begin.value) + int(s.extent.value) - 1)
            new = replace(s, body=visit(s.body, inner))
            return _narrowed(new, boxes, ranges) or new
        if isinstance(s, Seq):
            return Seq(tuple(visit(c, ranges) for c in s.stmts))
        if isinstance(s, IfThenElse):
            return replace(s, then=visit(s.then, ranges),
                           orelse=visit(s.orelse, ranges) if s.orelse is not None else None)
        if isinstance(s, (Allocate, LetStmt)):
            return replace(s, body=visit(s.body, ranges))
        return s

    return visit(body, {})


def _narrowed(loop: For, boxes: dict, outer: dict) -> For | None:
    if loop.kind not in (ForKind.SERIAL, ForKind.ROLLED) or not isinstance(loop.begin, Const) \
            or not isinstance(loop.extent, Const) or int(loop.extent.value) < 2:
        return None  # a one-trip loop simplifies away; bounds on it would keep it
    v = loop.var
    inner: dict = {}
    for s in walk_stmt(loop.body):
        if isinstance(s, For):  # a loop narrowed already has no constant range (None)
            inner[id(s.var)] = (int(s.begin.value), int(s.begin.value) + int(s.extent.value) - 1) \
                if isinstance(s.begin, Const) and isinstance(s.extent, Const) else None
        elif isinstance(s, (Allocate, LetStmt)):
            return None
    stores = [s for s in walk_stmt(loop.body) if isinstance(s, Store)]
    if not stores:
        return None
    spans = []
    for st in stores:
        read = _zero_factor(st, boxes)
        if read is None or any(x is v for i in st.indices for x in free_vars(i)):
            return None
        span = _tap_span(read, boxes[id(read.tensor)], v, inner)
        if span is None:
            return None
        spans.append(span)
    begin = _fold(BinOp.MIN, [b for b, _ in spans])
    end = _fold(BinOp.MAX, [e for _, e in spans])
    b0, e0 = int(loop.begin.value), int(loop.begin.value) + int(loop.extent.value)
    bb, eb = const_bounds(begin, outer), const_bounds(end, outer)
    if bb is None or eb is None or (bb[1] <= b0 and eb[0] >= e0):
        return None  # never narrower than the loop for any iteration around it
    new_begin = arith.binary(BinOp.MAX, Const(b0, v.dtype), begin)
    new_end = arith.binary(BinOp.MIN, Const(e0, v.dtype), end)
    extent = arith.binary(BinOp.MAX, arith.binary(BinOp.SUB, new_end, new_begin), Const(0, v.dtype))
    return replace(loop, begin=new_begin, extent=extent)


def _zero_factor(st: Store, boxes: dict) -> Load | None:
    """The boxed read `P` of an accumulation `acc = acc + P * w` (either order)."""
    value = st.value
    if not isinstance(value, Binary) or value.op is not BinOp.ADD:
        return None
    key = [structural_key(i) for i in st.indices]
    for acc, term in ((value.a, value.b), (value.b, value.a)):
        if isinstance(acc, Load) and acc.tensor is st.buffer and [structural_key(i) for i in acc.indices] == key:
            if isinstance(term, Binary) and term.op is BinOp.MUL:
                for f in (term.a, term.b):
                    if isinstance(f, Load) and id(f.tensor) in boxes:
                        return f
    return None


def _tap_span(read: Load, box: Box, v: Var, inner: dict) -> tuple[Expr, Expr] | None:
    """[begin, end) of the loop variable outside which `read` is zero for every value of
    the loops inside; None when it cannot be bounded."""
    begins, ends = [], []
    for dim, (lo, hi) in box.items():
        lin = to_linear(read.indices[dim])
        coef = next((c for a, c in lin.terms.values() if a is v), 0)
        if coef == 0:
            continue
        if coef < 0:
            return None
        low, high = [Const(lin.const, v.dtype)], [Const(lin.const, v.dtype)]
        for atom, c in lin.terms.values():
            if atom is v:
                continue
            if isinstance(atom, Var) and inner.get(id(atom)) is not None:
                a, b = inner[id(atom)]
                low.append(Const(c * (a if c > 0 else b), v.dtype))
                high.append(Const(c * (b if c > 0 else a), v.dtype))
            elif any(id(x) in inner or x is v for x in free_vars(atom)):
                return None
            else:
                term = arith.binary(BinOp.MUL, atom, Const(c, v.dtype))
                low.append(term)
                high.append(term)
        rest_min, rest_max = _fold(BinOp.ADD, low), _fold(BinOp.ADD, high)
        # coef*v + rest_max >= lo  and  coef*v + rest_min <= hi - 1
        begins.append(_ceildiv(arith.binary(BinOp.SUB, Const(lo, v.dtype), rest_max), coef))
        ends.append(arith.binary(BinOp.ADD, arith.binary(
            BinOp.FLOORDIV, arith.binary(BinOp.SUB, Const(hi - 1, v.dtype), rest_min), Const(coef, v.dtype)),
            Const(1, v.dtype)))
    if not begins:
        return None
    return _fold(BinOp.MAX, begins), _fold(BinOp.MIN, ends)


def _ceildiv(a: Expr, c: int) -> Expr:
    if c == 1:
        return a
    return arith.binary(BinOp.FLOORDIV, arith.binary(BinOp.ADD, a, Const(c - 1, a.dtype)), Const(c, a.dtype))


def _fold(op: BinOp, items: list[Expr]) -> Expr:
    out = items[0]
    for x in items[1:]:
        out = arith.binary(op, out, x)
    return out

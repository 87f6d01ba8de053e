"""Integer arithmetic simplification with variable ranges.

After `simplify(e, ranges)`: constants are folded; integer sums are in a
canonical linear form (like terms combined); floordiv/floormod by a positive
constant pull out the divisible part and vanish when the range proves the
rest lies in [0, c); comparisons, min/max and selects decided by the ranges
are folded. `ranges` maps id(var) to inclusive (lo, hi) constant bounds.
"""

from __future__ import annotations

import threading

from ..ir import arith
from ..ir.dtype import Kind, bool_
from ..ir.expr import Binary, BinOp, Cast, CmpOp, Compare, Const, Expr, Select, Unary, UnOp, Var
from ..ir.traverse import children, structural_key, with_children

Ranges = dict[int, tuple[int, int]]


def interval(op: BinOp, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int] | None:
    """Inclusive bounds of `a op b` for + - * min max (None for other operators)."""
    if op is BinOp.ADD:
        return (a[0] + b[0], a[1] + b[1])
    if op is BinOp.SUB:
        return (a[0] - b[1], a[1] - b[0])
    if op is BinOp.MUL:
        products = [x * y for x in a for y in b]
        return (min(products), max(products))
    if op is BinOp.MIN:
        return (min(a[0], b[0]), min(a[1], b[1]))
    if op is BinOp.MAX:
        return (max(a[0], b[0]), max(a[1], b[1]))
    return None


def const_bounds(e: Expr, ranges: Ranges) -> tuple[int, int] | None:
    """Inclusive constant bounds of an integer expression, or None if unknown."""
    bounds = _const_bounds(e, ranges)
    if bounds is not None and e.dtype.is_int and (e.dtype.kind is Kind.UINT or isinstance(e, Cast)):
        lo, hi = e.dtype.int_range
        if bounds[0] < lo or bounds[1] > hi:
            return None  # unsigned arithmetic and casts wrap: the true interval is no bound of the value
    return bounds


def _const_bounds(e: Expr, ranges: Ranges) -> tuple[int, int] | None:
    if isinstance(e, Const):
        return (int(e.value), int(e.value)) if not e.dtype.is_float else None
    if isinstance(e, Var):
        return ranges.get(id(e))
    if isinstance(e, Cast) and e.dtype.is_int and e.value.dtype.is_int:
        return const_bounds(e.value, ranges)
    if isinstance(e, Select):
        a, b = const_bounds(e.t, ranges), const_bounds(e.f, ranges)
        return (min(a[0], b[0]), max(a[1], b[1])) if a and b else None
    if isinstance(e, Unary) and e.op is UnOp.NEG:
        a = const_bounds(e.a, ranges)
        return (-a[1], -a[0]) if a else None
    if not isinstance(e, Binary) or not e.dtype.is_int:
        return None
    a, b = const_bounds(e.a, ranges), const_bounds(e.b, ranges)
    if e.op in (BinOp.MIN, BinOp.MAX) and (a is None) != (b is None):  # a clamp of an unknown (requantize's)
        a, b = a or e.a.dtype.int_range, b or e.b.dtype.int_range
    if a is None or b is None:
        if e.op is BinOp.FLOORMOD and b is not None and b[0] > 0:
            return (0, b[1] - 1)
        return None
    op = e.op
    basic = interval(op, a, b)
    if basic is not None:
        return basic
    if op in (BinOp.FLOORDIV, BinOp.TRUNCDIV) and b[0] == b[1] and b[0] > 0:
        if op is BinOp.TRUNCDIV and a[0] < 0:
            return None
        return (a[0] // b[0], a[1] // b[0])
    if op in (BinOp.FLOORMOD, BinOp.TRUNCMOD) and b[0] == b[1] and b[0] > 0:
        c = b[0]
        if op is BinOp.TRUNCMOD and a[0] < 0:
            return None
        if a[0] // c == a[1] // c:
            return (a[0] % c, a[1] % c)
        return (0, c - 1)
    return None


# ---- linear forms ---------------------------------------------------------------

class Linear:
    """sum(coef * atom) + const over integer atoms (vars or non-linear terms)."""

    def __init__(self, terms=None, const: int = 0):
        self.terms: dict = terms or {}  # structural key of atom -> [atom, coef]
        self.const = const

    def add(self, other: Linear, sign: int = 1) -> Linear:
        terms = {k: [a, c] for k, (a, c) in self.terms.items()}
        for k, (a, c) in other.terms.items():
            if k in terms:
                terms[k][1] += sign * c
            else:
                terms[k] = [a, sign * c]
        return Linear({k: v for k, v in terms.items() if v[1] != 0}, self.const + sign * other.const)

    def scale(self, c: int) -> Linear:
        if c == 0:
            return Linear()
        return Linear({k: [a, coef * c] for k, (a, coef) in self.terms.items()}, self.const * c)


_state = threading.local()  # .linear: id -> (node, form) during one `simplify` (tuning lowers in threads)


def to_linear(e: Expr) -> Linear:
    """The linear form of `e` (callers must not modify it: within `simplify` forms are shared)."""
    memo = getattr(_state, "linear", None)
    if memo is None:
        return _to_linear(e)
    hit = memo.get(id(e))
    if hit is None or hit[0] is not e:
        hit = memo[id(e)] = (e, _to_linear(e))
    return hit[1]


def _to_linear(e: Expr) -> Linear:
    if isinstance(e, Const) and e.dtype.is_int:
        return Linear(const=int(e.value))
    if isinstance(e, Binary) and e.dtype.is_int:
        if e.op is BinOp.ADD:
            return to_linear(e.a).add(to_linear(e.b))
        if e.op is BinOp.SUB:
            return to_linear(e.a).add(to_linear(e.b), -1)
        if e.op is BinOp.MUL:
            if isinstance(e.b, Const):
                return to_linear(e.a).scale(int(e.b.value))
            if isinstance(e.a, Const):
                return to_linear(e.b).scale(int(e.a.value))
    if isinstance(e, Unary) and e.op is UnOp.NEG and e.dtype.is_int:
        return to_linear(e.a).scale(-1)
    return Linear({structural_key(e): [e, 1]})


def from_linear(lin: Linear, dtype) -> Expr:
    pos = [(a, c) for a, c in lin.terms.values() if c > 0]
    neg = [(a, -c) for a, c in lin.terms.values() if c < 0]
    out: Expr | None = None
    for a, c in pos:
        term = a if c == 1 else Binary(BinOp.MUL, a, Const(c, dtype), dtype)
        out = term if out is None else Binary(BinOp.ADD, out, term, dtype)
    for a, c in neg:
        term = a if c == 1 else Binary(BinOp.MUL, a, Const(c, dtype), dtype)
        out = Binary(BinOp.SUB, out if out is not None else Const(0, dtype), term, dtype)
    if out is None:
        return Const(lin.const, dtype)
    if lin.const > 0:
        return Binary(BinOp.ADD, out, Const(lin.const, dtype), dtype)
    if lin.const < 0:
        return Binary(BinOp.SUB, out, Const(-lin.const, dtype), dtype)
    return out


# ---- the rewriter ---------------------------------------------------------------

def _fold_binary(e: Binary) -> Expr | None:
    a, b = e.a, e.b
    if not (isinstance(a, Const) and isinstance(b, Const)) or not e.dtype.is_int:
        return None
    x, y = int(a.value), int(b.value)
    table = {
        BinOp.ADD: lambda: x + y, BinOp.SUB: lambda: x - y, BinOp.MUL: lambda: x * y,
        BinOp.MIN: lambda: min(x, y), BinOp.MAX: lambda: max(x, y),
        BinOp.FLOORDIV: lambda: x // y if y else None, BinOp.FLOORMOD: lambda: x % y if y else None,
        BinOp.TRUNCDIV: lambda: abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1) if y else None,
        BinOp.TRUNCMOD: lambda: x - (abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1)) * y if y else None,
    }
    fn = table.get(e.op)
    value = fn() if fn else None
    if value is None:
        return None
    lo, hi = e.dtype.int_range
    return Const(value, e.dtype) if lo <= value <= hi else None


def _div_mod(e: Binary, ranges: Ranges) -> Expr | None:
    if not isinstance(e.b, Const) or int(e.b.value) <= 0 or e.dtype.kind is Kind.UINT:
        return None  # unsigned sums wrap, so (x + c*k) // c is not x // c + k
    c = int(e.b.value)
    if c == 1:
        return e.a if e.op is BinOp.FLOORDIV else Const(0, e.dtype)
    lin = to_linear(e.a)
    whole = Linear({k: [a, coef // c] for k, (a, coef) in lin.terms.items() if coef % c == 0}, lin.const // c)
    rest = Linear({k: v for k, v in lin.terms.items() if v[1] % c != 0}, lin.const % c)
    rest_expr = from_linear(rest, e.dtype)
    bounds = const_bounds(rest_expr, ranges)
    fits = bounds is not None and 0 <= bounds[0] and bounds[1] < c
    if e.op is BinOp.FLOORMOD:
        if fits:
            return rest_expr
        common = _common_factor(rest, c, e, ranges)
        if common is not None:
            return common
        if len(rest.terms) == len(lin.terms) and rest.const == lin.const:
            return None  # nothing pulled out
        return Binary(BinOp.FLOORMOD, rest_expr, e.b, e.dtype)
    quotient = from_linear(whole, e.dtype)
    if fits:
        return quotient
    common = _common_factor(rest, c, e, ranges)
    if common is not None:
        if not whole.terms and whole.const == 0:
            return common
        return simplify_node(Binary(BinOp.ADD, quotient, common, e.dtype), ranges)
    if not whole.terms and whole.const == 0:
        return _nested_div(e)
    return simplify_node(Binary(BinOp.ADD, quotient, Binary(BinOp.FLOORDIV, rest_expr, e.b, e.dtype), e.dtype),
                         ranges)


def _common_factor(rest: Linear, c: int, e: Binary, ranges: Ranges) -> Expr | None:
    """(g*x + r) // c == x // (c/g) and (g*x + r) % c == (x % (c/g))*g + r when g
    divides c and 0 <= r < g: a vector lane (r) below a channel group (c) leaves
    the group index uniform across the vector (a group conv's o // 64)."""
    for g in range(c // 2, 1, -1):
        if c % g:
            continue
        small = Linear({k: v for k, v in rest.terms.items() if v[1] % g}, rest.const % g)
        if len(small.terms) == len(rest.terms):
            continue
        bounds = const_bounds(from_linear(small, e.dtype), ranges)
        if bounds is None or bounds[0] < 0 or bounds[1] >= g:
            continue
        big = Linear({k: [a, coef // g] for k, (a, coef) in rest.terms.items() if coef % g == 0}, rest.const // g)
        inner = simplify_node(Binary(e.op, from_linear(big, e.dtype), Const(c // g, e.dtype), e.dtype), ranges)
        if e.op is BinOp.FLOORDIV:
            return inner
        scaled = simplify_node(Binary(BinOp.MUL, inner, Const(g, e.dtype), e.dtype), ranges)
        return simplify_node(Binary(BinOp.ADD, scaled, from_linear(small, e.dtype), e.dtype), ranges)
    return None


def _nested_div(e: Binary) -> Expr | None:
    # (x // a) // b == x // (a * b) for positive a, b
    a = e.a
    if isinstance(a, Binary) and a.op is BinOp.FLOORDIV and isinstance(a.b, Const) and int(a.b.value) > 0:
        return Binary(BinOp.FLOORDIV, a.a, Const(int(a.b.value) * int(e.b.value), e.dtype), e.dtype)
    return None


def _decide(e: Compare, ranges: Ranges) -> bool | None:
    if not e.a.dtype.is_int:
        return None
    diff = simplify_node(arith.binary(BinOp.SUB, e.a, e.b), ranges) if e.a.dtype.bits >= 32 else None
    bounds = const_bounds(diff, ranges) if diff is not None else None
    if bounds is None:
        return None
    lo, hi = bounds
    checks = {
        CmpOp.LT: (hi < 0, lo >= 0), CmpOp.LE: (hi <= 0, lo > 0), CmpOp.GT: (lo > 0, hi <= 0),
        CmpOp.GE: (lo >= 0, hi < 0), CmpOp.EQ: (lo == hi == 0, lo > 0 or hi < 0),
        CmpOp.NE: (lo > 0 or hi < 0, lo == hi == 0),
    }
    true, false = checks[e.op]
    return True if true else False if false else None


def simplify_node(e: Expr, ranges: Ranges) -> Expr:
    """One rewrite step at `e` (children are assumed simplified)."""
    if isinstance(e, Binary):
        folded = _fold_binary(e)
        if folded is not None:
            return folded
        if e.dtype.is_int and e.op in (BinOp.ADD, BinOp.SUB, BinOp.MUL):
            lin = to_linear(e)
            if len(lin.terms) != 1 or lin.const or next(iter(lin.terms.values()))[0] is not e:
                return from_linear(lin, e.dtype)
            return e
        if e.dtype.is_int and e.op in (BinOp.FLOORDIV, BinOp.FLOORMOD):
            out = _div_mod(e, ranges)
            return e if out is None else out
        if e.op in (BinOp.MIN, BinOp.MAX) and e.dtype.is_int:
            a, b = const_bounds(e.a, ranges), const_bounds(e.b, ranges)
            if a and b:
                if a[1] <= b[0]:
                    return e.a if e.op is BinOp.MIN else e.b
                if b[1] <= a[0]:
                    return e.b if e.op is BinOp.MIN else e.a
        if e.dtype.is_bool and e.op in (BinOp.AND, BinOp.OR):
            for x, y in ((e.a, e.b), (e.b, e.a)):
                if isinstance(x, Const):
                    if e.op is BinOp.AND:
                        return y if x.value else x
                    return x if x.value else y
        return e
    if isinstance(e, Compare):
        decided = _decide(e, ranges)
        return Const(decided, bool_) if decided is not None else e
    if isinstance(e, Select) and isinstance(e.cond, Const):
        return e.t if e.cond.value else e.f
    if isinstance(e, Unary) and e.op is UnOp.NOT and isinstance(e.a, Const) and e.dtype.is_bool:
        return Const(not e.a.value, bool_)
    if isinstance(e, Cast) and isinstance(e.value, Const) and e.dtype.is_int and e.value.dtype.is_int:
        lo, hi = e.dtype.int_range
        if lo <= e.value.value <= hi:
            return Const(int(e.value.value), e.dtype)
    if isinstance(e, Cast) and isinstance(e.value, Cast) and e.dtype == e.value.value.dtype and e.dtype.is_int \
            and e.value.dtype.is_int:  # widened back after a narrowing that lost nothing (uint8 then int32)
        bounds = const_bounds(e.value.value, ranges)
        lo, hi = e.value.dtype.int_range
        if bounds is not None and lo <= bounds[0] and bounds[1] <= hi:
            return e.value.value
    return e


def simplify(e: Expr, ranges: Ranges | None = None, memo: dict | None = None) -> Expr:
    """Bottom-up, except that a select whose condition folds to a constant keeps only its chosen
    branch, which alone is simplified (an unrolled dispatch chain: a Winograd transform's 36).
    `memo`: results to share across calls with the same `ranges` (the stores of one unrolled body
    share subtrees; simplify_stmt passes one per set of loop ranges), by id (id -> (node, result))
    and by structure (("structure", structural_key) -> result: equal subtrees built apart)."""
    ranges = ranges or {}
    memo = {} if memo is None else memo
    outer = getattr(_state, "linear", None)
    if outer is None:  # the outermost call: each subtree's form computed once (deep index sums were
        _state.linear = {}  # re-linearized at every level, quadratic in their depth)

    def visit(node: Expr) -> Expr:
        hit = memo.get(id(node))
        if hit is not None and hit[0] is node:
            return hit[1]
        same = ("structure", structural_key(node))  # an equal subtree built apart (an unrolled copy's loads)
        out = memo.get(same)
        if out is None:
            cond = visit(node.cond) if isinstance(node, Select) else None
            if isinstance(cond, Const):
                out = visit(node.t if cond.value else node.f)
            else:
                out = simplify_node(with_children(node, tuple(visit(c) for c in children(node))), ranges)
            memo[same] = out
        memo[id(node)] = (node, out)  # the node itself held: its id cannot be reused while shared
        return out

    try:
        return visit(e)
    finally:
        _state.linear = outer

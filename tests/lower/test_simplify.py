"""The integer simplifier: random index expressions keep their value at every point of the variables'
ranges, `const_bounds` contains every value, and the common index forms of lowering simplify away."""

from __future__ import annotations

import itertools
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilewright.ir import arith
from tilewright.ir.dtype import int32
from tilewright.ir.expr import Binary, BinOp, Cast, CmpOp, Compare, Const, Select, Unary, UnOp, Var
from tilewright.lower.simplify import const_bounds, simplify

RANDOM = os.environ.get("TW_HYPOTHESIS_RANDOM") == "1"
EXAMPLES = int(os.environ.get("TW_SIMPLIFY_EXAMPLES", "300"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=not RANDOM, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

X, Y, Z = Var("x", int32), Var("y", int32), Var("z", int32)
VARS = (X, Y, Z)


def floordiv(a, b):
    return a // b


def truncdiv(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


_BIN = {
    BinOp.ADD: lambda a, b: a + b, BinOp.SUB: lambda a, b: a - b, BinOp.MUL: lambda a, b: a * b,
    BinOp.FLOORDIV: floordiv, BinOp.FLOORMOD: lambda a, b: a % b,
    BinOp.TRUNCDIV: truncdiv, BinOp.TRUNCMOD: lambda a, b: a - truncdiv(a, b) * b,
    BinOp.MIN: min, BinOp.MAX: max,
    BinOp.AND: lambda a, b: a and b if isinstance(a, bool) else a & b,
    BinOp.OR: lambda a, b: a or b if isinstance(a, bool) else a | b,
}
_CMP = {CmpOp.LT: lambda a, b: a < b, CmpOp.LE: lambda a, b: a <= b, CmpOp.GT: lambda a, b: a > b,
        CmpOp.GE: lambda a, b: a >= b, CmpOp.EQ: lambda a, b: a == b, CmpOp.NE: lambda a, b: a != b}


def ev(e, env):
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Var):
        return env[id(e)]
    if isinstance(e, Binary):
        return _BIN[e.op](ev(e.a, env), ev(e.b, env))
    if isinstance(e, Unary):
        v = ev(e.a, env)
        return -v if e.op is UnOp.NEG else (not v if isinstance(v, bool) else ~v)
    if isinstance(e, Compare):
        return _CMP[e.op](ev(e.a, env), ev(e.b, env))
    if isinstance(e, Select):
        return ev(e.t, env) if ev(e.cond, env) else ev(e.f, env)
    if isinstance(e, Cast):
        return ev(e.value, env)
    raise TypeError(type(e).__name__)


def int_exprs():
    leaves = st.one_of(st.sampled_from(VARS), st.integers(-6, 9).map(lambda v: arith.const(v, int32)))

    def extend(children):
        positive = st.integers(1, 7).map(lambda v: arith.const(v, int32))
        nonzero = st.sampled_from([-3, -2, 2, 3, 4]).map(lambda v: arith.const(v, int32))
        return st.one_of(
            st.tuples(st.sampled_from([BinOp.ADD, BinOp.SUB, BinOp.MUL, BinOp.MIN, BinOp.MAX]), children, children)
            .map(lambda t: Binary(t[0], t[1], t[2], int32)),
            st.tuples(st.sampled_from([BinOp.FLOORDIV, BinOp.FLOORMOD]), children, st.one_of(positive, nonzero))
            .map(lambda t: Binary(t[0], t[1], t[2], int32)),
            st.tuples(st.sampled_from([BinOp.TRUNCDIV, BinOp.TRUNCMOD]), children, positive)
            .map(lambda t: Binary(t[0], t[1], t[2], int32)),
            children.map(lambda a: Unary(UnOp.NEG, a, int32)),
            st.tuples(st.sampled_from(list(CmpOp)), children, children, children, children)
            .map(lambda t: Select(Compare(t[0], t[1], t[2], arith.bool_), t[3], t[4], int32)),
        )

    return st.recursive(leaves, extend, max_leaves=8)


ranges_st = st.tuples(*[st.tuples(st.integers(-4, 6), st.integers(0, 5)).map(lambda t: (t[0], t[0] + t[1]))
                        for _ in VARS])


def points(ranges):
    return [dict(zip((id(v) for v in VARS), p))
            for p in itertools.product(*[range(lo, hi + 1) for lo, hi in ranges])]


@SETTINGS
@given(e=int_exprs(), rs=ranges_st)
def test_simplify_preserves_value(e, rs):
    ranges = {id(v): r for v, r in zip(VARS, rs)}
    s = simplify(e, ranges)
    for env in points(rs):
        try:
            want = ev(e, env)
        except ZeroDivisionError:
            return
        assert ev(s, env) == want, f"{e}  ->  {s}  at {[(v.name, env[id(v)]) for v in VARS]}"


@SETTINGS
@given(e=int_exprs(), rs=ranges_st)
def test_const_bounds_contain_every_value(e, rs):
    ranges = {id(v): r for v, r in zip(VARS, rs)}
    bounds = const_bounds(e, ranges)
    if bounds is None:
        return
    for env in points(rs):
        try:
            v = ev(e, env)
        except ZeroDivisionError:
            return
        assert bounds[0] <= v <= bounds[1], f"{e}: {v} outside {bounds}"


@SETTINGS
@given(e=int_exprs(), rs=ranges_st)
def test_simplify_is_idempotent_in_value(e, rs):
    ranges = {id(v): r for v, r in zip(VARS, rs)}
    once = simplify(e, ranges)
    twice = simplify(once, ranges)
    for env in points(rs)[:50]:
        try:
            assert ev(twice, env) == ev(once, env)
        except ZeroDivisionError:
            return


def test_split_index_forms_simplify():
    i, o = Var("inner", int32), Var("outer", int32)
    ranges = {id(i): (0, 3), id(o): (0, 4)}
    assert str(simplify((o * 4 + i) // 4, ranges)) == "outer"
    assert str(simplify((o * 4 + i) % 4, ranges)) == "inner"
    assert simplify(o * 4 + i < 20, ranges).value is True
    assert isinstance(simplify(o * 4 + i < 19, ranges), Compare)  # the tail guard stays
    assert str(simplify(X + 3 - X, {})) == "3"
    assert str(simplify(((X // 2) // 3), {})) == "x // 6"


def test_division_by_a_multiple_of_a_lane_block_drops_the_lane():
    """A vector lane below a block that divides the divisor leaves the quotient uniform across the
    vector (a group conv's input channel (o_outer * 8 + lane) // 48)."""
    lane, o = Var("lane", int32), Var("o", int32)
    ranges = {id(lane): (0, 7), id(o): (0, 40)}
    assert str(simplify((o * 8 + lane) // 48, ranges)) == "o // 6"
    assert str(simplify((o * 8 + lane) % 48, ranges)) == "o % 6 * 8 + lane"
    assert str(simplify((o * 8 + lane + 3) // 48, ranges)) == "(o * 8 + lane + 3) // 48"  # may cross a block

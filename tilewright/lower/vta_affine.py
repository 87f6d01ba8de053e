"""Index arithmetic for the VTA instruction selection: evaluating integer
expressions under concrete loop values, the affine map of an address over a
loop nest (measured by differences and checked at every point, or at the
corners and a spread of points for big nests), and the split of a nest into
the lanes of one buffer element and the loops over elements."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from ..errors import LoweringError
from ..ir.expr import Binary, BinOp, Cast, CmpOp, Compare, Const, Expr, Select, Unary, UnOp, Var

_BIN = {
    BinOp.ADD: lambda a, b: a + b, BinOp.SUB: lambda a, b: a - b, BinOp.MUL: lambda a, b: a * b,
    BinOp.FLOORDIV: lambda a, b: a // b, BinOp.FLOORMOD: lambda a, b: a % b,
    BinOp.TRUNCDIV: lambda a, b: int(a / b), BinOp.TRUNCMOD: lambda a, b: a - b * int(a / b),
    BinOp.MIN: min, BinOp.MAX: max, BinOp.AND: lambda a, b: a and b, BinOp.OR: lambda a, b: a or b,
    BinOp.SHR: lambda a, b: a >> b, BinOp.SHL: lambda a, b: a << b,
}
_CMP = {CmpOp.LT: lambda a, b: a < b, CmpOp.LE: lambda a, b: a <= b, CmpOp.GT: lambda a, b: a > b,
        CmpOp.GE: lambda a, b: a >= b, CmpOp.EQ: lambda a, b: a == b, CmpOp.NE: lambda a, b: a != b}


def evaluate(e: Expr, env: dict) -> int:
    """The integer (or bool) value of an index or condition expression; `env`: Var -> int."""
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Var):
        if e not in env:
            raise LoweringError(f"VTA lowering: index variable '{e.name}' has no value here")
        return env[e]
    if isinstance(e, Binary):
        return _BIN[e.op](evaluate(e.a, env), evaluate(e.b, env))
    if isinstance(e, Compare):
        return _CMP[e.op](evaluate(e.a, env), evaluate(e.b, env))
    if isinstance(e, Unary):
        v = evaluate(e.a, env)
        return -v if e.op is UnOp.NEG else (not v if e.dtype.name == "bool" else ~v)
    if isinstance(e, Select):
        return evaluate(e.t, env) if evaluate(e.cond, env) else evaluate(e.f, env)
    if isinstance(e, Cast) and (e.dtype.is_int or e.dtype.name == "bool"):
        return evaluate(e.value, env)
    raise LoweringError(f"VTA lowering: cannot evaluate the index expression {e!r:.80} on the host")


@dataclass(frozen=True)
class Loop:
    var: Var
    extent: int


def affine(e: Expr, loops: list[Loop], env: dict, what: str) -> tuple[int, list[int]]:
    """(value at the origin, coefficient per loop) of `e`, checked to be affine over the nest."""
    base_env = {**env, **{lp.var: 0 for lp in loops}}
    base = evaluate(e, base_env)
    coefs = []
    for lp in loops:
        coefs.append(evaluate(e, {**base_env, lp.var: 1}) - base if lp.extent > 1 else 0)
    points = itertools.product(*(range(lp.extent) for lp in loops))
    total = 1
    for lp in loops:
        total *= lp.extent
    if total > 4096:  # the corners and a stride through the rest
        corners = list(itertools.product(*((0, lp.extent - 1) for lp in loops)))
        points = corners + [tuple((k * 7919 + j * 104729) % lp.extent for j, lp in enumerate(loops))
                            for k in range(512)]
    for p in points:
        got = evaluate(e, {**base_env, **{lp.var: i for lp, i in zip(loops, p)}})
        if got != base + sum(c * i for c, i in zip(coefs, p)):
            raise LoweringError(f"VTA lowering: the {what} address is not affine in the loops "
                                f"{[lp.var.name for lp in loops]}; the accelerator's loops and DMA need affine "
                                f"addresses")
    return base, coefs


def split_lanes(loops: list[Loop], coefs: list[int], lanes: int, what: str) -> int:
    """How many innermost loops cover exactly one element of `lanes` contiguous values (their
    coefficients 1, n1, n1*n2, ...); the loops outside step whole elements."""
    n, covered = 0, 1
    for lp, c in zip(reversed(loops), reversed(coefs)):
        if covered == lanes:
            break
        if lp.extent == 1:
            n += 1
            continue
        if c != covered:
            break
        covered *= lp.extent
        n += 1
    if covered != lanes:
        raise LoweringError(f"VTA lowering: the {what} does not move whole elements of {lanes} values in its "
                            f"innermost loops (keep the block axes innermost and unsplit)")
    return n


def element_coefs(base: int, coefs: list[int], lanes: int, what: str) -> tuple[int, list[int]]:
    if base % lanes or any(c % lanes for c in coefs):
        raise LoweringError(f"VTA lowering: the {what} is not aligned to elements of {lanes} values")
    return base // lanes, [c // lanes for c in coefs]


def span(base: int, coefs: list[int], loops: list[Loop]) -> tuple[int, int]:
    """[lo, hi) of the element indices an affine access touches."""
    lo = base + sum(min(0, c * (lp.extent - 1)) for c, lp in zip(coefs, loops))
    hi = base + sum(max(0, c * (lp.extent - 1)) for c, lp in zip(coefs, loops)) + 1
    return lo, hi


def rows(outer: list[Loop], bases: list[int], coefs: list[list[int]], make) -> None:
    """Cut an element nest into 2-D transfers: adjacent loops that step every address contiguously
    (outer coefficient = inner coefficient x inner extent) fuse into one row; past two loops, the
    outer ones run on the host. `make(bases, ys, xs, (y coefs), (x coefs))` emits one transfer."""
    dims = [(lp.extent, [c[k] for c in coefs]) for k, lp in enumerate(outer) if lp.extent > 1]
    k = len(dims) - 1
    while k > 0:
        (n0, c0), (n1, c1) = dims[k - 1], dims[k]
        if all(a == b * n1 for a, b in zip(c0, c1)):
            dims[k - 1:k + 1] = [(n0 * n1, c1)]
        k -= 1

    def emit(dims, bases):
        if len(dims) > 2:
            n, c = dims[0]
            for i in range(n):
                emit(dims[1:], [b + i * x for b, x in zip(bases, c)])
            return
        if len(dims) == 1 and any(x != 1 for x in dims[0][1]):  # one strided loop: rows of one element
            dims = [dims[0], (1, [1] * len(bases))]
        full = [(1, [0] * len(bases))] * (2 - len(dims)) + dims
        (ys, cy), (xs, cx) = full
        make(bases, ys, xs, cy, cx)
    emit(dims, bases)


__all__ = ["Loop", "affine", "element_coefs", "evaluate", "rows", "span", "split_lanes"]

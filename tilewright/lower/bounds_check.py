"""Bounds proof: before flattening, every Load and Store of the loop IR stays inside its buffer on
every iteration, or lowering fails with a LoweringError naming the tensor, the index expression, the
range it can take and the valid range (the reference evaluator rejects the same reads).

The proof is interval arithmetic per access, not per element: loop ranges, narrowed by the guards
that enclose the access (IfThenElse and if_then_else/Select conditions; conjunctions of integer
comparisons), a guard also bounding an index that differs from it by a linear combination, and a
case split on the min/max of clamped regions. An index that reads data (a gather) may hold anything its
dtype does, so it must be clamped (min/max) or guarded to be accepted: a kernel never reads outside a
tensor, whatever the data (tw.evaluate checks the data it is given instead).
"""

from __future__ import annotations

from ..errors import LoweringError
from ..ir.expr import Binary, BinOp, Cast, CmpOp, Compare, Const, Expr, Load, Select, Unary, UnOp, Var
from ..ir.stmt import Allocate, For, IfThenElse, LetStmt, Seq, Stmt, Store
from ..ir.traverse import children, free_vars, structural_key, transform, walk
from .simplify import Linear, Ranges, const_bounds, simplify, to_linear

_MAX_SPLITS = 3  # min/max nodes split into cases per access (2**3 cases at most)
_FLIP = {CmpOp.LT: CmpOp.GE, CmpOp.LE: CmpOp.GT, CmpOp.GT: CmpOp.LE, CmpOp.GE: CmpOp.LT,
         CmpOp.EQ: CmpOp.NE, CmpOp.NE: CmpOp.EQ}


def check_bounds(func) -> None:
    """Raise LoweringError for the first access of `func.body` that can leave its buffer."""
    _Checker({id(b) for b in func.args}).stmt(func.body, {}, (), None)


def _facts(cond: Expr, negate: bool = False) -> tuple[Expr, ...]:
    """Integer expressions g with g >= 0 whenever `cond` (or its negation) holds."""
    if isinstance(cond, Unary) and cond.op is UnOp.NOT:
        return _facts(cond.a, not negate)
    if isinstance(cond, Binary) and cond.dtype.is_bool and cond.op in (BinOp.AND, BinOp.OR):
        if (cond.op is BinOp.AND) != negate:  # a and b; not (a or b)
            return _facts(cond.a, negate) + _facts(cond.b, negate)
        return ()
    if not isinstance(cond, Compare) or not cond.a.dtype.is_int or cond.a.dtype.lanes != 1:
        return ()
    op, a, b = (_FLIP[cond.op] if negate else cond.op), cond.a, cond.b
    if op is CmpOp.LT:
        return (b - a - 1,)
    if op is CmpOp.LE:
        return (b - a,)
    if op is CmpOp.GT:
        return (a - b - 1,)
    if op is CmpOp.GE:
        return (a - b,)
    if op is CmpOp.EQ:
        return (a - b, b - a)
    return ()


def _atom_bounds(atom: Expr, ranges: Ranges, facts) -> tuple[int, int] | None:
    if facts and isinstance(atom, Binary) and atom.op in (BinOp.FLOORDIV, BinOp.FLOORMOD) \
            and isinstance(atom.b, Const) and atom.b.value > 0:
        # a fused or split loop's (x // c, x % c): the guards bound x, so they bound its quotient
        num = _index_bounds(_linear(atom.a, ranges), facts, ranges)
        raw = _index_bounds(_linear(atom.a, ranges, False), facts, ranges)
        if num is None or raw is None:
            num = num or raw
        else:
            num = (max(num[0], raw[0]), min(num[1], raw[1]))
        if num is not None:
            c, (lo, hi) = int(atom.b.value), num
            if atom.op is BinOp.FLOORDIV:
                return lo // c, hi // c
            return (lo % c, hi % c) if lo // c == hi // c else (0, c - 1)
    if isinstance(atom, Load) and atom.dtype.is_int:
        return atom.dtype.int_range  # a value read from data may be anything its dtype holds
    return const_bounds(atom, ranges)


def _bounds(lin: Linear, ranges: Ranges, facts=()) -> tuple[int, int] | None:
    lo = hi = lin.const
    for atom, c in lin.terms.values():
        b = _atom_bounds(atom, ranges, facts)
        if b is None:
            return None
        lo, hi = lo + min(c * b[0], c * b[1]), hi + max(c * b[0], c * b[1])
    return lo, hi


def _tighten(ranges: Ranges, facts: list[Linear]) -> Ranges | None:
    """Loop ranges narrowed by the facts (None when they contradict: the code never runs)."""
    r = dict(ranges)
    for _ in range(3):
        changed = False
        for f in facts:
            for key, (atom, c) in f.terms.items():
                if not isinstance(atom, Var) or id(atom) not in r:
                    continue
                rest = _bounds(Linear({k: v for k, v in f.terms.items() if k != key}, f.const), r)
                if rest is None:
                    continue
                lo, hi = r[id(atom)]
                if c > 0:  # c*x >= -rest
                    lo = max(lo, -(rest[1] // c))
                else:  # (-c)*x <= rest
                    hi = min(hi, rest[1] // -c)
                if lo > hi:
                    return None
                if (lo, hi) != r[id(atom)]:
                    r[id(atom)] = (lo, hi)
                    changed = True
        if not changed:
            break
    return r


def _index_bounds(lin: Linear, facts: list[Linear], ranges: Ranges) -> tuple[int, int] | None:
    """Bounds of `lin`, each fact f >= 0 also bounding it as lin = (lin - k*f) + k*f for k > 0."""
    b = _bounds(lin, ranges, facts)
    lo, hi = b if b is not None else (None, None)
    for f in facts:
        for key, (_, cf) in f.terms.items():
            if key not in lin.terms:
                continue
            cl = lin.terms[key][1]
            if cl % cf == 0 and cl // cf > 0:  # lin >= lower(lin - k f)
                r = _bounds(lin.add(f.scale(cl // cf), -1), ranges)
                if r is not None:
                    lo = r[0] if lo is None else max(lo, r[0])
            if cl % cf == 0 and -cl // cf > 0:  # lin <= upper(lin + k f)
                r = _bounds(lin.add(f.scale(-cl // cf)), ranges)
                if r is not None:
                    hi = r[1] if hi is None else min(hi, r[1])
    if lo is None or hi is None:
        return None
    return lo, hi


def _widening(n: Expr) -> Expr | None:
    src, dst = (n.value.dtype, n.dtype) if isinstance(n, Cast) else (None, None)
    if src is not None and src.is_int and dst.is_int and src.int_range[0] >= dst.int_range[0] \
            and src.int_range[1] <= dst.int_range[1]:
        return n.value  # the value is unchanged: see through it (64-bit index arithmetic)
    return None


def _linear(e: Expr, ranges: Ranges, simplified: bool = True) -> Linear:
    e = transform(e, _widening)
    if not simplified:
        return to_linear(e)
    lin = to_linear(simplify(e, ranges))
    # x // c * c + x % c == x: a split of a fused loop recombined (simplify keeps the two apart)
    for key, (atom, k) in list(lin.terms.items()):
        if key not in lin.terms or not (isinstance(atom, Binary) and atom.op is BinOp.FLOORMOD
                                        and isinstance(atom.b, Const) and atom.b.value > 0):
            continue
        div = structural_key(Binary(BinOp.FLOORDIV, atom.a, atom.b, atom.dtype))
        if div in lin.terms and lin.terms[div][1] == k * atom.b.value:
            rest = Linear({x: v for x, v in lin.terms.items() if x not in (key, div)}, lin.const)
            lin = rest.add(to_linear(atom.a).scale(k))
    return lin


def _minmax_nodes(exprs) -> list[Binary]:
    seen, out = set(), []
    for e in exprs:
        for n in walk(e):
            if isinstance(n, Binary) and n.op in (BinOp.MIN, BinOp.MAX) and n.dtype.is_int:
                key = structural_key(n)
                if key not in seen:
                    seen.add(key)
                    out.append(n)
    return out


def _replace(e: Expr, key, value: Expr) -> Expr:
    def fn(n):
        if isinstance(n, Binary) and n.op in (BinOp.MIN, BinOp.MAX) and structural_key(n) == key:
            return value
        return None

    return transform(e, fn)


def _relevant(index: Expr, facts: tuple, variables) -> list:
    """The guards that share a variable with `index`, directly or through other such guards: the
    others cannot narrow it (a dispatch chain's `e == k` around a load indexed by other loops).
    `variables(e)`: the ids of `e`'s free variables."""
    wanted = set(variables(index))
    rest = [(n, set(variables(f))) for n, f in enumerate(facts)]
    chosen: set[int] = set()
    grew = True
    while grew:
        grew = False
        for n, vs in rest:
            if n not in chosen and (vs & wanted or not vs):  # a constant guard may mean the code never runs
                chosen.add(n)
                wanted |= vs
                grew = True
    return [f for n, f in enumerate(facts) if n in chosen]


class _Checker:
    def __init__(self, args: set[int]):
        # buffers of compute_at regions hold a window whose offsets (x // c - x0 // c over a stepped
        # loop) need more than intervals; their tensors are checked where they are root or inputs
        self.args = args
        self.memo: dict = {}  # equal indices under equal guards and ranges (a dispatch chain's many loads)
        self.seen: set = set()  # (node, guards) pairs checked in the current expression
        self.held: list = []  # the guard tuples keyed by id in `seen`, kept alive while it holds them
        # per expression, by id (the node held): its free variables, whether it reads data; a
        # dispatch chain asks this of the same guards and indices thousands of times
        self.vars_of: dict = {}
        self.gathers_of: dict = {}
        self.linear_of: dict = {}  # _linear's results (see there)

    def stmt(self, s: Stmt, ranges: Ranges, facts: tuple, writer: str | None) -> None:
        if isinstance(s, For):
            b, e = const_bounds(s.begin, ranges), const_bounds(s.extent, ranges)
            inner = dict(ranges)
            if b is not None and e is not None:
                if b[1] + e[1] <= b[0]:
                    return  # never runs
                inner[id(s.var)] = (b[0], b[1] + e[1] - 1)
            self.stmt(s.body, inner, facts, writer)
        elif isinstance(s, Seq):
            for c in s.stmts:
                self.stmt(c, ranges, facts, writer)
        elif isinstance(s, IfThenElse):
            self.expr(s.cond, ranges, facts, writer)
            self.stmt(s.then, ranges, facts + _facts(s.cond), writer)
            if s.orelse is not None:
                self.stmt(s.orelse, ranges, facts + _facts(s.cond, True), writer)
        elif isinstance(s, LetStmt):
            self.expr(s.value, ranges, facts, writer)
            b = const_bounds(s.value, ranges) if s.value.dtype.is_int else None
            self.stmt(s.body, {**ranges, id(s.var): b} if b else ranges, facts, writer)
        elif isinstance(s, Allocate):
            if not ranges:  # allocated outside every loop: a root stage's whole tensor
                self.args.add(id(s.buffer))
            self.stmt(s.body, ranges, facts, writer)
        elif isinstance(s, Store):
            name = s.buffer.name
            self.access(s.buffer, s.indices, ranges, facts, f"compute '{name}' writes '{name}'")
            for e in (*s.indices, s.value):
                self.expr(e, ranges, facts, name)
        else:
            for attr in ("body", "then", "orelse"):  # statements added by later work (barriers, ...)
                child = getattr(s, attr, None)
                if isinstance(child, Stmt):
                    self.stmt(child, ranges, facts, writer)

    def expr(self, e: Expr, ranges: Ranges, facts: tuple, writer: str | None) -> None:
        """Check every load in `e`; a subtree shared by several parents under the same guards once."""
        try:
            self._expr(e, ranges, facts, writer)
        finally:
            self.seen, self.held = set(), []

    def _expr(self, e: Expr, ranges: Ranges, facts: tuple, writer: str | None) -> None:
        key = (id(e), id(facts))
        if key in self.seen:
            return
        self.seen.add(key)
        if isinstance(e, Select):
            then, orelse = facts + _facts(e.cond), facts + _facts(e.cond, True)
            self.held += [then, orelse]
            self._expr(e.cond, ranges, facts, writer)
            self._expr(e.t, ranges, then, writer)
            self._expr(e.f, ranges, orelse, writer)
            return
        if isinstance(e, Load) and hasattr(e.tensor, "shape"):
            self.access(e.tensor, e.indices, ranges, facts, f"compute '{writer}' reads '{e.tensor.name}'")
        for c in children(e):
            self._expr(c, ranges, facts, writer)

    def access(self, buf, indices, ranges: Ranges, facts: tuple, what: str) -> None:
        if len(indices) != len(buf.shape) or id(buf) not in self.args:
            return  # already flat (a pass ran before us): nothing per axis to say
        for d, (index, n) in enumerate(zip(indices, buf.shape)):
            if index.dtype.lanes != 1:
                continue  # vector indices appear only after vectorize, which runs later
            b = self.range_of(index, ranges, facts)
            gather = self._gathers(index)
            if gather and (b is None or b[0] < 0 or b[1] >= n):
                raise LoweringError(
                    f"{what} at an index read from data: axis {d} index `{index}` cannot be proved inside "
                    f"[0, {n}); clamp it (tw.max(tw.min(index, {n - 1}), 0)) or guard the read with "
                    f"tw.if_then_else(0 <= index < {n}, ...), so the kernel cannot read outside the tensor")
            if b is not None and (b[0] < 0 or b[1] >= n):
                raise LoweringError(
                    f"{what} out of bounds: axis {d} index `{index}` can take values in [{b[0]}, {b[1]}], "
                    f"outside the valid [0, {n}) (0..{n - 1}); guard the access with tw.if_then_else, "
                    f"pad the tensor or shrink the axis")

    def _vars(self, e: Expr) -> dict:
        """`e`'s free variables by id, remembered per node."""
        hit = self.vars_of.get(id(e))
        if hit is None or hit[0] is not e:
            hit = self.vars_of[id(e)] = (e, {id(v): v for v in free_vars(e)})
        return hit[1]

    def variables(self, e: Expr):
        return self._vars(e).keys()

    def _gathers(self, index: Expr) -> bool:
        """Whether `index` reads data, remembered per node."""
        hit = self.gathers_of.get(id(index))
        if hit is None or hit[0] is not index:
            hit = self.gathers_of[id(index)] = (index, any(isinstance(x, Load) for x in walk(index)))
        return hit[1]

    def range_of(self, index: Expr, ranges: Ranges, facts: tuple) -> tuple[int, int] | None:
        """Union over the min/max cases of the index's bounds; None when unknown."""
        relevant = _relevant(index, facts, self.variables)
        used = {i: v for e in (index, *relevant) for i, v in self._vars(e).items()}
        key = (structural_key(index), tuple(structural_key(f) for f in relevant),
               tuple(sorted((structural_key(v), ranges.get(i)) for i, v in used.items())))
        if key not in self.memo:
            self.memo[key] = self._range_of(index, relevant, ranges)
        return self.memo[key]

    def _linear(self, e: Expr, ranges: Ranges, simplified: bool = True) -> Linear:
        """`_linear`, remembered by structure and the ranges of the variables it uses (the guards
        of a dispatch chain are linearized again for each index they enclose)."""
        if not simplified:
            key = ("raw", structural_key(e))
        else:
            key = (structural_key(e), tuple(sorted((structural_key(v), ranges.get(i))
                                                   for i, v in self._vars(e).items())))
        hit = self.linear_of.get(key)
        if hit is None:
            hit = self.linear_of[key] = _linear(e, ranges, simplified)
        return hit

    def _range_of(self, index: Expr, facts: list, ranges: Ranges) -> tuple[int, int] | None:
        cases = [(index, list(facts))]
        for _ in range(_MAX_SPLITS):  # one node at a time: replacing it rebuilds the nodes around it
            split = []
            for e, fs in cases:
                nodes = _minmax_nodes((e, *fs))
                if not nodes:
                    split.append((e, fs))
                    continue
                node, key = nodes[0], structural_key(nodes[0])
                for pick, other in ((node.a, node.b), (node.b, node.a)):
                    # min(a, b) is a where a <= b; max(a, b) is a where a >= b
                    order = other - pick if node.op is BinOp.MIN else pick - other
                    split.append((_replace(e, key, pick), [_replace(f, key, pick) for f in fs] + [order]))
            cases = split
        lo = hi = None
        for e, fs in cases:
            lin_facts = [self._linear(f, ranges) for f in fs]
            r = _tighten(ranges, lin_facts)
            if r is None:
                continue  # this case cannot happen
            if any((fb := _bounds(f, r, lin_facts)) is not None and fb[1] < 0 for f in lin_facts):
                continue  # a guard that never holds here: the access never runs
            # Every pairing of the index and the guards, simplified under the loop ranges or the ranges the
            # guards tighten, or not at all, gives sound bounds; their intersection is the tightest. (Simplify
            # may split a quotient apart, or, under tightened ranges, drop a `% c` the guards still spell.)
            index_forms = (self._linear(e, r), self._linear(e, r, False))
            fact_forms = (lin_facts, [self._linear(f, r) for f in fs], [self._linear(f, r, False) for f in fs])
            found = [x for lin in index_forms for facts_ in fact_forms
                     if (x := _index_bounds(lin, facts_, r)) is not None]
            if not found:
                return None
            b = (max(x[0] for x in found), min(x[1] for x in found))
            if b[0] > b[1]:
                continue  # the guards contradict each other
            lo, hi = (b[0], b[1]) if lo is None else (min(lo, b[0]), max(hi, b[1]))
        return None if lo is None else (lo, hi)


__all__ = ["check_bounds"]

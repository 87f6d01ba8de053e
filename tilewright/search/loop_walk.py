"""One walk over a lowered function for the cost model's features: every
store with the loops around it (trip counts, kinds), how often it runs, its
arithmetic and its memory accesses. Index expressions are evaluated
numerically, loop variables at the middle of their ranges, so strides come
from finite differences whatever the index form (affine or not). A
vectorized loop counts as the lanes of its statements, not as a loop."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.expr import (
    Binary,
    BinOp,
    Broadcast,
    Call,
    Cast,
    CmpOp,
    Compare,
    Const,
    Expr,
    Load,
    Ramp,
    Select,
    Unary,
    UnOp,
    Var,
)
from ..ir.stmt import Allocate, Barrier, Fence, For, ForKind, IfThenElse, LetStmt, Seq, Stmt, Store

_ARITH = {BinOp.ADD, BinOp.SUB, BinOp.MUL, BinOp.DIV, BinOp.MIN, BinOp.MAX}


# ---- numeric evaluation of index expressions ------------------------------------------------------
def index_value(e: Expr, env: dict) -> int:
    """The integer value of `e` with variables from `env` (absent ones 0); data (loads) read as 0."""
    if isinstance(e, Const):
        v = e.value
        return int(v) if isinstance(v, (int, bool)) or float(v).is_integer() else 0
    if isinstance(e, Var):
        return env.get(e, 0)
    if isinstance(e, Binary):
        a, b = index_value(e.a, env), index_value(e.b, env)
        op = e.op
        if op is BinOp.ADD:
            return a + b
        if op is BinOp.SUB:
            return a - b
        if op is BinOp.MUL:
            return a * b
        if op in (BinOp.FLOORDIV, BinOp.DIV):
            return a // b if b else 0
        if op is BinOp.FLOORMOD:
            return a % b if b else 0
        if op is BinOp.TRUNCDIV:
            return int(a / b) if b else 0
        if op is BinOp.TRUNCMOD:
            return a - b * int(a / b) if b else 0
        if op is BinOp.MIN:
            return min(a, b)
        if op is BinOp.MAX:
            return max(a, b)
        if op is BinOp.AND:
            return a & b
        if op is BinOp.OR:
            return a | b
        return 0
    if isinstance(e, Compare):
        a, b = index_value(e.a, env), index_value(e.b, env)
        return int({CmpOp.LT: a < b, CmpOp.LE: a <= b, CmpOp.GT: a > b, CmpOp.GE: a >= b, CmpOp.EQ: a == b,
                    CmpOp.NE: a != b}[e.op])
    if isinstance(e, Select):
        return index_value(e.t, env) if index_value(e.cond, env) else index_value(e.f, env)
    if isinstance(e, Unary):
        a = index_value(e.a, env)
        return -a if e.op is UnOp.NEG else int(not a)
    if isinstance(e, (Cast, Broadcast)):
        return index_value(e.value, env)
    if isinstance(e, Ramp):
        return index_value(e.base, env)
    return 0


def coefficient(index: Expr, env: dict, var: Var) -> int:
    return index_value(index, {**env, var: env.get(var, 0) + 1}) - index_value(index, env)


# ---- one walk over the function -------------------------------------------------------------------
@dataclass
class Loop:
    var: Var
    extent: int
    kind: ForKind
    mid: int


@dataclass
class Access:
    buffer: object
    index: Expr
    lanes: int
    ramp_stride: int | None  # None: a scalar access (broadcast when it feeds a vector)
    write: bool


@dataclass
class Site:
    loops: tuple[Loop, ...]
    env: dict
    guarded: bool
    execs: float
    flops: float  # per execution
    lanes: int
    accesses: list[Access] = field(default_factory=list)
    ops: int = 0  # arithmetic instructions per execution
    selects: int = 0


def accesses_of(store: Store, env: dict, vec: tuple | None) -> list[Access]:
    """The store and the loads of its value; inside a vectorized loop `vec` = (variable, extent), a
    scalar index that moves with the variable is a vector access of that stride, one that does not
    is a broadcast."""
    out = []

    def add(buffer, index, write):
        if isinstance(index, Ramp):
            out.append(Access(buffer, index, index.lanes, index.stride, write))
            return
        stride = coefficient(index, env, vec[0]) if vec else 0
        if stride:
            out.append(Access(buffer, index, vec[1], stride, write))
        else:
            out.append(Access(buffer, index, 1, None, write))

    add(store.buffer, store.indices[0] if store.indices else Const(0, store.value.dtype), True)
    stack = [store.value]
    while stack:
        e = stack.pop()
        if isinstance(e, Load):
            if hasattr(e.tensor, "shape") and e.indices:
                add(e.tensor, e.indices[0], False)
            continue  # indices are address arithmetic, not work
        if isinstance(e, (Binary, Compare)):
            stack += [e.a, e.b]
        elif isinstance(e, Unary):
            stack.append(e.a)
        elif isinstance(e, (Cast, Broadcast)):
            stack.append(e.value)
        elif isinstance(e, Select):
            stack += [e.t, e.f]
        elif isinstance(e, Call):
            stack += list(e.args)
    return out


def work_of(value: Expr) -> tuple[float, int, int]:
    """Arithmetic of a stored value: operations with lanes counted, instructions, and selects (guarded
    reads); conditions and addresses are not work."""
    n, ops, selects, stack = 0.0, 0, 0, [value]
    while stack:
        e = stack.pop()
        if isinstance(e, Binary):
            if e.op in _ARITH:
                n += e.dtype.lanes
                ops += 1
            stack += [e.a, e.b]
        elif isinstance(e, Call):
            n += e.dtype.lanes
            ops += 1
            stack += list(e.args)
        elif isinstance(e, Unary):
            stack.append(e.a)
        elif isinstance(e, (Cast, Broadcast)):
            stack.append(e.value)
        elif isinstance(e, Select):
            selects += 1
            stack += [e.t, e.f]
    return n, ops, selects


@dataclass
class Walk:
    sites: list = field(default_factory=list)
    statements: int = 0
    parallel_regions: int = 0
    allocs: list = field(default_factory=list)  # (Allocate, execs)
    innermost: dict = field(default_factory=dict)  # id(site) -> its group: the loop nest around it


def walk_function(body: Stmt) -> Walk:
    """Every store with its loops (a vectorized loop is lanes, not a loop), executions and accesses.
    Statements are grouped by their loop nest (the same loop variables and extents): the copies an
    unrolled register tile makes of a reduction fall in one group."""
    w = Walk()

    def visit(s: Stmt, loops: tuple, env: dict, execs: float, guarded: bool, vec):
        w.statements += 1
        if isinstance(s, For):
            begin = index_value(s.begin, env)
            extent = max(1, index_value(s.extent, env))
            if s.kind is ForKind.VECTORIZED:
                visit(s.body, loops, {**env, s.var: begin}, execs, guarded, (s.var, extent))
                return
            if s.kind is ForKind.PARALLEL:
                w.parallel_regions += 1
            loop = Loop(s.var, extent, s.kind, begin + extent // 2)
            visit(s.body, loops + (loop,), {**env, s.var: loop.mid}, execs * extent, guarded, vec)
        elif isinstance(s, Seq):
            for c in s.stmts:
                visit(c, loops, env, execs, guarded, vec)
        elif isinstance(s, IfThenElse):
            visit(s.then, loops, env, execs, True, vec)
            if s.orelse is not None:
                visit(s.orelse, loops, env, execs, True, vec)
        elif isinstance(s, LetStmt):
            visit(s.body, loops, {**env, s.var: index_value(s.value, env)}, execs, guarded, vec)
        elif isinstance(s, Allocate):
            w.allocs.append((s, execs))
            visit(s.body, loops, env, execs, guarded, vec)
        elif isinstance(s, Store):
            widen = vec[1] if vec else 1
            flops, ops, selects = work_of(s.value)
            site = Site(loops, env, guarded, execs, flops * widen, s.value.dtype.lanes * widen,
                         accesses_of(s, env, vec), ops, selects)
            w.sites.append(site)
            w.innermost[id(site)] = tuple((id(lp.var), lp.extent) for lp in loops)
        elif isinstance(s, (Barrier, Fence)):
            pass

    visit(body, (), {}, 1.0, False, None)
    return w


__all__ = ["Access", "Loop", "Site", "Walk", "coefficient", "index_value", "walk_function"]

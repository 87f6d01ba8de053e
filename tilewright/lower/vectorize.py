"""Vectorization: after it, an innermost loop marked vectorized with a
constant extent is one statement on vectors of that many lanes (`Ramp`
indices, vector loads/stores, broadcasts of loop-invariant values).

A load whose index is a ramp of small constant stride (a stride-2 conv's
input along its output width: `x[2*w + r]`) stays one vector load with that
ramp: the C backend reads the span it covers with |stride| contiguous vector
loads and picks the lanes out (codegen/strided.py), GPU backends per lane.

On CPU targets (`vector_bytes` given), a one-vector loop may store at a ramp
of any positive stride (a scatter): an epilogue vectorized along a conv's
output channels (bias and activation as vector operations on the accumulators'
registers) writes NCHW lane by lane (codegen/strided.py).

Loops this pass cannot express (a width that is not a power of two, a nested loop, a data-dependent branch,
a gather, a store that every lane would make to one address, a dtype without
vector support) stay loops marked vectorized; the C backend then asks the
compiler to vectorize them (`#pragma omp simd`)."""

from __future__ import annotations

from dataclasses import replace

from ..ir import arith
from ..ir.expr import (
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
    Select,
    Unary,
    UnOp,
    Var,
)
from ..ir.stmt import For, ForKind, IfThenElse, Scope, Seq, Stmt, Store, seq
from ..ir.stmt_functor import map_stmt, walk_stmt
from ..ir.traverse import free_vars, substitute, walk

_VECTOR_DTYPES = {"float32", "float64", "int8", "int16", "int32", "int64", "uint8"}
# Larger strides read more than MAX_LOAD_STRIDE vectors per vector of lanes used: a gather or
# scalar code is no worse there.
MAX_LOAD_STRIDE = 4


def is_vector_load_index(index: Expr) -> bool:
    """A ramp a vector load may take: contiguous, reversed, or of a small constant stride."""
    return isinstance(index, Ramp) and index.stride != 0 and abs(index.stride) <= MAX_LOAD_STRIDE


class _Unvectorizable(Exception):
    pass


def _lanes(e: Expr) -> int:
    return e.dtype.lanes


def _broadcast(e: Expr, lanes: int) -> Expr:
    if e.dtype.lanes == lanes:
        return e
    if isinstance(e, Ramp):
        return e
    return Broadcast(e, lanes, e.dtype.with_lanes(lanes))


def _materialize(e: Expr, lanes: int) -> Expr:
    """A vector operand: ramps stay (rendered as base + {0, s, 2s, ...})."""
    return _broadcast(e, lanes)


class _Vectorizer:
    def __init__(self, var: Var, lanes: int, base: Expr | None = None, scatter: bool = False,
                 bf16_moves: bool = False):
        self.var = var
        self.lanes = lanes
        self.base = base  # the first lane's value of `var` (0 when None)
        self.scatter = scatter  # stores at a positive stride allowed (CPU)
        self.bf16_moves = bf16_moves  # bfloat16 vectors loaded, stored, selected, cast to/from float32 (CPU)
        self.memo: dict[int, tuple[Expr, Expr]] = {}  # keeps shared subexpressions shared

    def expr(self, e: Expr) -> Expr:
        hit = self.memo.get(id(e))
        if hit is None or hit[0] is not e:
            hit = self.memo[id(e)] = (e, self._expr(e))
        return hit[1]

    def _expr(self, e: Expr) -> Expr:
        if e is self.var:
            base = arith.const(0, e.dtype) if self.base is None else self.base
            return Ramp(base, 1, self.lanes, e.dtype.with_lanes(self.lanes))
        if isinstance(e, (Const, Var)):
            return e
        if isinstance(e, Binary):
            return self.binary(e)
        if isinstance(e, Load):
            return self.load(e)
        if isinstance(e, Compare):
            a, b = self.expr(e.a), self.expr(e.b)
            if _lanes(a) == 1 and _lanes(b) == 1:
                return replace(e, a=a, b=b)
            self._check(e.a.dtype)
            return Compare(e.op, _materialize(a, self.lanes), _materialize(b, self.lanes),
                           e.dtype.with_lanes(self.lanes))
        if isinstance(e, Select):
            c, t, f = self.expr(e.cond), self.expr(e.t), self.expr(e.f)
            if max(_lanes(c), _lanes(t), _lanes(f)) == 1:
                return replace(e, cond=c, t=t, f=f)
            self._check(e.dtype, move=True)
            if _lanes(c) > 1 and _cond_bits(e.cond) != e.dtype.bits:
                raise _Unvectorizable("select mask width differs from the data width")
            if _lanes(c) > 1 and any(isinstance(n, Load) for b in (e.t, e.f) for n in walk(b)):
                # a blend evaluates both branches: the untaken one may read outside its tensor
                raise _Unvectorizable("select whose branches read memory")
            return Select(c, _materialize(t, self.lanes), _materialize(f, self.lanes),
                          e.dtype.with_lanes(self.lanes))
        if isinstance(e, Cast):
            v = self.expr(e.value)
            if _lanes(v) == 1:
                return replace(e, value=v)
            bf16 = "bfloat16" in (e.dtype.name, e.value.dtype.name)
            if bf16 and {e.dtype.name, e.value.dtype.name} != {"bfloat16", "float32"}:
                raise _Unvectorizable(f"vector cast {e.value.dtype} -> {e.dtype}")
            self._check(e.dtype, move=bf16)
            self._check(e.value.dtype, move=bf16)
            return Cast(_materialize(v, self.lanes), e.dtype.with_lanes(self.lanes))
        if isinstance(e, Call):
            args = [self.expr(a) for a in e.args]
            if all(_lanes(a) == 1 for a in args):
                return replace(e, args=tuple(args))
            self._check(e.dtype)
            return Call(e.func, tuple(_materialize(a, self.lanes) for a in args), e.dtype.with_lanes(self.lanes))
        if isinstance(e, Unary):
            a = self.expr(e.a)
            if _lanes(a) == 1:
                return replace(e, a=a)
            if e.op is UnOp.NOT and e.dtype.is_bool:
                raise _Unvectorizable("logical not of a mask")
            self._check(e.dtype)
            return Unary(e.op, _materialize(a, self.lanes), e.dtype.with_lanes(self.lanes))
        raise _Unvectorizable(f"cannot vectorize {type(e).__name__}")

    def _check(self, dtype, move: bool = False) -> None:
        """`move`: the value is only loaded, stored, selected or converted (bfloat16 may be, on CPUs)."""
        if dtype.scalar.name not in _VECTOR_DTYPES and not (move and self.bf16_moves and dtype.name == "bfloat16"):
            raise _Unvectorizable(f"no vector support for {dtype}")

    def binary(self, e: Binary) -> Expr:
        a, b = self.expr(e.a), self.expr(e.b)
        if _lanes(a) == 1 and _lanes(b) == 1:
            return replace(e, a=a, b=b)
        ra, rb = isinstance(a, Ramp), isinstance(b, Ramp)
        if (ra or rb) and e.op in (BinOp.ADD, BinOp.SUB, BinOp.MUL):
            folded = _ramp_arith(e.op, a, b)
            if folded is not None:
                return folded
        if e.op in (BinOp.FLOORDIV, BinOp.FLOORMOD, BinOp.TRUNCDIV, BinOp.TRUNCMOD, BinOp.SHL, BinOp.SHR):
            raise _Unvectorizable(f"vector {e.op.value}")
        self._check(e.dtype)
        return Binary(e.op, _materialize(a, self.lanes), _materialize(b, self.lanes), e.dtype.with_lanes(self.lanes))

    def load(self, e: Load) -> Expr:
        index = self.expr(e.indices[0])
        if _lanes(index) == 1:
            return replace(e, indices=(index,))
        if is_vector_load_index(index):
            self._check(e.dtype, move=True)
            return Load(e.tensor, (index,), e.dtype.with_lanes(self.lanes))
        raise _Unvectorizable(f"gather from '{e.tensor.name}'")

    def stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, Store):
            index = self.expr(s.indices[0])
            if _lanes(index) == 1:
                raise _Unvectorizable("every lane would store to one address")
            stride = index.stride if isinstance(index, Ramp) else 0
            if not (stride == 1 or (stride > 1 and self.scatter and s.buffer.scope is Scope.GLOBAL)):
                raise _Unvectorizable("scatter store")
            value = self.expr(s.value)
            self._check(s.value.dtype, move=True)
            return Store(s.buffer, (index,), _broadcast(value, self.lanes))
        if isinstance(s, Seq):
            return seq(*[self.stmt(c) for c in s.stmts])
        if isinstance(s, IfThenElse):
            cond = self.expr(s.cond)
            if _lanes(cond) > 1:
                raise _Unvectorizable("branch that depends on the vectorized loop")
            return IfThenElse(cond, self.stmt(s.then), self.stmt(s.orelse) if s.orelse is not None else None)
        raise _Unvectorizable(f"{type(s).__name__} inside a vectorized loop")


def _cond_bits(cond: Expr) -> int:
    if isinstance(cond, Compare):
        return cond.a.dtype.bits
    if isinstance(cond, Binary):
        return _cond_bits(cond.a)
    return 0


def _ramp_arith(op: BinOp, a: Expr, b: Expr) -> Expr | None:
    """Affine arithmetic on ramps stays a ramp: ramp + x, ramp * c, ramp + ramp."""
    if isinstance(a, Ramp) and isinstance(b, Ramp):
        if op is BinOp.MUL:
            return None
        stride = a.stride + b.stride if op is BinOp.ADD else a.stride - b.stride
        return Ramp(arith.binary(op, a.base, b.base), stride, a.lanes, a.dtype)
    ramp, other, ramp_first = (a, b, True) if isinstance(a, Ramp) else (b, a, False)
    if other.dtype.lanes != 1:
        return None
    if op is BinOp.ADD:
        return Ramp(arith.binary(op, ramp.base, other), ramp.stride, ramp.lanes, ramp.dtype)
    if op is BinOp.SUB:
        if ramp_first:
            return Ramp(arith.binary(op, ramp.base, other), ramp.stride, ramp.lanes, ramp.dtype)
        return Ramp(arith.binary(op, other, ramp.base), -ramp.stride, ramp.lanes, ramp.dtype)
    if op is BinOp.MUL and isinstance(other, Const):
        c = int(other.value)
        return Ramp(arith.binary(op, ramp.base, c), ramp.stride * c, ramp.lanes, ramp.dtype)
    return None


def vectorize(stmt: Stmt, vector_bytes: int | None = None) -> Stmt:
    """With `vector_bytes` (the target's vector register width), a vectorized loop that is not
    one power-of-two vector (an extent of 112, a loop starting at 1 after partition split off a
    padding border) is strip-mined into vectors of that width, then the remainder as smaller
    power-of-two vectors and at most one scalar iteration, instead of an `omp simd` loop (GCC
    leaves a padding copy's guarded row loop scalar). Without it, such loops stay `omp simd`.
    GPU kernels (thread-bound loops) are never strip-mined: their renderers split vectors into lanes."""
    if vector_bytes and any(isinstance(s, For) and s.kind is ForKind.THREAD_BINDING for s in walk_stmt(stmt)):
        vector_bytes = None

    def fs(s: Stmt):
        if not (isinstance(s, For) and s.kind is ForKind.VECTORIZED):
            return None
        if any(isinstance(c, For) and c.kind in (ForKind.PARALLEL, ForKind.VECTORIZED) for c in walk_stmt(s.body)):
            return replace(s, kind=ForKind.SERIAL)  # OpenMP forbids a parallel or simd loop inside a simd loop
        if not (isinstance(s.begin, Const) and isinstance(s.extent, Const)):
            return None
        lanes = int(s.extent.value)
        one_vector = s.begin.value == 0 and 2 <= lanes <= 64 and not lanes & (lanes - 1)
        if not one_vector and not vector_bytes:  # vector types need a power-of-two width
            return None
        try:
            if one_vector:
                return _Vectorizer(s.var, lanes, scatter=bool(vector_bytes), bf16_moves=bool(vector_bytes)).stmt(s.body)
            return _strip_mine(s, vector_bytes)
        except _Unvectorizable:
            if any(isinstance(st, Store) and not any(v is s.var for v in free_vars(st.indices[0]))
                   for st in walk_stmt(s.body)):
                return replace(s, kind=ForKind.SERIAL)  # a sum along the loop: `omp simd` would race its lanes
            return None

    return map_stmt(stmt, fs)


def _strip_mine(s: For, vector_bytes: int) -> Stmt | None:
    """`s` as vectors of `vector_bytes` (by the widest value it stores) in a serial loop, then the
    remainder; raises _Unvectorizable where the body is not vectorizable, None where too short."""
    var, begin, extent = s.var, int(s.begin.value), int(s.extent.value)
    stored = [st.value.dtype.bytes for st in walk_stmt(s.body) if isinstance(st, Store)]
    width = min(64, vector_bytes // max(stored, default=vector_bytes))
    width = 1 << (width.bit_length() - 1) if width >= 2 else 1
    if width < 2 or extent < width:
        # a short tail (a register tile's last 6 columns) stays a loop: split into 4 + 2 lanes it reads
        # an unpromoted tile at offsets its 8-lane stores cannot forward to (2x slower, dw_4 rows_h2)
        return None
    count, parts = extent // width, []
    if count > 1:
        outer = Var(f"{var.name}.vec", var.dtype)
        base = arith.binary(BinOp.ADD, arith.const(begin, var.dtype), arith.binary(BinOp.MUL, outer, width))
        body = _Vectorizer(var, width, base, bf16_moves=True).stmt(s.body)
        parts.append(For(outer, arith.const(0, var.dtype), arith.const(count, var.dtype), ForKind.SERIAL, body))
    else:
        parts.append(_Vectorizer(var, width, arith.const(begin, var.dtype), bf16_moves=True).stmt(s.body))
    offset, rest = begin + count * width, extent - count * width
    for chunk in (1 << k for k in range(width.bit_length() - 2, -1, -1)):  # width/2, ..., 2, 1
        if rest & chunk:
            at = arith.const(offset, var.dtype)
            parts.append(_Vectorizer(var, chunk, at, bf16_moves=True).stmt(s.body) if chunk > 1 else
                         map_stmt(s.body, fexpr=lambda e, at=at: substitute(e, {var: at})))
            offset += chunk
    return seq(*parts)

"""Scalar expression nodes shared by tensor expressions, the loop IR and codegen.

Nodes are frozen dataclasses compared by identity: `a == b` builds a comparison
node (as in TVM), so structural equality is `structurally_equal`, not `==`.
Python operators on nodes build new nodes through `arith`, which applies the
dtype promotion rules of `dtype`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from ..errors import ExprError
from .dtype import DType, int32


class BinOp(enum.Enum):
    ADD = "+"
    SUB = "-"
    MUL = "*"
    DIV = "/"  # true division, floats only
    FLOORDIV = "//"
    FLOORMOD = "%"
    TRUNCDIV = "truncdiv"
    TRUNCMOD = "truncmod"
    MIN = "min"
    MAX = "max"
    AND = "&"  # logical on bool, bitwise on ints
    OR = "|"
    XOR = "^"
    SHL = "<<"
    SHR = ">>"


class UnOp(enum.Enum):
    NEG = "-"
    NOT = "~"  # logical on bool, bitwise on ints


class CmpOp(enum.Enum):
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    EQ = "=="
    NE = "!="


class Intrinsic(enum.Enum):
    EXP = "exp"
    LOG = "log"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    TANH = "tanh"
    ERF = "erf"
    SIGMOID = "sigmoid"
    ABS = "abs"
    POW = "pow"
    FLOOR = "floor"
    CEIL = "ceil"
    ROUND = "round"  # half to even, as C's nearbyint
    SIN = "sin"
    COS = "cos"


class AxisKind(enum.Enum):
    SPATIAL = "spatial"
    REDUCE = "reduce"


class Expr:
    """Base of all expression nodes; every node has a `dtype`."""

    __slots__ = ()
    __hash__ = object.__hash__
    dtype: DType

    def __bool__(self):
        raise ExprError(
            f"the truth value of the expression `{self}` is unknown while building a "
            "computation; use tw.if_then_else(cond, a, b) instead of Python's if/and/or"
        )

    def __str__(self) -> str:
        from .printer import expr_str

        return expr_str(self)

    __repr__ = __str__

    # Arithmetic and comparison operators build nodes (see arith.py).
    def __add__(self, o): return arith.binary(BinOp.ADD, self, o)  # noqa: E704
    def __radd__(self, o): return arith.binary(BinOp.ADD, o, self)  # noqa: E704
    def __sub__(self, o): return arith.binary(BinOp.SUB, self, o)  # noqa: E704
    def __rsub__(self, o): return arith.binary(BinOp.SUB, o, self)  # noqa: E704
    def __mul__(self, o): return arith.binary(BinOp.MUL, self, o)  # noqa: E704
    def __rmul__(self, o): return arith.binary(BinOp.MUL, o, self)  # noqa: E704
    def __truediv__(self, o): return arith.binary(BinOp.DIV, self, o)  # noqa: E704
    def __rtruediv__(self, o): return arith.binary(BinOp.DIV, o, self)  # noqa: E704
    def __floordiv__(self, o): return arith.binary(BinOp.FLOORDIV, self, o)  # noqa: E704
    def __rfloordiv__(self, o): return arith.binary(BinOp.FLOORDIV, o, self)  # noqa: E704
    def __mod__(self, o): return arith.binary(BinOp.FLOORMOD, self, o)  # noqa: E704
    def __rmod__(self, o): return arith.binary(BinOp.FLOORMOD, o, self)  # noqa: E704
    def __and__(self, o): return arith.binary(BinOp.AND, self, o)  # noqa: E704
    def __rand__(self, o): return arith.binary(BinOp.AND, o, self)  # noqa: E704
    def __or__(self, o): return arith.binary(BinOp.OR, self, o)  # noqa: E704
    def __ror__(self, o): return arith.binary(BinOp.OR, o, self)  # noqa: E704
    def __xor__(self, o): return arith.binary(BinOp.XOR, self, o)  # noqa: E704
    def __rxor__(self, o): return arith.binary(BinOp.XOR, o, self)  # noqa: E704
    def __lshift__(self, o): return arith.binary(BinOp.SHL, self, o)  # noqa: E704
    def __rshift__(self, o): return arith.binary(BinOp.SHR, self, o)  # noqa: E704
    def __neg__(self): return arith.unary(UnOp.NEG, self)  # noqa: E704
    def __invert__(self): return arith.unary(UnOp.NOT, self)  # noqa: E704
    def __lt__(self, o): return arith.compare(CmpOp.LT, self, o)  # noqa: E704
    def __le__(self, o): return arith.compare(CmpOp.LE, self, o)  # noqa: E704
    def __gt__(self, o): return arith.compare(CmpOp.GT, self, o)  # noqa: E704
    def __ge__(self, o): return arith.compare(CmpOp.GE, self, o)  # noqa: E704
    def __eq__(self, o): return arith.compare(CmpOp.EQ, self, o)  # noqa: E704
    def __ne__(self, o): return arith.compare(CmpOp.NE, self, o)  # noqa: E704

    def __pow__(self, o):
        return arith.call(Intrinsic.POW, self, o)

    def astype(self, dtype) -> Expr:
        return arith.cast(self, dtype)


@dataclass(frozen=True, eq=False, repr=False)
class Const(Expr):
    value: Any
    dtype: DType


@dataclass(frozen=True, eq=False, repr=False)
class Var(Expr):
    name: str
    dtype: DType = int32


@dataclass(frozen=True, eq=False, repr=False)
class IterVar(Var):
    """A loop axis of a compute: `begin <= var < begin + extent`."""

    begin: int = 0
    extent: int = 1
    kind: AxisKind = AxisKind.SPATIAL

    @property
    def end(self) -> int:
        return self.begin + self.extent

    @property
    def var(self) -> IterVar:  # TVM spelling: axis.var
        return self

    @property
    def dom(self) -> tuple[int, int]:
        return (self.begin, self.extent)


@dataclass(frozen=True, eq=False, repr=False)
class Binary(Expr):
    op: BinOp
    a: Expr
    b: Expr
    dtype: DType


@dataclass(frozen=True, eq=False, repr=False)
class Unary(Expr):
    op: UnOp
    a: Expr
    dtype: DType


@dataclass(frozen=True, eq=False, repr=False)
class Compare(Expr):
    op: CmpOp
    a: Expr
    b: Expr
    dtype: DType

    def __bool__(self):
        # Lets `axis in list_of_axes` work: == and != on two nodes mean identity here.
        if self.op is CmpOp.EQ:
            return self.a is self.b
        if self.op is CmpOp.NE:
            return self.a is not self.b
        return Expr.__bool__(self)


@dataclass(frozen=True, eq=False, repr=False)
class Cast(Expr):
    value: Expr
    dtype: DType


@dataclass(frozen=True, eq=False, repr=False)
class Select(Expr):
    """`cond ? t : f`; only the chosen branch is evaluated (a guarded load in the
    other branch may be out of bounds)."""

    cond: Expr
    t: Expr
    f: Expr
    dtype: DType


@dataclass(frozen=True, eq=False, repr=False)
class Call(Expr):
    func: Intrinsic
    args: tuple[Expr, ...]
    dtype: DType


@dataclass(frozen=True, eq=False, repr=False)
class Load(Expr):
    """Read of a tensor element; `tensor` is a te Tensor (or a buffer later on)."""

    tensor: Any
    indices: tuple[Expr, ...]
    dtype: DType


@dataclass(frozen=True, eq=False, repr=False)
class Combiner:
    """A commutative, associative reducer instantiated for one dtype:
    `result` combines `lhs` and `rhs`; `identity` is its neutral element."""

    name: str
    lhs: Var
    rhs: Var
    result: Expr
    identity: Const

    @property
    def dtype(self) -> DType:
        return self.identity.dtype

    @property
    def lane_op(self) -> BinOp | None:
        """ADD, MAX or MIN when the result is `lhs op rhs`: partial results may be kept
        apart per vector lane and combined later (lower/lane_reductions.py); None otherwise."""
        r = self.result
        if isinstance(r, Binary) and r.op in (BinOp.ADD, BinOp.MAX, BinOp.MIN) \
                and {id(r.a), id(r.b)} == {id(self.lhs), id(self.rhs)}:
            return r.op
        return None

    @property
    def is_sum(self) -> bool:
        """`lhs + rhs`."""
        return self.lane_op is BinOp.ADD


@dataclass(frozen=True, eq=False, repr=False)
class Reduce(Expr):
    combiner: Combiner
    source: Expr
    axes: tuple[IterVar, ...]
    condition: Expr | None
    dtype: DType
    # filled by the reducer that built it; used for messages only
    origin: str = field(default="", compare=False)


@dataclass(frozen=True, eq=False, repr=False)
class Ramp(Expr):
    """The vector (base, base + stride, ..., base + (lanes-1)*stride)."""

    base: Expr
    stride: int
    lanes: int
    dtype: DType


@dataclass(frozen=True, eq=False, repr=False)
class Broadcast(Expr):
    value: Expr
    lanes: int
    dtype: DType


from . import arith  # noqa: E402  (arith needs the classes above)

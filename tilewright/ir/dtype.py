"""Scalar data types and the promotion rules between them.

Implicit promotion happens only where it is lossless and unambiguous:

| operands                               | result              |
|----------------------------------------|---------------------|
| same dtype                             | that dtype          |
| two signed ints                        | the wider one       |
| two unsigned ints                      | the wider one       |
| unsigned with a wider signed int       | the signed one      |
| (uint8 with int16, uint32 with int64)  |                     |
| float16 or bfloat16 with float32/64    | the wider float     |
| float32 with float64                   | float64             |
| anything else (int with float, bool    | DTypeError: cast    |
| with a number, float16 with bfloat16,  | one side explicitly |
| unsigned with a signed int of its      |                     |
| width or narrower: int8 with uint8,    |                     |
| int64 with uint64)                     |                     |

Python literals take the dtype of the other operand when they fit it exactly
(an int literal fits any dtype but bool; a float literal only a float dtype).
A literal alone is int32, int64 where it does not fit, uint64 above int64's range.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from ..errors import DTypeError


class Kind(enum.Enum):
    BOOL = "bool"
    INT = "int"
    UINT = "uint"
    FLOAT = "float"


@dataclass(frozen=True)
class DType:
    name: str
    kind: Kind
    bits: int
    lanes: int = 1  # > 1 only in vectorized loop IR

    def with_lanes(self, lanes: int) -> DType:
        return DType(self.name, self.kind, self.bits, lanes)

    @property
    def scalar(self) -> DType:
        return self if self.lanes == 1 else DType(self.name, self.kind, self.bits)

    @property
    def is_float(self) -> bool:
        return self.kind is Kind.FLOAT

    @property
    def is_int(self) -> bool:
        """Signed or unsigned integer (not bool)."""
        return self.kind in (Kind.INT, Kind.UINT)

    @property
    def is_bool(self) -> bool:
        return self.kind is Kind.BOOL

    @property
    def bytes(self) -> int:
        return max(1, self.bits // 8)

    @property
    def int_range(self) -> tuple[int, int]:
        if self.kind is Kind.INT:
            return -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1
        if self.kind is Kind.UINT:
            return 0, (1 << self.bits) - 1
        raise DTypeError(f"{self.name} is not an integer dtype")

    @property
    def lowest(self):
        """The least value (max's identity): -inf for floats, the minimum for integers, False for bool."""
        if self.is_bool:
            return False
        return self.int_range[0] if self.is_int else -np.inf

    @property
    def highest(self):
        """The greatest value (min's identity): inf for floats, the maximum for integers, True for bool."""
        if self.is_bool:
            return True
        return self.int_range[1] if self.is_int else np.inf

    @property
    def numpy(self) -> np.dtype:
        """NumPy storage dtype. bfloat16 has none in NumPy: it is carried in float32
        arrays whose values are exactly representable in bfloat16."""
        return np.dtype("float32" if self.name == "bfloat16" else self.name)

    def __str__(self) -> str:
        return self.name if self.lanes == 1 else f"{self.name}x{self.lanes}"


float16 = DType("float16", Kind.FLOAT, 16)
bfloat16 = DType("bfloat16", Kind.FLOAT, 16)
float32 = DType("float32", Kind.FLOAT, 32)
float64 = DType("float64", Kind.FLOAT, 64)
int8 = DType("int8", Kind.INT, 8)
int16 = DType("int16", Kind.INT, 16)
int32 = DType("int32", Kind.INT, 32)
int64 = DType("int64", Kind.INT, 64)
uint8 = DType("uint8", Kind.UINT, 8)
uint16 = DType("uint16", Kind.UINT, 16)
uint32 = DType("uint32", Kind.UINT, 32)
uint64 = DType("uint64", Kind.UINT, 64)
bool_ = DType("bool", Kind.BOOL, 8)

ALL_DTYPES = (float16, bfloat16, float32, float64, int8, uint8, int16, uint16, int32, uint32, int64, uint64, bool_)
_BY_NAME = {d.name: d for d in ALL_DTYPES}


def as_dtype(value, what: str = "dtype") -> DType:
    """Accept a DType, a name ("float32"), a NumPy dtype or a scalar type."""
    if isinstance(value, DType):
        return value
    name = value if isinstance(value, str) else None
    if name is None:
        try:
            name = np.dtype(value).name
        except TypeError:
            name = getattr(value, "__name__", repr(value))
    if name in _BY_NAME:
        return _BY_NAME[name]
    valid = ", ".join(_BY_NAME)
    raise DTypeError(f"unknown {what} {value!r}; valid dtypes are: {valid}")


def _float_rank(d: DType) -> int:
    return {"float16": 1, "bfloat16": 1, "float32": 2, "float64": 3}[d.name]


def promote(a: DType, b: DType) -> DType | None:
    """The common dtype of a and b under the table above, or None if a cast is needed."""
    if a == b:
        return a
    if a.kind is Kind.FLOAT and b.kind is Kind.FLOAT:
        ra, rb = _float_rank(a), _float_rank(b)
        if ra == rb:  # float16 vs bfloat16: neither holds the other
            return None
        return a if ra > rb else b
    if a.kind is b.kind and a.kind in (Kind.INT, Kind.UINT):
        return a if a.bits > b.bits else b
    for s, u in ((a, b), (b, a)):
        if s.kind is Kind.INT and u.kind is Kind.UINT and s.bits > u.bits:
            return s
    return None


def promote_or_raise(a: DType, b: DType, context: str) -> DType:
    result = promote(a, b)
    if result is None:
        raise DTypeError(
            f"{context}: operands have dtypes {a} and {b}, which need an explicit cast; "
            f"write tw.cast(x, dtype) on one side (implicit promotion only widens within signed ints, "
            f"within unsigned ints, unsigned into a wider signed int, or within floats)"
        )
    return result


def literal_fits(value, dtype: DType) -> bool:
    """Whether a Python literal can take `dtype` without changing its value."""
    if isinstance(value, bool):
        return dtype.is_bool or dtype.is_int or dtype.is_float
    if isinstance(value, int):
        if dtype.is_int:
            lo, hi = dtype.int_range
            return lo <= value <= hi
        return dtype.is_float
    if isinstance(value, float):
        return dtype.is_float
    return False


def default_literal_dtype(value) -> DType:
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        if int32.int_range[0] <= value <= int32.int_range[1]:
            return int32
        return uint64 if value > int64.int_range[1] else int64
    if isinstance(value, float):
        return float32
    raise DTypeError(f"cannot make a constant from {value!r} of type {type(value).__name__}")

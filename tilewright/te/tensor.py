"""Tensors and the operations that produce them (placeholder or compute)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import ExprError, ShapeError
from ..ir.arith import as_expr
from ..ir.dtype import DType
from ..ir.expr import Const, Expr, IterVar, Load


@dataclass(frozen=True, eq=False)
class PlaceholderOp:
    name: str
    shape: tuple[int, ...]
    dtype: DType
    value_range: tuple[int, int] | None = None  # integers the caller promises every element lies in

    @property
    def input_tensors(self) -> tuple[Tensor, ...]:
        return ()


@dataclass(frozen=True, eq=False)
class ComputeOp:
    name: str
    axis: tuple[IterVar, ...]
    reduce_axis: tuple[IterVar, ...]
    body: Expr
    attrs: dict = field(default_factory=dict)
    input_tensors: tuple[Tensor, ...] = ()

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.extent for a in self.axis)

    @property
    def dtype(self) -> DType:
        return self.body.dtype


@dataclass(frozen=True, eq=False)
class Tensor:
    """An n-dimensional tensor: a placeholder (input) or the output of a compute.
    Indexing it, `T[i, j]`, builds a Load expression."""

    op: Any  # PlaceholderOp | ComputeOp
    shape: tuple[int, ...]
    dtype: DType

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices) -> Load:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != self.ndim:
            raise ShapeError(
                f"tensor '{self.name}' has {self.ndim} dimension(s) {list(self.shape)} but was indexed "
                f"with {len(indices)} index(es); give exactly {self.ndim}"
            )
        converted = []
        for dim, index in enumerate(indices):
            converted.append(self._check_index(dim, index))
        return Load(self, tuple(converted), self.dtype)

    def _check_index(self, dim: int, index) -> Expr:
        where = f"tensor '{self.name}' axis {dim}"
        if isinstance(index, slice) or index is Ellipsis or index is None:
            raise ExprError(f"{where}: slices are not expressions; index with an axis or an integer expression")
        if isinstance(index, float) or (isinstance(index, Expr) and not index.dtype.is_int):
            dtype = index.dtype if isinstance(index, Expr) else "float"
            raise ExprError(f"{where}: index must be an integer expression, got {dtype} `{index}`; cast it")
        if isinstance(index, bool):
            raise ExprError(f"{where}: index must be an integer expression, got bool")
        e = as_expr(index, context=where)
        if isinstance(e, Const) and not 0 <= e.value < self.shape[dim]:
            raise ShapeError(f"{where}: constant index {e.value} is out of range [0, {self.shape[dim]})")
        return e

    def __str__(self) -> str:
        from .formula import program_str

        return program_str([self])

    def __repr__(self) -> str:
        return f"Tensor(name={self.name!r}, shape={list(self.shape)}, dtype={self.dtype})"

    def __bool__(self):
        return True

    def _not_a_scalar(self, *_):
        index = ", ".join(f"i{d}" for d in range(self.ndim))
        raise ExprError(f"tensor '{self.name}' is used as a scalar; index it, e.g. {self.name}[{index}]")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _not_a_scalar
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _not_a_scalar
    __neg__ = __lt__ = __le__ = __gt__ = __ge__ = __pow__ = _not_a_scalar

    def __iter__(self):
        raise TypeError(f"tensor '{self.name}' is not iterable; index it with T[i, j]")

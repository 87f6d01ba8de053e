"""Normalising operator parameters the way PyTorch's functional API accepts them,
with errors that name the operator and the parameter."""

from __future__ import annotations

import inspect
from collections.abc import Callable

from ..errors import DTypeError, ShapeError
from ..te.tensor import Tensor


def ntuple(value, n: int, op: str, param: str, minimum: int = 0) -> tuple[int, ...]:
    """An int or a length-n sequence of ints, each >= minimum."""
    items = tuple(value) if isinstance(value, (list, tuple)) else (value,) * n
    if len(items) != n or any(isinstance(v, bool) or not isinstance(v, int) for v in items):
        raise ShapeError(f"{op}: {param} must be an int or {n} ints, got {value!r}")
    if any(v < minimum for v in items):
        raise ShapeError(f"{op}: {param} must be >= {minimum}, got {value!r}")
    return items


def expect_ndim(t: Tensor, ndim: int, op: str, role: str, layout: str = "") -> None:
    if t.ndim != ndim:
        hint = f" ({layout})" if layout else ""
        raise ShapeError(f"{op}: {role} '{t.name}' must have {ndim} dimensions{hint}, got shape {list(t.shape)}")


def conv_out_size(size: int, kernel: int, stride: int, pad_before: int, pad_after: int, dilation: int,
                  op: str, axis: str) -> int:
    span = dilation * (kernel - 1) + 1
    out = (size + pad_before + pad_after - span) // stride + 1
    if out <= 0:
        raise ShapeError(
            f"{op}: along {axis} the input ({size}, padded to {size + pad_before + pad_after}) is smaller than the "
            f"dilated kernel ({span}); output size would be {out}"
        )
    return out


def named_axes(fcompute, names) -> Callable:
    """`fcompute(*idx)` with the parameter names `names`, which `compute` takes as
    axis names; lets an N-d operator name its axes (n, c, h, w) instead of ax0.."""
    names = tuple(names)

    def wrapper(*idx):
        return fcompute(*idx)

    wrapper.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names]
    )
    return wrapper


def normalize_dim(dim, ndim: int, op: str, param: str = "dim") -> int:
    """A PyTorch dim in [-ndim, ndim) as a non-negative axis number."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise ShapeError(f"{op}: {param} must be an int, got {dim!r}")
    if not -ndim <= dim < ndim:
        raise ShapeError(
            f"{op}: {param} {dim} is out of range for a {ndim}-d tensor; valid range is [{-ndim}, {ndim - 1}]"
        )
    return dim % ndim


def require_float(t: Tensor, op: str, role: str = "input") -> None:
    if not t.dtype.is_float:
        raise DTypeError(
            f"{op}: {role} '{t.name}' has dtype {t.dtype}, but {op} needs a floating-point tensor; "
            f"cast it first (a compute stage with tw.cast)"
        )

"""Static layout operators: transpose, permute, reshape, flatten (PyTorch
semantics, negative dims allowed). Each is one copying stage; reshape maps an
output index to the row-major linear index and back with // and %."""

from __future__ import annotations

import math

from ..errors import ShapeError
from ..te import cast, compute
from ..te.tensor import Tensor
from .params import normalize_dim

_INT32_MAX = (1 << 31) - 1


def transpose(x: Tensor, dim0: int, dim1: int, *, name: str = "transpose") -> Tensor:
    """Swap axes dim0 and dim1."""
    d0 = normalize_dim(dim0, x.ndim, "transpose", "dim0")
    d1 = normalize_dim(dim1, x.ndim, "transpose", "dim1")
    dims = list(range(x.ndim))
    dims[d0], dims[d1] = d1, d0
    return _permuted(x, dims, name)


def permute(x: Tensor, dims, *, name: str = "permute") -> Tensor:
    """Output axis a is input axis dims[a]."""
    dims = list(dims) if isinstance(dims, (list, tuple)) else [dims]
    if len(dims) != x.ndim:
        raise ShapeError(f"permute: dims {dims} must list all {x.ndim} axes of '{x.name}' {list(x.shape)}")
    norm = [normalize_dim(d, x.ndim, "permute", "dims entry") for d in dims]
    if len(set(norm)) != len(norm):
        raise ShapeError(f"permute: dims {dims} repeat an axis; each of the {x.ndim} axes must appear once")
    return _permuted(x, norm, name)


def _permuted(x: Tensor, dims: list[int], name: str) -> Tensor:
    inverse = [dims.index(d) for d in range(x.ndim)]
    return compute(tuple(x.shape[d] for d in dims), lambda *idx: x[tuple(idx[a] for a in inverse)], name=name)


def _resolve_shape(x: Tensor, shape, op: str) -> tuple[int, ...]:
    shape = tuple(shape) if isinstance(shape, (list, tuple)) else (shape,)
    if any(isinstance(n, bool) or not isinstance(n, int) for n in shape):
        raise ShapeError(f"{op}: shape must be ints, got {shape!r}")
    holes = [a for a, n in enumerate(shape) if n == -1]
    if len(holes) > 1 or any(n < -1 or n == 0 for n in shape):
        raise ShapeError(f"{op}: shape {list(shape)} may hold positive sizes and at most one -1")
    numel = math.prod(x.shape)
    known = math.prod(n for n in shape if n != -1)
    if holes:
        if numel % known:
            raise ShapeError(f"{op}: cannot infer -1 in {list(shape)}: {numel} elements of '{x.name}' "
                             f"do not divide by {known}")
        shape = tuple(numel // known if n == -1 else n for n in shape)
    elif known != numel:
        raise ShapeError(f"{op}: shape {list(shape)} has {known} elements but '{x.name}' {list(x.shape)} has {numel}")
    return shape


def reshape(x: Tensor, shape, *, name: str = "reshape") -> Tensor:
    """The same row-major elements in a new static shape; one -1 is inferred."""
    shape = _resolve_shape(x, shape, "reshape")
    wide = math.prod(shape) > _INT32_MAX  # linear indices past int32 need int64 arithmetic

    def body(*idx):
        linear = 0
        for i, n in zip(idx, shape, strict=True):
            i = cast(i, "int64") if wide else i
            linear = linear * n + i
        src = []
        stride = math.prod(x.shape)
        for a, n in enumerate(x.shape):
            stride //= n
            v = linear // stride if stride > 1 else linear
            src.append(v % n if a > 0 else v)  # the leading quotient is already < n
        return x[tuple(src)]

    return compute(shape, body, name=name)


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1, *, name: str = "flatten") -> Tensor:
    """Merge axes start_dim..end_dim into one (a 0-d input becomes 1-D)."""
    if x.ndim == 0:
        return reshape(x, (1,), name=name)
    s = normalize_dim(start_dim, x.ndim, "flatten", "start_dim")
    e = normalize_dim(end_dim, x.ndim, "flatten", "end_dim")
    if s > e:
        raise ShapeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} for a {x.ndim}-d tensor")
    return reshape(x, x.shape[:s] + (math.prod(x.shape[s:e + 1]),) + x.shape[e + 1:], name=name)

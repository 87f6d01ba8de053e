"""Elementwise binary operators with NumPy/PyTorch broadcasting, and `bias_add`.

Shapes align from the right; each pair of sizes must be equal or contain a 1,
and a size-1 input axis is read at index 0. One operand may be a Python scalar,
which takes the tensor's dtype (a float scalar with an integer tensor is an error).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..errors import DTypeError, ShapeError
from ..te import compute
from ..te import max as max_of
from ..te import min as min_of
from ..te.tensor import Tensor
from .params import expect_ndim, normalize_dim


def broadcast_shapes(shapes: Sequence[Sequence[int]], op: str, names: Sequence[str] | None = None) -> tuple[int, ...]:
    """The broadcast of `shapes` (right-aligned, sizes equal or 1), or a ShapeError
    naming the operator, the tensors and the first dimension that disagrees."""
    shapes = [tuple(s) for s in shapes]
    names = list(names) if names is not None else [f"#{n}" for n in range(len(shapes))]
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(-ndim, 0):
        sizes = [s[d] for s in shapes if len(s) >= -d]
        target = max(sizes)
        if any(n not in (1, target) for n in sizes):
            listed = " and ".join(f"{list(s)} ('{n}')" for s, n in zip(shapes, names, strict=True))
            pair = " and ".join(str(s[d]) if len(s) >= -d else "-" for s in shapes)
            raise ShapeError(
                f"{op}: shapes {listed} do not broadcast: dimension {d} has sizes {pair}; "
                f"sizes must be equal or 1"
            )
        out.append(target)
    return tuple(out)


def broadcast_index(shape: Sequence[int], idx: Sequence) -> tuple:
    """Indices into a tensor of `shape` broadcast to the output indices `idx`
    (right-aligned; a size-1 axis is read at 0)."""
    lead = len(idx) - len(shape)
    return tuple(0 if n == 1 else i for n, i in zip(shape, idx[lead:], strict=True))


def _operand(value, idx):
    return value[broadcast_index(value.shape, idx)] if isinstance(value, Tensor) else value


def _elementwise(op: str, a, b, fn: Callable, name: str) -> Tensor:
    tensors = [v for v in (a, b) if isinstance(v, Tensor)]
    if not tensors:
        raise ShapeError(f"{op}: at least one operand must be a tensor, got {a!r} and {b!r}")
    shape = broadcast_shapes([t.shape for t in tensors], op, [t.name for t in tensors])
    return compute(shape, lambda *idx: fn(_operand(a, idx), _operand(b, idx)), name=name)


def add(a, b, *, name: str = "add") -> Tensor:
    """a + b with broadcasting (torch.add without alpha)."""
    return _elementwise("add", a, b, lambda x, y: x + y, name)


def sub(a, b, *, name: str = "sub") -> Tensor:
    """a - b with broadcasting (torch.sub without alpha)."""
    return _elementwise("sub", a, b, lambda x, y: x - y, name)


def mul(a, b, *, name: str = "mul") -> Tensor:
    """a * b with broadcasting."""
    return _elementwise("mul", a, b, lambda x, y: x * y, name)


def div(a, b, *, name: str = "div") -> Tensor:
    """a / b with broadcasting; true division, so floating-point tensors only
    (torch would promote integers to float; here the cast is explicit)."""
    for t in (a, b):
        if isinstance(t, Tensor) and not t.dtype.is_float:
            raise DTypeError(
                f"div: '{t.name}' has dtype {t.dtype}; true division needs floating-point tensors, "
                f"cast it first or use floor division in a compute"
            )
    return _elementwise("div", a, b, lambda x, y: x / y, name)


def maximum(a, b, *, name: str = "maximum") -> Tensor:
    """Elementwise max with broadcasting."""
    return _elementwise("maximum", a, b, max_of, name)


def minimum(a, b, *, name: str = "minimum") -> Tensor:
    """Elementwise min with broadcasting."""
    return _elementwise("minimum", a, b, min_of, name)


def bias_add(x: Tensor, bias: Tensor, axis: int = 1, *, name: str = "bias_add") -> Tensor:
    """x + bias along `axis` (TVM's nn.bias_add): bias is 1-D of length x.shape[axis]."""
    axis = normalize_dim(axis, x.ndim, "bias_add", "axis")
    expect_ndim(bias, 1, "bias_add", "bias")
    if bias.shape[0] != x.shape[axis]:
        raise ShapeError(
            f"bias_add: bias '{bias.name}' has {bias.shape[0]} elements but axis {axis} of '{x.name}' "
            f"{list(x.shape)} has {x.shape[axis]}"
        )
    return compute(x.shape, lambda *idx: x[idx] + bias[idx[axis]], name=name)

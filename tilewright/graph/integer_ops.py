"""The graph's integer and dynamic-quantization ops, what ONNX Runtime's `quantize_dynamic` writes
(DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul), with their types, NumPy reference and
lowering to te, one table each for `infer`, `reference` and `lower_te` (specs in `opset`):

- `cast(x)`, attr `dtype`: NumPy's astype between integer, bool and float dtypes (integers wrap as
  NumPy's do); float -> integer truncates toward zero, saturates at the integer's range and takes NaN
  to 0 (C leaves those undefined, NumPy gives the minimum: this defines them);
- `reduce_max(x)` / `reduce_min(x)`, attrs `axes`, `keepdims`: as `mean` does, with max / min;
- `dynamic_scale(low, high)`: ONNX DynamicQuantizeLinear's y_scale from x's range widened to hold 0
  (low = min(min(x), 0), high = max(max(x), 0)): (high - low) / 255 in float32, 1 where that is 0 (an
  all-zero x), as ONNX Runtime gives;
- `mod(a, b)`, attr `fmod`: remainder of integers or float32 / float64, NumPy broadcasting; fmod 1 takes the
  dividend's sign (C's `%` / fmod), fmod 0 the divisor's (Python's); an integer zero divisor gives `a` as the
  kernels define it, a float one NaN;
- `truncdiv(a, b)`: integer division rounding toward zero (ONNX's integer Div, C's `/`), NumPy broadcasting;
  a zero divisor gives 0 and MIN / -1 wraps to MIN, as the kernels define them;
- `matmul_integer(x, weight, bias?)`: acc[..., n] = sum_k x[..., k] * W[n, k] + bias[n] in int32, x uint8,
  the int8 weight stored [N/8, K/4, 8, 4] as `qdense`'s (what dot-product instructions read)."""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..te import compute, floormod, logical_and, logical_or, reduce_axis, select, truncdiv, truncmod
from ..te import max as te_max
from ..te import min as te_min
from .ir import Node, TensorType
from .quantized_ops import DENSE_BLOCK, dense_accumulator

CAST_FLOATS = ("float16", "bfloat16", "float32", "float64")
CAST_DTYPES = ("bool", "uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64", "float16", "bfloat16",
               "float32", "float64")


def _fail(node: Node, ins, why: str) -> ShapeError:
    return ShapeError(f"node '{node.name}' ({node.op}) with inputs ({', '.join(str(t) for t in ins)}): {why}")


def _is_float(dtype: str) -> bool:
    return dtype.startswith("float") or dtype == "bfloat16"


def _numpy_dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        from .bfloat16 import bfloat16_dtype

        return bfloat16_dtype()
    return np.dtype(name)


def _cast_type(node: Node, ins):
    to = node.attr("dtype")
    if to not in CAST_DTYPES:
        raise _fail(node, ins, f"cast to {to!r}; valid dtypes: {', '.join(CAST_DTYPES)}")
    return [TensorType(ins[0].shape, to)]


def _float_to_int_bounds(to: str) -> tuple[float, float]:
    """(below, top): the powers of two a float must be at least (unsigned: above -1) and below to convert into
    integer dtype `to` by truncation; both exact in every float dtype."""
    info = np.iinfo(to)
    return (-1.0 if info.min == 0 else float(info.min)), float(info.max) + 1.0


def _saturating(src: str, to: str) -> bool:
    return _is_float(src) and to not in CAST_FLOATS and to != "bool"


def reference_cast(node: Node, x):
    to = node.attr("dtype")
    if not _saturating(x.dtype.name, to):
        return x.astype(_numpy_dtype(to))
    low, top = _float_to_int_bounds(to)
    info = np.iinfo(to)
    wide = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        below, above = (wide <= low) if info.min == 0 else (wide < low), wide >= top
        inside = np.where(np.isnan(wide) | below | above, 0, np.trunc(wide)).astype(to)
    return np.where(above, info.max, np.where(below, info.min, inside)).astype(to)


def lower_cast(node: Node, a: list, name: str):
    x, to = a[0], node.attr("dtype")
    src = x.dtype.name
    if not _saturating(src, to):
        return compute(x.shape, lambda *i: x[i].astype(to), name=name)
    low, top = _float_to_int_bounds(to)
    info = np.iinfo(to)

    def body(*i):
        v = x[i]
        below = (v <= low) if info.min == 0 else (v < low)
        inside = select(logical_or(below, v >= top), 0, v).astype(to)  # C's conversion truncates toward zero
        return select(v != v, 0, select(v >= top, info.max, select(below, info.min, inside)))
    return compute(x.shape, body, name=name)


def _dynamic_scale_type(node: Node, ins):
    if any(t.dtype != "float32" or t.shape not in ((), (1,)) for t in ins):
        raise _fail(node, ins, "low and high must be float32 scalars (x's range widened to hold 0)")
    return [TensorType((), "float32")]


def _matmul_integer_type(node: Node, ins):
    x, w = ins[:2]
    k = x.shape[-1] if x.shape else 0
    if x.dtype != "uint8" or w.dtype != "int8" or len(w.shape) != 4 or w.shape[2:] != (DENSE_BLOCK, 4) \
            or w.shape[1] * 4 != k:
        raise _fail(node, ins, f"x must be uint8 [..., K] and the weight int8 [N/{DENSE_BLOCK}, K/4, "
                               f"{DENSE_BLOCK}, 4] with K = x's last extent")
    n = w.shape[0] * DENSE_BLOCK
    if len(ins) > 2 and (ins[2].dtype != "int32" or ins[2].shape != (n,)):
        raise _fail(node, ins, f"the bias must be int32 of shape ({n},)")
    return [TensorType((*x.shape[:-1], n), "int32")]


def _mod_type(node: Node, ins):
    from .infer import broadcast_shapes

    shape = broadcast_shapes(ins[0].shape, ins[1].shape)
    floats = ("float32", "float64") if node.op == "mod" else ()
    if ins[0].dtype != ins[1].dtype or shape is None or not (
            np.issubdtype(np.dtype(ins[0].dtype), np.integer) or ins[0].dtype in floats):
        kinds = "integer or float32 / float64" if floats else "integer"
        raise _fail(node, ins, f"takes two {kinds} inputs of one dtype whose shapes broadcast")
    return [TensorType(shape, ins[0].dtype)]


# reduce_max / reduce_min take mean's type rule (graph/infer.py)
TYPES = {"cast": _cast_type, "dynamic_scale": _dynamic_scale_type, "matmul_integer": _matmul_integer_type,
         "mod": _mod_type, "truncdiv": _mod_type}


# --- reference ---

def _axes(node: Node, ndim: int) -> tuple[int, ...]:
    from .infer import reduce_axes

    return reduce_axes(node, ndim)


def reference_dynamic_scale(node: Node, low, high):
    scale = np.float32(np.float32(high.reshape(())) - np.float32(low.reshape(()))) / np.float32(255)
    return np.asarray(np.float32(1) if scale == 0 else scale, np.float32)


def reference_matmul_integer(node: Node, x, w, bias=None):
    nb, kb, b, four = w.shape
    plain = w.transpose(0, 2, 1, 3).reshape(nb * b, kb * four).astype(np.int64)
    acc = x.astype(np.int64) @ plain.T
    if bias is not None:
        acc = acc + bias.astype(np.int64)
    return acc.astype(np.int32)


def reference_mod(node: Node, a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (np.fmod if node.attr("fmod", 0) else np.mod)(a, b)
    return r.astype(a.dtype) if a.dtype.kind == "f" else np.where(b == 0, a, r).astype(a.dtype)


def reference_truncdiv(node: Node, a, b):
    safe = np.where(b == 0, 1, b).astype(b.dtype)
    with np.errstate(over="ignore"):  # MIN // -1 wraps to MIN
        q = (a - np.fmod(a, safe)) // safe  # exact: a - fmod(a, b) is a multiple of b
    return np.where(b == 0, 0, q).astype(a.dtype)


REFERENCE = {
    "mod": reference_mod,
    "truncdiv": reference_truncdiv,
    "cast": reference_cast,
    "reduce_max": lambda n, x: np.max(x, axis=_axes(n, x.ndim), keepdims=bool(n.attr("keepdims", True))),
    "reduce_min": lambda n, x: np.min(x, axis=_axes(n, x.ndim), keepdims=bool(n.attr("keepdims", True))),
    "dynamic_scale": reference_dynamic_scale,
    "matmul_integer": reference_matmul_integer,
}


# --- lowering ---

def reduce_over(x, axes, keep: bool, reducer, name: str):
    """`reducer` (te sum/max/min) of `x` over `axes`, kept as extent-1 axes with `keep`."""
    red = {d: reduce_axis(x.shape[d], f"r{d}") for d in axes}
    shape = tuple(1 if d in red else x.shape[d] for d in range(x.ndim)) if keep else \
        tuple(x.shape[d] for d in range(x.ndim) if d not in red)

    def body(*i):
        it = iter(i)
        idx = []
        for d in range(x.ndim):
            if d in red:
                if keep:
                    next(it)
                idx.append(red[d])
            else:
                idx.append(next(it))
        return reducer(x[tuple(idx)], axis=list(red.values()))

    return compute(shape, body, name=name)


def _lower_reduce(reducer):
    def lower(node: Node, a: list, name: str):
        return reduce_over(a[0], _axes(node, a[0].ndim), bool(node.attr("keepdims", True)), reducer, name)
    return lower


def lower_dynamic_scale(node: Node, a: list, name: str):
    low, high = (t[(0,) * t.ndim] for t in a)

    def body():
        scale = (high - low) / 255.0
        return select(scale == 0.0, 1.0, scale)

    return compute((), body, name=name)


def lower_matmul_integer(node: Node, a: list, name: str):
    x, w = a[:2]
    bias = a[2] if len(a) > 2 else None
    acc = dense_accumulator(x, w, f"{name}_acc" if bias is not None else name)
    if bias is None:
        return acc
    return compute(acc.shape, lambda *i: acc[i] + bias[i[-1]], name=name)


def _float_floormod(x, y):
    """NumPy's mod on floats (the divisor's sign): C's fmod, plus the divisor where the signs differ; exact,
    and right at infinities where x - floor(x / y) * y is not."""
    r = truncmod(x, y)
    flips = logical_or(logical_and(r < 0, y > 0), logical_and(r > 0, y < 0))
    return select(flips, r + y, r)


def lower_mod(node: Node, a: list, name: str):
    from ..ops.elementwise import broadcast_index
    from .infer import broadcast_shapes

    fn = truncdiv if node.op == "truncdiv" else truncmod if node.attr("fmod", 0) else floormod
    x, y = a
    if node.op == "mod" and x.dtype.is_float and not node.attr("fmod", 0):
        fn = _float_floormod
    return compute(broadcast_shapes(x.shape, y.shape),
                   lambda *i: fn(x[broadcast_index(x.shape, i)], y[broadcast_index(y.shape, i)]), name=name)


LOWER = {
    "mod": lower_mod,
    "truncdiv": lower_mod,
    "cast": lower_cast,
    "reduce_max": _lower_reduce(te_max),
    "reduce_min": _lower_reduce(te_min),
    "dynamic_scale": lower_dynamic_scale,
    "matmul_integer": lower_matmul_integer,
}

__all__ = ["TYPES", "REFERENCE", "LOWER", "CAST_DTYPES", "reduce_over"]

"""The graph's integer and dynamic-quantization ops, what ONNX Runtime's `quantize_dynamic` writes
(DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul), with their types, NumPy reference and
lowering to te, one table each for `infer`, `reference` and `lower_te` (specs in `opset`):

- `cast(x)`, attr `dtype`: NumPy's astype between integer, bool and float dtypes (integers wrap as
  NumPy's do); float -> integer is refused (C leaves out-of-range values undefined);
- `reduce_max(x)` / `reduce_min(x)`, attrs `axes`, `keepdims`: as `mean` does, with max / min;
- `dynamic_scale(low, high)`: ONNX DynamicQuantizeLinear's y_scale from x's range widened to hold 0
  (low = min(min(x), 0), high = max(max(x), 0)): (high - low) / 255 in float32, 1 where that is 0 (an
  all-zero x), as ONNX Runtime gives;
- `mod(a, b)`, attr `fmod`: integer remainder, NumPy broadcasting; fmod 1 takes the dividend's sign
  (C's `%`), fmod 0 the divisor's (Python's); a zero divisor gives `a` (fmod 1) as the kernels define it;
- `matmul_integer(x, weight, bias?)`: acc[..., n] = sum_k x[..., k] * W[n, k] + bias[n] in int32, x uint8,
  the int8 weight stored [N/8, K/4, 8, 4] as `qdense`'s (what dot-product instructions read)."""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..te import compute, floormod, reduce_axis, select, truncmod
from ..te import max as te_max
from ..te import min as te_min
from .ir import Node, TensorType
from .quantized_ops import DENSE_BLOCK, dense_accumulator

CAST_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")


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
    if _is_float(ins[0].dtype) and not _is_float(to):
        raise _fail(node, ins, f"a float -> {to} cast (out-of-range values are undefined in C); valid: integer, "
                               "bool and float sources to any dtype, floats to floats")
    return [TensorType(ins[0].shape, to)]


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
    if ins[0].dtype != ins[1].dtype or not np.issubdtype(np.dtype(ins[0].dtype), np.integer) or shape is None:
        raise _fail(node, ins, "takes two integer inputs of one dtype whose shapes broadcast")
    return [TensorType(shape, ins[0].dtype)]


# reduce_max / reduce_min take mean's type rule (graph/infer.py)
TYPES = {"cast": _cast_type, "dynamic_scale": _dynamic_scale_type, "matmul_integer": _matmul_integer_type,
         "mod": _mod_type}


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
    return np.where(b == 0, a, r).astype(a.dtype)


REFERENCE = {
    "mod": reference_mod,
    "cast": lambda n, x: x.astype(_numpy_dtype(n.attr("dtype"))),
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


def lower_mod(node: Node, a: list, name: str):
    from ..ops.elementwise import broadcast_index
    from .infer import broadcast_shapes

    rem = truncmod if node.attr("fmod", 0) else floormod
    x, y = a
    return compute(broadcast_shapes(x.shape, y.shape),
                   lambda *i: rem(x[broadcast_index(x.shape, i)], y[broadcast_index(y.shape, i)]), name=name)


LOWER = {
    "mod": lower_mod,
    "cast": lambda n, a, name: compute(a[0].shape, lambda *i: a[0][i].astype(n.attr("dtype")), name=name),
    "reduce_max": _lower_reduce(te_max),
    "reduce_min": _lower_reduce(te_min),
    "dynamic_scale": lower_dynamic_scale,
    "matmul_integer": lower_matmul_integer,
}

__all__ = ["TYPES", "REFERENCE", "LOWER", "CAST_DTYPES", "reduce_over"]

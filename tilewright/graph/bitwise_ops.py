"""Bitwise ops on integer tensors, with their types, NumPy reference and lowering to te, one table each
for `infer`, `reference` and `lower_te` (specs in `opset`). The binary ones broadcast as NumPy does and
take two inputs of one integer dtype (signed or unsigned, not bool: `logical_*` are bool's):

- `bitwise_and`, `bitwise_or`, `bitwise_xor` (a, b); `bitwise_not` (x): two's-complement bits;
- `left_shift`, `right_shift` (a, b): a shifted by b bits, arithmetic (sign-filling) right shifts of
  signed a; a count b outside [0, bits) shifts every bit out, leaving 0, or -1 for a right shift of a
  negative a (NumPy's and ONNX BitShift's rule; C leaves it undefined, the kernels guard it)."""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ops.elementwise import broadcast_index
from ..reference.expr_eval import shift
from ..te import compute
from .ir import Node, TensorType

INTEGER_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
BINARY = {"bitwise_and": (np.bitwise_and, lambda x, y: x & y),
          "bitwise_or": (np.bitwise_or, lambda x, y: x | y),
          "bitwise_xor": (np.bitwise_xor, lambda x, y: x ^ y),
          "left_shift": (lambda a, b: shift(a, b, True), lambda x, y: x << y),
          "right_shift": (lambda a, b: shift(a, b, False), lambda x, y: x >> y)}


def _fail(node: Node, ins, why: str) -> ShapeError:
    return ShapeError(f"node '{node.name}' ({node.op}) with inputs ({', '.join(str(t) for t in ins)}): {why}")


def _check_dtypes(node: Node, ins) -> str:
    dtypes = {t.dtype for t in ins}
    if len(dtypes) != 1 or next(iter(dtypes)) not in INTEGER_DTYPES:
        raise _fail(node, ins, f"takes integer inputs of one dtype; valid: {', '.join(INTEGER_DTYPES)} "
                               "(bool: the logical_* ops; cast one input if the dtypes differ)")
    return ins[0].dtype


def _binary_type(node: Node, ins):
    from .infer import broadcast_shapes

    dtype = _check_dtypes(node, ins)
    shape = broadcast_shapes(ins[0].shape, ins[1].shape)
    if shape is None:
        raise _fail(node, ins, "shapes do not broadcast (NumPy rules: trailing dims equal or 1)")
    return [TensorType(shape, dtype)]


def _not_type(node: Node, ins):
    _check_dtypes(node, ins)
    return [ins[0]]


TYPES = {**{op: _binary_type for op in BINARY}, "bitwise_not": _not_type}

def _reference_binary(fn):
    return lambda node, a, b: np.asarray(fn(a, b)).astype(a.dtype, copy=False)


REFERENCE = {
    **{op: _reference_binary(fn) for op, (fn, _) in BINARY.items()},
    "bitwise_not": lambda node, x: np.invert(x),
}


def _lower_binary(te_fn):
    def lower(node: Node, a: list, name: str):
        from .infer import broadcast_shapes

        x, y = a
        return compute(broadcast_shapes(tuple(x.shape), tuple(y.shape)),
                       lambda *i: te_fn(x[broadcast_index(x.shape, i)], y[broadcast_index(y.shape, i)]), name=name)
    return lower


LOWER = {
    **{op: _lower_binary(te_fn) for op, (_, te_fn) in BINARY.items()},
    "bitwise_not": lambda node, a, name: compute(a[0].shape, lambda *i: ~a[0][i], name=name),
}

__all__ = ["TYPES", "REFERENCE", "LOWER", "BINARY", "INTEGER_DTYPES"]

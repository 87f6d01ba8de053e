"""Import-time folding for the ONNX frontend: the shape arithmetic exporters
write (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, Constant, Cast,
Slice, ...) is evaluated in NumPy when its inputs are known, so the graph
only holds real tensor work. `fold(op, attrs, inputs, shapes)` returns the
outputs' arrays, or None when the op is not foldable here."""

from __future__ import annotations

import numpy as np

_ONNX_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 5: np.int16, 6: np.int32, 7: np.int64, 9: np.bool_,
                10: np.float16, 11: np.float64}


def _axes(attrs, inputs, i):
    if len(inputs) > i and inputs[i] is not None:
        return [int(a) for a in np.asarray(inputs[i]).ravel()]
    return [int(a) for a in attrs.get("axes", [])]


def _unsqueeze(attrs, xs):
    x, axes = xs[0], _axes(attrs, xs, 1)
    rank = x.ndim + len(axes)
    for a in sorted(a % rank for a in axes):
        x = np.expand_dims(x, a)
    return x


def _squeeze(attrs, xs):
    x, axes = xs[0], _axes(attrs, xs, 1)
    return np.squeeze(x, tuple(a % x.ndim for a in axes)) if axes else np.squeeze(x)


def _slice(attrs, xs):
    x, starts, ends = xs[0], np.asarray(xs[1]).ravel(), np.asarray(xs[2]).ravel()
    axes = np.asarray(xs[3]).ravel() if len(xs) > 3 and xs[3] is not None else np.arange(len(starts))
    steps = np.asarray(xs[4]).ravel() if len(xs) > 4 and xs[4] is not None else np.ones(len(starts), np.int64)
    index = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        index[int(a) % x.ndim] = slice(int(s), int(e), int(st))  # Python slicing clamps as ONNX does
    return x[tuple(index)]


def reshape_shape(shape, target, allowzero=False) -> tuple[int, ...]:
    """ONNX Reshape's target: 0 copies the input's extent (unless allowzero), one -1 is inferred."""
    out = [int(shape[i]) if (int(t) == 0 and not allowzero) else int(t) for i, t in enumerate(target)]
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1], dtype=np.int64))
        out[out.index(-1)] = int(np.prod(shape, dtype=np.int64)) // max(known, 1)
    return tuple(out)


def _truncating_divide(a, b):
    """Integer division rounding toward zero, as ONNX's Div and C's `/` do (NumPy's // floors)."""
    a, b = np.asarray(a), np.asarray(b)
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q).astype(np.result_type(a, b))


def _shape(attrs, shapes):
    s = np.array(shapes[0], dtype=np.int64)
    start, end = attrs.get("start", 0), attrs.get("end", None)
    return s[start:end]


_FOLD = {
    "Identity": lambda a, xs: xs[0],
    "Cast": lambda a, xs: xs[0].astype(_ONNX_DTYPES[a["to"]]),
    "Gather": lambda a, xs: np.take(xs[0], xs[1], axis=a.get("axis", 0)),
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Concat": lambda a, xs: np.concatenate([np.atleast_1d(x) for x in xs], axis=a.get("axis", 0)),
    "Slice": _slice,
    "Reshape": lambda a, xs: xs[0].reshape(reshape_shape(xs[0].shape, xs[1], a.get("allowzero", 0))),
    "Transpose": lambda a, xs: np.transpose(xs[0], a.get("perm")),
    "ConstantOfShape": lambda a, xs: np.full(tuple(int(d) for d in xs[0]),
                                             a["value"].ravel()[0] if "value" in a else np.float32(0)),
    "Range": lambda a, xs: np.arange(xs[0], xs[1], xs[2]).astype(np.asarray(xs[0]).dtype),
    "Equal": lambda a, xs: np.equal(xs[0], xs[1]),
    "Where": lambda a, xs: np.where(xs[0], xs[1], xs[2]),
    "Add": lambda a, xs: np.add(xs[0], xs[1]), "Sub": lambda a, xs: np.subtract(xs[0], xs[1]),
    "Mul": lambda a, xs: np.multiply(xs[0], xs[1]),
    "Div": lambda a, xs: _truncating_divide(*xs) if np.asarray(xs[0]).dtype.kind in "iu" else np.divide(*xs),
    "Sqrt": lambda a, xs: np.sqrt(xs[0]), "Neg": lambda a, xs: np.negative(xs[0]),
    "Flatten": lambda a, xs: xs[0].reshape(int(np.prod(xs[0].shape[:a.get("axis", 1)], dtype=np.int64)), -1),
}


def fold(op: str, attrs: dict, inputs: list, shapes: list):
    """Output arrays of `op` on known `inputs` (None entries: absent optional inputs), or None if not foldable.
    Shape needs only its input's static shape (`shapes[0]`)."""
    if op == "Shape":
        return [_shape(attrs, shapes)] if shapes and shapes[0] is not None else None
    if op == "Size":
        return [np.array(int(np.prod(shapes[0], dtype=np.int64)), np.int64)] if shapes and shapes[0] is not None \
            else None
    if op not in _FOLD or not inputs or inputs[0] is None:
        return None
    if op == "Cast" and attrs.get("to") not in _ONNX_DTYPES:
        return None  # a dtype NumPy has no exact type for: the Cast handler names it
    return [np.asarray(_FOLD[op](attrs, inputs))]

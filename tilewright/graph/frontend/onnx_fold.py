"""Import-time folding for the ONNX frontend: the shape arithmetic exporters
write (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, Constant, Cast,
Slice, ...) is evaluated in NumPy when its inputs are known, so the graph
only holds real tensor work. `fold(op, attrs, inputs, shapes)` returns the
outputs' arrays, or None when the op is not foldable here."""

from __future__ import annotations

import numpy as np

_ONNX_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
                9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}


_NUMPY_NAMES = {np.dtype(t).name for t in _ONNX_DTYPES.values()}


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


def _mod(attrs, xs):
    """ONNX Mod: fmod 1 takes the dividend's sign (C's %), fmod 0 the divisor's (Python's)."""
    if attrs.get("fmod", 0):
        return np.fmod(xs[0], xs[1])
    return np.mod(xs[0], xs[1])


def _variadic(f):
    def run(attrs, xs):
        out = xs[0]
        for x in xs[1:]:
            out = f(out, x)
        return out
    return run


def _reduce(f):
    """Reduce* of opset 18+ (axes an input) and older (axes an attribute); empty axes reduce all unless
    noop_with_empty_axes."""
    def run(attrs, xs):
        axes = _axes(attrs, xs, 1)
        if not axes and attrs.get("noop_with_empty_axes", 0):
            return xs[0]
        axes = tuple(a % max(xs[0].ndim, 1) for a in axes) if axes else None
        return f(xs[0], axis=axes, keepdims=bool(attrs.get("keepdims", 1)))
    return run


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
    "Abs": lambda a, xs: np.abs(xs[0]),
    "Flatten": lambda a, xs: xs[0].reshape(int(np.prod(xs[0].shape[:a.get("axis", 1)], dtype=np.int64)), -1),
    "Not": lambda a, xs: np.logical_not(xs[0]), "And": lambda a, xs: np.logical_and(xs[0], xs[1]),
    "Or": lambda a, xs: np.logical_or(xs[0], xs[1]), "Xor": lambda a, xs: np.logical_xor(xs[0], xs[1]),
    "Less": lambda a, xs: np.less(xs[0], xs[1]), "LessOrEqual": lambda a, xs: np.less_equal(xs[0], xs[1]),
    "Greater": lambda a, xs: np.greater(xs[0], xs[1]),
    "GreaterOrEqual": lambda a, xs: np.greater_equal(xs[0], xs[1]),
    "Mod": _mod, "Max": _variadic(np.maximum), "Min": _variadic(np.minimum),
    "Expand": lambda a, xs: xs[0] * np.ones(tuple(int(d) for d in xs[1]), xs[0].dtype),
    "Tile": lambda a, xs: np.tile(xs[0], tuple(int(r) for r in np.asarray(xs[1]).ravel())),
    **{op: _reduce(f) for op, f in (("ReduceSum", np.sum), ("ReduceProd", np.prod), ("ReduceMax", np.max),
                                     ("ReduceMin", np.min))},
}


def fold(op: str, attrs: dict, inputs: list, shapes: list, like: str | None = None):
    """Output arrays of `op` on known `inputs` (None entries: absent optional inputs), or None if not foldable.
    Shape needs only its input's static shape (`shapes[0]`); CastLike only its target's dtype name (`like`),
    so a constant cast like a run-time tensor (a mask's -inf pad value) stays a constant."""
    if op == "CastLike":
        if like is None and len(inputs) > 1 and inputs[1] is not None:
            like = np.asarray(inputs[1]).dtype.name
        ok = inputs and inputs[0] is not None and like in _NUMPY_NAMES
        return [np.asarray(inputs[0]).astype(like)] if ok else None
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


REFERENCE_FOLD_LIMIT = 1 << 16  # input elements up to which any op on constants is folded by onnx's reference
# ops the reference must not fold: quantization (its handlers keep constant integer weights integer) and
# random draws (a constant would repeat one draw)
_NOT_BY_REFERENCE = frozenset({"DequantizeLinear", "QuantizeLinear", "DynamicQuantizeLinear", "QLinearConv",
                               "QLinearMatMul", "MatMulInteger", "ConvInteger", "Bernoulli", "Multinomial",
                               "RandomNormalLike", "RandomUniformLike"})


def fold_node(imp, node, ins, a) -> bool:
    """Whether `node`'s outputs are known at import (then recorded in imp.known): its inputs are all known and
    the table above folds it, or onnx's reference implementation does on small inputs; or ONNX infers only
    empty outputs for it (no values to compute)."""
    present = [i for i in ins if i]
    cast_like = node.op_type == "CastLike" and ins[0] in imp.known and imp.type_of(ins[1]) is not None
    values = _known_values(imp, present)
    if values is not None or node.op_type in ("Shape", "Size") or cast_like:
        values = values or {i: imp.known[i] for i in present if i in imp.known}
        shapes = [imp.type_of(i).shape if imp.type_of(i) else None for i in ins[:1]]
        like = imp.type_of(ins[1]).dtype if cast_like else None
        args = [values.get(i) if i else None for i in ins]
        try:
            got = fold(node.op_type, a, args, shapes, like=like)
        except (ValueError, TypeError, IndexError):  # a form the table's NumPy cannot take (a max of nothing)
            got = None
        small = sum(np.asarray(v).size for v in values.values()) <= REFERENCE_FOLD_LIMIT
        if got is None and len(values) == len(present) and small and node.op_type not in _NOT_BY_REFERENCE:
            got = _reference_fold(node, ins, args, imp.model.opset_import)
        if got is not None:
            imp.known.update(zip(node.output, got))
            return True
    types = [imp.onnx_types.get(o) for o in node.output if o]
    if types and all(t is not None and 0 in t.shape for t in types):
        imp.known.update((o, np.zeros(t.shape, t.dtype)) for o, t in zip([o for o in node.output if o], types))
        return True
    return False


def _known_values(imp, present) -> dict | None:
    """The values of all of a node's inputs where they are known: constants, or, on a node whose data input is an
    empty tensor (its output then depends on shapes alone), graph inputs given example values (then fixed)."""
    from ...errors import TilewrightError

    if not present:
        return None
    if all(i in imp.known for i in present):
        return {i: imp.known[i] for i in present}
    first = present[0]  # the data input: an empty one leaves only shapes to compute (an empty target type does not)
    if first not in imp.known or np.asarray(imp.known[first]).size != 0:
        return None
    try:
        return {i: imp.known[i] if i in imp.known else imp.const(i, "an input of a node on an empty tensor")
                for i in present}
    except TilewrightError:
        return None


def _reference_fold(node, ins, args, opsets):
    """The node evaluated by onnx's reference on its constant inputs, or None where it cannot be."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    try:
        names = [f"i{k}" if i else "" for k, i in enumerate(ins)]
        feeds = {n: np.asarray(v) for n, i, v in zip(names, ins, args) if i}
        one = helper.make_node(node.op_type, names, [f"o{k}" for k in range(len(node.output))], domain=node.domain,
                               **{x.name: helper.get_attribute_value(x) for x in node.attribute})
        graph = helper.make_graph([one], "fold", [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(
            v.dtype), v.shape) for n, v in feeds.items()], [helper.make_tensor_value_info(o, 0, None)
                                                            for o in one.output])
        model = helper.make_model(graph, opset_imports=list(opsets))
        return [np.asarray(v) for v in ReferenceEvaluator(model).run(None, feeds)]
    except Exception:  # noqa: BLE001 - an op or form the reference cannot run here: left to the handlers
        return None


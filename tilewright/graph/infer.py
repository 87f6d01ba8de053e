"""Shape and dtype inference: `infer_types(graph)` gives every value a `TensorType`.

Graph inputs and constants must be typed already (constants from their arrays);
every other value's type follows from its node's inputs and attributes. A bad
node raises ShapeError naming the node, the op, its input types and what would
be valid, so a frontend bug is found where it happens, not in a kernel."""

from __future__ import annotations

import math

import numpy as np

from ..errors import ShapeError
from ..ops import winograd
from .bitwise_ops import TYPES as BITWISE_TYPES
from .blocked import block_of, blocked_shape, unblocked_shape
from .conv_types import conv2d_type, conv_transpose2d_type, dense_type, layout_block, pair, quad
from .gather_ops import TYPES as GATHER_TYPES
from .integer_ops import TYPES as INTEGER_TYPES
from .ir import Graph, Node, TensorType
from .logic_ops import TYPES as LOGIC_TYPES
from .opset import FLOAT_ONLY_UNARY, spec
from .quantized_ops import TYPES as QUANTIZED_TYPES

# Attributes any op may carry besides its spec's (the layout pass writes `layout`).
_COMMON_ATTRS = ("layout",)


def _fail(node: Node, ins: list[TensorType], why: str) -> ShapeError:
    types = ", ".join(str(t) for t in ins)
    return ShapeError(f"node '{node.name}' ({node.op}) with inputs ({types}): {why}")


def broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """NumPy broadcasting of two shapes, None when they do not broadcast."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            return None
        out.append(y if x == 1 else x)
    return tuple(reversed(out))


def norm_axis(axis: int, ndim: int, node: Node, ins) -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise _fail(node, ins, f"axis {axis} is out of range; valid: {-ndim}..{ndim - 1}")
    return axis % max(ndim, 1)


def pool_out(size: int, k: int, s: int, p0: int, p1: int, d: int, ceil: bool) -> int:
    """Output extent of a pooling window (PyTorch's rule: with ceil_mode the last
    window must start inside the input or its left padding)."""
    span = size + p0 + p1 - d * (k - 1) - 1
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= size + p0:
        out -= 1
    return out


def _embedding(node, ins):
    w, ids = ins
    if len(w.shape) != 2:
        raise _fail(node, ins, "weight must be 2-D [V, D]")
    if not ids.dtype.startswith(("int", "uint")):
        raise _fail(node, ins, f"ids must be integers, got {ids.dtype}")
    return [TensorType((*ids.shape, w.shape[1]), w.dtype)]


def _matmul(node, ins):
    a, b = ins[0].shape, ins[1].shape
    if not a or not b:
        raise _fail(node, ins, "matmul needs inputs of at least one dimension")
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise _fail(node, ins, f"contracted dimensions differ ({a2[-1]} vs {b2[-2]}); "
                               "valid: a[..., M, K] @ b[..., K, N]")
    batch = broadcast_shapes(a2[:-2], b2[:-2])
    if batch is None:
        raise _fail(node, ins, f"batch dimensions {a2[:-2]} and {b2[:-2]} do not broadcast")
    shape = batch + ((a2[-2],) if len(a) > 1 else ()) + ((b2[-1],) if len(b) > 1 else ())
    return [TensorType(shape, np.result_type(ins[0].dtype, ins[1].dtype).name)]


def _batch_norm(node, ins):
    x = ins[0]
    if len(x.shape) < 2:
        raise _fail(node, ins, "x must have a channel axis 1")
    c = x.shape[1]
    for role, t in zip(("weight", "bias", "mean", "var"), ins[1:]):
        if t.shape != (c,):
            raise _fail(node, ins, f"{role} must have shape ({c},)")
    return [x]


def _layer_norm(node, ins):
    x = ins[0]
    k = int(node.attr("axes", 1))
    if not 1 <= k <= len(x.shape):
        raise _fail(node, ins, f"axes={k} (trailing dims normalized) must be in 1..{len(x.shape)}")
    tail = x.shape[-k:]
    for t in ins[1:]:
        if t.shape != tail:
            raise _fail(node, ins, f"weight and bias must have shape {tail}")
    return [x]


def _softmax(node, ins):
    norm_axis(int(node.attr("axis", -1)), len(ins[0].shape), node, ins)
    return [ins[0]]


def _pool(node, ins):
    block = layout_block(node, ins)
    if block:
        x = ins[0]
        if len(x.shape) != 5 or x.shape[4] != block:
            raise _fail(node, ins, f"layout {node.attr('layout')!r} needs x 5-D with a last axis of {block}")
        out = _pool(node.replace(attrs={k: v for k, v in node.attrs.items() if k != "layout"}),
                    [TensorType(unblocked_shape(x.shape), x.dtype)])[0]
        return [TensorType(blocked_shape(out.shape, block), x.dtype)]
    x = ins[0]
    if len(x.shape) != 4:
        raise _fail(node, ins, "x must be 4-D NCHW")
    if node.attr("kernel") is None:
        raise _fail(node, ins, "attribute 'kernel' is required")
    kh, kw = pair(node.attr("kernel"))
    sh, sw = pair(node.attr("stride") if node.attr("stride") is not None else (kh, kw))
    dh, dw = pair(node.attr("dilation", (1, 1)))
    pt, pl, pb, pr = quad(node.attr("padding", (0, 0, 0, 0)))
    if min(sh, sw, dh, dw, kh, kw) < 1 or min(pt, pl, pb, pr) < 0:
        raise _fail(node, ins, "kernel, stride and dilation must be >= 1, padding >= 0")
    ceil = bool(node.attr("ceil_mode", False))
    n, c, h, w = x.shape
    oh, ow = pool_out(h, kh, sh, pt, pb, dh, ceil), pool_out(w, kw, sw, pl, pr, dw, ceil)
    if oh < 1 or ow < 1:
        raise _fail(node, ins, f"the {kh}x{kw} window does not fit the padded {h}x{w} input")
    return [TensorType((n, c, oh, ow), x.dtype)]


def reduce_axes(node: Node, ndim: int, ins=()) -> tuple[int, ...]:
    axes = node.attr("axes")
    if axes is None:
        return tuple(range(ndim))
    axes = (axes,) if isinstance(axes, (int, np.integer)) else tuple(axes)
    out = tuple(sorted({norm_axis(int(a), ndim, node, ins) for a in axes}))
    if len(out) != len(axes):
        raise _fail(node, ins, f"axes {axes} repeat an axis")
    return out


def _mean(node, ins):
    shape = ins[0].shape
    axes = reduce_axes(node, len(shape), ins)
    if node.attr("keepdims", True):
        out = tuple(1 if i in axes else d for i, d in enumerate(shape))
    else:
        out = tuple(d for i, d in enumerate(shape) if i not in axes)
    return [TensorType(out, ins[0].dtype)]


def reshape_target(node: Node, x: TensorType, ins=()) -> tuple[int, ...]:
    """The `shape` attribute with its one -1 resolved."""
    shape = node.attr("shape")
    if shape is None:
        raise _fail(node, list(ins) or [x], "attribute 'shape' is required")
    shape = tuple(int(d) for d in shape)
    holes = [i for i, d in enumerate(shape) if d == -1]
    if len(holes) > 1 or any(d < -1 for d in shape):
        raise _fail(node, list(ins) or [x], f"shape {shape} may hold at most one -1 and no other negative extent")
    known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
    if holes:
        if known == 0 or x.size % known:
            raise _fail(node, list(ins) or [x], f"cannot infer the -1 of {shape} from {x.size} elements")
        shape = shape[:holes[0]] + (x.size // known,) + shape[holes[0] + 1:]
    elif known != x.size:
        raise _fail(node, list(ins) or [x], f"shape {shape} holds {known} elements, the input {x.size}")
    return shape


def _reshape(node, ins):
    return [TensorType(reshape_target(node, ins[0], ins), ins[0].dtype)]


def _permute(node, ins):
    dims = node.attr("dims")
    nd = len(ins[0].shape)
    if dims is None or sorted(int(d) % max(nd, 1) for d in dims) != list(range(nd)) or len(dims) != nd:
        raise _fail(node, ins, f"dims {dims} must be a permutation of 0..{nd - 1}")
    return [TensorType(tuple(ins[0].shape[int(d)] for d in dims), ins[0].dtype)]


def _pad(node, ins):
    pads = node.attr("pads")
    shape = ins[0].shape
    nd = len(shape)
    if pads is None or len(pads) != 2 * nd:
        raise _fail(node, ins, f"pads must list {2 * nd} values (all befores, then all afters)")
    out = tuple(d + int(pads[i]) + int(pads[i + nd]) for i, d in enumerate(shape))
    if min(out, default=1) < 1:
        raise _fail(node, ins, f"pads {tuple(pads)} leave an empty dimension")
    return [TensorType(out, ins[0].dtype)]


def slice_shape(begin, end, step) -> tuple[int, ...]:
    """The shape of x[begin[d]:end[d]:step[d]] over every dimension d (valid bounds)."""
    return tuple(-(-(int(e) - int(b)) // int(s)) for b, e, s in zip(begin, end, step))


def _slice(node, ins):
    shape = ins[0].shape
    begin, end, step = (tuple(int(v) for v in node.attr(k)) for k in ("begin", "end", "step"))
    if not len(begin) == len(end) == len(step) == len(shape):
        raise _fail(node, ins, f"begin, end and step must each list {len(shape)} values, one per dimension")
    for d, (b, e, s, n) in enumerate(zip(begin, end, step, shape)):
        if not (0 <= b < e <= n and s >= 1):
            raise _fail(node, ins, f"dimension {d}: begin {b}, end {e}, step {s} is not a slice of size {n}; "
                                   f"valid: 0 <= begin < end <= {n}, step >= 1")
    return [TensorType(slice_shape(begin, end, step), ins[0].dtype)]


def _concat(node, ins):
    first = ins[0].shape
    axis = norm_axis(int(node.attr("axis", 0)), len(first), node, ins)
    for t in ins[1:]:
        if len(t.shape) != len(first) or any(a != b for i, (a, b) in enumerate(zip(t.shape, first)) if i != axis):
            raise _fail(node, ins, f"all inputs must match except along axis {axis}")
        if t.dtype != ins[0].dtype:
            raise _fail(node, ins, "all inputs must share one dtype")
    total = sum(t.shape[axis] for t in ins)
    return [TensorType(first[:axis] + (total,) + first[axis + 1:], ins[0].dtype)]


def _layout_transform(node, ins):
    x = ins[0]
    try:
        src, dst = block_of(node.attr("src")), block_of(node.attr("dst"))
    except ShapeError as e:
        raise _fail(node, ins, str(e)) from None
    if len(x.shape) != (5 if src else 4) or (src and x.shape[4] != src):
        raise _fail(node, ins, f"x does not have the src layout {node.attr('src')!r}")
    plain = unblocked_shape(x.shape) if src else x.shape
    if dst and plain[1] % dst:
        raise _fail(node, ins, f"{plain[1]} channels do not split into blocks of {dst}")
    return [TensorType(blocked_shape(plain, dst) if dst else plain, x.dtype)]


def _binary(node, ins):
    shape = broadcast_shapes(ins[0].shape, ins[1].shape)
    if shape is None:
        raise _fail(node, ins, "shapes do not broadcast (NumPy rules: trailing dims equal or 1)")
    return [TensorType(shape, np.result_type(ins[0].dtype, ins[1].dtype).name)]


def _same(node, ins):
    return [ins[0]]


def _winograd_input(node, ins):
    """x [N, C/b, H, W, b] -> V [36, N * tiles, C] (graph/winograd_ops.py)."""
    if len(ins[0].shape) != 5:
        raise _fail(node, ins, "x must be 5-D NCHW{b}c")
    n, cb, h, w, b = ins[0].shape
    padding = quad(node.attr("padding", (1, 1, 1, 1)))
    oh, ow = winograd.conv_out_hw(h, w, padding)
    if oh < 1 or ow < 1 or min(padding) < 0:
        raise _fail(node, ins, f"padding {padding} leaves no output of a 3x3 window")
    th, tw = winograd.tiles(oh, ow)
    return [TensorType((winograd.POSITIONS, n * th * tw, cb * b), ins[0].dtype)]


def _winograd_output(node, ins):
    """M [36, N * tiles, O] (+ bias [O]) -> the NCHW{b}c output of attribute `shape`."""
    shape = tuple(int(d) for d in node.attr("shape"))
    if len(shape) != 5:
        raise _fail(node, ins, f"attribute shape {shape} must be a 5-D NCHW{{b}}c output")
    n, ob, oh, ow, b = shape
    want = (winograd.POSITIONS, n * math.prod(winograd.tiles(oh, ow)), ob * b)
    if ins[0].shape != want or (len(ins) > 1 and ins[1].shape != (ob * b,)):
        raise _fail(node, ins, f"valid: m of shape {want} and a bias of shape ({ob * b},) for output {shape}")
    return [TensorType(shape, ins[0].dtype)]


_RULES = {
    "conv2d": conv2d_type, "conv_transpose2d": conv_transpose2d_type, "embedding": _embedding,
    "dense": dense_type, "matmul": _matmul, "batch_norm": _batch_norm, "layer_norm": _layer_norm,
    "softmax": _softmax, "max_pool2d": _pool, "avg_pool2d": _pool, "mean": _mean, "reshape": _reshape,
    "permute": _permute, "pad": _pad, "concat": _concat, "slice": _slice, "layout_transform": _layout_transform,
    "winograd_input": _winograd_input, "winograd_output": _winograd_output, **QUANTIZED_TYPES,
    **INTEGER_TYPES, **LOGIC_TYPES, **GATHER_TYPES, **BITWISE_TYPES,
    "cumsum": _same, "cumprod": _same, "reduce_max": _mean, "reduce_min": _mean, "reduce_sum": _mean,
    "reduce_prod": _mean,
}


# Ops that read and write packed NCHW{b}c data when their `layout` attribute says so.
_LAYOUT_OPS = ("conv2d", "qconv2d", "max_pool2d", "avg_pool2d")


def infer_node(node: Node, ins: list[TensorType]) -> list[TensorType]:
    """The output types of `node` given its input types; ShapeError if they do not fit."""
    s = spec(node.op, node.name)
    if node.op == "constant":
        raise ShapeError(f"node '{node.name}' (constant): a constant's type comes from its array")
    variadic = any(r.endswith("*") for r in s.inputs)
    if len(ins) < max(s.min_inputs, 1 if variadic else 0) or (not variadic and len(ins) > len(s.inputs)):
        raise _fail(node, ins, f"takes inputs ({', '.join(s.inputs)}), got {len(ins)}")
    unknown = sorted(set(node.attrs) - set(s.attrs) - set(_COMMON_ATTRS))
    if unknown:
        raise _fail(node, ins, f"unknown attributes {unknown}; valid: {sorted(s.attrs)}")
    missing = [k for k, d in s.attrs.items() if d is None and node.attr(k) is None and k not in ("stride", "min",
                                                                                                   "max", "axes")]
    if missing:
        raise _fail(node, ins, f"missing required attributes {missing}")
    if node.attr("layout", "NCHW") != "NCHW" and node.op not in _LAYOUT_OPS:
        raise _fail(node, ins, f"layout {node.attr('layout')!r} is only for {', '.join(_LAYOUT_OPS)}; valid "
                               "here: 'NCHW'")
    if len(node.outputs) != 1:
        raise _fail(node, ins, f"writes {len(node.outputs)} values; every graph op writes exactly one")
    if node.op in _RULES:
        return _RULES[node.op](node, ins)
    if node.op in FLOAT_ONLY_UNARY and not ins[0].dtype.startswith(("float", "bfloat")):
        raise _fail(node, ins, f"takes floating-point input, got {ins[0].dtype}")
    if s.inputs == ("a", "b"):
        return _binary(node, ins)
    return _same(node, ins)


def infer_types(graph: Graph) -> Graph:
    """A copy of `graph` whose `types` holds every value's type (inputs keep
    theirs, constants' come from their arrays); ShapeError at the first bad node."""
    types: dict = {}
    for v in graph.inputs:
        if v not in graph.types:
            raise ShapeError(f"graph '{graph.name}': input '{v}' has no type; give the input shapes")
        types[v] = graph.types[v]
    for node in graph.nodes:
        if node.op == "constant":
            v = node.outputs[0]
            if v not in graph.constants:
                raise ShapeError(f"graph '{graph.name}': constant node '{node.name}' has no array")
            arr = np.asarray(graph.constants[v])
            types[v] = TensorType(arr.shape, arr.dtype.name)
            continue
        ins = []
        for v in node.inputs:
            if v not in types:
                raise ShapeError(f"graph '{graph.name}': node '{node.name}' ({node.op}) reads '{v}', which no "
                                 "earlier node writes and is not a graph input")
            ins.append(types[v])
        for v, t in zip(node.outputs, infer_node(node, ins)):
            types[v] = t
    return graph.replace(types=types)


__all__ = ["infer_types", "infer_node", "slice_shape",
           "broadcast_shapes", "pool_out", "pair", "quad", "reshape_target", "reduce_axes"]

"""Lowering one fused group to one te program: placeholders for the values it
reads (activations and constants alike: constant arrays are passed at run time),
each node composed from `tilewright.ops`, the group's outputs last. te tensors
are named after graph values (sanitized), so generated C reads like the model."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .. import ops
from ..errors import ShapeError
from ..ops.elementwise import broadcast_index, broadcast_shapes
from ..ops.pad import pad_axes
from ..te import abs as te_abs
from ..te import cast, ceil, compute, cos, erf, exp, floor, if_then_else, log, placeholder, reduce_axis, sin, sqrt
from ..te import max as te_max
from ..te import min as te_min
from ..te import pow as te_pow
from ..te import round as te_round
from ..te import sum as te_sum
from ..te.tensor import Tensor
from . import bitwise_ops, gather_ops, integer_ops, logic_ops, quantized_ops, reduce_ops, winograd_ops
from .infer import slice_shape
from .ir import Graph, Node
from .partition import Group


@dataclass(frozen=True)
class GroupProgram:
    """`args`: placeholders of `input_values` in order, then the tensors of `output_values`."""
    name: str
    args: tuple[Tensor, ...]
    input_values: tuple[str, ...]
    output_values: tuple[str, ...]

    @property
    def inputs(self) -> tuple[Tensor, ...]:
        return self.args[:len(self.input_values)]

    @property
    def outputs(self) -> tuple[Tensor, ...]:
        return self.args[len(self.input_values):]


def sanitize(name: str) -> str:
    """A C identifier made from a graph value's name."""
    out = re.sub(r"[^A-Za-z0-9_]", "_", name) or "v"
    return "v_" + out if out[0].isdigit() else out


class _Names:
    """Unique sanitized names within one program (two values may sanitize alike)."""

    def __init__(self):
        self.used: set[str] = set()

    def __call__(self, value: str) -> str:
        base = sanitize(value)
        name, n = base, 1
        while name in self.used:
            name, n = f"{base}_{n}", n + 1
        self.used.add(name)
        return name


def group_program(graph: Graph, group: Group) -> GroupProgram:
    """The te program of `group`; a ShapeError names a node whose op has no lowering."""
    names = _Names()
    env: dict[str, Tensor] = {}
    for v in group.inputs:
        t = graph.type_of(v)
        env[v] = placeholder(t.shape, t.dtype, name=names(v), value_range=_constant_range(graph, v))
    for node in group.nodes:
        fn = _LOWER.get(node.op)
        if fn is None:
            raise ShapeError(f"node '{node.name}': op '{node.op}' has no lowering to te; lowered ops: "
                             f"{', '.join(sorted(_LOWER))}")
        args = [env[v] for v in node.inputs]
        out = fn(node, args, names(node.outputs[0]))
        want = graph.types.get(node.outputs[0])
        if want is not None and tuple(out.shape) != want.shape:
            raise ShapeError(f"node '{node.name}' ({node.op}): lowered to shape {list(out.shape)}, but the graph "
                             f"types '{node.outputs[0]}' as {want}")
        env[node.outputs[0]] = out
    outs = []
    for v in group.outputs:
        t = env[v]
        if v in group.inputs:  # a value passed straight through still needs its own output buffer
            t = compute(t.shape, lambda *i, t=t: t[i], name=names(v + "_copy"))
        outs.append(t)
    return GroupProgram(sanitize(group.name), tuple(env[v] for v in group.inputs) + tuple(outs),
                        tuple(group.inputs), tuple(group.outputs))


def _constant_range(graph: Graph, value: str) -> tuple[int, int] | None:
    """The values an integer constant holds: what lets an intrinsic exact only on a range (vpmaddubsw
    on weights quantized to 7 bits) embed; constants are fixed when the module is built."""
    arr = graph.constants.get(value)
    if arr is None or arr.size == 0 or arr.dtype.kind not in "iu":
        return None
    return int(arr.min()), int(arr.max())


# --- one function per op: (node, input tensors, output name) -> tensor ---

def _conv2d(node: Node, a: list[Tensor], name: str) -> Tensor:
    x, w = a[0], a[1]
    bias = a[2] if len(a) > 2 else None
    top, left, bottom, right = node.attr("padding", (0, 0, 0, 0))
    stride, dilation, groups = node.attr("stride", (1, 1)), node.attr("dilation", (1, 1)), node.attr("groups", 1)
    tail = [0] * (x.ndim - 4)  # the channel block of packed NCHW{b}c data
    if (top, left) != (bottom, right):  # asymmetric (TF/ONNX 'SAME'): pad explicitly, convolve without padding
        x = pad_axes(x, [0, 0, top, left, *tail], [0, 0, bottom, right, *tail], 0, name=f"{name}_apad")
        top = left = 0
    accumulate = {"out_dtype": "float32"} if x.dtype.name == "bfloat16" else {}  # bfloat16 sums in float32
    if tail and w.ndim == 7:  # bfloat16 pairs: [O/ob, C/ib, KH, KW, ib/2, ob, 2]
        return ops.conv2d_nchwc(x, w, bias, stride=stride, padding=(top, left), dilation=dilation, name=name,
                                weight_layout="dot", **accumulate)
    if tail:
        packed = ops.depthwise_conv2d_nchwc if groups > 1 else ops.conv2d_nchwc
        return packed(x, w, bias, stride=stride, padding=(top, left), dilation=dilation, name=name)
    # depthwise: as fast as conv2d(groups=C) by default schedule (both ~33 us at 64x28x28, 3x3), simpler to read
    if groups > 1 and groups == x.shape[1] and w.shape[1] == 1:
        return ops.depthwise_conv2d(x, w, bias, stride=stride, padding=(top, left), dilation=dilation, name=name)
    return ops.conv2d(x, w, bias, stride=stride, padding=(top, left), dilation=dilation, groups=groups, name=name,
                      **accumulate)


def _dense(node: Node, a: list[Tensor], name: str) -> Tensor:
    x, w = a[0], a[1]
    bias = a[2] if len(a) > 2 else None
    acc_name = name if bias is None else f"{name}_mm"
    acc_dtype = "float32" if x.dtype.name == "bfloat16" else None  # bfloat16 accumulates in float32
    if x.ndim == 2:
        acc = ops.gemm(x, w, transpose_b=True, name=acc_name, out_dtype=acc_dtype)
    else:  # x[..., K] @ w[N, K].T without a reshape stage
        k = reduce_axis(x.shape[-1], "k")

        def product(i):
            xv, wv = x[i[:-1] + (k,)], w[i[-1], k]
            return xv.astype(acc_dtype) * wv.astype(acc_dtype) if acc_dtype else xv * wv

        acc = compute((*x.shape[:-1], w.shape[0]), lambda *i: te_sum(product(i), axis=k), name=acc_name)
    if bias is None:
        return acc
    return compute(acc.shape, lambda *i: acc[i] + bias[i[-1]], name=name)


def _pool(node: Node, a: list[Tensor], name: str) -> Tensor:
    x = a[0]
    top, left, bottom, right = node.attr("padding", (0, 0, 0, 0))
    kernel, stride, ceil_mode = node.attr("kernel"), node.attr("stride"), node.attr("ceil_mode", False)
    is_max = node.op == "max_pool2d"
    tail = [0] * (x.ndim - 4)  # the channel block of packed NCHW{b}c data
    if not is_max and not node.attr("count_include_pad", True) and (top, left) != (bottom, right):
        if tail:
            raise ShapeError(f"node '{node.name}': uneven average pooling without the padding in the count "
                             f"is not lowered on packed data; keep this node NCHW")
        return _avg_pool_uneven(x, (top, left, bottom, right), kernel, stride, ceil_mode, name)
    if (top, left) != (bottom, right):
        low = x.dtype.int_range[0] if x.dtype.is_int else -math.inf
        x = pad_axes(x, [0, 0, top, left, *tail], [0, 0, bottom, right, *tail], low if is_max else 0.0,
                     name=f"{name}_apad")
        top = left = 0
    if is_max:
        return ops.max_pool2d(x, kernel, stride, (top, left), node.attr("dilation", (1, 1)), ceil_mode, name=name)
    return ops.avg_pool2d(x, kernel, stride, (top, left), ceil_mode, node.attr("count_include_pad", True),
                          name=name)


def _avg_pool_uneven(x: Tensor, padding, kernel, stride, ceil_mode: bool, name: str) -> Tensor:
    """Average over the real elements of each window when the padding differs per side (ONNX SAME_*
    pooling): the window sums over the explicitly padded input, divided by each window's count of
    elements inside the original input (the padded pool alone cannot know which zeros were padding)."""
    top, left, bottom, right = padding
    size = x.shape[-2:]
    xp = pad_axes(x, [0] * (x.ndim - 2) + [top, left], [0] * (x.ndim - 2) + [bottom, right], 0.0,
                  name=f"{name}_apad")
    total = ops.avg_pool2d(xp, kernel, stride, 0, ceil_mode, True, divisor_override=1, name=f"{name}_total")

    def count(o, axis: int, before: int):
        start = o * stride[axis] - before
        return te_min(start + kernel[axis], size[axis]) - te_max(start, 0)

    def body(*i):
        n = count(i[-2], 0, top) * count(i[-1], 1, left)
        return total[i] / cast(n, x.dtype)

    return compute(total.shape, body, name=name)


def _mean(node: Node, a: list[Tensor], name: str) -> Tensor:
    x = a[0]
    axes = node.attr("axes")
    axes = tuple(range(x.ndim)) if axes is None else tuple(d % x.ndim for d in
                                                              (axes if isinstance(axes, tuple) else (axes,)))
    total = integer_ops.reduce_over(x, axes, node.attr("keepdims", True), te_sum, f"{name}_sum")
    count = float(math.prod(x.shape[d] for d in axes))
    return compute(total.shape, lambda *i: total[i] / count, name=name)


def _clip(node: Node, a: list[Tensor], name: str) -> Tensor:
    lo, hi = node.attr("min"), node.attr("max")

    def body(*i):
        v = a[0][i]
        if lo is not None:
            v = te_max(v, float(lo))
        if hi is not None:
            v = te_min(v, float(hi))
        return v

    return compute(a[0].shape, body, name=name)


def _unary(fn):
    return lambda node, a, name: compute(a[0].shape, lambda *i: fn(a[0][i]), name=name)


def _embedding(node: Node, a: list[Tensor], name: str) -> Tensor:
    """Rows of the weight at the ids; the Module has checked every id it is given, the clamp only
    proves the read in bounds for ids a kernel computes."""
    w, ids = a
    rows = w.shape[0]

    def body(*i):
        k = ids[i[:-1]].astype("int32")
        if node.attr("negative_wraps", False):
            k = if_then_else(k < 0, k + rows, k)
        return w[te_max(te_min(k, rows - 1), 0), i[-1]]
    return compute((*ids.shape, w.shape[1]), body, name=name)


def _concat(node: Node, a: list[Tensor], name: str) -> Tensor:
    axis = node.attr("axis", 0) % a[0].ndim
    starts = [0]
    for t in a:
        starts.append(starts[-1] + t.shape[axis])
    shape = a[0].shape[:axis] + (starts[-1],) + a[0].shape[axis + 1:]

    def body(*i):
        def read(n):
            return a[n][i[:axis] + (i[axis] - starts[n],) + i[axis + 1:]]
        v = read(len(a) - 1)
        for n in range(len(a) - 2, -1, -1):
            v = if_then_else(i[axis] < starts[n + 1], read(n), v)
        return v

    return compute(shape, body, name=name)


def _pad(node: Node, a: list[Tensor], name: str) -> Tensor:
    pads, n = node.attr("pads"), a[0].ndim
    value = float(node.attr("value", 0.0))
    return pad_axes(a[0], list(pads[:n]), list(pads[n:]), int(value) if a[0].dtype.is_int else value, name=name)


def _slice(node: Node, a: list[Tensor], name: str) -> Tensor:
    begin, end, step = node.attr("begin"), node.attr("end"), node.attr("step")
    return compute(slice_shape(begin, end, step),
                   lambda *i: a[0][tuple(int(b) + int(s) * v for b, s, v in zip(begin, step, i))], name=name)


def _layer_norm(node: Node, a: list[Tensor], name: str) -> Tensor:
    x, k = a[0], node.attr("axes", 1)
    weight = a[1] if len(a) > 1 else None
    bias = a[2] if len(a) > 2 else None
    return ops.layer_norm(x, x.shape[x.ndim - k:], weight, bias, eps=node.attr("eps", 1e-5), name=name)


_LOWER = {
    "conv2d": _conv2d,
    "embedding": _embedding,
    "conv_transpose2d": lambda n, a, name: ops.conv_transpose2d(
        a[0], a[1], a[2] if len(a) > 2 else None, stride=n.attr("stride", (1, 1)), padding=n.attr("padding", (0, 0)),
        output_padding=n.attr("output_padding", (0, 0)), groups=n.attr("groups", 1),
        dilation=n.attr("dilation", (1, 1)), name=name),
    "dense": _dense,
    "matmul": lambda n, a, name: ops.matmul(a[0], a[1], name=name),
    "batch_norm": lambda n, a, name: ops.batch_norm(a[0], a[3], a[4], a[1], a[2], eps=n.attr("eps", 1e-5),
                                                    name=name),
    "layer_norm": _layer_norm,
    "softmax": lambda n, a, name: ops.softmax(a[0], n.attr("axis", -1),
                                              masked_rows_zero=n.attr("masked_rows_zero", False), name=name),
    "max_pool2d": _pool,
    "avg_pool2d": _pool,
    "mean": _mean,
    "relu": lambda n, a, name: ops.relu(a[0], name=name),
    "leaky_relu": lambda n, a, name: ops.leaky_relu(a[0], n.attr("alpha", 0.01), name=name),
    "gelu": lambda n, a, name: ops.gelu(a[0], n.attr("approximate", "none"), name=name),
    "sigmoid": lambda n, a, name: ops.sigmoid(a[0], name=name),
    "tanh": lambda n, a, name: ops.tanh(a[0], name=name),
    "silu": lambda n, a, name: ops.silu(a[0], name=name),
    "hardswish": lambda n, a, name: ops.hardswish(a[0], name=name),
    "clip": _clip,
    "exp": _unary(exp),
    "sqrt": _unary(sqrt),
    "erf": _unary(erf),
    "neg": _unary(lambda v: -v),
    "abs": _unary(te_abs),
    "log": _unary(log),
    "floor": _unary(floor),
    "ceil": _unary(ceil),
    "round": _unary(te_round),
    "sin": _unary(sin),
    "cos": _unary(cos),
    "reciprocal": _unary(lambda v: 1.0 / v),
    "add": lambda n, a, name: ops.add(a[0], a[1], name=name),
    "sub": lambda n, a, name: ops.sub(a[0], a[1], name=name),
    "mul": lambda n, a, name: ops.mul(a[0], a[1], name=name),
    "div": lambda n, a, name: ops.div(a[0], a[1], name=name),
    "maximum": lambda n, a, name: ops.maximum(a[0], a[1], name=name),
    "minimum": lambda n, a, name: ops.minimum(a[0], a[1], name=name),
    "pow": lambda n, a, name: compute(
        broadcast_shapes([a[0].shape, a[1].shape], "pow"),
        lambda *i: te_pow(a[0][broadcast_index(a[0].shape, i)],
                          a[1][broadcast_index(a[1].shape, i)]), name=name),
    "reshape": lambda n, a, name: ops.reshape(a[0], n.attr("shape"), name=name),
    "permute": lambda n, a, name: ops.permute(a[0], n.attr("dims"), name=name),
    "pad": _pad,
    "concat": _concat,
    "slice": _slice,
    "layout_transform": lambda n, a, name: ops.layout_transform(a[0], n.attr("src"), n.attr("dst"), name=name),
    **winograd_ops.LOWER,
    **quantized_ops.LOWER,
    **integer_ops.LOWER,
    **reduce_ops.LOWER,
    **logic_ops.LOWER,
    **gather_ops.LOWER,
    **bitwise_ops.LOWER,
}

LOWERED_OPS = frozenset(_LOWER)

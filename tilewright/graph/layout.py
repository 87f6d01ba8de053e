"""The layout pass (TVM section 2): chosen convolutions run on packed NCHW{b}c
data, vectorized over the channel block, with their weights packed once here
(constants) and layout transforms only where packed and plain data meet.

Packed values flow through the ops that do not care or have a packed form:
pooling, elementwise ops, a binary op whose operands are both packed (or one
is a per-channel constant, packed here too), the spatial mean. Every other
reader gets the NCHW value back from one transform, which writes the value's
original name, so the graph's outputs and NCHW readers are unchanged; a value
is converted at most once per layout, so no transform pair is ever emitted
back to back."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import ShapeError
from . import blocked
from .cleanup import eliminate_dead_code
from .fusion import is_elementwise
from .infer import infer_types, reduce_axes
from .ir import FreshNames, Graph, Node, TensorType
from .opset import OPS

_PACKED_READERS = frozenset({"max_pool2d", "avg_pool2d"})


def conv_block(graph: Graph, node: Node, block: int) -> int:
    """The input block of `node` if it can run packed with output blocks of `block`, else 0:
    a 2-D convolution with constant weights whose output channels split into blocks, and
    either groups 1 with input channels that split too (or fewer than one block: the first
    layer's 3 channels form one block) or a depthwise one (multiplier 1)."""
    shape = _conv_channels(graph, node) if block >= 2 else None
    if shape is None:
        return 0
    c, o, groups = shape
    if o % block:
        return 0
    if groups == 1:
        return block if c % block == 0 else (c if c < block else 0)
    return block if groups == c == o and c % block == 0 else 0


def _conv_channels(graph: Graph, node: Node) -> tuple[int, int, int] | None:
    """(input channels, output channels, groups) of a 2-D convolution that can pack (constant
    weights, 4-d fp data, groups 1 or depthwise with multiplier 1), else None."""
    if node.op != "conv2d" or not graph.is_constant(node.inputs[1]):
        return None
    x, w = graph.type_of(node.inputs[0]), graph.type_of(node.inputs[1])
    if len(x.shape) != 4 or len(w.shape) != 4 or x.dtype not in ("float32", "float64", "bfloat16") \
            or (x.dtype == "bfloat16" and int(node.attr("groups", 1)) != 1):
        return None
    groups = int(node.attr("groups", 1))
    if groups != 1 and w.shape[1] != 1:
        return None
    return x.shape[1], w.shape[0], groups


def narrow_block(target) -> int:
    """A second, narrower channel block for convolutions whose channels the vector-wide block does
    not divide: half the target's fp32 lanes where a half vector completes as many lane FMAs per
    cycle (Zen 4 runs a 512-bit FMA as two 256-bit halves), else 0 (none). MobileNet-v2's
    24-channel stage on 16-channel blocks stayed NCHW, with a layout transform on each side of
    every packed depthwise layer around it (on Zen 4, 0.25 of the model's 3.9 ms)."""
    lanes = target.vector_lanes(4)
    half = lanes // 2
    if half >= 4 and half * target.fmas_per_cycle(32 * half) >= lanes * target.fmas_per_cycle(32 * lanes):
        return half
    return 0


def _conv_blocks(graph: Graph, node: Node, blocks: tuple[int, ...], have: int) -> tuple[int, int]:
    """(input block, output block) of conv `node` packed, or (0, 0): the first of `blocks` that
    splits its output channels; its input read in the block it already has (`have`, 0: plain)
    where that splits its channels, so that no transform comes between (16 channels in, 8 out:
    the weights are packed for both)."""
    shape = _conv_channels(graph, node)
    if shape is None:
        return 0, 0
    c, o, groups = shape
    if groups > 1 and have in blocks and conv_block(graph, node, have):
        return have, have  # channel by channel: input and output blocks are one
    for b in blocks:
        if groups == 1 and have and o % b == 0 and c % have == 0:
            return have, b
        ib = conv_block(graph, node, b)
        if ib:
            return ib, b
    return 0, 0


def depthwise_only(graph: Graph, node: Node, block: int) -> bool:
    return int(node.attr("groups", 1)) > 1


def every_conv(graph: Graph, node: Node, block: int) -> bool:
    return True


Policy = Callable[[Graph, Node, int], bool]  # which of the convolutions `conv_block` allows are packed
LAYOUTS: dict[str, Policy | None] = {"NCHW": None, "NCHWc": every_conv, "depthwise": depthwise_only}
# compile's `layout` option; "auto" is layout_choice.py


def pack_layout(graph: Graph, layout: str, block: int, narrow: int = 0) -> Graph:
    """`graph` with the convolutions that compile's `layout` names on NCHW{block}c data (NCHW{narrow}c where
    `block` does not split their channels), dead constants dropped."""
    if layout not in LAYOUTS:
        raise ShapeError(f"compile: layout {layout!r} is not one of {', '.join(map(repr, [*LAYOUTS, 'auto']))}")
    if LAYOUTS[layout] is None or block < 2:
        return graph
    return eliminate_dead_code(convert_layout(graph, block, LAYOUTS[layout], narrow))


def convert_layout(graph: Graph, block: int, pick: Policy = every_conv, narrow: int = 0) -> Graph:
    """`graph` with the convolutions that `pick` chooses (among those `conv_block`
    allows) on NCHW{block}c data, or NCHW{narrow}c where `block` does not split their
    channels (`_conv_blocks`). Needs `graph.types`; returns a typed graph."""
    blocks = tuple(b for b in (block, narrow) if b >= 2)
    fresh = FreshNames.of(graph)
    constants = dict(graph.constants)
    nodes: list[Node] = []
    packed: dict[str, dict[int, str]] = {}  # NCHW value -> {block: packed value}
    only_packed: set[str] = set()  # values whose NCHW form is not written yet

    def add_constant(base: str, arr: np.ndarray) -> str:
        v = fresh(base)
        constants[v] = np.ascontiguousarray(arr)
        nodes.append(Node("constant", (), (v,), name=v))
        return v

    def plain(v: str) -> str:
        if v in only_packed:
            b, pv = next(iter(packed[v].items()))
            nodes.append(Node("layout_transform", (pv,), (v,), {"src": blocked.blocked(b), "dst": "NCHW"},
                              name=fresh(f"{v}_to_nchw")))
            only_packed.discard(v)
        return v

    def as_packed(v: str, b: int) -> str:
        forms = packed.setdefault(v, {})
        if b not in forms:
            if graph.is_constant(v):
                forms[b] = add_constant(f"{v}_nchw{b}c", pack_constant(graph.constants[v], b))
            else:
                src = plain(v)
                forms[b] = fresh(f"{v}_nchw{b}c")
                nodes.append(Node("layout_transform", (src,), (forms[b],), {"src": "NCHW", "dst": blocked.blocked(b)},
                                  name=forms[b]))
        return forms[b]

    def write_packed(node: Node, inputs: tuple[str, ...], b: int, attrs=None) -> None:
        v = node.outputs[0]
        pv = fresh(f"{v}_nchw{b}c")
        nodes.append(node.replace(inputs=inputs, outputs=(pv,), attrs=attrs if attrs is not None else node.attrs))
        packed[v] = {b: pv}
        only_packed.add(v)

    def packed_block(v: str) -> int:
        return next(iter(packed[v])) if v in only_packed else 0

    for node in graph.nodes:
        ins = node.inputs
        if node.op == "constant":
            nodes.append(node)
            continue
        if node.op == "qconv2d" and pick(graph, node, block) and _pack_qconv(
                graph, node, block, packed_block(ins[0]), (plain, as_packed, add_constant, write_packed), nodes, fresh):
            continue
        if node.op in _QUANTIZE_OPS and packed_block(ins[0]) and _scalar_params(graph, node):
            b = packed_block(ins[0])
            write_packed(node, (as_packed(ins[0], b), *ins[1:]), b)
            continue
        in_block, out_block = _conv_blocks(graph, node, blocks, packed_block(ins[0])) if node.op == "conv2d" \
            else (0, 0)
        if in_block and pick(graph, node, out_block):
            w = graph.constants[ins[1]]
            ib = 1 if int(node.attr("groups", 1)) > 1 else in_block
            wp = add_constant(f"{ins[1]}_oihw{ib}i{out_block}o", _pack_conv_weight(w, ib, out_block))
            attrs = {**node.attrs, "layout": blocked.blocked(out_block)}
            write_packed(node, (as_packed(ins[0], in_block), wp, *ins[2:]), out_block, attrs)
            continue
        b = next((packed_block(v) for v in ins if packed_block(v)), 0)  # the first packed input's block
        if b and _keeps_packed(graph, node):
            attrs = {**node.attrs, "layout": blocked.blocked(b)} if node.op in _PACKED_READERS else \
                {**node.attrs, "axes": (2, 3)} if node.op == "mean" else None
            write_packed(node, tuple(as_packed(v, b) for v in ins), b, attrs)
            continue
        nodes.append(node.replace(inputs=tuple(plain(v) for v in ins)))
    for v in graph.outputs:
        plain(v)
    return infer_types(graph.replace(nodes=nodes, constants=constants, types=dict(graph.types)))


_QUANTIZE_OPS = ("quantize", "dequantize")


def _pack_conv_weight(w: np.ndarray, ib: int, ob: int) -> np.ndarray:
    """A packed convolution's weight: OIHW{ib}i{ob}o, or for bfloat16 the channel pairs innermost
    ([O/ob, C/ib, KH, KW, ib/2, ob, 2], what `vdpbf16ps` reads)."""
    if w.dtype.name == "bfloat16":
        from .bfloat16 import PAIR
        from .quantized_ops import pack_qconv_weight

        return pack_qconv_weight(w, ib, ob, PAIR)
    return blocked.pack_weight(w, ib, ob)


def _scalar_params(graph: Graph, node: Node) -> bool:
    return len(graph.type_of(node.inputs[0]).shape) == 4 and all(graph.type_of(v).size == 1 for v in node.inputs[1:])


def _pack_qconv(graph: Graph, node: Node, block: int, have: int, writers, nodes, fresh) -> bool:
    """`node` (a qconv2d) written on NCHW{block}c output with its input in NCHW{ib}c, ib the block it already
    has or `block` where those split its channels, else 4 (channels zero-padded to a multiple of 4); False
    where it stays NCHW (non-constant weights, groups, output channels `block` does not split)."""
    from .quantized_ops import pack_qconv_weight

    plain, as_packed, add_constant, write_packed = writers
    x, w = graph.type_of(node.inputs[0]), graph.type_of(node.inputs[1])
    if not graph.is_constant(node.inputs[1]) or int(node.attr("groups", 1)) != 1 or block % 4 or w.shape[0] % block \
            or len(x.shape) != 4:
        return False
    c = x.shape[1]
    ib = next(b for b in (have, block, 4) if b and b % 4 == 0 and (c % b == 0 or b == 4))
    if c % ib:  # pad the channels of the NCHW input to a multiple of 4 (the weights' padding is zero)
        padded = -(-c // 4) * 4
        src = fresh(f"{node.inputs[0]}_c{padded}")
        pads = (0, 0, 0, 0, 0, padded - c, 0, 0)
        nodes.append(Node("pad", (plain(node.inputs[0]),), (src,), {"pads": pads, "value": 0.0}, name=src))
        xin = fresh(f"{src}_nchw{ib}c")
        nodes.append(Node("layout_transform", (src,), (xin,), {"src": "NCHW", "dst": blocked.blocked(ib)}, name=xin))
    else:
        xin = as_packed(node.inputs[0], ib)
    wp = add_constant(f"{node.inputs[1]}_packed", pack_qconv_weight(graph.constants[node.inputs[1]], ib, block))
    params = [add_constant(f"{v}_nchw{block}c", graph.constants[v].reshape(-1, block)) for v in node.inputs[2:]]
    write_packed(node, (xin, wp, *params), block, {**node.attrs, "layout": blocked.blocked(block)})
    return True


def _keeps_packed(graph: Graph, node: Node) -> bool:
    """Whether `node`, one of whose inputs is packed, can read and write packed data."""
    if node.op in _QUANTIZE_OPS:
        return False
    x = graph.type_of(node.inputs[0])
    if node.op in _PACKED_READERS:
        return len(x.shape) == 4 and (node.op == "max_pool2d" or node.attr("count_include_pad", True)
                                      or tuple(node.attr("padding", (0, 0, 0, 0)))[:2]
                                      == tuple(node.attr("padding", (0, 0, 0, 0)))[2:])
    if node.op == "mean":
        return len(x.shape) == 4 and node.attr("keepdims", True) and reduce_axes(node, 4) == (2, 3)
    if not is_elementwise(node) or node.op == "layout_transform" or OPS[node.op].inputs[-1].endswith("*"):
        return False
    out = graph.type_of(node.outputs[0]).shape
    if len(out) != 4:
        return False
    for v in node.inputs:
        t = graph.type_of(v)
        if t.shape == out:
            continue
        if not graph.is_constant(v) or not _per_channel(t, out):
            return False
    return True


def _per_channel(t: TensorType, out: tuple[int, ...]) -> bool:
    """A constant that broadcasts against NCHW `out` with one value per channel (or one in all)."""
    shape = (1,) * (4 - len(t.shape)) + t.shape if len(t.shape) <= 4 else None
    return shape is not None and shape[0] == 1 and shape[1] in (1, out[1]) and shape[2:] == (1, 1)


def pack_constant(arr: np.ndarray, b: int) -> np.ndarray:
    """A per-channel constant (broadcasting against NCHW) in the NCHW{b}c form that broadcasts alike."""
    shape = (1,) * (4 - arr.ndim) + arr.shape
    a = arr.reshape(shape)
    return blocked.to_blocked(a, b) if shape[1] > 1 else a.reshape(1, 1, 1, 1, 1)


__all__ = ["convert_layout", "conv_block", "narrow_block", "pack_layout", "LAYOUTS", "Policy", "depthwise_only",
           "every_conv", "pack_constant"]

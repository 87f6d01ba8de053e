"""Quantized convolutions and dense layers from QDQ models: DequantizeLinear -> Conv (or Gemm / MatMul
with a constant weight) -> [Relu] -> QuantizeLinear,
the form ONNX Runtime's `quantize_static` and PyTorch's PT2E export write, becomes one `qconv2d`
(`qdense`) that reads and writes uint8/int8 (what ONNX Runtime itself does with such a model); a max
pool between a dequantize and a quantize of the same parameters runs on the integers.

The zero points are folded ahead, on the constant weights: sum((x - xz) * (w - wz)) over a
window of x padded with xz equals sum(x * w') - xz * sum(w') with w' = w - wz (int8 when it
fits), so the kernel pads x with xz, multiplies raw u8 x s8 and the bias absorbs the
correction term. Without a quantize of its own (a residual add before it, as PT2E's x86 quantizer
writes, or the last layer) the kernel writes the dequantized float32 result and the float ops after it
fuse as its epilogue. A pattern that does not fit (per-tensor activations, constant per-tensor or
per-output-channel weights, w' in int8) is left as it is: dequantized, computed in float32, and
quantized again, which is the documented exact-in-float fallback, never a saturated result."""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from .ir import FreshNames, Graph, Node, TensorType
from .quantized_ops import DENSE_BLOCK, pack_dense_weight

_CONV_ATTRS = ("stride", "padding", "dilation", "groups")


def qconv_params(x_scale, x_zero, w_q, w_scale, w_zero, y_scale, bias_q=None, where: str = "qconv2d"):
    """(weight int8, multiplier float32[O], bias int32[O], pad value) of an int8 convolution (or dense
    layer: weight [O, K]) with ONNX QLinearConv's parameters; ShapeError naming `where` when the
    weight minus its zero point leaves int8 or a parameter has the wrong shape."""
    out = w_q.shape[0]

    def per_channel(v, what):
        v = np.asarray(v).reshape(-1)
        if v.size not in (1, out):
            raise ShapeError(f"{where}: {what} must be a scalar or one per output channel ({out}), got {v.size}; "
                             "per-group (blocked) quantization is not supported")
        return np.broadcast_to(v, (out,))

    if np.asarray(x_scale).size != 1 or np.asarray(x_zero).size != 1 or np.asarray(y_scale).size != 1:
        raise ShapeError(f"{where}: input and output scales and zero points must be per tensor (scalars)")
    w = w_q.astype(np.int64) - per_channel(w_zero, "the weight zero point").astype(np.int64).reshape(
        -1, *([1] * (w_q.ndim - 1)))
    if w.min(initial=0) < -128 or w.max(initial=0) > 127:
        raise ShapeError(f"{where}: weight minus its zero point spans [{w.min()}, {w.max()}], outside int8; valid: "
                         "int8 weights with zero point 0, or uint8 weights whose zero point keeps them in int8")
    xz = int(np.asarray(x_zero).reshape(()))
    mult = (np.float32(np.asarray(x_scale, np.float32).reshape(()))
            * per_channel(w_scale, "the weight scale").astype(np.float32)) / np.float32(np.asarray(y_scale).reshape(()))
    bias = np.zeros(out, np.int64) if bias_q is None else per_channel(bias_q, "the bias").astype(np.int64)
    bias = bias - xz * w.reshape(out, -1).sum(axis=1)
    if bias.min() < -2 ** 31 or bias.max() >= 2 ** 31:
        raise ShapeError(f"{where}: the bias with the zero-point correction leaves int32")
    return w.astype(np.int8), mult.astype(np.float32), bias.astype(np.int32), xz


class _Folder:
    def __init__(self, graph: Graph):
        self.g = graph
        self.fresh = FreshNames.of(graph)
        self.constants, self.types = dict(graph.constants), dict(graph.types)

    def const(self, v: str):
        return self.g.constants.get(v)

    def dequantized(self, value: str, constant: bool):
        """(q, scale, zero point, axis) when `value` is a dequantize of constant parameters (and of a
        constant tensor when `constant`), else None."""
        node = self.g.producer(value)
        if node is None or node.op != "dequantize":
            return None
        q, scale, zero = node.inputs
        if self.const(scale) is None or self.const(zero) is None or (constant and self.const(q) is None):
            return None
        return (self.const(q) if constant else q), self.const(scale), self.const(zero), int(node.attr("axis", 1))

    def sole_consumer(self, value: str, op: str) -> Node | None:
        users = self.g.consumers(value)
        if value in self.g.outputs or len(users) != 1 or users[0].op != op:
            return None
        return users[0]

    def match(self, conv: Node):
        if conv.attr("layout", "NCHW") != "NCHW":
            return None
        if conv.op == "dense" and (self.const(conv.inputs[1]) is not None or len(self.g.type_of(conv.inputs[1]).shape)
                                   != 2):
            return None
        x = self.dequantized(conv.inputs[0], constant=False)
        w = self.dequantized(conv.inputs[1], constant=True)
        if x is None or w is None or self.g.type_of(x[0]).dtype not in ("uint8", "int8"):
            return None
        if w[1].size != 1 and w[3] != 0:
            return None
        bias_q = None
        if len(conv.inputs) > 2:
            b = self.dequantized(conv.inputs[2], constant=True)
            if b is not None and b[0].dtype == np.int32 and not b[2].any():
                bias_q = b[0]
            elif self.const(conv.inputs[2]) is not None:
                acc_scale = np.float32(x[1].reshape(())) * w[1].astype(np.float32).reshape(-1)
                bias_q = np.rint(self.const(conv.inputs[2]).astype(np.float32) / acc_scale).astype(np.int64)
            else:
                return None
        relu = self.sole_consumer(conv.outputs[0], "relu")
        quant = self.sole_consumer((relu or conv).outputs[0], "quantize")
        if quant is not None and (self.const(quant.inputs[1]) is None or self.const(quant.inputs[2]) is None
                                  or self.const(quant.inputs[1]).size != 1 or self.const(quant.inputs[2]).size != 1):
            return None
        # no quantize of its own (a residual add or the last layer before it): the int8 kernel's dequantized
        # float32 result, and the float ops after it its epilogue
        y_scale, y_zero = (self.const(quant.inputs[1]), self.const(quant.inputs[2])) if quant is not None else \
            (np.float32(1), np.zeros((), np.float32))
        try:
            weight, mult, bias, pad = qconv_params(x[1], x[2], w[0], w[1], w[2], y_scale, bias_q, conv.name)
        except ShapeError:
            return None
        attrs = {"zero_point": int(y_zero.reshape(())), "relu": relu is not None, "out_dtype": y_zero.dtype.name}
        if conv.op == "dense":
            if weight.shape[0] % DENSE_BLOCK or weight.shape[1] % 4:
                return None
            return x[0], (pack_dense_weight(weight), mult, bias), attrs, [n for n in (relu, quant) if n is not None]
        attrs.update({k: conv.attr(k) for k in _CONV_ATTRS if conv.attr(k) is not None}, pad_value=pad)
        return x[0], (weight, mult, bias), attrs, [n for n in (relu, quant) if n is not None]

    def new_const(self, base: str, arr: np.ndarray) -> Node:
        v = self.fresh(base)
        self.constants[v] = arr
        self.types[v] = TensorType(arr.shape, arr.dtype.name)
        return Node("constant", (), (v,))

    def same_params(self, dq: Node, q: Node) -> bool:
        pairs = [(self.const(a), self.const(b)) for a, b in zip(dq.inputs[1:], q.inputs[1:])]
        return all(a is not None and b is not None and a.size == 1 and b.size == 1 and a.dtype == b.dtype
                   and a.reshape(()) == b.reshape(()) for a, b in pairs)

    def integer_max_pool(self, pool: Node):
        """dequantize -> max_pool2d -> quantize with the same parameters: the pool on the integers (dequantize
        is increasing and quantize undoes it exactly), so the integer data is never widened."""
        dq = self.g.producer(pool.inputs[0])
        if dq is None or dq.op != "dequantize" or len(self.g.consumers(dq.outputs[0])) != 1 \
                or dq.outputs[0] in self.g.outputs:
            return None
        q = self.sole_consumer(pool.outputs[0], "quantize")
        if q is None or not self.same_params(dq, q) or float(self.const(dq.inputs[1]).reshape(())) <= 0:
            return None
        return pool.replace(inputs=(dq.inputs[0],), outputs=q.outputs), q

    def run(self) -> Graph:
        nodes, dropped = [], set()
        for node in self.g.nodes:
            if id(node) in dropped:
                continue
            pooled = self.integer_max_pool(node) if node.op == "max_pool2d" else None
            if pooled is not None:
                nodes.append(pooled[0])
                dropped.add(id(pooled[1]))
                continue
            found = self.match(node) if node.op in ("conv2d", "dense") else None
            if found is None:
                nodes.append(node)
                continue
            xq, arrays, attrs, absorbed = found
            consts = [self.new_const(f"{node.name}_{role}", a) for role, a in zip(("w_q", "mult", "bias_q"), arrays)]
            nodes += consts
            op = "qconv2d" if node.op == "conv2d" else "qdense"
            outputs = absorbed[-1].outputs if absorbed else node.outputs
            nodes.append(Node(op, (xq, *(c.outputs[0] for c in consts)), outputs, attrs, name=node.name))
            dropped |= {id(n) for n in absorbed}
        return self.g.replace(nodes=nodes, types=self.types, constants=self.constants)


def fold_qdq(graph: Graph) -> Graph:
    """Every DequantizeLinear -> Conv -> [Relu] -> QuantizeLinear chain that fits (see the module
    docstring) replaced by one `qconv2d` writing the quantize node's value, and a DequantizeLinear -> Conv
    -> [Relu] without a quantize of its own by one writing the dequantized float32 result; the dequantize
    nodes stay for their other readers (dead-code elimination drops the rest)."""
    if not any(n.op == "dequantize" for n in graph.nodes):
        return graph
    return _Folder(graph).run()


__all__ = ["fold_qdq", "qconv_params"]

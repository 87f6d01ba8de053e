"""The graph's quantized ops: their types, NumPy reference and lowering to te, one table each
for `infer`, `reference` and `lower_te` (their specs are in `opset`).

- `quantize(x, scale, zero_point)`, attr `axis`: ONNX QuantizeLinear, float32 -> uint8/int8;
- `dequantize(x, scale, zero_point)`, attr `axis`: ONNX DequantizeLinear, uint8/int8/int32 -> float32;
- `qdense(x, weight, multiplier, bias?)`: x[..., K] (uint8/int8) times the int8 weight stored
  [N/8, K/4, 8, 4], requantized as qconv2d is;
- `qconv2d(x, weight, multiplier, bias?)`: an int8 convolution accumulating in int32 over x padded
  with `pad_value`, requantized to `out_dtype` (`graph/fold_qdq.py` writes these from QDQ models and
  QLinearConv, with the zero points already folded: see `qconv_params`). With `layout` NCHW{ob}c
  (the layout pass writes it) x is NCHW{ib}c (ib a multiple of 4), the weight
  [O/ob, C/ib, KH, KW, ib/4, ob, 4] (each output lane's 4 input channels contiguous, what
  dot-product instructions read), multiplier and bias [O/ob, ob], the output NCHW{ob}c.

The reference computes exactly what the kernels compute (float32 division and products, rounding
half to even, int64 accumulation that int32 never overflows at these sizes), so compiled int8
models are compared bit for bit."""

from __future__ import annotations

import numpy as np

from .. import ops
from ..errors import ShapeError
from ..ops.pad import pad_axes
from .ir import Node, TensorType

QUANTIZED_DTYPES = ("uint8", "int8")
OUT_DTYPES = (*QUANTIZED_DTYPES, "float32")  # float32: the dequantized accumulator, for a float epilogue
DENSE_BLOCK = 8  # qdense's weight: [N/8, K/4, 8, 4], what 8-lane dot-product instructions read


def _fail(node: Node, ins, why: str) -> ShapeError:
    return ShapeError(f"node '{node.name}' ({node.op}) with inputs ({', '.join(str(t) for t in ins)}): {why}")


def _check_params(node: Node, ins, x: TensorType, scale: TensorType, zp: TensorType):
    axis = int(node.attr("axis", 1))
    per_axis = (x.shape[axis % len(x.shape)],) if x.shape and -len(x.shape) <= axis < len(x.shape) else None
    for what, t in (("scale", scale), ("zero point", zp)):
        if t.shape not in ((), (1,)) and t.shape != per_axis:
            raise _fail(node, ins, f"{what} must be a scalar or have shape {per_axis} (one per index of axis "
                                   f"{axis}); per-group (blocked) quantization is not supported")
    if scale.dtype != "float32":
        raise _fail(node, ins, f"scale must be float32, got {scale.dtype}")


def _quantize_type(node: Node, ins):
    x, scale, zp = ins
    if zp.dtype not in QUANTIZED_DTYPES or x.dtype != "float32":
        raise _fail(node, ins, "quantizes float32 to the zero point's dtype; valid zero points: uint8, int8")
    _check_params(node, ins, x, scale, zp)
    return [TensorType(x.shape, zp.dtype)]


def _dequantize_type(node: Node, ins):
    x, scale, zp = ins
    if x.dtype not in (*QUANTIZED_DTYPES, "int32") or zp.dtype != x.dtype:
        raise _fail(node, ins, "dequantizes uint8, int8 or int32 with a zero point of the same dtype")
    _check_params(node, ins, x, scale, zp)
    return [TensorType(x.shape, "float32")]


def _qconv2d_type(node: Node, ins):
    from .blocked import block_of, blocked_shape

    x, w = ins[:2]
    if x.dtype not in QUANTIZED_DTYPES or w.dtype not in QUANTIZED_DTYPES:
        raise _fail(node, ins, "x and weight must be uint8 or int8")
    ob = block_of(node.attr("layout"))
    if not ob:
        return _plain_qconv2d_type(node, ins)
    if len(x.shape) != 5 or len(w.shape) != 7 or x.shape[4] % 4 or w.shape[4:] != (x.shape[4] // 4, ob, 4) \
            or w.shape[1] != x.shape[1]:
        raise _fail(node, ins, f"layout NCHW{ob}c needs x NCHW{{ib}}c (ib a multiple of 4) and weight "
                               f"[O/{ob}, C/ib, KH, KW, ib/4, {ob}, 4]")
    plain = [TensorType((x.shape[0], x.shape[1] * x.shape[4], *x.shape[2:4]), x.dtype),
             TensorType((w.shape[0] * ob, w.shape[1] * x.shape[4], *w.shape[2:4]), w.dtype),
             *(TensorType((t.size,), t.dtype) for t in ins[2:])]
    out = _plain_qconv2d_type(node.replace(attrs={k: v for k, v in node.attrs.items() if k != "layout"}), plain)[0]
    want = (w.shape[0], ob)
    if any(t.shape != want for t in ins[2:]):
        raise _fail(node, ins, f"multiplier and bias must have shape {want} on NCHW{ob}c")
    return [TensorType(blocked_shape(out.shape, ob), out.dtype)]


def _plain_qconv2d_type(node: Node, ins):
    from .infer import infer_node

    x, w, mult = ins[:3]
    if x.dtype not in QUANTIZED_DTYPES or w.dtype not in QUANTIZED_DTYPES:
        raise _fail(node, ins, "x and weight must be uint8 or int8")
    out_dtype = node.attr("out_dtype", "uint8")
    if out_dtype not in OUT_DTYPES:
        raise _fail(node, ins, f"out_dtype must be uint8, int8 or float32 (dequantized), got {out_dtype!r}")
    conv = Node("conv2d", node.inputs[:2], node.outputs, {k: node.attr(k) for k in
                                                          ("stride", "padding", "dilation", "groups")}, node.name)
    out = infer_node(conv, [TensorType(x.shape, "float32"), TensorType(w.shape, "float32")])[0]
    channels = (out.shape[1],)
    if mult.shape != channels or mult.dtype != "float32":
        raise _fail(node, ins, f"multiplier must be float32 of shape {channels}")
    if len(ins) > 3 and (ins[3].shape != channels or ins[3].dtype != "int32"):
        raise _fail(node, ins, f"bias must be int32 of shape {channels}")
    return [TensorType(out.shape, out_dtype)]


def _qdense_type(node: Node, ins):
    x, w = ins[:2]
    if x.dtype not in QUANTIZED_DTYPES or w.dtype not in QUANTIZED_DTYPES:
        raise _fail(node, ins, "x and weight must be uint8 or int8")
    if len(x.shape) < 1 or len(w.shape) != 4 or w.shape[2:] != (DENSE_BLOCK, 4) or x.shape[-1] != w.shape[1] * 4:
        raise _fail(node, ins, f"valid: x[..., K] and weight [N/{DENSE_BLOCK}, K/4, {DENSE_BLOCK}, 4]")
    channels = (w.shape[0] * DENSE_BLOCK,)
    if ins[2].shape != channels or ins[2].dtype != "float32" or (len(ins) > 3 and (
            ins[3].shape != channels or ins[3].dtype != "int32")):
        raise _fail(node, ins, f"multiplier float32 and bias int32 of shape {channels}")
    out_dtype = node.attr("out_dtype", "uint8")
    if out_dtype not in OUT_DTYPES:
        raise _fail(node, ins, f"out_dtype must be uint8, int8 or float32 (dequantized), got {out_dtype!r}")
    return [TensorType(x.shape[:-1] + channels, out_dtype)]


TYPES = {"quantize": _quantize_type, "dequantize": _dequantize_type, "qconv2d": _qconv2d_type,
         "qdense": _qdense_type}


# --- reference ---

def _along(param: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    """`param` shaped to broadcast against an array of rank `ndim` along `axis`."""
    if param.size == 1:
        return param.reshape(())
    shape = [1] * ndim
    shape[axis % ndim] = param.size
    return param.reshape(shape)


def saturate(q: np.ndarray, dtype: str, lo: int | None = None) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.clip(q, info.min if lo is None else max(lo, info.min), info.max).astype(dtype)


def reference_quantize(node: Node, x, scale, zp):
    axis = int(node.attr("axis", 1))
    q = np.rint(x.astype(np.float32) / _along(scale.astype(np.float32), x.ndim, axis)).astype(np.int64)
    return saturate(q + _along(zp.astype(np.int64), x.ndim, axis), zp.dtype.name)


def reference_dequantize(node: Node, x, scale, zp):
    axis = int(node.attr("axis", 1))
    diff = (x.astype(np.int64) - _along(zp.astype(np.int64), x.ndim, axis)).astype(np.float32)
    return (diff * _along(scale.astype(np.float32), x.ndim, axis)).astype(np.float32)


def unpack_qconv_weight(w: np.ndarray) -> np.ndarray:
    """[O/ob, C/ib, KH, KW, ib/g, ob, g] -> OIHW."""
    ob_, cb, kh, kw, c2, ob, c4 = w.shape
    return np.ascontiguousarray(w.transpose(0, 5, 1, 4, 6, 2, 3).reshape(ob_ * ob, cb * c2 * c4, kh, kw))


def pack_qconv_weight(w: np.ndarray, ib: int, ob: int, group: int = 4) -> np.ndarray:
    """OIHW -> [O/ob, C/ib, KH, KW, ib/g, ob, g] (g = `group`: 4 for int8, 2 for bf16 pairs), input
    channels zero-padded to a multiple of ib."""
    o, c, kh, kw = w.shape
    cp = -(-c // ib) * ib
    w = np.pad(w, ((0, 0), (0, cp - c), (0, 0), (0, 0)))
    return np.ascontiguousarray(w.reshape(o // ob, ob, cp // ib, ib // group, group, kh, kw)
                                .transpose(0, 2, 5, 6, 3, 1, 4))


def reference_qconv2d(node: Node, x, w, mult, bias=None):
    from .blocked import block_of, from_blocked, to_blocked
    from .reference import conv2d

    ob = block_of(node.attr("layout"))
    if ob:
        plain = node.replace(attrs={k: v for k, v in node.attrs.items() if k != "layout"})
        y = reference_qconv2d(plain, from_blocked(x), unpack_qconv_weight(w), mult.reshape(-1),
                              None if bias is None else bias.reshape(-1))
        return to_blocked(y, ob)

    top, left, bottom, right = node.attr("padding", (0, 0, 0, 0))
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (top, bottom), (left, right)),
                constant_values=int(node.attr("pad_value", 0)))
    acc = conv2d(xp, w.astype(np.int64), None, node.attr("stride", (1, 1)), 0, node.attr("dilation", (1, 1)),
                 int(node.attr("groups", 1)))
    return _requantize_ref(node, acc, mult, bias, 1)


def pack_dense_weight(w: np.ndarray) -> np.ndarray:
    """[N, K] -> [N/8, K/4, 8, 4]."""
    n, k = w.shape
    return np.ascontiguousarray(w.reshape(n // DENSE_BLOCK, DENSE_BLOCK, k // 4, 4).transpose(0, 2, 1, 3))


def _requantize_ref(node: Node, acc, mult, bias, channel_axis: int):
    shape = [1] * acc.ndim
    shape[channel_axis] = -1
    if bias is not None:
        acc = acc + bias.astype(np.int64).reshape(shape)
    if node.attr("out_dtype", "uint8") == "float32":
        y = acc.astype(np.float32) * mult.astype(np.float32).reshape(shape)
        return np.maximum(y, np.float32(0)) if node.attr("relu", False) else y
    q = np.rint(acc.astype(np.float32) * mult.astype(np.float32).reshape(shape)).astype(np.int64)
    zero = int(node.attr("zero_point", 0))
    return saturate(q + zero, node.attr("out_dtype", "uint8"), zero if node.attr("relu", False) else None)


def reference_qdense(node: Node, x, w, mult, bias=None):
    nb, kb, b, four = w.shape
    plain = w.transpose(0, 2, 1, 3).reshape(nb * b, kb * four).astype(np.int64)
    return _requantize_ref(node, x.astype(np.int64) @ plain.T, mult, bias, x.ndim - 1)


REFERENCE = {"quantize": reference_quantize, "dequantize": reference_dequantize, "qconv2d": reference_qconv2d,
             "qdense": reference_qdense}


# --- lowering ---

def lower_qconv2d(node: Node, a: list, name: str):
    x, w, mult = a[:3]
    bias = a[3] if len(a) > 3 else None
    top, left, bottom, right = node.attr("padding", (0, 0, 0, 0))
    pad_value = int(node.attr("pad_value", 0))
    tail = [0] * (x.ndim - 4)
    if (top, left) != (bottom, right) or (pad_value and any((top, left, bottom, right))):
        x = pad_axes(x, [0, 0, top, left, *tail], [0, 0, bottom, right, *tail], pad_value, name=f"{name}_pad")
        top = left = 0
    stride, dilation = node.attr("stride", (1, 1)), node.attr("dilation", (1, 1))
    if tail:
        acc = ops.qconv2d_nchwc(x, w, stride, (top, left), dilation, name=f"{name}_acc")
    else:
        acc = ops.conv2d(x, w, None, stride=stride, padding=(top, left), dilation=dilation,
                         groups=node.attr("groups", 1), out_dtype="int32", name=f"{name}_acc")
    return ops.requantize(acc, mult, bias, zero_point=int(node.attr("zero_point", 0)),
                          channel_axes=(1, 4) if tail else (1,), out_dtype=node.attr("out_dtype", "uint8"),
                          relu=bool(node.attr("relu", False)), name=name)


def dense_accumulator(x, w, name: str):
    """acc[..., n] = sum_k x[..., k] * W[n, k] in int32, the weight stored [N/8, K/4, 8, 4]."""
    from ..te import compute, reduce_axis
    from ..te import sum as te_sum

    k = reduce_axis(x.shape[-1], "k")

    def body(*i):
        n = i[-1]
        return te_sum(x[i[:-1] + (k,)].astype("int32")
                      * w[n // DENSE_BLOCK, k // 4, n % DENSE_BLOCK, k % 4].astype("int32"), axis=k)

    return compute((*x.shape[:-1], w.shape[0] * DENSE_BLOCK), body, name=name)


def lower_qdense(node: Node, a: list, name: str):
    x, w, mult = a[:3]
    bias = a[3] if len(a) > 3 else None
    acc = dense_accumulator(x, w, f"{name}_acc")
    return ops.requantize(acc, mult, bias, zero_point=int(node.attr("zero_point", 0)), channel_axes=(acc.ndim - 1,),
                          out_dtype=node.attr("out_dtype", "uint8"), relu=bool(node.attr("relu", False)), name=name)


LOWER = {
    "quantize": lambda n, a, name: ops.quantize(a[0], a[1], a[2], int(n.attr("axis", 1)), name=name),
    "dequantize": lambda n, a, name: ops.dequantize(a[0], a[1], a[2], int(n.attr("axis", 1)), name=name),
    "qconv2d": lower_qconv2d,
    "qdense": lower_qdense,
}

__all__ = ["TYPES", "REFERENCE", "LOWER", "QUANTIZED_DTYPES", "DENSE_BLOCK", "dense_accumulator", "saturate",
           "pack_qconv_weight", "unpack_qconv_weight", "pack_dense_weight"]

"""The ONNX frontend's quantized operators: QuantizeLinear and DequantizeLinear (per tensor or per
axis) become the graph's `quantize` / `dequantize`, QLinearConv a `qconv2d`, QLinearMatMul with a
constant B a `qdense`, DynamicQuantizeLinear and MatMulInteger (ONNX Runtime's `quantize_dynamic`) the
integer ops of `graph/integer_ops.py`; a DequantizeLinear of
constant integers feeding Gemm/MatMul is transposed on its integers (`quantized_nk`), so
`graph/fold_qdq.py` sees the QDQ pattern it folds into `qdense`."""

from __future__ import annotations

import numpy as np

from ..quantized_ops import DENSE_BLOCK


def _zero_point(imp, ins, k, dtype):
    """The zero point input `k` of a (De)QuantizeLinear / QLinear node, zeros of `dtype` when absent."""
    if len(ins) > k and ins[k]:
        return imp.const(ins[k], "the zero point")
    return np.zeros((), dtype)


def _quant_params(imp, n, ins, a, dtype):
    if a.get("block_size", 0):
        raise imp.fail("per-group (block_size) quantization; valid: per tensor or per axis")
    scale = imp.const(ins[1], "the scale")
    zero = _zero_point(imp, ins, 2, dtype)
    if scale.dtype != np.float32 or zero.dtype.name not in ("uint8", "int8", "int32"):
        raise imp.fail(f"scale {scale.dtype} and zero point {zero.dtype}; valid: float32 scale, uint8/int8/int32 "
                       "zero point")
    rank = len(imp.type_of(ins[0]).shape)
    return [imp.b.constant(scale, ins[1]), imp.b.constant(zero, (ins[2] if len(ins) > 2 and ins[2] else
                                                                 n.output[0]) + "_zero")], a.get("axis", 1) % rank


def _quantize_linear(imp, n, ins, a):
    dtype = imp.onnx.helper.tensor_dtype_to_np_dtype(a["output_dtype"]) if a.get("output_dtype") else np.uint8
    params, axis = _quant_params(imp, n, ins, a, dtype)
    imp.emit("quantize", [imp.value(ins[0]), *params], {"axis": axis}, n.output[0])


def _dequantize_linear(imp, n, ins, a):
    t = imp.type_of(ins[0])
    params, axis = _quant_params(imp, n, ins, a, np.dtype(t.dtype) if t else np.uint8)
    imp.emit("dequantize", [imp.value(ins[0]), *params], {"axis": axis}, n.output[0])
    if ins[0] in imp.known:  # a quantized weight: Gemm/MatMul transpose it as its integers (quantized_nk)
        imp.quantized[n.output[0]] = (ins[0], params, axis)


def quantized_nk(imp, name: str, transposed: bool) -> str | None:
    """A dense weight [N, K] dequantized from the integers of a 2-D DequantizeLinear weight B ([K, N] unless
    `transposed`): the transpose is made on the constant integers, so the QDQ pattern stays visible."""
    if name not in imp.quantized:
        return None
    q_name, params, axis = imp.quantized[name]
    q = imp.known[q_name]
    if q.ndim != 2:
        return None
    if not transposed:
        q, axis = q.T, 1 - axis
    qv = imp.b.constant(np.ascontiguousarray(q), q_name + ("" if transposed else "_t"))
    return imp.emit("dequantize", [qv, *params], {"axis": axis})


def _qlinear_conv(imp, n, ins, a):
    from ..fold_qdq import qconv_params
    from .onnx_conv import spatial as _spatial

    w = imp.const(ins[3], "the weight")
    if w.ndim != 4:
        raise imp.fail("only 2-D convolution")
    x_zero, y_zero = _zero_point(imp, ins, 2, np.uint8), _zero_point(imp, ins, 7, np.uint8)
    bias = imp.const(ins[8], "the bias") if len(ins) > 8 and ins[8] else None
    weight, mult, bias, pad = qconv_params(imp.const(ins[1], "x_scale"), x_zero, w, imp.const(ins[4], "w_scale"),
                                           _zero_point(imp, ins, 5, w.dtype), imp.const(ins[6], "y_scale"), bias,
                                           f"from_onnx: QLinearConv '{n.name or n.output[0]}'")
    stride, pads, dil = _spatial(imp, n, ins, a, w.shape[2:])
    vals = [imp.value(ins[0]), imp.b.constant(weight, ins[3] + "_q"), imp.b.constant(mult, n.output[0] + "_mult"),
            imp.b.constant(bias, n.output[0] + "_bias")]
    imp.emit("qconv2d", vals, {"stride": stride, "padding": pads, "dilation": dil, "groups": a.get("group", 1),
                               "pad_value": pad, "zero_point": int(y_zero), "out_dtype": y_zero.dtype.name},
             n.output[0])


def _qlinear_matmul(imp, n, ins, a):
    """QLinearMatMul with a constant B: one `qdense` where B is 2-D and B - b_zero fits int8 (K and N padded to
    the packed blocks), else ONNX's definition in float64."""
    from ...errors import ShapeError
    from ..fold_qdq import qconv_params
    from ..quantized_ops import pack_dense_weight

    b = imp.const(ins[3], "B (only a constant weight is supported)")
    x_zero, y_zero = _zero_point(imp, ins, 2, np.uint8), _zero_point(imp, ins, 7, np.uint8)
    scales = [np.asarray(imp.const(ins[k], name)) for k, name in ((1, "a_scale"), (4, "b_scale"), (6, "y_scale"))]
    try:
        if b.ndim != 2:
            raise ShapeError("a batched B")
        f32 = [v.astype(np.float32) for v in scales]
        weight, mult, bias, _ = qconv_params(f32[0], x_zero, np.ascontiguousarray(b.T), f32[1],
                                             _zero_point(imp, ins, 5, b.dtype), f32[2], None,
                                             f"from_onnx: QLinearMatMul '{n.name or n.output[0]}'")
    except ShapeError:  # not an int8 dot product (B - b_zero outside int8, or batched): exact in float64
        return _qlinear_matmul_float64(imp, n, ins, b, x_zero, y_zero, scales)
    x, (weight, mult, bias), n_out = _aligned(imp, imp.value(ins[0]), weight, (mult, 1), (bias, 0))
    vals = [x, imp.b.constant(pack_dense_weight(weight), ins[3] + "_q"),
            imp.b.constant(mult, n.output[0] + "_mult"), imp.b.constant(bias, n.output[0] + "_bias")]
    y = imp.emit("qdense", vals, {"zero_point": int(y_zero), "out_dtype": y_zero.dtype.name})
    _columns(imp, y, n_out, n.output[0])


def _qlinear_matmul_float64(imp, n, ins, b, x_zero, y_zero, scales):
    """QLinearMatMul as ONNX's definition computes it: (A - a_zero) @ (B - b_zero) (exact in float64 while the
    sums stay below 2^53), times a_scale * b_scale / y_scale (in the scales' own dtype), plus y_zero, rounded
    half to even and saturated."""
    b_zero = _zero_point(imp, ins, 5, b.dtype)
    x = imp.emit("cast", [imp.value(ins[0])], {"dtype": "float64"})
    x = imp.emit("sub", [x, imp.b.constant(np.asarray(x_zero, np.float64), "a_zero", exact=True)])
    w = np.asarray(b, np.float64) - np.asarray(b_zero, np.float64)
    acc = imp.emit("matmul", [x, imp.b.constant(w, "b_centred", exact=True)])
    mult = np.asarray(scales[0] * scales[1] / scales[2], np.float64)
    y = imp.emit("add", [imp.emit("mul", [acc, imp.b.constant(mult, "multiplier", exact=True)]),
                         imp.b.constant(np.asarray(y_zero, np.float64), "y_zero", exact=True)])
    info = np.iinfo(y_zero.dtype)
    y = imp.emit("clip", [imp.emit("round", [y])], {"min": float(info.min), "max": float(info.max)})
    imp.emit("cast", [y], {"dtype": y_zero.dtype.name}, n.output[0])


def _aligned(imp, x: str, weight: np.ndarray, *per_column):
    """x [..., K] and an int8 weight [N, K] padded to the packed layout's blocks (K to a multiple of 4, N of
    DENSE_BLOCK) with zero weights, so padded inputs add nothing; per-column arrays padded with their fill
    values. (x, [weight, *arrays], N); the caller slices the N real columns back out (`_columns`)."""
    n_out, k = weight.shape
    kp, np_ = -(-k // 4) * 4, -(-n_out // DENSE_BLOCK) * DENSE_BLOCK
    if (kp, np_) != (k, n_out):
        weight = np.pad(weight, ((0, np_ - n_out), (0, kp - k)))
        per_column = [(np.concatenate([v, np.full(np_ - n_out, fill, v.dtype)]), fill) for v, fill in per_column]
    if kp != k:
        rank = len(imp.b.types[x].shape)
        x = imp.emit("pad", [x], {"pads": (0,) * (2 * rank - 1) + (kp - k,), "value": 0.0})
    return x, [weight, *(v for v, _ in per_column)], n_out


def _columns(imp, y: str, n_out: int, out: str):
    shape = imp.b.types[y].shape
    if shape[-1] == n_out:
        imp.env[out] = y
        return
    imp.emit("slice", [y], {"begin": (0,) * len(shape), "end": (*shape[:-1], n_out), "step": (1,) * len(shape)},
             out)


def _global_reduce(imp, x: str, op: str) -> str:
    """`op` ("reduce_min"/"reduce_max") of every element of `x`: over the leading axes first (the kept
    last axis vectorizes and runs on every core), then over what is left."""
    t = imp.b.types[x]
    if len(t.shape) > 1 and t.shape[-1] >= 16:
        x = imp.emit(op, [x], {"axes": tuple(range(len(t.shape) - 1)), "keepdims": False})
    return imp.emit(op, [x], {"axes": None, "keepdims": False})


def _dynamic_quantize_linear(imp, n, ins, a):
    """y, y_scale, y_zero_point of ONNX DynamicQuantizeLinear: the scale from the range of x with 0 in it
    (`dynamic_scale`), the zero point -min(x, 0) / scale quantized, x quantized with both."""
    if imp.type_of(ins[0]) is None or imp.type_of(ins[0]).dtype != "float32":
        raise imp.fail("x must be float32")
    x = imp.value(ins[0])
    zero_f = imp.b.constant(np.zeros((), np.float32), n.output[0] + "_zero_f")
    low = imp.emit("minimum", [_global_reduce(imp, x, "reduce_min"), zero_f])
    high = imp.emit("maximum", [_global_reduce(imp, x, "reduce_max"), zero_f])
    out = [*n.output, "", ""][:3]  # y_scale and y_zero_point may be left unnamed
    scale = imp.emit("dynamic_scale", [low, high], {}, out[1] or None)
    zero = imp.emit("quantize", [imp.emit("neg", [low]), scale,
                                 imp.b.constant(np.zeros((), np.uint8), n.output[0] + "_zero_u8")], {"axis": 0},
                    out[2] or None)
    imp.emit("quantize", [x, scale, zero], {"axis": 0}, n.output[0])


def _matmul_integer(imp, n, ins, a):
    """ONNX MatMulInteger with a constant B [K, N] (K and N padded to the packed blocks): (A - a_zero) @ (B - b_zero)
    in int32 as one
    `matmul_integer` on A's uint8 and B - b_zero as int8, minus a_zero x the column sums of that weight
    (folded into the bias where a_zero is a constant, a fused epilogue where it is computed)."""
    from ..quantized_ops import pack_dense_weight

    b = imp.const(ins[1], "B (only a constant weight is supported)")
    t = imp.type_of(ins[0])
    if t is None or t.dtype != "uint8":
        raise imp.fail(f"A must be uint8 (what DynamicQuantizeLinear gives), got {t.dtype if t else 'unknown'}")
    if b.ndim != 2 or b.shape[0] != t.shape[-1]:
        raise imp.fail(f"B must be 2-D [K, N] with K = A's last extent ({t.shape[-1]}), got {list(b.shape)}")
    b_zero = _zero_point(imp, ins, 3, b.dtype).astype(np.int32)
    if b_zero.size not in (1, b.shape[1]):
        raise imp.fail(f"b_zero_point must be a scalar or one per column ({b.shape[1]}), got {b_zero.size}")
    w = b.astype(np.int32) - b_zero.reshape(1, -1)
    if w.min() < -128 or w.max() > 127:
        raise imp.fail("B - b_zero_point must fit int8 [-128, 127] (the dot-product instructions take signed "
                       "8-bit weights); valid: int8 B, or uint8 B with zero point 128")
    colsum = w.sum(axis=0).astype(np.int32)
    name = n.output[0]
    x, (weight, colsum), n_out = _aligned(imp, imp.value(ins[0]), np.ascontiguousarray(w.T).astype(np.int8),
                                          (colsum, 0))
    packed = imp.b.constant(pack_dense_weight(weight), ins[1] + "_packed")
    a_zero = ins[2] if len(ins) > 2 and ins[2] else None
    if a_zero is None or a_zero in imp.known:
        az = imp.known[a_zero].astype(np.int32) if a_zero else np.zeros((), np.int32)
        if az.size != 1:
            raise imp.fail("a_zero_point must be a scalar (per-row zero points are not supported)")
        bias = imp.b.constant((-int(az.ravel()[0]) * colsum).astype(np.int32), name + "_bias")
        return _columns(imp, imp.emit("matmul_integer", [x, packed, bias], {}), n_out, name)
    zt = imp.type_of(a_zero)
    if zt is None or zt.shape not in ((), (1,)):
        raise imp.fail("a_zero_point must be a scalar (per-row zero points are not supported)")
    acc = imp.emit("matmul_integer", [x, packed])
    zero = imp.emit("cast", [imp.value(a_zero)], {"dtype": "int32"})
    correction = imp.emit("mul", [zero, imp.b.constant(colsum, name + "_colsum")])
    _columns(imp, imp.emit("sub", [acc, correction], {}), n_out, name)


def _conv_integer(imp, n, ins, a):
    """ONNX ConvInteger: conv(x - x_zero, w - w_zero) accumulated in int32, the zero padding applied after
    the subtraction as ONNX specifies (x_zero a scalar, w_zero a scalar or one per output channel;
    either may be computed). An int32 convolution on widened operands: exact, not tensorized."""
    from .onnx_conv import spatial as _spatial

    x, w = imp.type_of(ins[0]), imp.type_of(ins[1])
    if x is None or w is None or x.dtype not in ("uint8", "int8") or w.dtype not in ("uint8", "int8"):
        raise imp.fail("x and w must be uint8 or int8")
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise imp.fail("only 2-D convolution (x NCHW, w OIHW)")

    def centred(k: int, zero_at: int, per_channel: tuple[int, ...]) -> str:
        v = imp.emit("cast", [imp.value(ins[k])], {"dtype": "int32"})
        if len(ins) <= zero_at or not ins[zero_at]:
            return v
        zt = imp.type_of(ins[zero_at])
        if zt is None or zt.shape not in ((), (1,), per_channel[:1]):
            raise imp.fail(f"zero point '{ins[zero_at]}' must be a scalar{' or one per output channel' if k else ''}")
        z = imp.emit("cast", [imp.value(ins[zero_at])], {"dtype": "int32"})
        if zt.shape == per_channel[:1] and per_channel[0] > 1:
            z = imp.emit("reshape", [z], {"shape": per_channel})
        return imp.emit("sub", [v, z])

    stride, pads, dil = _spatial(imp, n, ins, a, w.shape[2:])
    imp.emit("conv2d", [centred(0, 2, (1,)), centred(1, 3, (w.shape[0], 1, 1, 1))],
             {"stride": stride, "padding": pads, "dilation": dil, "groups": a.get("group", 1)}, n.output[0])


QUANTIZED_HANDLERS = {"QuantizeLinear": _quantize_linear, "DequantizeLinear": _dequantize_linear,
                      "QLinearConv": _qlinear_conv, "QLinearMatMul": _qlinear_matmul,
                      "DynamicQuantizeLinear": _dynamic_quantize_linear, "MatMulInteger": _matmul_integer,
                      "ConvInteger": _conv_integer}

__all__ = ["QUANTIZED_HANDLERS", "quantized_nk"]

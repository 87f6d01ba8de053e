"""The ONNX frontend's quantized operators: QuantizeLinear and DequantizeLinear (per tensor or per
axis) become the graph's `quantize` / `dequantize`, QLinearConv a `qconv2d`, QLinearMatMul with a
constant B a `qdense`; a DequantizeLinear of
constant integers feeding Gemm/MatMul is transposed on its integers (`quantized_nk`), so
`graph/fold_qdq.py` sees the QDQ pattern it folds into `qdense`."""

from __future__ import annotations

import numpy as np


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
    from .onnx import _spatial

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
    """QLinearMatMul with a constant 2-D B [K, N] (per tensor or per column): one `qdense`."""
    from ..fold_qdq import qconv_params
    from ..quantized_ops import DENSE_BLOCK, pack_dense_weight

    b = imp.const(ins[3], "B (only a constant weight is supported)")
    if b.ndim != 2 or b.shape[1] % DENSE_BLOCK or b.shape[0] % 4:
        raise imp.fail(f"B must be 2-D [K, N] with K a multiple of 4 and N of {DENSE_BLOCK}, got {list(b.shape)}")
    x_zero, y_zero = _zero_point(imp, ins, 2, np.uint8), _zero_point(imp, ins, 7, np.uint8)
    weight, mult, bias, _ = qconv_params(imp.const(ins[1], "a_scale"), x_zero, np.ascontiguousarray(b.T),
                                         imp.const(ins[4], "b_scale"), _zero_point(imp, ins, 5, b.dtype),
                                         imp.const(ins[6], "y_scale"), None,
                                         f"from_onnx: QLinearMatMul '{n.name or n.output[0]}'")
    vals = [imp.value(ins[0]), imp.b.constant(pack_dense_weight(weight), ins[3] + "_q"),
            imp.b.constant(mult, n.output[0] + "_mult"), imp.b.constant(bias, n.output[0] + "_bias")]
    imp.emit("qdense", vals, {"zero_point": int(y_zero), "out_dtype": y_zero.dtype.name}, n.output[0])


QUANTIZED_HANDLERS = {"QuantizeLinear": _quantize_linear, "DequantizeLinear": _dequantize_linear,
                      "QLinearConv": _qlinear_conv, "QLinearMatMul": _qlinear_matmul}

__all__ = ["QUANTIZED_HANDLERS", "quantized_nk"]

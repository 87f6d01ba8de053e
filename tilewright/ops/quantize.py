"""Quantized arithmetic as ONNX defines it (QLinearConv, QuantizeLinear, DequantizeLinear):
`quantize` and `dequantize` convert between float32 and uint8/int8; `requantize` turns an int32
accumulator plus an int32 bias into uint8/int8 with a per-channel float multiplier, rounding half
to even and saturating: one multiplication and no float addition, so no compiler can contract it
into a fused multiply-add that rounds differently from the reference; `qconv2d_nchwc` is the int8
convolution on packed data that dot-product instructions read."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ShapeError
from ..ir.dtype import as_dtype
from ..te import compute, const
from ..te import max as te_max
from ..te import min as te_min
from ..te import round as te_round
from ..te.tensor import Tensor
from .conv import expect_tensor


def requantize(acc: Tensor, multiplier: Tensor, bias: Tensor | None = None, zero_point: int = 0,
               channel_axes: Sequence[int] = (1,), out_dtype: str = "uint8", relu: bool = False,
               name: str = "requantize") -> Tensor:
    """q = saturate(round_half_even(float32(acc + bias[c]) * multiplier[c]) + zero_point), where `c` is the
    index of `acc` along `channel_axes` (multiplier and bias have those axes' extents: [C] for NCHW,
    [C/b, b] for NCHW{b}c with axes (1, 4)). multiplier = input scale x weight scale / output scale
    (float32); bias = round(float bias / (input scale x weight scale)) (int32; None: 0). `relu`: results
    below zero_point (negative before quantizing) become zero_point. out_dtype "float32": the dequantized
    result float32(acc + bias[c]) * multiplier[c] (multiplier = input scale x weight scale), not rounded,
    with relu at 0 (what a float epilogue before a later quantize reads)."""
    op = "requantize"
    expect_tensor(acc, op, "accumulator")
    expect_tensor(multiplier, op, "multiplier")
    if not acc.dtype.is_int:
        raise ShapeError(f"{op}: accumulator '{acc.name}' must be an integer tensor (int32), got {acc.dtype}")
    axes = tuple(channel_axes)
    if any(not 0 <= a < acc.ndim for a in axes):
        raise ShapeError(f"{op}: channel_axes {list(axes)} must be axes of '{acc.name}' (0..{acc.ndim - 1})")
    want = tuple(acc.shape[a] for a in axes)
    for t, dt in ((multiplier, "float32"), (bias, "int32")):
        if t is not None and (tuple(t.shape) != want or t.dtype.name != dt):
            raise ShapeError(f"{op}: '{t.name}' must be {dt} of shape {list(want)} (the extents of axes "
                             f"{list(axes)} of '{acc.name}'), got {t.dtype} {list(t.shape)}")
    dtype = as_dtype(out_dtype, f"{op} out_dtype")
    if dtype.name not in ("uint8", "int8", "float32"):
        raise ShapeError(f"{op}: out_dtype must be 'uint8', 'int8' or 'float32', got {out_dtype!r}")
    if dtype.name == "float32":
        def dequantized(*idx):
            c = tuple(idx[a] for a in axes)
            total = (acc[idx] if bias is None else acc[idx] + bias[c]).astype("float32") * multiplier[c]
            return te_max(total, const(0.0, "float32")) if relu else total

        return compute(acc.shape, dequantized, name=name)
    lo, hi = dtype.int_range
    if relu:
        lo = max(lo, int(zero_point))

    def body(*idx):
        c = tuple(idx[a] for a in axes)
        total = acc[idx] if bias is None else acc[idx] + bias[c]
        q = te_round(total.astype("float32") * multiplier[c]).astype("int32") + const(int(zero_point), "int32")
        return te_min(te_max(q, const(lo, "int32")), const(hi, "int32")).astype(dtype.name)

    return compute(acc.shape, body, name=name)


def qconv2d_nchwc(x: Tensor, w: Tensor, stride=1, padding=0, dilation=1, name: str = "qconv2d_nchwc") -> Tensor:
    """int8 convolution on packed data, accumulating in int32: x [N, C/ib, H, W, ib] (NCHW{ib}c, ib a
    multiple of 4, zero-padded), w [O/ob, C/ib, KH, KW, ib/4, ob, 4] -> [N, O/ob, OH, OW, ob]. The 4
    input channels a dot-product instruction (vpdpbusd, vpmaddubsw) sums are innermost in both
    operands, and each output lane's 4 weights are contiguous."""
    from .layout import conv2d_nchwc
    from .params import expect_ndim

    op = "qconv2d_nchwc"
    expect_tensor(x, op, "input")
    expect_tensor(w, op, "weight")
    expect_ndim(x, 5, op, "input", "NCHW{ib}c: N, C/ib, H, W, ib")
    expect_ndim(w, 7, op, "weight", "O/ob, C/ib, KH, KW, ib/4, ob, 4")
    if x.shape[4] % 4 or (w.shape[1], w.shape[4], w.shape[6]) != (x.shape[1], x.shape[4] // 4, 4):
        raise ShapeError(f"{op}: weight '{w.name}' {list(w.shape)} does not fit input '{x.name}' {list(x.shape)}; "
                         f"valid: [O/ob, {x.shape[1]}, KH, KW, {x.shape[4] // 4}, ob, 4] with an input block that "
                         "is a multiple of 4")
    return conv2d_nchwc(x, w, None, stride, padding, dilation, name, out_dtype="int32", weight_layout="dot")


def _per_axis(param: Tensor, x: Tensor, axis: int, op: str, what: str):
    """An index function reading `param` per element of `x`: a scalar (shape () or [1]) or one value per
    index of `axis`."""
    expect_tensor(param, op, what)
    if param.ndim == 0 or tuple(param.shape) == (1,):
        return lambda idx: param[(0,) * param.ndim]
    if not 0 <= axis < x.ndim or tuple(param.shape) != (x.shape[axis],):
        extent = x.shape[axis] if 0 <= axis < x.ndim else "C"
        raise ShapeError(f"{op}: {what} '{param.name}' must be a scalar or have shape [{extent}] (one per index "
                         f"of axis {axis} of '{x.name}', {list(x.shape)}), got {list(param.shape)}")
    return lambda idx: param[idx[axis]]


def quantize(x: Tensor, scale: Tensor, zero_point: Tensor, axis: int = 1, name: str = "quantize") -> Tensor:
    """ONNX QuantizeLinear: saturate(round_half_even(x / scale) + zero_point) in zero_point's dtype
    (uint8 or int8); scale and zero_point are scalars or one per index of `axis`."""
    op = "quantize"
    expect_tensor(x, op, "input")
    dtype = zero_point.dtype
    if dtype.name not in ("uint8", "int8"):
        raise ShapeError(f"{op}: zero point '{zero_point.name}' must be uint8 or int8, got {dtype}")
    axis = axis % x.ndim if x.ndim else 0
    s, z = _per_axis(scale, x, axis, op, "scale"), _per_axis(zero_point, x, axis, op, "zero point")
    lo, hi = dtype.int_range

    def body(*idx):
        q = te_round(x[idx].astype("float32") / s(idx)).astype("int32") + z(idx).astype("int32")
        return te_min(te_max(q, const(lo, "int32")), const(hi, "int32")).astype(dtype.name)

    return compute(x.shape, body, name=name)


def dequantize(x: Tensor, scale: Tensor, zero_point: Tensor, axis: int = 1, name: str = "dequantize") -> Tensor:
    """ONNX DequantizeLinear: float32(x - zero_point) * scale, per tensor or per index of `axis`."""
    op = "dequantize"
    expect_tensor(x, op, "input")
    if not x.dtype.is_int:
        raise ShapeError(f"{op}: input '{x.name}' must be an integer tensor, got {x.dtype}")
    axis = axis % x.ndim if x.ndim else 0
    s, z = _per_axis(scale, x, axis, op, "scale"), _per_axis(zero_point, x, axis, op, "zero point")
    return compute(x.shape, lambda *idx: (x[idx].astype("int32") - z(idx).astype("int32")).astype("float32")
                   * s(idx), name=name)


__all__ = ["requantize", "quantize", "dequantize", "qconv2d_nchwc"]

"""Quantized arithmetic as ONNX defines it (QLinearConv, QuantizeLinear):
`requantize` turns an int32 accumulator plus an int32 bias into uint8/int8
with a per-channel float multiplier, rounding half to even and saturating.
One multiplication and no float addition, so no compiler can contract it into
a fused multiply-add that rounds differently from the reference."""

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
               channel_axes: Sequence[int] = (1,), out_dtype: str = "uint8", name: str = "requantize") -> Tensor:
    """q = saturate(round_half_even(float32(acc + bias[c]) * multiplier[c]) + zero_point), where `c` is the
    index of `acc` along `channel_axes` (multiplier and bias have those axes' extents: [C] for NCHW,
    [C/b, b] for NCHW{b}c with axes (1, 4)). multiplier = input scale x weight scale / output scale
    (float32); bias = round(float bias / (input scale x weight scale)) (int32; None: 0)."""
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
    if dtype.name not in ("uint8", "int8"):
        raise ShapeError(f"{op}: out_dtype must be 'uint8' or 'int8', got {out_dtype!r}")
    lo, hi = dtype.int_range

    def body(*idx):
        c = tuple(idx[a] for a in axes)
        total = acc[idx] if bias is None else acc[idx] + bias[c]
        q = te_round(total.astype("float32") * multiplier[c]).astype("int32") + const(int(zero_point), "int32")
        return te_min(te_max(q, const(lo, "int32")), const(hi, "int32")).astype(dtype.name)

    return compute(acc.shape, body, name=name)


__all__ = ["requantize"]

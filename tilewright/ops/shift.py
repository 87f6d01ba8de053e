"""Shift convolution (ShiftNet), NHWC, as the FlexTensor suite's SHO operator:

    out[n, h, w, c] = pad(x)[n, h*stride + (shift[c] // kw)*dilation, w*stride + (shift[c] % kw)*dilation, c]

`shift` [C] holds, per channel, a flat kernel position in [0, kh*kw); the
positions are data, so the row/column are loads inside index expressions. A
position outside that range is clamped into it, so no value of `shift` can
make the kernel read outside the padded input (and lowering can prove it).
Each axis is padded by total = (stride-1)*size - stride + dilation*(k-1) + 1
split as total//2 before and the rest after, so the output keeps the input size
(the suite's definition pads total/2 per side; the two agree when total is
even, and an odd total puts the extra element after, like padding='same').
"""

from __future__ import annotations

from ..errors import DTypeError, ShapeError
from ..te import compute
from ..te import max as max_of
from ..te import min as min_of
from ..te.tensor import Tensor
from .conv import expect_tensor
from .pad import pad_axes
from .params import expect_ndim, named_axes, ntuple


def shift_conv2d(x: Tensor, shift: Tensor, kernel, stride=1, dilation=1, name: str = "shift_conv2d") -> Tensor:
    """x [N, H, W, C] (NHWC), shift [C] integer in [0, kh*kw), kernel int or (kh, kw) -> [N, H, W, C]."""
    op = "shift_conv2d"
    expect_tensor(x, op, "input")
    expect_tensor(shift, op, "shift")
    expect_ndim(x, 4, op, "input", "NHWC")
    expect_ndim(shift, 1, op, "shift", "one kernel position per channel")
    if not shift.dtype.is_int:
        raise DTypeError(f"{op}: shift '{shift.name}' must have an integer dtype (int32), got {shift.dtype}")
    channels = x.shape[3]
    if shift.shape[0] != channels:
        raise ShapeError(
            f"{op}: shift '{shift.name}' has {shift.shape[0]} entries but input '{x.name}' has {channels} "
            f"channels (NHWC); give one kernel position per channel"
        )
    kh, kw = ntuple(kernel, 2, op, "kernel", 1)
    stride = ntuple(stride, 2, op, "stride", 1)
    dilation = ntuple(dilation, 2, op, "dilation", 1)
    sizes = x.shape[1:3]
    totals = [(s - 1) * n - s + d * (k - 1) + 1 for n, k, s, d in zip(sizes, (kh, kw), stride, dilation, strict=True)]
    before = [t // 2 for t in totals]
    after = [t - b for t, b in zip(totals, before, strict=True)]
    data = pad_axes(x, [0, *before, 0], [0, *after, 0], 0, name=f"{name}_pad")
    (sh, sw), (dh, dw) = stride, dilation

    def body(n, h, w, c):
        pos = max_of(min_of(shift[c], kh * kw - 1), 0)
        return data[n, h * sh + (pos // kw) * dh, w * sw + (pos % kw) * dw, c]

    return compute(x.shape, named_axes(body, ("n", "h", "w", "c")), name=name)

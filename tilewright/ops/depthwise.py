"""Depthwise 2-D convolution with a channel multiplier, in PyTorch's layout:
x [N, C, H, W], w [C*M, 1, KH, KW]; output channel o reads input channel o // M.
Equals F.conv2d(x, w, groups=C), written without the size-1 channel reduction."""

from __future__ import annotations

from ..errors import ShapeError
from ..te import compute, reduce_axis
from ..te import sum as te_sum
from ..te.tensor import Tensor
from .conv import add_bias, check_bias, conv_padding, expect_same_dtype, expect_tensor, out_sizes
from .pad import pad_axes
from .params import expect_ndim, named_axes, ntuple


def depthwise_conv2d(x: Tensor, w: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
                     name: str = "depthwise_conv2d") -> Tensor:
    """x [N, C, H, W], w [C*M, 1, KH, KW], bias [C*M] -> [N, C*M, OH, OW]."""
    op = "depthwise_conv2d"
    expect_tensor(x, op, "input")
    expect_tensor(w, op, "weight")
    expect_ndim(x, 4, op, "input", "NCHW")
    expect_ndim(w, 4, op, "weight", "C*M, 1, KH, KW")
    expect_same_dtype(x, w, op, "weight")
    stride = ntuple(stride, 2, op, "stride", 1)
    dilation = ntuple(dilation, 2, op, "dilation", 1)
    channels, out_channels, kernel = x.shape[1], w.shape[0], w.shape[2:]
    if w.shape[1] != 1:
        raise ShapeError(
            f"{op}: weight '{w.name}' must have shape [C*M, 1, KH, KW] (PyTorch's depthwise layout), "
            f"but its axis 1 is {w.shape[1]}; it must be 1"
        )
    if out_channels % channels:
        raise ShapeError(
            f"{op}: weight '{w.name}' has {out_channels} output channels, which must be a multiple of the "
            f"{channels} channels of input '{x.name}' (C*M for channel multiplier M)"
        )
    multiplier = out_channels // channels
    before, after = conv_padding(padding, kernel, stride, dilation, op)
    out_spatial = out_sizes(x, x.shape[2:], kernel, stride, before, after, dilation, ("h", "w"), op)
    check_bias(bias, x, out_channels, op)

    data = pad_axes(x, [0, 0, *before], [0, 0, *after], 0, name=f"{name}_pad")
    rh, rw = reduce_axis(kernel[0], "rh"), reduce_axis(kernel[1], "rw")
    (sh, sw), (dh, dw) = stride, dilation

    def body(n, o, h, w_):
        src = data[n, o // multiplier, h * sh + rh * dh, w_ * sw + rw * dw]
        return te_sum(src * w[o, 0, rh, rw], axis=[rh, rw])

    names = ("n", "o", "h", "w")
    shape = (x.shape[0], out_channels, *out_spatial)
    acc = compute(shape, named_axes(body, names), name=name if bias is None else f"{name}_sum")
    return add_bias(acc, bias, lambda *i: i[1], names, name)

"""Convolution: torch.nn.functional.conv1d / conv2d / conv3d.

One N-d implementation. Data is channels-first (NCL, NCHW, NCDHW) with weights
[O, C/groups, k...], or, for conv2d, channels-last NHWC with HWIO weights.
Padding is its own stage (only when there is any), the convolution is a single
`tw.sum` stage and the bias another stage, so the reduction stays a plain
multiply-accumulate that a schedule can tile. Stages are named `{name}_pad`,
`{name}_sum` (only with a bias) and `{name}` (the output).

The helpers below (padding, validation, bias) are shared by the other
convolution-family modules.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import DTypeError, ShapeError
from ..ir.dtype import as_dtype
from ..te import compute, reduce_axis
from ..te import sum as te_sum
from ..te.tensor import Tensor
from .pad import pad_axes
from .params import conv_out_size, expect_ndim, named_axes, ntuple

SPATIAL_AXES = {1: ("l",), 2: ("h", "w"), 3: ("d", "h", "w")}
CHANNELS_FIRST = {1: "NCL", 2: "NCHW", 3: "NCDHW"}
WEIGHT_LAYOUT = {1: "OIL", 2: "OIHW", 3: "OIDHW"}
CONV2D_LAYOUTS = {"NCHW": "OIHW", "NHWC": "HWIO"}


def expect_tensor(t, op: str, role: str) -> None:
    if not isinstance(t, Tensor):
        raise ShapeError(
            f"{op}: {role} must be a tilewright Tensor (tw.placeholder or tw.compute), got {type(t).__name__}"
        )


def expect_same_dtype(x: Tensor, other: Tensor, op: str, role: str) -> None:
    if other.dtype != x.dtype:
        raise DTypeError(
            f"{op}: {role} '{other.name}' has dtype {other.dtype} but input '{x.name}' has {x.dtype}; "
            f"they must match: tw.cast one of them first"
        )


def check_groups(groups, op: str) -> int:
    return ntuple(groups, 1, op, "groups", 1)[0]


def check_bias(bias, x: Tensor, channels: int, op: str, out_dtype=None) -> None:
    """`bias` has one value per output channel, in the accumulator's dtype (`out_dtype`, else x's)."""
    if bias is None:
        return
    expect_tensor(bias, op, "bias")
    if bias.shape != (channels,):
        raise ShapeError(
            f"{op}: bias '{bias.name}' must have shape [{channels}] (one value per output channel), "
            f"got {list(bias.shape)}"
        )
    if out_dtype is None:
        expect_same_dtype(x, bias, op, "bias")
    elif bias.dtype != as_dtype(out_dtype):
        raise DTypeError(f"{op}: bias '{bias.name}' has dtype {bias.dtype}; with out_dtype {as_dtype(out_dtype)} it "
                         f"must be {as_dtype(out_dtype)} (the accumulator's dtype)")


def add_bias(acc: Tensor, bias: Tensor | None, channel_index, names: Sequence[str], name: str) -> Tensor:
    """`acc + bias[channel_index(*idx)]` as its own stage; `acc` itself without a bias."""
    if bias is None:
        return acc
    return compute(acc.shape, named_axes(lambda *i: acc[i] + bias[channel_index(*i)], names), name=name)


def conv_padding(padding, kernel: Sequence[int], stride: Sequence[int], dilation: Sequence[int],
                 op: str) -> tuple[list[int], list[int]]:
    """(before, after) per spatial axis from PyTorch's `padding`: an int, one int per
    axis (both sides), "valid" (none) or "same" (stride 1 only; an odd total puts
    the extra element after, as PyTorch does)."""
    n = len(kernel)
    if isinstance(padding, str):
        if padding == "valid":
            return [0] * n, [0] * n
        if padding == "same":
            if any(s != 1 for s in stride):
                raise ShapeError(
                    f"{op}: padding='same' needs stride 1 on every axis (as in PyTorch), got stride={tuple(stride)}; "
                    f"give the padding as ints instead"
                )
            total = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
            before = [t // 2 for t in total]
            return before, [t - b for t, b in zip(total, before, strict=True)]
        raise ShapeError(f"{op}: padding must be an int, {n} ints, 'valid' or 'same', got {padding!r}")
    try:
        p = ntuple(padding, n, op, "padding", 0)
    except ShapeError as e:
        raise ShapeError(f"{e}; it may also be 'valid' or 'same'") from None
    return list(p), list(p)


def out_sizes(x: Tensor, sizes, kernel, stride, before, after, dilation, axes: Sequence[str], op: str) -> list[int]:
    return [
        conv_out_size(n, k, s, b, a, d, op, f"axis {ax.upper()} of input '{x.name}'")
        for n, k, s, b, a, d, ax in zip(sizes, kernel, stride, before, after, dilation, axes, strict=True)
    ]


def conv1d(x: Tensor, w: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1, groups=1,
           name: str = "conv1d") -> Tensor:
    """F.conv1d: x [N, C, L], w [O, C/groups, K], bias [O] -> [N, O, OL]."""
    return conv_nd(x, w, bias, stride, padding, dilation, groups, nsp=1, channels_last=False, op="conv1d", name=name)


def conv2d(x: Tensor, w: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1, groups=1,
           layout: str = "NCHW", name: str = "conv2d", out_dtype=None) -> Tensor:
    """F.conv2d: x [N, C, H, W], w [O, C/groups, KH, KW] -> [N, O, OH, OW]; with
    layout="NHWC": x [N, H, W, C], w [KH, KW, C/groups, O] (HWIO) -> [N, OH, OW, O].
    `out_dtype="int32"`: u8/s8 operands accumulate in int32 (TVM's spelling)."""
    if layout not in CONV2D_LAYOUTS:
        valid = " or ".join(f"'{d}' (weight {k})" for d, k in CONV2D_LAYOUTS.items())
        raise ShapeError(f"conv2d: layout must be {valid}, got {layout!r}")
    return conv_nd(x, w, bias, stride, padding, dilation, groups, nsp=2, channels_last=layout == "NHWC",
                   op="conv2d", name=name, out_dtype=out_dtype)


def conv3d(x: Tensor, w: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1, groups=1,
           name: str = "conv3d") -> Tensor:
    """F.conv3d: x [N, C, D, H, W], w [O, C/groups, KD, KH, KW] -> [N, O, OD, OH, OW]."""
    return conv_nd(x, w, bias, stride, padding, dilation, groups, nsp=3, channels_last=False, op="conv3d", name=name)


def conv_nd(x: Tensor, w: Tensor, bias: Tensor | None, stride, padding, dilation, groups, *, nsp: int,
            channels_last: bool, op: str, name: str, out_dtype=None) -> Tensor:
    """Grouped, dilated, strided N-d convolution; see conv1d/conv2d/conv3d. `out_dtype` (TVM's):
    both operands are cast to it before multiplying (u8 x s8 accumulating in int32)."""
    spatial = SPATIAL_AXES[nsp]
    layout = "N" + "".join(spatial).upper() + "C" if channels_last else CHANNELS_FIRST[nsp]
    wlayout = "".join(spatial).upper() + "IO" if channels_last else WEIGHT_LAYOUT[nsp]
    expect_tensor(x, op, "input")
    expect_tensor(w, op, "weight")
    expect_ndim(x, nsp + 2, op, "input", layout)
    expect_ndim(w, nsp + 2, op, "weight", wlayout)
    if out_dtype is None:
        expect_same_dtype(x, w, op, "weight")
    else:
        out_dtype = as_dtype(out_dtype, f"{op} out_dtype").name
    groups = check_groups(groups, op)
    stride = ntuple(stride, nsp, op, "stride", 1)
    dilation = ntuple(dilation, nsp, op, "dilation", 1)
    if channels_last:
        channels, sizes, out_channels, w_in, kernel = x.shape[-1], x.shape[1:-1], w.shape[-1], w.shape[-2], w.shape[:-2]
    else:
        channels, sizes, out_channels, w_in, kernel = x.shape[1], x.shape[2:], w.shape[0], w.shape[1], w.shape[2:]
    if channels % groups:
        raise ShapeError(
            f"{op}: input '{x.name}' has {channels} channels, which groups={groups} does not divide; "
            f"groups must divide in_channels"
        )
    if out_channels % groups:
        raise ShapeError(
            f"{op}: weight '{w.name}' has {out_channels} output channels, which groups={groups} does not divide; "
            f"groups must divide out_channels"
        )
    if w_in != channels // groups:
        raise ShapeError(
            f"{op}: weight '{w.name}' ({wlayout}, shape {list(w.shape)}) has {w_in} input channels per group, but "
            f"input '{x.name}' has {channels} channels and groups={groups}, so it must be {channels // groups}"
        )
    before, after = conv_padding(padding, kernel, stride, dilation, op)
    out_spatial = out_sizes(x, sizes, kernel, stride, before, after, dilation, spatial, op)
    check_bias(bias, x, out_channels, op, out_dtype)

    if channels_last:
        data = pad_axes(x, [0, *before, 0], [0, *after, 0], 0, name=f"{name}_pad")
        shape = (x.shape[0], *out_spatial, out_channels)
        names = ("n", *spatial, "o")
    else:
        data = pad_axes(x, [0, 0, *before], [0, 0, *after], 0, name=f"{name}_pad")
        shape = (x.shape[0], out_channels, *out_spatial)
        names = ("n", "o", *spatial)
    # the parameters, for backends that lower whole operators (target "vta" takes an NCHW int8 conv2d)
    attrs = {"operator": op, "stride": stride, "padding": tuple(before), "padding_after": tuple(after),
             "dilation": dilation, "groups": groups, "layout": layout}
    if all(k == 1 for k in kernel) and any(st > 1 for st in stride) and not any(before) and not any(after):
        # a strided 1x1 reads only every stride-th element: taking those into their own stage lets the
        # schedule copy them once (a dense, mergeable input for a stride-1 contraction) or inline the read
        data, stride = _subsample(data, stride, channels_last, name), (1,) * nsp
    group_in, group_out = channels // groups, out_channels // groups
    rc = reduce_axis(group_in, "rc")
    rs = [reduce_axis(k, f"r{a}") for k, a in zip(kernel, spatial, strict=True)]

    def body(*idx):
        n, o, sp = (idx[0], idx[-1], idx[1:-1]) if channels_last else (idx[0], idx[1], idx[2:])
        # groups == 1 keeps the data read independent of o (one GEMM-like contraction)
        c = rc if groups == 1 else (o // group_out) * group_in + rc
        pos = [s * st + r * dl for s, r, st, dl in zip(sp, rs, stride, dilation, strict=True)]
        a, b = (data[(n, *pos, c)], w[(*rs, rc, o)]) if channels_last else (data[(n, c, *pos)], w[(o, rc, *rs)])
        if out_dtype is not None:
            a, b = a.astype(out_dtype), b.astype(out_dtype)
        return te_sum(a * b, axis=[rc, *rs])

    acc = compute(shape, named_axes(body, names), name=name if bias is None else f"{name}_sum", attrs=attrs)
    channel = (lambda *i: i[-1]) if channels_last else (lambda *i: i[1])
    return add_bias(acc, bias, channel, names, name)


def _subsample(x: Tensor, stride, channels_last: bool, name: str) -> Tensor:
    """Every stride-th element of `x` along its spatial axes (the only ones a strided 1x1 reads)."""
    first = 1 if channels_last else 2
    nsp = len(stride)
    shape = list(x.shape)
    for d, st in enumerate(stride):
        shape[first + d] = (shape[first + d] - 1) // st + 1

    def body(*idx):
        return x[tuple(i * stride[d - first] if first <= d < first + nsp else i for d, i in enumerate(idx))]

    names = ["n", *SPATIAL_AXES[nsp], "c"] if channels_last else ["n", "c", *SPATIAL_AXES[nsp]]
    return compute(tuple(shape), named_axes(body, names), name=f"{name}_stride")

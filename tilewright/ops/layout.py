"""Data layouts in TVM's notation, and convolution on packed (NCHWc) data.

A layout string lists the axes in memory order: an upper-case letter is a
primal axis, a number and a lower-case letter is a split sub-axis of that
primal axis (the inner part): "NCHW8c" is NCHW with C cut into blocks of 8
stored innermost, "OIHW8i16o" packs a conv weight the same way.
"""

from __future__ import annotations

import re

from ..errors import ShapeError
from ..ir.dtype import as_dtype
from ..te import compute, reduce_axis
from ..te import sum as te_sum
from ..te.tensor import Tensor
from .conv import add_bias, check_bias, conv_padding, expect_same_dtype, expect_tensor, out_sizes
from .pad import pad_axes
from .params import expect_ndim, named_axes, ntuple

_TOKEN = re.compile(r"([A-Z])|([1-9][0-9]*)([a-z])")


def parse_layout(layout, op: str, role: str) -> list[tuple[str, int]]:
    """Tokens (primal letter, split factor; 0 for the primal axis itself)."""
    if not isinstance(layout, str) or not layout:
        raise ShapeError(f"{op}: {role} layout must be a non-empty string such as 'NCHW8c', got {layout!r}")
    tokens, pos = [], 0
    while pos < len(layout):
        m = _TOKEN.match(layout, pos)
        if m is None:
            raise ShapeError(
                f"{op}: {role} layout {layout!r} is invalid at {layout[pos:]!r}; primal axes are upper-case "
                f"letters and split sub-axes a positive number plus the lower-case letter, e.g. 'NCHW8c'"
            )
        tokens.append((m.group(1), 0) if m.group(1) else (m.group(3).upper(), int(m.group(2))))
        pos = m.end()
    primal = [a for a, f in tokens if f == 0]
    splits = [a for a, f in tokens if f]
    for letters, what in ((primal, "primal axis"), (splits, "split sub-axis")):
        dup = sorted({a for a in letters if letters.count(a) > 1})
        if dup:
            raise ShapeError(f"{op}: {role} layout {layout!r} repeats the {what} {', '.join(dup)}; each appears once")
    orphans = sorted(set(splits) - set(primal))
    if orphans:
        raise ShapeError(
            f"{op}: {role} layout {layout!r} splits {', '.join(a.lower() for a in orphans)} without the primal "
            f"axis {', '.join(orphans)}; a sub-axis needs its upper-case axis too"
        )
    return tokens


def _axis_name(letter: str, factor: int) -> str:
    return letter.lower() + ("_inner" if factor else "")


def layout_transform(t: Tensor, src: str, dst: str, name: str = "layout_transform") -> Tensor:
    """Re-pack `t`, laid out as `src`, into layout `dst` (e.g. "NCHW" -> "NCHW8c",
    "NCHW16c" -> "NCHW", "NCHW" -> "NHWC", "OIHW" -> "OIHW8i16o"). Returns `t`
    itself when the layouts are equal."""
    op = "layout_transform"
    expect_tensor(t, op, "input")
    src_tokens, dst_tokens = parse_layout(src, op, "src"), parse_layout(dst, op, "dst")
    src_primal = sorted(a for a, f in src_tokens if f == 0)
    dst_primal = sorted(a for a, f in dst_tokens if f == 0)
    if src_primal != dst_primal:
        raise ShapeError(
            f"{op}: src layout {src!r} and dst layout {dst!r} must have the same primal (upper-case) axes, got "
            f"{''.join(src_primal)} and {''.join(dst_primal)}"
        )
    if len(src_tokens) != t.ndim:
        raise ShapeError(
            f"{op}: src layout {src!r} has {len(src_tokens)} axes but tensor '{t.name}' has shape {list(t.shape)}"
        )
    src_split = {a: f for a, f in src_tokens if f}
    dst_split = {a: f for a, f in dst_tokens if f}
    extent = {}
    for (a, f), n in zip(src_tokens, t.shape, strict=True):
        if f and n != f:
            raise ShapeError(
                f"{op}: src layout {src!r} says sub-axis {f}{a.lower()} has extent {f} but tensor '{t.name}' "
                f"(shape {list(t.shape)}) has {n} there"
            )
        if not f:
            extent[a] = n * src_split.get(a, 1)
    for a, f in dst_split.items():
        if extent[a] % f:
            raise ShapeError(
                f"{op}: dst layout {dst!r} splits axis {a} (extent {extent[a]}) into blocks of {f}, which does not "
                f"divide it; use a factor of {extent[a]}"
            )
    if src_tokens == dst_tokens:
        return t
    shape = tuple(f if f else extent[a] // dst_split.get(a, 1) for a, f in dst_tokens)

    def body(*idx):
        at = dict(zip(dst_tokens, idx, strict=True))
        out = []
        for a, f in src_tokens:
            fs, fd = src_split.get(a, 0), dst_split.get(a, 0)
            if fs == fd:  # same decomposition: copy the index
                out.append(at[(a, f)])
                continue
            logical = at[(a, 0)] * fd + at[(a, fd)] if fd else at[(a, 0)]
            out.append(logical % fs if f else (logical // fs if fs else logical))
        return t[tuple(out)]

    return compute(shape, named_axes(body, [_axis_name(a, f) for a, f in dst_tokens]), name=name)


def _packed_window(x: Tensor, w: Tensor, stride, padding, dilation, op: str, name: str):
    """The sliding window of a convolution on NCHW{b}c data with a 6-D weight (KH, KW at axes 2, 3):
    the zero-padded input stage, the output's (OH, OW), the (rh, rw) reduce axes, stride, dilation."""
    stride = ntuple(stride, 2, op, "stride", 1)
    dilation = ntuple(dilation, 2, op, "dilation", 1)
    kernel = w.shape[2:4]
    before, after = conv_padding(padding, kernel, stride, dilation, op)
    out_spatial = out_sizes(x, x.shape[2:4], kernel, stride, before, after, dilation, ("h", "w"), op)
    data = pad_axes(x, [0, 0, *before, 0], [0, 0, *after, 0], 0, name=f"{name}_pad")
    window = reduce_axis(kernel[0], "rh"), reduce_axis(kernel[1], "rw")
    return data, out_spatial, window, stride, dilation


_WEIGHT_LAYOUTS = {  # weight_layout -> (rank, axes of (input block, output block), description)
    "io": (6, (4, 5), "OIHW{cb}i{ob}o: O/ob, C/cb, KH, KW, cb, ob"),
    "oi": (6, (5, 4), "OIHW{ob}o{cb}i: O/ob, C/cb, KH, KW, ob, cb"),
    "dot": (7, (4, 5), "O/ob, C/cb, KH, KW, cb/g, ob, g"),
}


def conv2d_nchwc(x: Tensor, w: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
                 name: str = "conv2d_nchwc", out_dtype=None, weight_layout: str = "io") -> Tensor:
    """Convolution on packed data: x [N, C/cb, H, W, cb] (NCHW{cb}c), w [O/ob, C/cb, KH, KW, cb, ob]
    (OIHW{cb}i{ob}o), bias [O] -> [N, O/ob, OH, OW, ob] (NCHW{ob}c). No groups.
    `weight_layout="oi"`: w [O/ob, C/cb, KH, KW, ob, cb] (OIHW{ob}o{cb}i: each output lane's input
    channels contiguous); `"dot"`: w [O/ob, C/cb, KH, KW, cb/g, ob, g], each output lane's g input
    channels contiguous, what a g-wide dot-product instruction reads (g = 2 for bf16 `vdpbf16ps`,
    4 for int8 `vpdpbusd`). `out_dtype` (TVM's): both operands are cast to it before multiplying,
    so u8 x s8 accumulates in int32 and bf16 in float32."""
    op = "conv2d_nchwc"
    expect_tensor(x, op, "input")
    expect_tensor(w, op, "weight")
    expect_ndim(x, 5, op, "input", "NCHW{cb}c: N, C/cb, H, W, cb")
    if weight_layout not in _WEIGHT_LAYOUTS:
        raise ShapeError(f"{op}: weight_layout must be one of {', '.join(map(repr, _WEIGHT_LAYOUTS))}, "
                         f"got {weight_layout!r}")
    rank, (cb_at, ob_at), described = _WEIGHT_LAYOUTS[weight_layout]
    expect_ndim(w, rank, op, "weight", described)
    if out_dtype is None:
        expect_same_dtype(x, w, op, "weight")
    else:
        out_dtype = as_dtype(out_dtype, f"{op} out_dtype")
    group = w.shape[6] if weight_layout == "dot" else 1
    if (w.shape[1], w.shape[cb_at] * group) != (x.shape[1], x.shape[4]):
        raise ShapeError(
            f"{op}: weight '{w.name}' (shape {list(w.shape)}) must hold {x.shape[1]} input blocks of {x.shape[4]} "
            f"channels (axes 1 and {cb_at}{', 6' if group > 1 else ''}) to match input '{x.name}' (shape "
            f"{list(x.shape)}), got {w.shape[1]} blocks of {w.shape[cb_at] * group}; conv2d_nchwc has no groups "
            f"parameter (grouped convolution is not supported on packed data: use conv2d(..., groups=...) on NCHW)"
        )
    out_blocks, block = w.shape[0], w.shape[ob_at]
    check_bias(bias, x, out_blocks * block, op, out_dtype)
    data, out_spatial, (rh, rw), (sh, sw), (dh, dw) = _packed_window(x, w, stride, padding, dilation, op, name)
    rc = reduce_axis(x.shape[1], "rc")
    if weight_layout == "dot":
        pair, inner = reduce_axis(w.shape[4], "rc_pair"), reduce_axis(group, "rc_inner")
        channel, axes = pair * group + inner, [rc, rh, rw, pair, inner]
    else:
        channel = reduce_axis(x.shape[4], "rc_inner")
        axes = [rc, rh, rw, channel]

    def body(n, o, h, w_, oi):
        src = data[n, rc, h * sh + rh * dh, w_ * sw + rw * dw, channel]
        wv = w[o, rc, rh, rw, channel, oi] if weight_layout == "io" else w[o, rc, rh, rw, oi, channel] \
            if weight_layout == "oi" else w[o, rc, rh, rw, pair, oi, inner]
        if out_dtype is not None:
            src, wv = src.astype(out_dtype.name), wv.astype(out_dtype.name)
        return te_sum(src * wv, axis=axes)

    names = ("n", "o", "h", "w", "o_inner")
    shape = (x.shape[0], out_blocks, *out_spatial, block)
    acc = compute(shape, named_axes(body, names), name=name if bias is None else f"{name}_sum")
    return add_bias(acc, bias, lambda n, o, h, w_, oi: o * block + oi, names, name)


def depthwise_conv2d_nchwc(x: Tensor, w: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
                           name: str = "depthwise_conv2d_nchwc") -> Tensor:
    """Depthwise convolution on packed data, vectorizable over the channel block:
    x [N, C/b, H, W, b] (NCHW{b}c), w [C/b, 1, KH, KW, 1, b] (OIHW1i{b}o: one input
    channel per group), bias [C] -> [N, C/b, OH, OW, b]. Channel multiplier 1."""
    op = "depthwise_conv2d_nchwc"
    expect_tensor(x, op, "input")
    expect_tensor(w, op, "weight")
    expect_ndim(x, 5, op, "input", "NCHW{b}c: N, C/b, H, W, b")
    expect_ndim(w, 6, op, "weight", "OIHW1i{b}o: C/b, 1, KH, KW, 1, b")
    expect_same_dtype(x, w, op, "weight")
    if (w.shape[0], w.shape[1], w.shape[4], w.shape[5]) != (x.shape[1], 1, 1, x.shape[4]):
        raise ShapeError(
            f"{op}: weight '{w.name}' (shape {list(w.shape)}) must have shape [{x.shape[1]}, 1, KH, KW, 1, "
            f"{x.shape[4]}] to match input '{x.name}' (shape {list(x.shape)}): one {x.shape[4]}-channel block "
            f"per input block, one input channel per group"
        )
    block = x.shape[4]
    check_bias(bias, x, x.shape[1] * block, op)
    data, out_spatial, (rh, rw), (sh, sw), (dh, dw) = _packed_window(x, w, stride, padding, dilation, op, name)

    def body(n, c, h, w_, ci):
        return te_sum(data[n, c, h * sh + rh * dh, w_ * sw + rw * dw, ci] * w[c, 0, rh, rw, 0, ci], axis=[rh, rw])

    names = ("n", "c", "h", "w", "c_inner")
    shape = (x.shape[0], x.shape[1], *out_spatial, block)
    acc = compute(shape, named_axes(body, names), name=name if bias is None else f"{name}_sum")
    return add_bias(acc, bias, lambda n, c, h, w_, ci: c * block + ci, names, name)

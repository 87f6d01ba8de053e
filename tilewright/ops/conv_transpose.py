"""Transposed convolution: torch.nn.functional.conv_transpose1d / 2d / 3d.

Written as TVM does: one stage spreads the input out (stride-1 zeros between
neighbours) and pads it by dilation*(k-1) - padding before and that plus
output_padding after (a negative amount crops), then a stride-1 convolution
with the spatially flipped kernel. A strided one with many outputs per phase
(groups 1, dilation 1) is instead computed per output phase without the
inserted zeros (`phase_transpose`). Weights use PyTorch's layout
[C_in, C_out/groups, k...].
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..errors import ShapeError
from ..te import all as all_of
from ..te import compute, if_then_else, reduce_axis
from ..te import sum as te_sum
from ..te.tensor import Tensor
from .conv import CHANNELS_FIRST, SPATIAL_AXES, add_bias, check_bias, check_groups, expect_same_dtype, expect_tensor
from .pad import pad_axes
from .params import expect_ndim, named_axes, ntuple

# Phase decomposition regroups the weights on every call (one pass over them) and forces tiles
# per phase; below this many outputs per phase that costs more than the inserted zeros save
# (YOLO conv22 reversed, 7 x 7 per phase: 40 ms spread, 230 ms phased; conv1 reversed,
# 224 x 224 per phase: 315 ms spread, 22 ms phased, both untuned defaults).
MIN_PHASE_POINTS = 256


def conv_transpose1d(x: Tensor, w: Tensor, bias: Tensor | None = None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1, name: str = "conv_transpose1d") -> Tensor:
    """F.conv_transpose1d: x [N, C, L], w [C, O/groups, K], bias [O] -> [N, O, OL]."""
    return conv_transpose_nd(x, w, bias, stride, padding, output_padding, groups, dilation, nsp=1,
                             op="conv_transpose1d", name=name)


def conv_transpose2d(x: Tensor, w: Tensor, bias: Tensor | None = None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1, name: str = "conv_transpose2d") -> Tensor:
    """F.conv_transpose2d: x [N, C, H, W], w [C, O/groups, KH, KW], bias [O] -> [N, O, OH, OW]."""
    return conv_transpose_nd(x, w, bias, stride, padding, output_padding, groups, dilation, nsp=2,
                             op="conv_transpose2d", name=name)


def conv_transpose3d(x: Tensor, w: Tensor, bias: Tensor | None = None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1, name: str = "conv_transpose3d") -> Tensor:
    """F.conv_transpose3d: x [N, C, D, H, W], w [C, O/groups, KD, KH, KW], bias [O] -> [N, O, OD, OH, OW]."""
    return conv_transpose_nd(x, w, bias, stride, padding, output_padding, groups, dilation, nsp=3,
                             op="conv_transpose3d", name=name)


def conv_transpose_nd(x: Tensor, w: Tensor, bias: Tensor | None, stride, padding, output_padding, groups, dilation,
                      *, nsp: int, op: str, name: str) -> Tensor:
    """Each output size is (in-1)*stride - 2*padding + dilation*(k-1) + output_padding + 1."""
    spatial = SPATIAL_AXES[nsp]
    expect_tensor(x, op, "input")
    expect_tensor(w, op, "weight")
    expect_ndim(x, nsp + 2, op, "input", CHANNELS_FIRST[nsp])
    kernel_axes = ", ".join(f"K{a.upper()}" for a in spatial)
    expect_ndim(w, nsp + 2, op, "weight", f"in_channels, out_channels/groups, {kernel_axes}")
    expect_same_dtype(x, w, op, "weight")
    groups = check_groups(groups, op)
    stride = ntuple(stride, nsp, op, "stride", 1)
    dilation = ntuple(dilation, nsp, op, "dilation", 1)
    if isinstance(padding, str):
        raise ShapeError(
            f"{op}: padding must be an int or {nsp} ints, got {padding!r}; transposed convolution has no "
            f"'same'/'valid' padding (as in PyTorch)"
        )
    padding = ntuple(padding, nsp, op, "padding", 0)
    output_padding = ntuple(output_padding, nsp, op, "output_padding", 0)
    for ax, p, s, d in zip(spatial, output_padding, stride, dilation, strict=True):
        if p >= max(s, d):
            raise ShapeError(
                f"{op}: output_padding={output_padding} must be smaller than stride or dilation on each axis, "
                f"but along axis {ax.upper()} it is {p} with stride {s} and dilation {d}"
            )
    channels, sizes, kernel = x.shape[1], x.shape[2:], w.shape[2:]
    if w.shape[0] != channels:
        raise ShapeError(
            f"{op}: weight '{w.name}' (shape {list(w.shape)}) has {w.shape[0]} input channels on axis 0, but input "
            f"'{x.name}' has {channels}; the weight layout is [in_channels, out_channels/groups, k...]"
        )
    if channels % groups:
        raise ShapeError(
            f"{op}: input '{x.name}' has {channels} channels, which groups={groups} does not divide; "
            f"groups must divide in_channels"
        )
    out_channels = w.shape[1] * groups
    out_spatial = []
    for ax, n, k, s, p, d, op_ in zip(spatial, sizes, kernel, stride, padding, dilation, output_padding, strict=True):
        size = (n - 1) * s - 2 * p + d * (k - 1) + op_ + 1
        if size <= 0:
            raise ShapeError(
                f"{op}: along axis {ax.upper()} of input '{x.name}' the output size (in-1)*stride - 2*padding + "
                f"dilation*(k-1) + output_padding + 1 = {size} is not positive; padding={p} is too large"
            )
        out_spatial.append(size)
    check_bias(bias, x, out_channels, op)

    before = [d * (k - 1) - p for k, p, d in zip(kernel, padding, dilation, strict=True)]
    names = ("n", "o", *spatial)
    per_phase = math.prod(-(-o // s) for o, s in zip(out_spatial, stride, strict=True))
    if groups == 1 and all(d == 1 for d in dilation) and any(s > 1 for s in stride) and per_phase >= MIN_PHASE_POINTS:
        acc = phase_transpose(x, w, stride, before, out_spatial, name, name if bias is None else f"{name}_sum")
        return add_bias(acc, bias, lambda *i: i[1], names, name)
    after = [b + p for b, p in zip(before, output_padding, strict=True)]
    data = spread_pad(x, stride, before, after, name=f"{name}_pad")

    group_in, group_out = channels // groups, out_channels // groups
    rc = reduce_axis(group_in, "rc")
    rs = [reduce_axis(k, f"r{a}") for k, a in zip(kernel, spatial, strict=True)]

    def body(n, o, *sp):
        c = rc if groups == 1 else (o // group_out) * group_in + rc
        oc = o if groups == 1 else o % group_out
        pos = [s + r * d for s, r, d in zip(sp, rs, dilation, strict=True)]
        flipped = [r if k == 1 else (k - 1) - r for r, k in zip(rs, kernel, strict=True)]
        return te_sum(data[(n, c, *pos)] * w[(c, oc, *flipped)], axis=[rc, *rs])

    shape = (x.shape[0], out_channels, *out_spatial)
    acc = compute(shape, named_axes(body, names), name=name if bias is None else f"{name}_sum")
    return add_bias(acc, bias, lambda *i: i[1], names, name)


def spread_pad(x: Tensor, stride: Sequence[int], before: Sequence[int], after: Sequence[int], name: str) -> Tensor:
    """`x` (N, C, spatial...) with stride-1 zeros inserted between neighbours along
    each spatial axis, then padded by before/after zeros (negative crops)."""
    nsp = len(stride)
    if all(s == 1 for s in stride):
        return pad_axes(x, [0, 0, *before], [0, 0, *after], 0, name=name)
    sizes = x.shape[2:]
    spread = [(n - 1) * s + 1 for n, s in zip(sizes, stride, strict=True)]
    shape = (*x.shape[:2], *(n + b + a for n, b, a in zip(spread, before, after, strict=True)))

    def body(n, c, *sp):
        conds, src = [], []
        for i, b, a, s, extent in zip(sp, before, after, stride, spread, strict=True):
            j = i - b if b >= 0 else i + (-b)
            if b > 0:
                conds.append(j >= 0)
            if a > 0:
                conds.append(j < extent)
            if s > 1:
                conds.append(j % s == 0)
                j = j // s
            src.append(j)
        inner = x[(n, c, *src)]
        return if_then_else(all_of(*conds), inner, 0) if conds else inner

    return compute(shape, named_axes(body, ("n", "c", *SPATIAL_AXES[nsp])), name=name)


def phase_transpose(x: Tensor, w: Tensor, stride: Sequence[int], before: Sequence[int], out_spatial: Sequence[int],
                    name: str, out_name: str) -> Tensor:
    """A strided transposed convolution (groups 1, dilation 1) without the products with
    inserted zeros: output position i = S*q + p (phase p) meets only the kernel taps
    r = r0(p) + S*t, r0(p) = (B - p) mod S, and reads input q + t + off(p). One stage
    computes every phase as a dense convolution over ceil(k/S) taps per axis (weights
    regrouped per phase with output channels innermost, zero where a phase has fewer taps; input zero-padded so no
    read needs a guard), outputs [N, O, phases..., q...] with q innermost; a copy
    interleaves the phases. The spread formulation would do S^d times the work."""
    nsp = len(stride)
    spatial = SPATIAL_AXES[nsp]
    kernel, sizes = w.shape[2:], x.shape[2:]
    taps = [-(-k // s) for k, s in zip(kernel, stride, strict=True)]
    blocks = [-(-o // s) for o, s in zip(out_spatial, stride, strict=True)]
    offsets = [[_phase_offset(p, s, b) for p in range(s)] for s, b in zip(stride, before, strict=True)]
    lo = [max(0, -min(off)) for off in offsets]
    hi = [max(0, q - 1 + t - 1 + max(off) + 1 - n)
          for q, t, off, n in zip(blocks, taps, offsets, sizes, strict=True)]
    data = pad_axes(x, [0, 0, *lo], [0, 0, *hi], 0, name=f"{name}_pad")

    def phase_weight(c, *pto):
        *pt, o = pto
        conds, idx = [], []
        for d in range(nsp):
            p, t, k, s, b = pt[2 * d], pt[2 * d + 1], kernel[d], stride[d], before[d]
            r = (b - p) % s + s * t
            if k % s:
                conds.append(r < k)
            idx.append((k - 1) - r)
        inner = w[(c, o, *idx)]
        return if_then_else(all_of(*conds), inner, 0) if conds else inner

    pt_names = [n for a in spatial for n in (f"p{a}", f"t{a}")]
    # output channels innermost: the vector axis of the register tile when rows are short
    wph = compute((w.shape[0], *[v for s, t in zip(stride, taps, strict=True) for v in (s, t)], w.shape[1]),
                  named_axes(phase_weight, ("c", *pt_names, "o")), name=f"{name}_wphase")
    rc = reduce_axis(x.shape[1], "rc")
    rt = [reduce_axis(t, f"t{a}") for t, a in zip(taps, spatial, strict=True)]

    def body(n, o, *pq):
        ps, qs = pq[:nsp], pq[nsp:]
        pos = []
        for p, q, t, s, b, pad in zip(ps, qs, rt, stride, before, lo, strict=True):
            pos.append(q + t + _phase_offset(p, s, b) + pad)
        wi = [v for p, t in zip(ps, rt, strict=True) for v in (p, t)]
        return te_sum(data[(n, rc, *pos)] * wph[(rc, *wi, o)], axis=[rc, *rt])

    phased = compute((x.shape[0], w.shape[1], *stride, *blocks),
                     named_axes(body, ("n", "o", *[f"p{a}" for a in spatial], *[f"q{a}" for a in spatial])),
                     name=f"{name}_phases")

    def interleave(n, o, *sp):
        return phased[(n, o, *[i % s for i, s in zip(sp, stride, strict=True)],
                       *[i // s for i, s in zip(sp, stride, strict=True)])]

    return compute((x.shape[0], w.shape[1], *out_spatial), named_axes(interleave, ("n", "o", *spatial)),
                   name=out_name)


def _phase_offset(p, s: int, b: int):
    """Input offset of output phase p (an int or an index expression): its first tap
    r0 = (b - p) mod s lands on spread position p + r0 - b, a multiple of s."""
    return (p + (b - p) % s - b) // s

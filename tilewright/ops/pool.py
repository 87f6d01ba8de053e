"""2-D pooling over the spatial axes of NCHW (or CHW) tensors, with PyTorch's
exact output sizes and window rules. Max and average pooling also take packed
NCHW{b}c data (5-D: the channel block innermost, pooled lane by lane).

Output size along an axis (torch's pooling_output_shape):
    out = floor((size + 2*pad - dilation*(kernel-1) - 1 [+ stride-1 if ceil_mode]) / stride) + 1
and in ceil_mode the last window must start inside the input or the left
padding (else out -= 1). Padding may be at most half the kernel, so every
window holds at least one input element.

Padding is a separate `{name}_pad` stage (-inf, or the dtype's lowest value,
for max; 0 for average); it also covers a ceil_mode window that runs past the
right padding, which PyTorch leaves out of both the max and the average.
"""

from __future__ import annotations

import math

from ..errors import ShapeError
from ..te import all as all_of
from ..te import cast, compute, if_then_else, reduce_axis
from ..te import max as max_of
from ..te import min as min_of
from ..te import sum as sum_of
from ..te.tensor import Tensor
from .pad import pad_axes
from .params import named_axes, ntuple, require_float

_AXES = ("h", "w")


def _check_input(op: str, x: Tensor, packed: bool = False) -> None:
    if x.ndim not in (3, 4, 5) or (x.ndim == 5 and not packed):
        also = " or 5-D NCHW{b}c (N, C/b, H, W, b)" if packed else ""
        raise ShapeError(f"{op}: input '{x.name}' must be 3-D (C, H, W) or 4-D (N, C, H, W){also}, "
                         f"got shape {list(x.shape)}")


def _out_names(x: Tensor) -> list[str]:
    return {3: ["c"], 4: ["n", "c"], 5: ["n", "c"]}[x.ndim] + ["oh", "ow"] + (["c_inner"] if x.ndim == 5 else [])


def _lead(x: Tensor) -> int:
    """Axes before the spatial pair (the packed channel block of NCHW{b}c follows it)."""
    return 2 if x.ndim == 5 else x.ndim - 2


def _spatial(x: Tensor) -> tuple[int, int]:
    lead = _lead(x)
    return x.shape[lead], x.shape[lead + 1]


def _at(idx, lead: int, h, w) -> tuple:
    """`idx` with its spatial pair replaced by (h, w)."""
    return tuple(idx[:lead]) + (h, w) + tuple(idx[lead + 2:])


def _pads(x: Tensor, before, after) -> tuple[list, list]:
    lead, trail = _lead(x), x.ndim - _lead(x) - 2
    return [0] * lead + list(before) + [0] * trail, [0] * lead + list(after) + [0] * trail


def _out_shape(x: Tensor, out) -> tuple:
    lead = _lead(x)
    return x.shape[:lead] + tuple(out) + x.shape[lead + 2:]


def pool_out_size(op: str, size: int, kernel: int, stride: int, pad: int, dilation: int, ceil_mode: bool,
                  axis: str) -> int:
    """PyTorch's pooling output size along one axis, with its validity checks."""
    if pad > kernel // 2:
        raise ShapeError(f"{op}: padding {pad} along {axis} must be at most half the kernel size {kernel}")
    out = (size + 2 * pad - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1  # the last window would start in the right padding
    if out < 1:
        raise ShapeError(
            f"{op}: along {axis} the input ({size}, padding {pad}) is smaller than the dilated kernel "
            f"({dilation * (kernel - 1) + 1}); output size would be {out}"
        )
    return out


def _params(op: str, x: Tensor, kernel_size, stride, padding, dilation, ceil_mode):
    _check_input(op, x, packed=True)
    k = ntuple(kernel_size, 2, op, "kernel_size", 1)
    s = k if stride is None else ntuple(stride, 2, op, "stride", 1)
    p = ntuple(padding, 2, op, "padding", 0)
    d = ntuple(dilation, 2, op, "dilation", 1)
    size = _spatial(x)
    out = tuple(pool_out_size(op, size[a], k[a], s[a], p[a], d[a], ceil_mode, _AXES[a]) for a in range(2))
    # Right padding actually read by the last window (may be less than p, or more in ceil_mode).
    after = tuple(max(0, (out[a] - 1) * s[a] + d[a] * (k[a] - 1) + 1 - size[a] - p[a]) for a in range(2))
    return k, s, p, d, out, after


def max_pool2d(x: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False, *,
               name: str = "max_pool2d") -> Tensor:
    """torch.nn.functional.max_pool2d (without return_indices); any numeric dtype."""
    k, s, p, d, out, after = _params("max_pool2d", x, kernel_size, stride, padding, dilation, ceil_mode)
    lead = _lead(x)
    xp = pad_axes(x, *_pads(x, p, after), x.dtype.lowest, name=f"{name}_pad")
    rh, rw = reduce_axis(k[0], "rh"), reduce_axis(k[1], "rw")

    def body(*idx):
        oh, ow = idx[lead:lead + 2]
        return max_of(xp[_at(idx, lead, oh * s[0] + rh * d[0], ow * s[1] + rw * d[1])], axis=[rh, rw])

    return compute(_out_shape(x, out), named_axes(body, _out_names(x)), name=name)


def _window_count(o, size: int, kernel: int, stride: int, pad: int, include_pad: bool):
    """Elements of the window at output index `o` that PyTorch divides by: the
    window clipped to the padded input, or to the input alone."""
    start = o * stride - pad
    end = min_of(start + kernel, size + pad)
    if include_pad:
        return end - start
    return min_of(end, size) - max_of(start, 0)


def avg_pool2d(x: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None, *,
               name: str = "avg_pool2d") -> Tensor:
    """torch.nn.functional.avg_pool2d: a `{name}_sum` stage, then the division."""
    op = "avg_pool2d"
    require_float(x, op)
    k, s, p, _, out, after = _params(op, x, kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override is not None and (
        isinstance(divisor_override, bool) or not isinstance(divisor_override, int) or divisor_override == 0
    ):
        raise ShapeError(f"{op}: divisor_override must be a nonzero int, got {divisor_override!r}")
    lead = _lead(x)
    xp = pad_axes(x, *_pads(x, p, after), 0, name=f"{name}_pad")
    rh, rw = reduce_axis(k[0], "rh"), reduce_axis(k[1], "rw")
    names = _out_names(x)

    def sum_body(*idx):
        oh, ow = idx[lead:lead + 2]
        return sum_of(xp[_at(idx, lead, oh * s[0] + rh, ow * s[1] + rw)], axis=[rh, rw])

    total = compute(_out_shape(x, out), named_axes(sum_body, names), name=f"{name}_sum")
    size = _spatial(x)
    # The divisor is the constant kernel area unless some window is clipped.
    clipped = any(after[a] > p[a] for a in range(2)) or (not count_include_pad and any(p))

    def body(*idx):
        if divisor_override is not None:
            return total[idx] / float(divisor_override)
        if not clipped:
            return total[idx] / float(k[0] * k[1])
        counts = [_window_count(idx[lead + a], size[a], k[a], s[a], p[a], count_include_pad) for a in range(2)]
        return total[idx] / cast(counts[0] * counts[1], x.dtype)

    return compute(_out_shape(x, out), named_axes(body, names), name=name)


def _adaptive_window(o, size: int, out: int):
    """(start, length, max length) of PyTorch's adaptive window:
    [floor(o*size/out), ceil((o+1)*size/out))."""
    if size % out == 0:
        return o * (size // out), size // out, size // out
    longest = max(math.ceil((i + 1) * size / out) - (i * size) // out for i in range(out))
    start = (o * size) // out
    return start, ((o + 1) * size + (out - 1)) // out - start, longest


def adaptive_avg_pool2d(x: Tensor, output_size, *, name: str = "adaptive_avg_pool2d") -> Tensor:
    """torch.nn.functional.adaptive_avg_pool2d; `output_size` is an int or a pair
    whose entries may be None (keep the input size)."""
    op = "adaptive_avg_pool2d"
    _check_input(op, x)
    require_float(x, op)
    size = x.shape[-2:]
    pair = tuple(output_size) if isinstance(output_size, (list, tuple)) else (output_size, output_size)
    if len(pair) == 2:
        pair = tuple(size[a] if v is None else v for a, v in enumerate(pair))
    out = ntuple(pair, 2, op, "output_size", 1)
    lead = x.ndim - 2
    names = _out_names(x)
    longest = [_adaptive_window(0, size[a], out[a])[2] for a in range(2)]
    rs = [reduce_axis(longest[0], "rh"), reduce_axis(longest[1], "rw")]

    def sum_body(*idx):
        windows = [_adaptive_window(idx[lead + a], size[a], out[a]) for a in range(2)]
        value = x[idx[:lead] + tuple(w[0] + r for w, r in zip(windows, rs, strict=True))]
        # Windows shorter than the longest one skip the tail of the reduce axis.
        conds = [rs[a] < windows[a][1] for a in range(2) if size[a] % out[a]]
        return sum_of(if_then_else(all_of(*conds), value, 0.0) if conds else value, axis=rs)

    total = compute(x.shape[:-2] + out, named_axes(sum_body, names), name=f"{name}_sum")

    def body(*idx):
        windows = [_adaptive_window(idx[lead + a], size[a], out[a]) for a in range(2)]
        if all(size[a] % out[a] == 0 for a in range(2)):
            return total[idx] / float(windows[0][1] * windows[1][1])
        return total[idx] / cast(windows[0][1] * windows[1][1], x.dtype)

    return compute(x.shape[:-2] + out, named_axes(body, names), name=name)


def global_avg_pool2d(x: Tensor, *, name: str = "global_avg_pool2d") -> Tensor:
    """Mean over H and W, keeping them as size-1 axes (TVM's global_avg_pool2d;
    torch's adaptive_avg_pool2d(x, 1))."""
    op = "global_avg_pool2d"
    _check_input(op, x)
    require_float(x, op)
    h, w = x.shape[-2:]
    rh, rw = reduce_axis(h, "rh"), reduce_axis(w, "rw")
    names = _out_names(x)
    shape = x.shape[:-2] + (1, 1)
    total = compute(shape, named_axes(lambda *idx: sum_of(x[idx[:-2] + (rh, rw)], axis=[rh, rw]), names),
                    name=f"{name}_sum")
    return compute(shape, named_axes(lambda *idx: total[idx] / float(h * w), names), name=name)

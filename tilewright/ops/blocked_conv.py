"""int8 convolution in a GEMM core's blocked layout, and the shift / bias / clip
epilogue integer accelerators apply: the operator TVM's VTA benchmarks run
(output = clip((conv >> 8) + bias, 0, 127) as int8). Each compute records its
operator and parameters in `attrs`, which is how an accelerator backend that
lowers whole operators (target "vta") recognises them.

data [N/b, C/bi, H, W, b, bi] int8, weight [O/bo, C/bi, KH, KW, bo, bi] int8,
bias [N/b, O/bo, 1, 1, b, bo] int32, output [N/b, O/bo, OH, OW, b, bo]."""

from __future__ import annotations

from ..errors import ShapeError
from ..te import compute, const, if_then_else, reduce_axis
from ..te import max as te_max
from ..te import min as te_min
from ..te import sum as te_sum
from ..te.tensor import Tensor
from .conv import expect_tensor
from .params import expect_ndim, named_axes


def _pair(v, what: str, op: str) -> tuple[int, int]:
    pair = (v, v) if isinstance(v, int) else tuple(v)
    if len(pair) != 2 or any(not isinstance(x, int) or x < 0 for x in pair):
        raise ShapeError(f"{op}: {what} must be a non-negative int or a pair of them, got {v!r}")
    return pair


def conv2d_blocked(data: Tensor, weight: Tensor, stride=1, padding=0, name: str = "conv2d_blocked") -> Tensor:
    """int8 x int8 -> int32 convolution on blocked data and weights (layouts above)."""
    op = "conv2d_blocked"
    expect_tensor(data, op, "data")
    expect_tensor(weight, op, "weight")
    expect_ndim(data, 6, op, "data", "N/b, C/bi, H, W, b, bi")
    expect_ndim(weight, 6, op, "weight", "O/bo, C/bi, KH, KW, bo, bi")
    if (weight.shape[1], weight.shape[5]) != (data.shape[1], data.shape[5]):
        raise ShapeError(f"{op}: weight '{weight.name}' {list(weight.shape)} does not fit data '{data.name}' "
                         f"{list(data.shape)}; valid: [O/bo, {data.shape[1]}, KH, KW, bo, {data.shape[5]}]")
    for t in (data, weight):
        if t.dtype.name not in ("int8", "uint8"):
            raise ShapeError(f"{op}: '{t.name}' must be int8 or uint8, got {t.dtype}")
    (sh, sw), (ph, pw) = _pair(stride, "stride", op), _pair(padding, "padding", op)
    if min(sh, sw) < 1:
        raise ShapeError(f"{op}: stride must be positive, got {stride!r}")
    nb, cb, h, w, b, bi = data.shape
    ob, _, kh, kw, bo, _ = weight.shape
    oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    if oh < 1 or ow < 1:
        raise ShapeError(f"{op}: a {kh}x{kw} kernel does not fit data {h}x{w} with padding ({ph}, {pw})")
    rc, rh, rw, ri = reduce_axis(cb, "rc"), reduce_axis(kh, "rh"), reduce_axis(kw, "rw"), reduce_axis(bi, "ri")

    def body(n, o, y, x, bn, bk):
        iy, ix = y * sh + rh - ph, x * sw + rw - pw
        v = data[n, rc, iy, ix, bn, ri].astype("int32")
        if ph or pw:
            v = if_then_else((iy >= 0) & (iy < h) & (ix >= 0) & (ix < w), v, const(0, "int32"))
        return te_sum(v * weight[o, rc, rh, rw, bk, ri].astype("int32"), axis=[rc, rh, rw, ri])

    return compute((nb, ob, oh, ow, b, bo), named_axes(body, ("n", "o", "h", "w", "b", "bo")), name=name,
                   attrs={"operator": op, "stride": (sh, sw), "padding": (ph, pw)})


def shift_bias_clip(acc: Tensor, bias: Tensor | None = None, shift: int = 8, lo: int = 0, hi: int = 127,
                    name: str = "shift_bias_clip", round_half_up: bool = False) -> Tensor:
    """int8 clip((acc >> shift) + bias, lo, hi): an arithmetic shift (flooring; `round_half_up` adds
    2^(shift-1) first, so a quantized network's values do not drift down layer by layer);
    acc blocked [N/b, O/bo, OH, OW, b, bo] with bias [N/b, O/bo, 1, 1, b, bo], or NCHW [N, O, OH, OW]
    (an ops.conv2d's) with bias [O]."""
    op = "shift_bias_clip"
    expect_tensor(acc, op, "accumulator")
    if acc.ndim != 4:
        expect_ndim(acc, 6, op, "accumulator", "N/b, O/bo, OH, OW, b, bo (or NCHW)")
    if bias is not None:
        want = [acc.shape[1]] if acc.ndim == 4 else [acc.shape[0], acc.shape[1], 1, 1, acc.shape[4], acc.shape[5]]
        if list(bias.shape) != want or bias.dtype.name != "int32":
            raise ShapeError(f"{op}: bias '{bias.name}' must be int32 {want}, got {bias.dtype} {list(bias.shape)}")
    if isinstance(shift, bool) or not isinstance(shift, int) or not 0 <= shift <= 31:
        raise ShapeError(f"{op}: shift must be an int in 0..31 (an arithmetic right shift of int32), got {shift!r}")
    if not -128 <= lo <= hi <= 127:
        raise ShapeError(f"{op}: need -128 <= lo <= hi <= 127 for an int8 result, got lo={lo}, hi={hi}")

    def body(*i):
        v = acc[i]
        if round_half_up and shift:
            v = v + const(1 << (shift - 1), "int32")
        v = v >> const(shift, "int32")
        if bias is not None:
            v = v + (bias[i[1]] if acc.ndim == 4 else bias[i[0], i[1], 0, 0, i[4], i[5]])
        return te_min(te_max(v, const(lo, "int32")), const(hi, "int32")).astype("int8")

    names = ("n", "o", "y", "x") if acc.ndim == 4 else ("n", "o", "y", "x", "bn", "bk")
    attrs = {"operator": op, "shift": shift, "lo": lo, "hi": hi, "round": bool(round_half_up)}
    return compute(acc.shape, named_axes(body, names), name=name, attrs=attrs)


__all__ = ["conv2d_blocked", "shift_bias_clip"]

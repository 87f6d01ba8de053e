"""The index arrays of an embedding's layout rewrites on a convolution (see
search/vta_embed.py): per image axis a mode, per batch and channel index its
decomposition, and one gather each for data, weights, bias and output."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..intrin.affine_form import EmbeddingError


@dataclass(frozen=True)
class _Axis:
    """One image axis (h or w) of the rewritten convolution."""

    mode: str  # "unrolled", "strip", "plain", "phase" (dilation as batch), "blown" (dilation as zero taps)
    out: int  # original output extent
    size: int  # original input extent
    kernel: int
    stride: int
    pad: int
    dilation: int
    lanes: int = 1  # batch lanes this axis' digit contributes
    step: int = 1  # strip length (strip) or 1 (dense lanes)

    @property
    def phases(self) -> int:
        return self.dilation if self.mode == "phase" else 1

    @property
    def new_out(self) -> int:
        if self.step > 1 or self.mode == "phase":
            return self.step
        return -(-self.out // self.lanes)

    @property
    def new_kernel(self) -> int:
        if self.mode == "unrolled":
            return 1
        return (self.kernel - 1) * self.dilation + 1 if self.mode == "blown" else self.kernel

    @property
    def new_stride(self) -> int:
        return 1 if self.mode in ("unrolled", "phase") else self.stride

    @property
    def new_pad(self) -> int:
        return self.pad if self.mode in ("plain", "blown") else 0

    @property
    def new_in(self) -> int:
        if self.mode in ("plain", "blown"):
            return self.size
        if self.mode == "unrolled":
            return self.new_out
        return (self.new_out - 1) * self.new_stride + self.new_kernel

    def out_coord(self, y, lane, phase):
        if self.mode == "phase":  # lanes take strips of the phase image
            return (lane * self.step + y) * self.dilation + phase
        if self.step > 1:
            return lane * self.step + y
        return y * self.lanes + lane

    def in_coord(self, y, lane, phase, tap):
        """Original input coordinate (pad not applied yet: may lie outside) read at new input index y."""
        if self.mode == "unrolled":
            return self.out_coord(y, lane, phase) * self.stride + tap * self.dilation - self.pad
        if self.mode == "strip":
            return lane * self.step * self.stride + y - self.pad
        if self.mode == "phase":
            return (lane * self.step + y) * self.dilation + phase - self.pad
        return y

    def inverse(self, o):
        """(y, lane, phase) of original output coordinate o."""
        if self.mode == "phase":
            q = o // self.dilation
            return q % self.step, q // self.step, o % self.dilation
        if self.step > 1:
            return o % self.step, o // self.step, 0
        return o // self.lanes, o % self.lanes, 0

    def tap(self, ky):
        """Original kernel tap at new kernel index ky, and whether it is a real tap."""
        if self.mode == "blown":
            return ky // self.dilation, ky % self.dilation == 0
        return ky, np.ones_like(ky, dtype=bool)


@dataclass
class Layout:
    batch: int
    channels: int
    out_channels: int
    h: _Axis
    w: _Axis
    data_index: np.ndarray
    weight_index: np.ndarray
    bias_index: np.ndarray
    out_index: np.ndarray

    in_h = property(lambda self: self.h.new_in)
    in_w = property(lambda self: self.w.new_in)
    kernel_h = property(lambda self: self.h.new_kernel)
    kernel_w = property(lambda self: self.w.new_kernel)
    pad_h = property(lambda self: self.h.new_pad)
    pad_w = property(lambda self: self.w.new_pad)
    stride_h = property(lambda self: self.h.new_stride)
    stride_w = property(lambda self: self.w.new_stride)
    out_h = property(lambda self: self.h.new_out)
    out_w = property(lambda self: self.w.new_out)

    @staticmethod
    def _gather(a: np.ndarray, index: np.ndarray) -> np.ndarray:
        flat = np.concatenate([np.ascontiguousarray(a).reshape(-1), np.zeros(1, a.dtype)])
        return flat[index]

    def pack_data(self, x: np.ndarray) -> np.ndarray:
        return self._gather(x, self.data_index)

    def pack_weight(self, w: np.ndarray) -> np.ndarray:
        return self._gather(w, self.weight_index)

    def pack_bias(self, b: np.ndarray) -> np.ndarray:
        return self._gather(b, self.bias_index)

    def unpack(self, out_blocked: np.ndarray) -> np.ndarray:
        return out_blocked.reshape(-1)[self.out_index]


def _axis(p, which: str, digit, unrolled: bool, dilation: str) -> _Axis:
    g = lambda name: getattr(p, f"{name}_{which}")  # noqa: E731
    out, size = (p.out_h, p.height) if which == "h" else (p.out_w, p.width)
    base = dict(out=out, size=size, kernel=g("kernel"), stride=g("stride"), pad=g("pad"), dilation=g("dilation"))
    if digit is not None:
        _, f, s = digit
        if unrolled:
            return _Axis("unrolled", lanes=f, step=s, **base)
        if s == 1:
            raise EmbeddingError(f"dense lanes across image axis {which} need its stencil unrolled")
        if base["dilation"] == 1:
            return _Axis("strip", lanes=f, step=s, **base)
        if base["stride"] > 1:
            raise EmbeddingError(f"a strip over strided, dilated axis {which} needs its stencil unrolled")
        return _phases(f, base)  # strips of the dilation phases' images
    if unrolled:
        return _Axis("unrolled", **base)
    if base["dilation"] == 1:
        return _Axis("plain", **base)
    return _phases(1, base) if base["stride"] == 1 and dilation == "phase" else _Axis("blown", **base)


def _phases(lanes: int, base: dict) -> _Axis:
    per_phase = -(-base["out"] // base["dilation"])
    return _Axis("phase", lanes=lanes, step=-(-per_phase // lanes), **base)


def _decode(index: np.ndarray, radices: list[int]) -> list[np.ndarray]:
    out = []
    for r in reversed(radices):
        out.append(index % r)
        index = index // r
    return list(reversed(out))


def build_layout(p, mapping, cfg) -> Layout:
    b_digits = {names[0]: (names, f, s) for names, f, s in mapping.batch}
    i_names = {n for names, _, _ in mapping.inp for n in names}
    unrolled = {x for x in ("h", "w") if x in mapping.unrolled or f"r{x}" in i_names
                or (x in b_digits and b_digits[x][2] == 1)}
    h, w = (_axis(p, x, b_digits.get(x), x in unrolled, mapping.dilation) for x in ("h", "w"))
    # channel' = (extras, digit tiles, digit lanes): the input channels and every unrolled kernel axis
    real = {"rc": p.in_channels, "rh": p.kernel_h if "h" in unrolled else 1,
            "rw": p.kernel_w if "w" in unrolled else 1}
    for names, _, _ in mapping.inp:
        for n in names:
            if n not in real:
                raise EmbeddingError(f"the 'in' digit on '{n}' is not a reduction axis of the convolution")
    extras = [n for n in ("rc", "rh", "rw") if n not in i_names and real[n] > 1]
    digits = [(names, f, -(-math.prod(real[n] for n in names) // f)) for names, f, _ in mapping.inp]
    radices = [real[n] for n in extras] + [t for _, _, t in digits] + [f for _, f, _ in digits]
    channels = math.prod(radices)
    bo, bi, bb = cfg.block_out, cfg.block_in, cfg.batch
    out_channels = -(-p.out_channels // bo) * bo
    n_lane = b_digits["n"][1] if "n" in b_digits else 1
    n_outer = -(-p.batch // n_lane)
    lane_radices = [f for _, f, _ in mapping.batch]
    batch = n_outer * h.phases * w.phases * bb

    def decode_batch(nprime):
        outer, lanes = nprime // bb, nprime % bb
        n_o, ph_h, ph_w = _decode(outer, [n_outer, h.phases, w.phases])
        parts = dict(zip([names[0] for names, _, _ in mapping.batch], _decode(lanes, lane_radices)))
        zero = np.zeros_like(nprime)
        n = n_o * n_lane + parts.get("n", zero)
        return n, parts.get("h", zero), parts.get("w", zero), ph_h, ph_w

    def decode_channel(c):
        parts = _decode(c, radices)
        vals = {n: np.zeros_like(c) for n in real}
        for n, v in zip(extras, parts):
            vals[n] = v
        tiles, lanes = parts[len(extras):len(extras) + len(digits)], parts[len(extras) + len(digits):]
        valid = np.ones_like(c, dtype=bool)
        for (names, f, _), t, ln in zip(digits, tiles, lanes):
            q = t * f + ln
            for n in reversed(names[1:]):
                q, vals[n] = q // real[n], q % real[n]
            vals[names[0]] = q
            valid &= q < real[names[0]]
        return vals["rc"], vals["rh"], vals["rw"], valid

    # data: (N'/b, C'/bi, IH', IW', b, bi)
    nb_, cb_, yh, yw, bl, ci = np.ix_(*(np.arange(n) for n in (batch // bb, channels // bi, h.new_in, w.new_in,
                                                                 bb, bi)))
    n, lh, lw, ph_h, ph_w = decode_batch(nb_ * bb + bl)
    rc, th, tw_, cvalid = decode_channel(cb_ * bi + ci)
    ih, iw = h.in_coord(yh, lh, ph_h, th), w.in_coord(yw, lw, ph_w, tw_)
    valid = cvalid & (n < p.batch) & (rc < p.in_channels) & (ih >= 0) & (ih < p.height) & (iw >= 0) & (iw < p.width)
    if h.mode == "unrolled":
        valid &= (h.out_coord(yh, lh, ph_h) < h.out) & (th < p.kernel_h)
    if w.mode == "unrolled":
        valid &= (w.out_coord(yw, lw, ph_w) < w.out) & (tw_ < p.kernel_w)
    total = p.batch * p.in_channels * p.height * p.width
    flat = ((n * p.in_channels + rc) * p.height + ih) * p.width + iw
    data_index = np.where(valid, flat, total).astype(np.int64)

    # weights: (K'/bo, C'/bi, KH', KW', bo, bi)
    kb, cb2, ky, kx, ko, ci2 = np.ix_(*(np.arange(n) for n in (out_channels // bo, channels // bi, h.new_kernel,
                                                                w.new_kernel, bo, bi)))
    k = kb * bo + ko
    rc2, th2, tw2, cvalid2 = decode_channel(cb2 * bi + ci2)
    kh, okh = (th2, True) if h.mode == "unrolled" else h.tap(ky)
    kw, okw = (tw2, True) if w.mode == "unrolled" else w.tap(kx)
    wvalid = cvalid2 & okh & okw & (k < p.out_channels) & (rc2 < p.in_channels) & (kh < p.kernel_h) & \
        (kw < p.kernel_w)
    wflat = ((k * p.in_channels + rc2) * p.kernel_h + kh) * p.kernel_w + kw
    weight_index = np.where(wvalid, wflat, p.out_channels * p.in_channels * p.kernel_h * p.kernel_w)

    kb3, ko3 = np.ix_(np.arange(out_channels // bo), np.arange(bo))
    k3 = (kb3 * bo + ko3)[None, :, None, None, None, :]
    bias_index = np.broadcast_to(np.where(k3 < p.out_channels, k3, p.out_channels),
                                 (batch // bb, out_channels // bo, 1, 1, bb, bo))

    # output: original (N, K, OH, OW) -> flat position in (N'/b, K'/bo, OH', OW', b, bo)
    n4, k4, oh, ow = np.ix_(*(np.arange(n) for n in (p.batch, p.out_channels, p.out_h, p.out_w)))
    yh4, lh4, phh4 = h.inverse(oh)
    yw4, lw4, phw4 = w.inverse(ow)
    lane_of = {"n": n4 % n_lane, "h": lh4, "w": lw4}
    lane = np.zeros_like(n4)
    for names, f, _ in mapping.batch:
        lane = lane * f + lane_of[names[0]]
    outer = ((n4 // n_lane) * h.phases + phh4) * w.phases + phw4
    out_index = (((((outer * (out_channels // bo) + k4 // bo) * h.new_out + yh4) * w.new_out + yw4) * bb + lane)
                 * bo + k4 % bo)
    return Layout(batch, channels, out_channels, h, w, data_index, np.ascontiguousarray(weight_index),
                  np.ascontiguousarray(bias_index), out_index.astype(np.int64))

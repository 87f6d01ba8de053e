"""The layout rewrites of an embedding on a convolution (see
search/vta_embed.py): per image axis a mode, per batch and channel index its
decomposition, as index maps written once for both of their uses: NumPy
index arrays (weights and bias, packed once; the reference gathers) and te
expressions (the compiled data and output transforms that run per call)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

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


def _and(a, b):
    """Conjunction of two conditions that may be Python bools, NumPy arrays or te expressions."""
    if a is False or b is False:
        return False
    return b if a is True else a if b is True else a & b


def _decode(index, radices: list[int]) -> list:
    out = []
    for r in reversed(radices):
        out.append(index % r if r > 1 else 0)
        index = index // r if r > 1 else index
    return list(reversed(out))


@dataclass(frozen=True)
class Geometry:
    """Where each element of the rewritten operands comes from, as index maps that take NumPy index grids
    (the gathers' index arrays) and te variables (the compiled host transforms) alike. Batch' = (outer:
    batch outer x phases, lanes: the batch digits); channel' = (block: extras x digit tiles, lane: the
    digit lanes)."""

    p: object  # the ConvProblem
    h: _Axis
    w: _Axis
    bb: int
    bi: int
    bo: int
    n_outer: int
    n_lane: int
    lane_names: tuple
    lane_radices: tuple
    real: dict
    extras: tuple
    digits: tuple  # (names, lanes, tiles)
    batch: int
    channels: int
    out_channels: int

    def decode_batch(self, outer, lanes):
        """(n, h lane, w lane, h phase, w phase) of rewritten batch index outer * bb + lanes."""
        n_o, ph_h, ph_w = _decode(outer, [self.n_outer, self.h.phases, self.w.phases])
        parts = dict(zip(self.lane_names, _decode(lanes, list(self.lane_radices))))
        return n_o * self.n_lane + parts.get("n", 0), parts.get("h", 0), parts.get("w", 0), ph_h, ph_w

    def decode_channel(self, block, lane):
        """(rc, rh, rw, valid) of rewritten channel block * bi + lane."""
        vals = {n: 0 for n in self.real}
        parts = _decode(block, [self.real[n] for n in self.extras] + [t for _, _, t in self.digits])
        for n, v in zip(self.extras, parts):
            vals[n] = v
        lanes = _decode(lane, [f for _, f, _ in self.digits])
        valid = True
        for (names, f, _), t, ln in zip(self.digits, parts[len(self.extras):], lanes):
            q = t * f + ln
            for n in reversed(names[1:]):
                q, vals[n] = q // self.real[n], q % self.real[n]
            vals[names[0]] = q
            valid = _and(valid, q < self.real[names[0]])
        return vals["rc"], vals["rh"], vals["rw"], valid

    def data_source(self, nb, cb, yh, yw, bl, ci):
        """(valid, (n, c, y, x)): the NCHW element that rewritten data (N'/b, C'/bi, IH', IW', b, bi) holds at
        the given index, where valid (zero elsewhere)."""
        p, h, w = self.p, self.h, self.w
        n, lh, lw, ph_h, ph_w = self.decode_batch(nb, bl)
        rc, th, tw_, valid = self.decode_channel(cb, ci)
        ih, iw = h.in_coord(yh, lh, ph_h, th), w.in_coord(yw, lw, ph_w, tw_)
        for cond in (n < p.batch, rc < p.in_channels, ih >= 0, ih < p.height, iw >= 0, iw < p.width):
            valid = _and(valid, cond)
        if h.mode == "unrolled":
            valid = _and(_and(valid, h.out_coord(yh, lh, ph_h) < h.out), th < p.kernel_h)
        if w.mode == "unrolled":
            valid = _and(_and(valid, w.out_coord(yw, lw, ph_w) < w.out), tw_ < p.kernel_w)
        return valid, (n, rc, ih, iw)

    def out_position(self, n, k, oh, ow):
        """Index into the rewritten output (N'/b, K'/bo, OH', OW', b, bo) of NCHW output element (n, k, oh, ow)."""
        yh, lh, phh = self.h.inverse(oh)
        yw, lw, phw = self.w.inverse(ow)
        lane_of = {"n": n % self.n_lane if self.n_lane > 1 else 0, "h": lh, "w": lw}
        lane = 0
        for name, f in zip(self.lane_names, self.lane_radices):
            lane = lane * f + lane_of[name]
        n_o = n // self.n_lane if self.n_lane > 1 else n
        outer = (n_o * self.h.phases + phh) * self.w.phases + phw
        return outer, k // self.bo, yh, yw, lane, k % self.bo

    @property
    def data_shape(self) -> tuple:
        return (self.batch // self.bb, self.channels // self.bi, self.h.new_in, self.w.new_in, self.bb, self.bi)

    @property
    def out_shape(self) -> tuple:
        return (self.batch // self.bb, self.out_channels // self.bo, self.h.new_out, self.w.new_out, self.bb,
                self.bo)


@dataclass
class Layout:
    """A realization's layout: the rewritten convolution's geometry and its operands' transforms. Data and
    output move through compiled kernels (search/vta_host_transforms.py); constant weights and bias, packed
    once, through index arrays; `gather_data` / `gather_out` are the index-array versions of the first two
    (what the compiled ones are tested against)."""

    geometry: Geometry
    weight_index: np.ndarray
    bias_index: np.ndarray

    batch = property(lambda self: self.geometry.batch)
    channels = property(lambda self: self.geometry.channels)
    out_channels = property(lambda self: self.geometry.out_channels)
    h = property(lambda self: self.geometry.h)
    w = property(lambda self: self.geometry.w)
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

    def data_index(self) -> np.ndarray:
        g, p = self.geometry, self.geometry.p
        valid, (n, rc, ih, iw) = g.data_source(*np.ix_(*(np.arange(e) for e in g.data_shape)))
        total = p.batch * p.in_channels * p.height * p.width
        return np.where(valid, ((n * p.in_channels + rc) * p.height + ih) * p.width + iw, total).astype(np.int64)

    def out_index(self) -> np.ndarray:
        g, p = self.geometry, self.geometry.p
        pos = g.out_position(*np.ix_(*(np.arange(e) for e in (p.batch, p.out_channels, p.out_h, p.out_w))))
        return np.ravel_multi_index(np.broadcast_arrays(*pos), g.out_shape).astype(np.int64)

    def gather_data(self, x: np.ndarray) -> np.ndarray:
        return self._gather(x, self.data_index())

    def gather_out(self, out_blocked: np.ndarray) -> np.ndarray:
        return out_blocked.reshape(-1)[self.out_index()]

    def pack_data(self, x: np.ndarray) -> np.ndarray:
        return self.transforms.pack(x)

    def unpack(self, out_blocked: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        return self.transforms.unpack(out_blocked, out)

    @cached_property
    def transforms(self):
        from .vta_host_transforms import HostTransforms

        return HostTransforms(self.geometry)

    def pack_weight(self, w: np.ndarray) -> np.ndarray:
        return self._gather(w, self.weight_index)

    def pack_bias(self, b: np.ndarray) -> np.ndarray:
        return self._gather(b, self.bias_index)


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
    extras = tuple(n for n in ("rc", "rh", "rw") if n not in i_names and real[n] > 1)
    digits = tuple((names, f, -(-math.prod(real[n] for n in names) // f)) for names, f, _ in mapping.inp)
    channels = math.prod([real[n] for n in extras] + [t * f for _, f, t in digits])
    bo, bi, bb = cfg.block_out, cfg.block_in, cfg.batch
    n_lane = b_digits["n"][1] if "n" in b_digits else 1
    n_outer = -(-p.batch // n_lane)
    g = Geometry(p, h, w, bb, bi, bo, n_outer, n_lane, tuple(names[0] for names, _, _ in mapping.batch),
                 tuple(f for _, f, _ in mapping.batch), real, extras, digits, n_outer * h.phases * w.phases * bb,
                 channels, -(-p.out_channels // bo) * bo)

    # weights: (K'/bo, C'/bi, KH', KW', bo, bi)
    kb, cb2, ky, kx, ko, ci2 = np.ix_(*(np.arange(n) for n in (g.out_channels // bo, channels // bi, h.new_kernel,
                                                                w.new_kernel, bo, bi)))
    k = kb * bo + ko
    rc2, th2, tw2, cvalid2 = g.decode_channel(cb2, ci2)
    kh, okh = (th2, True) if h.mode == "unrolled" else h.tap(ky)
    kw, okw = (tw2, True) if w.mode == "unrolled" else w.tap(kx)
    wvalid = cvalid2 & okh & okw & (k < p.out_channels) & (rc2 < p.in_channels) & (kh < p.kernel_h) & \
        (kw < p.kernel_w)
    wflat = ((k * p.in_channels + rc2) * p.kernel_h + kh) * p.kernel_w + kw
    weight_index = np.where(wvalid, wflat, p.out_channels * p.in_channels * p.kernel_h * p.kernel_w)

    kb3, ko3 = np.ix_(np.arange(g.out_channels // bo), np.arange(bo))
    k3 = (kb3 * bo + ko3)[None, :, None, None, None, :]
    bias_index = np.broadcast_to(np.where(k3 < p.out_channels, k3, p.out_channels),
                                 (g.batch // bb, g.out_channels // bo, 1, 1, bb, bo))
    return Layout(g, np.ascontiguousarray(weight_index), np.ascontiguousarray(bias_index))

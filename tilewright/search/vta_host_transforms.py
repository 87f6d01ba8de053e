"""The host side of an embedding on the VTA-like accelerator, compiled: the
data pack (NCHW int8 -> the rewritten (N'/b, C'/bi, IH', IW', b, bi), zero
where the layout pads, im2col-unrolls or strips) and the output unpack
(the rewritten blocked output -> NCHW) as te stages over the layout's index
maps (vta_layouts.Geometry), scheduled by the CPU space (its default point,
or whatever a builder passed in returns: the payoff bench tunes them) and
built by the C backend, as the paper's Relay layout transforms are compiled
for its ARM host. Index arithmetic replaces the index arrays of a NumPy
gather, which read 8 bytes of index per byte moved."""

from __future__ import annotations

import numpy as np

from ..build import build_library
from ..codegen import generate_c
from ..lower import lower
from ..runtime import Kernel
from ..space import apply_cpu, cpu_space, default_point
from ..targets import Target, host_target
from ..te import compute, const, if_then_else, placeholder


def _source(x, g, nb, cb, yh, yw, bl, ci):
    valid, index = g.data_source(nb, cb, yh, yw, bl, ci)
    if valid is False:
        return const(0, "int8")
    return x[index] if valid is True else if_then_else(valid, x[index], const(0, "int8"))


def _data(g):
    p = g.p
    return placeholder((p.batch, p.in_channels, p.height, p.width), "int8", name="data")


def pack_program(g):
    """(NCHW data placeholder, rewritten data) of geometry `g`, in one pass over the rewritten data."""
    x = _data(g)
    return x, compute(g.data_shape, lambda *i: _source(x, g, *i), name="packed")


def channel_major_programs(g):
    """The same pack in two passes: ((data, channel-major (N'/b, b, C'/bi, bi, IH', IW')), (that, rewritten
    data)). The first pass walks image rows with the channel decomposition fixed (what an im2col of a fused
    channel axis needs: its divisions leave the inner loop); the second is a blocked transpose."""
    x = _data(g)
    nb, cb, ih, iw, b, bi = g.data_shape
    major = compute((nb, b, cb, bi, ih, iw), lambda n, lane, c, ci, y, xx: _source(x, g, n, c, y, xx, lane, ci),
                    name="channel_major")
    major_in = placeholder(major.shape, "int8", name="channel_major")
    packed = compute(g.data_shape, lambda n, c, y, xx, lane, ci: major_in[n, lane, c, ci, y, xx], name="packed")
    return (x, major), (major_in, packed)


def unpack_program(g):
    """(rewritten output placeholder, NCHW output) of geometry `g`."""
    p = g.p
    blocked = placeholder(g.out_shape, "int8", name="blocked")
    return blocked, compute((p.batch, p.out_channels, p.out_h, p.out_w),
                            lambda n, k, oh, ow: blocked[g.out_position(n, k, oh, ow)], name="unpacked")


def default_builder(args, name: str, target: Target) -> Kernel:
    """The kernel of the CPU space's default point for the program whose arguments are `args`."""
    space, plan = cpu_space([args[-1]], target)
    s = apply_cpu([args[-1]], plan, default_point(space, plan))
    func = lower(s, args, name)
    return Kernel(func, (src := generate_c(func, target.vector_bytes)), build_library(src.text, target), target)


class _TwoPass:
    """Two kernels through a scratch array allocated once."""

    def __init__(self, first: Kernel, second: Kernel, shape: tuple):
        self.kernels, self.scratch = (first, second), np.empty(shape, np.int8)

    def __call__(self, x, out):
        self.kernels[0](x, self.scratch)
        self.kernels[1](self.scratch, out)

    def time(self, x, out, number: int, repeat: int) -> float:
        return self.kernels[0].time(x, self.scratch, number=number, repeat=repeat).median + \
            self.kernels[1].time(self.scratch, out, number=number, repeat=repeat).median


class HostTransforms:
    """The compiled pack and unpack of one layout geometry, built on first use on `target` (its cores are the
    threads they run on) by `builder(args, name, target)` (default: the CPU space's default point; a tuner
    can be passed). The pack is the faster, timed here once, of one pass over the rewritten data and two
    (channel-major, then a blocked transpose)."""

    def __init__(self, geometry, target: Target | None = None, builder=None):
        self.geometry = geometry
        self.target = target or host_target()
        self.builder = builder or default_builder
        self._pack = self._unpack = None
        self.pack_passes = 0  # 1 or 2 once the pack is built

    @property
    def pack_kernel(self):
        if self._pack is None:
            g, build = self.geometry, lambda args, name: self.builder(list(args), name, self.target)
            first, second = channel_major_programs(g)
            options = [build(pack_program(g), "vta_pack_data"),
                       _TwoPass(build(first, "vta_pack_channel_major"), build(second, "vta_pack_transpose"),
                                tuple(first[1].shape))]
            p = g.p
            x, out = np.zeros((p.batch, p.in_channels, p.height, p.width), np.int8), np.empty(g.data_shape, np.int8)
            times = [options[0].time(x, out, number=2, repeat=3).median,
                     options[1].time(x, out, number=2, repeat=3)]
            self.pack_passes = 1 + int(times[1] < times[0])
            self._pack = options[self.pack_passes - 1]
        return self._pack

    @property
    def unpack_kernel(self) -> Kernel:
        if self._unpack is None:
            self._unpack = self.builder(list(unpack_program(self.geometry)), "vta_unpack_out", self.target)
        return self._unpack

    def pack(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        out = np.empty(self.geometry.data_shape, np.int8) if out is None else out
        self.pack_kernel(np.ascontiguousarray(x, np.int8), out)
        return out

    def unpack(self, blocked: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        p = self.geometry.p
        out = np.empty((p.batch, p.out_channels, p.out_h, p.out_w), np.int8) if out is None else out
        self.unpack_kernel(np.ascontiguousarray(blocked, np.int8).reshape(self.geometry.out_shape), out)
        return out


__all__ = ["HostTransforms", "channel_major_programs", "default_builder", "pack_program", "unpack_program"]

"""The workloads of Vyasa's evaluation (section IV), as te computations for target "aie":
Table VI's computer-vision filters (2 x 2 ... 11 x 11 on 256 x 16 outputs), Table VII's CONV2D
layers (REG 3x3 / 5x5 / 7x7, PW, SS 1x3 and 3x1, DS, FC on 128 x 2 x 16 outputs of 8 channels)
and the three CONV3D filters (3^3, 5^3, 7^3 on 168 x 2 x 16 outputs, the paper's IV-C), each in
32- and 16-bit: 42 in all. The tuner chooses their data layouts; the te states them as written
(channels outermost).

Inputs are the valid-convolution extents (output + filter - 1). 32-bit operands are declared to
hold 24-bit values (`value_range`), so that the reference's int64 sum is exact; 16-bit ones span
the whole int16 range, and their sums are stored with a rounding shift that keeps them in range.
The paper's MACs/cycle (Figs. 10, 11, 13) are not printed as numbers in its text; where its text
gives one (the geomeans, FC 16-bit's 15.77) the bench quotes it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import ops, te

V24 = (-(1 << 23), (1 << 23) - 1)


@dataclass(frozen=True)
class VyasaWorkload:
    """`kind` "filter": out[spatial] = sum in[spatial + taps] * w[taps] (CV filters, CONV3D);
    "conv": out[k, y, x] = sum_{c, s, r} in[c, y + s, x + r] * w[k, c, s, r] (REG, PW, SS);
    "depthwise": out[k, y, x] = sum_{s, r} in[k, y + s, x + r] * w[k, s, r];
    "fc": out[k] = sum_c in[c] * w[k, c]. `out` / `kernel` are the output's and filter's extents
    (conv: kernel = (K, C, S, R); fc: kernel = (K, C))."""

    name: str
    table: str  # "VI", "VII" or "3D"
    out: tuple[int, ...]
    kernel: tuple[int, ...]
    kind: str = "filter"

    def build(self, bits: int):
        """[input, weight, output] te tensors of this workload at `bits` (32 or 16)."""
        dt = f"int{bits}"
        vr = V24 if bits == 32 else None
        inp_shape, body, taps = self._shapes()
        inp = te.placeholder(inp_shape, dt, name="I", value_range=vr)
        wgt = te.placeholder(self.kernel, dt, name="W", value_range=vr)
        acc = te.compute(self.out, body(inp, wgt), name="acc")
        shift = 0 if bits == 32 else 14 + taps.bit_length()  # typical sums land well inside int16, extremes saturate
        out = ops.shift_round_saturate(acc, shift, dt, round_half_up=bits == 16, name=f"{self.name}_{bits}")
        return [inp, wgt, out]

    def build_int32(self):
        """[input, weight, output] with int16 operands summed in int32 and stored as int32: the native
        x86 analog's form (vpmaddwd), for the "filter" kind."""
        inp_shape, _, _ = self._shapes()
        inp = te.placeholder(inp_shape, "int16", name="I")
        wgt = te.placeholder(self.kernel, "int16", name="W")
        n = len(self.out)
        rs = [te.reduce_axis((0, k), f"r{d}") for d, k in enumerate(self.kernel)]
        out = te.compute(self.out, lambda *o: te.sum(
            inp[tuple(o[d] + rs[d] for d in range(n))].astype("int32") * wgt[tuple(rs)].astype("int32"), axis=rs),
            name=f"{self.name}_i32")
        return [inp, wgt, out]

    def _shapes(self):
        def wide(v):
            return v.astype("int64")

        if self.kind == "filter":
            n = len(self.out)
            taps = math.prod(self.kernel)

            def body(inp, wgt):
                rs = [te.reduce_axis((0, k), f"r{d}") for d, k in enumerate(self.kernel)]
                return lambda *o: te.sum(wide(inp[tuple(o[d] + rs[d] for d in range(n))]) * wide(wgt[tuple(rs)]),
                                         axis=rs)
            return tuple(o + k - 1 for o, k in zip(self.out, self.kernel)), body, taps
        if self.kind == "conv":
            (_, y, x), (_, c, s, r) = self.out, self.kernel

            def body(inp, wgt):
                rc, rs, rr = te.reduce_axis((0, c), "rc"), te.reduce_axis((0, s), "rs"), te.reduce_axis((0, r), "rr")
                return lambda k, yy, xx: te.sum(wide(inp[rc, yy + rs, xx + rr]) * wide(wgt[k, rc, rs, rr]),
                                                axis=[rc, rs, rr])
            return (c, y + s - 1, x + r - 1), body, c * s * r
        if self.kind == "depthwise":
            (k, y, x), (_, s, r) = self.out, self.kernel

            def body(inp, wgt):
                rs, rr = te.reduce_axis((0, s), "rs"), te.reduce_axis((0, r), "rr")
                return lambda kk, yy, xx: te.sum(wide(inp[kk, yy + rs, xx + rr]) * wide(wgt[kk, rs, rr]), axis=[rs, rr])
            return (k, y + s - 1, x + r - 1), body, s * r
        (_, c) = self.kernel

        def body(inp, wgt):
            rc = te.reduce_axis((0, c), "rc")
            return lambda kk: te.sum(wide(inp[rc]) * wide(wgt[kk, rc]), axis=rc)
        return (c,), body, c


def random_inputs(tensors, seed: int = 0):
    """Arrays for [input, weight, output]: inputs drawn over their whole declared range, a zeroed output."""
    inp, wgt, out = tensors
    rng = np.random.default_rng(seed)
    arrays = []
    for t in (inp, wgt):
        lo, hi = t.op.value_range or t.dtype.int_range
        arrays.append(rng.integers(lo, hi + 1, size=t.shape).astype(t.dtype.name))
    return arrays + [np.zeros(out.shape, out.dtype.name)]


TABLE_VI = tuple(VyasaWorkload(f"cv{k}x{k}", "VI", (16, 256), (k, k)) for k in range(2, 12))
CONV3D = tuple(VyasaWorkload(f"conv3d_{k}", "3D", (16, 2, 168), (k, k, k)) for k in (3, 5, 7))
# Table VII: output 128 x 2 x 16 (X x Y x K), 8 input channels; the FC layer 4096 outputs of 8 inputs
TABLE_VII = (
    VyasaWorkload("reg3x3", "VII", (16, 2, 128), (16, 8, 3, 3), "conv"),
    VyasaWorkload("reg5x5", "VII", (16, 2, 128), (16, 8, 5, 5), "conv"),
    VyasaWorkload("reg7x7", "VII", (16, 2, 128), (16, 8, 7, 7), "conv"),
    VyasaWorkload("pw", "VII", (16, 2, 128), (16, 8, 1, 1), "conv"),
    VyasaWorkload("ss1x3", "VII", (16, 2, 128), (16, 8, 3, 1), "conv"),
    VyasaWorkload("ss3x1", "VII", (16, 2, 128), (16, 8, 1, 3), "conv"),
    VyasaWorkload("ds3x3", "VII", (16, 2, 128), (16, 3, 3), "depthwise"),
    VyasaWorkload("fc", "VII", (4096,), (4096, 8), "fc"),
)

__all__ = ["CONV3D", "TABLE_VI", "TABLE_VII", "V24", "VyasaWorkload", "random_inputs"]

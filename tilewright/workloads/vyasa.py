"""The workloads of Vyasa's evaluation (section IV), as te computations for target "aie":
Table VI's computer-vision filters (2 x 2 ... 11 x 11 on 256 x 16 outputs), Table VII's CONV2D
layers (REG 3x3 / 5x5 / 7x7, PW, SS 1x3 and 3x1, DS, FC) and the three CONV3D filters (3^3, 5^3,
7^3 on 168 x 2 x 16 outputs, the paper's IV-C), each in 32- and 16-bit.

Inputs are the valid-convolution extents (output + filter - 1). 32-bit operands are declared to
hold 24-bit values (`value_range`), so that the reference's int64 sum is exact; 16-bit ones span
the whole int16 range, and their sums are stored with a rounding shift that keeps them in range.
The paper's MACs/cycle (Figs. 10, 11, 13) are not printed as numbers in its text; where its text
gives one (the geomeans, FC 16-bit's 15.77) the bench quotes it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import ops, te

V24 = (-(1 << 23), (1 << 23) - 1)


@dataclass(frozen=True)
class VyasaWorkload:
    name: str
    table: str  # "VI", "VII" or "3D"
    out: tuple[int, ...]  # spatial output extents, outermost first
    kernel: tuple[int, ...]  # filter extents along the same axes

    def build(self, bits: int):
        """[input, weight, output] te tensors of this workload at `bits` (32 or 16)."""
        dt = f"int{bits}"
        vr = V24 if bits == 32 else None
        n = len(self.out)
        inp = te.placeholder(tuple(o + k - 1 for o, k in zip(self.out, self.kernel)), dt, name="I", value_range=vr)
        wgt = te.placeholder(self.kernel, dt, name="W", value_range=vr)
        rs = [te.reduce_axis((0, k), f"r{d}") for d, k in enumerate(self.kernel)]

        def body(*o):
            return te.sum(inp[tuple(o[d] + rs[d] for d in range(n))].astype("int64")
                          * wgt[tuple(rs)].astype("int64"), axis=rs)

        acc = te.compute(self.out, body, name="acc")
        taps = 1
        for k in self.kernel:
            taps *= k
        shift = 0 if bits == 32 else 14 + taps.bit_length()  # typical sums land well inside int16, extremes saturate
        out = ops.shift_round_saturate(acc, shift, dt, round_half_up=bits == 16, name=f"{self.name}_{bits}")
        return [inp, wgt, out]


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
CONV3D = tuple(VyasaWorkload(f"conv3d_{k}", "3D", (2, 16, 168), (k, k, k)) for k in (3, 5, 7))

__all__ = ["CONV3D", "TABLE_VI", "V24", "VyasaWorkload", "random_inputs"]

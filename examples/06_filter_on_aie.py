"""Lesson 6: a 16-bit image filter on an AI-Engine-like core (a 2-D SIMD datapath with a shuffle
network), compiled by Vyasa's passes and tuned against the core's cycle model. Every cycle count
printed is simulated (our model), not measured; the kernel itself runs on this host, bit-exact,
through an emulation of the AI Engine intrinsics it is written in.

The computation, in te: a K x K filter of int16 pixels and int16 coefficients, summed exactly in
int64, then stored as the datapath stores an accumulator (`srs`): shifted right with rounding and
saturated to int16. `value_range` is not needed at 16 bits: the compiler proves that the sum fits
the 48-bit accumulator lanes; at 32 bits it would ask for one.

Run: python examples/06_filter_on_aie.py [--k 5] [--trials 100]
"""

from __future__ import annotations

import argparse

import numpy as np

import tilewright as tw
from tilewright.workloads.vyasa import random_inputs


def filter2d(height: int, width: int, k: int, shift: int):
    image = tw.placeholder((height + k - 1, width + k - 1), "int16", name="image")
    coeffs = tw.placeholder((k, k), "int16", name="coeffs")
    ry, rx = tw.reduce_axis((0, k), "ry"), tw.reduce_axis((0, k), "rx")
    acc = tw.compute((height, width), lambda y, x: tw.sum(
        image[y + ry, x + rx].astype("int64") * coeffs[ry, rx].astype("int64"), axis=[ry, rx]), name="acc")
    out = tw.ops.shift_round_saturate(acc, shift, "int16", round_half_up=True, name="out")
    return image, coeffs, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--trials", type=int, default=100)
    args = ap.parse_args()
    image, coeffs, out = filter2d(16, 256, args.k, shift=12)

    plain = tw.build([image, coeffs, out], target="aie")  # no records: the plain vectorizer's schedule
    result = tw.tune([image, coeffs, out], target="aie", trials=args.trials, records=None)
    print(result.report())
    kernel = result.build()

    img, cof, got = random_inputs([image, coeffs, out])  # over int16's whole range
    kernel(img, cof, got)
    want = tw.reference.evaluate([out], {image: img, coeffs: cof})
    np.testing.assert_array_equal(got, want[0] if isinstance(want, (list, tuple)) else want)
    print("bit-exact against the te reference")
    for name, k in (("plain", plain), ("tuned", kernel)):
        s = k.stats()
        print(f"{name}: {s['schedule']}: {s['cycles']} cycles (simulated), {s['macs_per_cycle']:.1f} MACs/cycle of 32, "
              f"II {s['ii']}, slots {s['slot_utilization']}")
    print("\n".join(kernel.source.splitlines()[:24]) + "\n    ...")


if __name__ == "__main__":
    main()

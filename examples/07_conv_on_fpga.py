"""Lesson 7: an int8 convolution as an FPGA design. tilewright searches FlexTensor's FPGA space
(tiles held on chip, the PE array, buffer partitions, stream width, pipelines) against the analytic
model, emits the design as HLS C++ and checks it by C simulation against the NumPy reference. Every
time, II and resource count printed is the model's estimate: no synthesis runs here.

Run: python examples/07_conv_on_fpga.py [--device zu9eg] [--trials 2000] [--export conv_prj]
"""

from __future__ import annotations

import argparse

import numpy as np

import tilewright as tw


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="vu9p", help="vu9p, zu9eg or vc707")
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--export", default=None, help="write the Vitis HLS project (with test data) here")
    args = ap.parse_args()

    x = tw.placeholder((1, 32, 28, 28), "int8", name="x")
    w = tw.placeholder((64, 32, 3, 3), "int8", name="w")
    y = tw.ops.conv2d(x, w, padding=1, out_dtype="int32", name="y")

    res = tw.tune([x, w, y], target=f"hls -device={args.device}", trials=args.trials, records=None)
    print(res.report())
    kernel = res.build()

    rng = np.random.default_rng(0)
    xa = rng.integers(-128, 128, (1, 32, 28, 28)).astype("int8")
    wa = rng.integers(-128, 128, (64, 32, 3, 3)).astype("int8")
    ya = np.zeros((1, 64, 28, 28), "int32")
    kernel(xa, wa, ya)                                   # the HLS C++, C-simulated
    ref = tw.evaluate(y, {x: xa, w: wa})
    print("C simulation equals the reference:", bool(np.array_equal(ya, ref)))
    for key, value in kernel.stats().items():
        print(f"  {key}: {value}")
    if args.export:
        print("project:", kernel.export(args.export, data=(xa, wa, ref)))


if __name__ == "__main__":
    main()

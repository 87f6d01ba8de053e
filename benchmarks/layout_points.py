"""NCHW against NCHW8c (`tw.ops.conv2d_nchwc`, input [N, C/8, H, W, 8], weights pre-packed
[O/8, C/8, KH, KW, 8, 8]) on ResNet layers, both with bias + ReLU and the untuned default
schedule, data already in each layout (a model kept in NCHWc converts only at its boundaries).
Evidence for the per-convolution layout choice of issue 15; results in docs/models.md.

Run: python benchmarks/layout_points.py
"""

from __future__ import annotations

import numpy as np

import tilewright as tw
from tilewright.bench.timing import median_seconds

LAYERS = [(64, 64, 56, 3, 1, 1), (128, 128, 28, 3, 1, 1), (256, 256, 14, 3, 1, 1), (512, 512, 7, 3, 1, 1),
          (256, 512, 14, 1, 2, 0), (64, 256, 56, 1, 1, 0)]  # C, O, H=W, kernel, stride, padding


def nchw(c, o, h, k, s, p):
    x = tw.placeholder((1, c, h, h), "float32", name="x")
    w = tw.placeholder((o, c, k, k), "float32", name="w")
    b = tw.placeholder((o,), "float32", name="b")
    return [x, w, b, tw.ops.relu(tw.ops.conv2d(x, w, b, stride=s, padding=p, name="conv"), name="out")]


def nchw8c(c, o, h, k, s, p, block=8):
    x = tw.placeholder((1, c // block, h, h, block), "float32", name="x")
    w = tw.placeholder((o // block, c // block, k, k, block, block), "float32", name="w")
    b = tw.placeholder((o,), "float32", name="b")
    return [x, w, b, tw.ops.relu(tw.ops.conv2d_nchwc(x, w, b, stride=s, padding=p, name="conv"), name="out")]


def main() -> None:
    rng = np.random.default_rng(0)
    print("| C, O, H, k, stride, pad | NCHW ms | NCHW8c ms | NCHW8c speedup |")
    print("|---|---|---|---|")
    for layer in LAYERS:
        times = []
        for make in (nchw, nchw8c):
            tensors = make(*layer)
            kernel = tw.build(tensors, target="cpu")
            ins = [rng.standard_normal(t.shape).astype("float32") for t in tensors[:-1]]
            out = np.zeros(tensors[-1].shape, "float32")
            times.append(median_seconds(lambda k=kernel, a=ins, o=out: k(*a, o), repeat=7))
        print(f"| {layer} | {times[0] * 1e3:.3f} | {times[1] * 1e3:.3f} | {times[0] / times[1]:.2f}x |")


if __name__ == "__main__":
    main()

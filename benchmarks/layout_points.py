"""NCHW against NCHW8c (`tw.ops.conv2d_nchwc`, input [N, C/8, H, W, 8], weights pre-packed
[O/8, C/8, KH, KW, 8, 8]) on ResNet layers, both with bias + ReLU and the untuned default
schedule, data already in each layout (a model kept in NCHWc converts only at its boundaries);
both kernels are checked against PyTorch before they are timed.
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


def reference(x, w, b, stride, padding) -> np.ndarray:
    """relu(conv2d) in NCHW by PyTorch, the check of both kernels before they are timed."""
    import torch

    y = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), stride, padding)
    return torch.relu(y).numpy()


def to_nchw8c(x, w, block=8):
    n, c, h, ww = x.shape
    o, _, kh, kw = w.shape
    xp = x.reshape(n, c // block, block, h, ww).transpose(0, 1, 3, 4, 2)
    wp = w.reshape(o // block, block, c // block, block, kh, kw).transpose(0, 2, 4, 5, 3, 1)
    return np.ascontiguousarray(xp), np.ascontiguousarray(wp)


def from_nchw8c(y):
    n, ob, h, w, block = y.shape
    return y.transpose(0, 1, 4, 2, 3).reshape(n, ob * block, h, w)


def main() -> None:
    rng = np.random.default_rng(0)
    print("| C, O, H, k, stride, pad | NCHW ms | NCHW8c ms | NCHW8c speedup |")
    print("|---|---|---|---|")
    for layer in LAYERS:
        c, o, h, k, s, p = layer
        x = rng.standard_normal((1, c, h, h)).astype("float32")
        w = rng.standard_normal((o, c, k, k)).astype("float32")
        b = rng.standard_normal(o).astype("float32")
        want = reference(x, w, b, s, p)
        times = []
        for make, ins, back in ((nchw, (x, w), lambda y: y), (nchw8c, to_nchw8c(x, w), from_nchw8c)):
            tensors = make(*layer)
            kernel = tw.build(tensors, target="cpu")
            ins = [*ins, b]
            out = np.zeros(tensors[-1].shape, "float32")
            kernel(*ins, out)
            err = np.abs(back(out) - want).max() / np.abs(want).max()
            if err > 1e-4:
                raise SystemExit(f"{make.__name__} {layer}: wrong result (max relative error {err:.2e})")
            times.append(median_seconds(lambda k=kernel, a=ins, o=out: k(*a, o), repeat=7))
        print(f"| {layer} | {times[0] * 1e3:.3f} | {times[1] * 1e3:.3f} | {times[0] / times[1]:.2f}x |")


if __name__ == "__main__":
    main()

"""What slicing a Winograd convolution costs (graph/winograd_chunks.py): one 3x3 conv +
ReLU compiled as a one-layer model on NCHW{8}c with its GEMM and output transform forced
into K slices of its output channel blocks, default schedules, every K checked against
the unsliced graph's reference, then timed in alternating rounds in one process.

Run: python benchmarks/winograd_slices.py C O H K1,K2,...   (e.g. 64 192 112 1,6: YOLO-v1's
112x112 layer; 1024 1024 12 1,8: OverFeat's last 3x3)
"""

from __future__ import annotations

import sys

import numpy as np

from tilewright.graph import Graph, Node, TensorType
from tilewright.graph.fusion import fuse
from tilewright.graph.kernel_graph import kernel_graph
from tilewright.graph.module import build_module
from tilewright.graph.reference import run_reference
from tilewright.graph.winograd import eligible, winograd_convs
from tilewright.stats import median


def layer(c: int, o: int, h: int) -> Graph:
    rng = np.random.default_rng(0)
    consts = {"w": (rng.standard_normal((o, c, 3, 3)) * 0.1).astype(np.float32),
              "bias": rng.standard_normal(o).astype(np.float32)}
    nodes = [Node("constant", (), ("w",)), Node("constant", (), ("bias",)),
             Node("conv2d", ("x", "w", "bias"), ("conv",), {"padding": (1, 1, 1, 1)}),
             Node("relu", ("conv",), ("out",))]
    types = {"x": TensorType((1, c, h, h)), "w": TensorType(consts["w"].shape), "bias": TensorType((o,)),
             "conv": TensorType((1, o, h, h)), "out": TensorType((1, o, h, h))}
    return Graph(nodes, ["x"], ["out"], types, consts, "layer")


def main(c: int, o: int, h: int, ks: list[int], rounds: int = 7) -> None:
    packed = kernel_graph(layer(c, o, h), "NCHWc", 8, winograd=False)
    conv = next(n.name for n in packed.nodes if eligible(packed, n))
    x = [np.random.default_rng(1).standard_normal((1, c, h, h)).astype(np.float32)]
    want = run_reference(packed, x)[0]
    modules = {}
    for k in ks:
        modules[k] = build_module(fuse(winograd_convs(packed, chunks={conv: k})), "cpu")
        np.testing.assert_allclose(modules[k](*x), want, rtol=1e-3, atol=1e-2 * float(np.abs(want).max()))
    times = {k: [] for k in ks}
    for _ in range(rounds):
        for k in ks:
            times[k].append(modules[k].time(*x, repeat=3))
    base = median(times[ks[0]])
    for k in ks:
        t = median(times[k])
        print(f"C={c} O={o} {h}x{h} K={k}: {t * 1e3:.3f} ms ({base / t:.2f}x of K={ks[0]}), "
              f"arena {modules[k].plan.peak_bytes / 2**20:.2f} MiB")


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) != 4:
        sys.exit(__doc__)
    main(int(a[0]), int(a[1]), int(a[2]), [int(k) for k in a[3].split(",")])

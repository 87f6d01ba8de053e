"""Lesson 2: tune a real operator automatically and compare it with PyTorch.

Takes a YOLO-v1 convolution layer from the FlexTensor suite (with bias and
ReLU), lets `tw.tune` search its schedule space (no template, no hand
schedule), checks the best kernel against the reference, and times it beside
PyTorch (oneDNN) and the untuned default on the same inputs, same threads.

Run: python examples/02_tune_conv2d.py [--case yolo_conv8] [--trials 60] [--method q]
"""

from __future__ import annotations

import argparse

import numpy as np

import tilewright as tw
from tilewright.bench.timing import median_seconds, settle
from tilewright.workloads import suite_case


def conv_layer(case: dict):
    n, c, h, w = case["batch"], case["in_channels"], case["height"], case["width"]
    f, k = case["out_channels"], case["kernel"]
    x = tw.placeholder((n, c, h, w), "float32", name="x")
    weight = tw.placeholder((f, c, k, k), "float32", name="weight")
    bias = tw.placeholder((f,), "float32", name="bias")
    y = tw.ops.relu(tw.ops.conv2d(x, weight, bias, stride=case["stride"], padding=case["padding"]))
    return [x, weight, bias, y]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="yolo_conv8")
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--method", default="q", choices=["q", "p", "random"])
    parser.add_argument("--records", default=None, help="SQLite records (default: user cache dir)")
    args = parser.parse_args()

    case = suite_case("C2D", args.case)
    tensors = conv_layer(case)
    print(f"tuning C2D {args.case}: {tensors[0].shape} * {tensors[1].shape}, stride {case['stride']}, "
          f"padding {case['padding']}, + bias + ReLU; {args.trials} trials, method {args.method}")
    result = tw.tune(tensors, trials=args.trials, method=args.method, records=args.records)
    print(result.report())
    kernel = result.build()

    rng = np.random.default_rng(0)
    ins = [rng.standard_normal(t.shape, dtype=np.float32) for t in tensors[:-1]]
    out = np.zeros(tensors[-1].shape, np.float32)
    kernel(*ins, out)
    want = tw.evaluate(tensors[-1], dict(zip(tensors[:-1], ins)))
    err = float(np.abs(out - want).max() / np.abs(want).max())
    if err > 1e-4:
        raise SystemExit(f"tuned kernel is wrong: max relative error {err:.2e}")
    settle()  # the reference evaluator's BLAS threads spin for a while; wait until they idle
    ours = kernel.time(*ins, out, repeat=9).median
    gflop = result.flops / 1e9
    print(f"\n{'':22} {'ms':>8} {'GFLOP/s':>8}")
    print(f"{'tilewright (tuned)':22} {ours * 1e3:8.3f} {gflop / ours:8.1f}")
    if np.isfinite(result.default_cost):
        print(f"{'tilewright (default)':22} {result.default_cost * 1e3:8.3f} {gflop / result.default_cost:8.1f}")
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed; no baseline")
        return
    torch.set_num_threads(tw.as_target("cpu").cores)
    tx, tw_, tb = (torch.from_numpy(a) for a in ins)
    best_torch, layout = None, None
    for name, fmt in (("NCHW", torch.contiguous_format), ("channels_last", torch.channels_last)):
        xx = tx.contiguous(memory_format=fmt)
        ww = tw_.contiguous(memory_format=fmt)

        def run(xx=xx, ww=ww):
            with torch.no_grad():
                return torch.relu(torch.nn.functional.conv2d(xx, ww, tb, stride=case["stride"],
                                                             padding=case["padding"]))

        t = median_seconds(run)
        if best_torch is None or t < best_torch:
            best_torch, layout = t, name
    print(f"{'torch (' + layout + ')':22} {best_torch * 1e3:8.3f} {gflop / best_torch:8.1f}")
    print(f"\ntilewright / torch speed: {best_torch / ours:.2f}x (torch timed in its faster layout, "
          f"conv weights packed inside each call, as PyTorch eager does)")


if __name__ == "__main__":
    main()

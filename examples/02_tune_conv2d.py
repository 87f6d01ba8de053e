"""Lesson 2: tune a real operator automatically and compare it with PyTorch.

Takes a YOLO-v1 convolution layer from the FlexTensor suite (with bias and
ReLU), lets `tw.tune` search its schedule space (no template, no hand
schedule), checks the best kernel against the reference, and times it beside
the untuned default and PyTorch's fused equivalent (oneDNN conv with bias, then
an in-place ReLU; NCHW and channels_last) on the same aligned inputs, same
threads, every side called from Python through one harness in alternating
rounds (our kernels' C-loop time is printed beside, for reference).

Run: python examples/02_tune_conv2d.py [--case yolo_conv8] [--trials 60] [--method q]
"""

from __future__ import annotations

import argparse

import numpy as np

import tilewright as tw
from tilewright.bench.timing import ROUNDS, alternating_medians, median_seconds
from tilewright.runtime.aligned import aligned_copy, aligned_zeros
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
    sides = {"tilewright (tuned)": result.build(),
             "tilewright (default)": result.backend.build(
                 result.backend.default_schedule(tensors[-1:], result.target), tensors, result.target)}

    rng = np.random.default_rng(0)
    ins = [aligned_copy(rng.standard_normal(t.shape, dtype=np.float32)) for t in tensors[:-1]]
    want = tw.evaluate(tensors[-1], dict(zip(tensors[:-1], ins)))
    timed, loop_s = {}, {}
    for name, kernel in sides.items():
        out = aligned_zeros(tensors[-1].shape, np.float32)
        kernel(*ins, out)
        err = float(np.abs(out - want).max() / np.abs(want).max())
        if err > 1e-4:
            raise SystemExit(f"{name} kernel is wrong: max relative error {err:.2e}")
        timed[name] = lambda k=kernel, out=out: median_seconds(lambda: k(*ins, out), repeat=3)
        loop_s[name] = kernel.time(*ins, out, repeat=9).median
    timed.update(torch_sides(case, ins, want))
    times = alternating_medians(timed)  # the same harness for every side, in alternating rounds
    gflop = result.flops / 1e9
    print(f"\nmedians of {ROUNDS} alternating rounds, every side called from Python on the same aligned "
          f"arrays, {threads()} threads")
    print(f"{'':40} {'ms':>8} {'GFLOP/s':>8}   C loop ms")
    for name, t in times.items():
        loop = f"{loop_s[name] * 1e3:11.3f}" if name in loop_s else ""
        print(f"{name:40} {t * 1e3:8.3f} {gflop / t:8.1f}   {loop}")
    torch_best = min((n for n in times if n.startswith("torch")), key=times.get, default=None)
    if torch_best:
        ours = times["tilewright (tuned)"]
        print(f"\ntilewright / {torch_best}: {times[torch_best] / ours:.2f}x (conv weights packed inside "
              "each call on both sides, as PyTorch eager does)")


def threads() -> int:
    return tw.as_target("cpu").cores


def torch_sides(case: dict, ins: list, want) -> dict:
    """PyTorch's fused equivalent, conv2d + bias then an in-place ReLU, in inference mode, in NCHW
    and in channels_last (its tensors converted once, outside the timing: PyTorch at its best),
    each checked against the reference first."""
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed; no baseline")
        return {}
    torch.set_num_threads(threads())
    x, w, b = (torch.from_numpy(a) for a in ins)
    out = {}
    for name, fmt in (("NCHW", torch.contiguous_format), ("channels_last", torch.channels_last)):
        xx, ww = x.contiguous(memory_format=fmt), w.contiguous(memory_format=fmt)

        def run(xx=xx, ww=ww):
            with torch.inference_mode():
                return torch.nn.functional.conv2d(xx, ww, b, stride=case["stride"], padding=case["padding"]).relu_()

        err = float(np.abs(run().numpy() - want).max() / np.abs(want).max())
        if err > 1e-4:
            raise SystemExit(f"PyTorch {name} disagrees with the reference: max relative error {err:.2e}")
        out[f"torch {name} (conv+bias, relu_)"] = lambda run=run: median_seconds(run, repeat=3)
    return out


if __name__ == "__main__":
    main()

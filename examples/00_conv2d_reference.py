"""Lesson 0: describe an operator, evaluate it with the NumPy reference, check it.

Builds YOLO-v1's second convolution layer (FlexTensor suite case C2D
yolo_conv2) with bias and ReLU from `tw.ops`, prints the tensor-expression
program, evaluates it with `tw.evaluate`, and checks the result against
PyTorch (when installed) on the same inputs. The reference evaluator is the
oracle every generated kernel is checked against; it is not a fast path.
"""

import time

import numpy as np

import tilewright as tw
from tilewright.workloads import suite_case


def main() -> None:
    case = suite_case("C2D", "yolo_conv2")
    n, c, h, w = case["batch"], case["in_channels"], case["height"], case["width"]
    k, f = case["kernel"], case["out_channels"]
    x = tw.placeholder((n, c, h, w), "float32", name="x")
    weight = tw.placeholder((f, c, k, k), "float32", name="weight")
    bias = tw.placeholder((f,), "float32", name="bias")
    y = tw.ops.relu(tw.ops.conv2d(x, weight, bias, stride=case["stride"], padding=case["padding"]))
    print(f"C2D {case['name']}: input {[n, c, h, w]}, weight {[f, c, k, k]}, stride {case['stride']}, "
          f"padding {case['padding']}\n")
    print(y, "\n")

    rng = np.random.default_rng(0)
    inputs = {
        x: rng.standard_normal((n, c, h, w), dtype=np.float32),
        weight: rng.standard_normal((f, c, k, k), dtype=np.float32) / np.float32(np.sqrt(c * k * k)),
        bias: rng.standard_normal(f, dtype=np.float32),
    }
    start = time.perf_counter()
    out = tw.evaluate(y, inputs)
    elapsed = time.perf_counter() - start
    gflop = 2 * n * f * out.shape[2] * out.shape[3] * c * k * k / 1e9
    print(f"reference evaluation: {elapsed * 1e3:.0f} ms for {gflop:.2f} GFLOP, output {list(out.shape)}")

    try:
        import torch
    except ImportError:
        print("PyTorch is not installed; skipped the cross-check")
        return
    tx, tw_, tb = (torch.from_numpy(inputs[t]) for t in (x, weight, bias))
    want = torch.relu(torch.nn.functional.conv2d(tx, tw_, tb, stride=case["stride"], padding=case["padding"]))
    err = float(np.abs(out - want.numpy()).max())
    print(f"max |tilewright reference - torch| = {err:.2e}  ->  {'OK' if err < 1e-3 else 'MISMATCH'}")
    if err >= 1e-3:
        raise SystemExit(1)


if __name__ == "__main__":
    main()

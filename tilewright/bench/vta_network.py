"""An int8 ResNet-18 quantized the way VTA runs it (int8 activations, every conv's
int32 sum rescaled by a power of two: clip((acc >> shift) + bias, 0, 127)), end
to end: its 19 offloadable convolutions on the accelerator simulator, the first
conv (3 input channels), max pool, residual adds, global pool and classifier on
the host CPU as tilewright kernels, as TVM's VTA deployment splits it. The
logits are checked bit for bit against the reference evaluator of the whole te
graph. Weights are random (seeded): this checks the compiler and simulator, not
accuracy. Accelerator numbers are simulated cycles; host numbers are measured.
`--compile resnet18` instead takes the in-tree float torch model through
`tw.compile(model, target="vta")` (graph/vta_offload.py: calibrated power-of-two
quantization) and compares with the float model too.

    python -m tilewright.bench.vta_network --out DIR
    python -m tilewright.bench.vta_network --compile resnet18 --out DIR"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..ops.blocked_conv import conv2d_blocked, shift_bias_clip
from ..te import compute, const, if_then_else, placeholder, reduce_axis
from ..te import max as te_max
from ..te import min as te_min
from ..te import sum as te_sum

B = 16  # channel block of the default 1 x 16 x 16 core


@dataclass
class Node:
    name: str
    device: str  # "vta" or "cpu"
    inputs: tuple[str, ...]
    make: object  # (*input tensors) -> (output tensor, [parameter placeholders])


def _maxpool(x):
    rh, rw = reduce_axis(3, "ph"), reduce_axis(3, "pw")
    n, c, h, w, b, k = x.shape
    oh, ow = (h + 1) // 2, (w + 1) // 2

    def body(i, o, y, z, bb, kk):
        iy, ix = y * 2 + rh - 1, z * 2 + rw - 1
        inside = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
        return te_max(if_then_else(inside, x[i, o, iy, ix, bb, kk], const(-128, "int8")), axis=[rh, rw])
    return compute((n, c, oh, ow, b, k), body, name="maxpool")


def _add_clip(a, b):
    return compute(a.shape, lambda *i: te_min(te_max(a[i].astype("int32") + b[i].astype("int32"), const(0, "int32")),
                                              const(127, "int32")).astype("int8"), name="residual_add")


def _pool_fc(x, w):
    """Global sum pool >> 6 clipped to int8, then the int32 classifier (1000 classes padded to 1008)."""
    n, c, h, ww, b, k = x.shape
    ry, rx = reduce_axis(h, "gy"), reduce_axis(ww, "gx")
    pooled = compute((n, c, b, k), lambda i, o, bb, kk: te_sum(x[i, o, ry, rx, bb, kk].astype("int32"),
                                                                 axis=[ry, rx]), name="gap_sum")
    q = compute(pooled.shape, lambda *i: te_min(te_max(pooled[i] >> const(6, "int32"), const(0, "int32")),
                                                const(127, "int32")).astype("int8"), name="gap")
    rc, rk = reduce_axis(c, "fc"), reduce_axis(k, "fk")
    return compute((n, w.shape[0], b, w.shape[2]),
                   lambda i, o, bb, kk: te_sum(q[i, rc, bb, rk].astype("int32") * w[o, rc, kk, rk].astype("int32"),
                                               axis=[rc, rk]), name="logits")


def _conv(name, cin, cout, k, stride, pad):
    shift = max(0, round(math.log2(9 * math.sqrt(cin * k * k))))

    def make(x):
        w = placeholder((cout // B, cin // B, k, k, B, B), "int8", f"{name}_w")
        b = placeholder((1, cout // B, 1, 1, 1, B), "int32", f"{name}_b")
        return shift_bias_clip(conv2d_blocked(x, w, stride, pad), b, shift, name=name), [w, b]
    return make


def resnet18_nodes() -> list[Node]:
    nodes = [Node("conv1", "cpu", ("image",), _conv("conv1", 16, 64, 7, 2, 3)),
             Node("pool", "cpu", ("conv1",), lambda x: (_maxpool(x), []))]
    prev, cin = "pool", 64
    for stage, cout in enumerate((64, 128, 256, 512), start=1):
        for block in range(2):
            stride = 2 if stage > 1 and block == 0 else 1
            p = f"l{stage}.{block}"
            nodes.append(Node(f"{p}.a", "vta", (prev,), _conv(f"{p}.a", cin, cout, 3, stride, 1)))
            nodes.append(Node(f"{p}.b", "vta", (f"{p}.a",), _conv(f"{p}.b", cout, cout, 3, 1, 1)))
            short = prev
            if stride != 1 or cin != cout:
                short = f"{p}.down"
                nodes.append(Node(short, "vta", (prev,), _conv(short, cin, cout, 1, stride, 0)))
            nodes.append(Node(f"{p}.add", "cpu", (f"{p}.b", short), lambda a, b: (_add_clip(a, b), [])))
            prev, cin = f"{p}.add", cout
    fc = placeholder((1008 // B, 512 // B, B, B), "int8", "fc_w")
    nodes.append(Node("pool_fc", "cpu", (prev,), lambda x: (_pool_fc(x, fc), [fc])))
    return nodes


def _params(tensors, rng) -> dict:
    out = {}
    for t in tensors:
        if t.dtype.name == "int32":
            out[t] = rng.integers(-64, 64, t.shape, dtype=np.int32)
        else:
            out[t] = rng.integers(-16, 16, t.shape, dtype=np.int8)
    return out


def run(seed: int = 0, check: bool = True) -> dict:
    import tilewright as tw

    from ..reference import evaluate

    rng = np.random.default_rng(seed)
    image = placeholder((1, 1, 224, 224, 1, B), "int8", "image")
    feed = {image: np.zeros(image.shape, np.int8)}
    feed[image][..., :3] = rng.integers(0, 128, (1, 1, 224, 224, 1, 3), dtype=np.int8)  # 3 channels, padded
    values, whole, rows = {"image": feed[image]}, {"image": image}, []
    for node in resnet18_nodes():
        ins = [placeholder(values[i].shape, "int8", f"{node.name}_in{k}") for k, i in enumerate(node.inputs)]
        out, params = node.make(*ins)
        pvals = _params(params, rng)
        t0 = time.perf_counter()
        kernel = tw.build([*ins, *params, out], target=node.device)
        build_s = time.perf_counter() - t0
        result = np.zeros(out.shape, np.dtype(out.dtype.name))
        t0 = time.perf_counter()
        kernel(*[values[i] for i in node.inputs], *[pvals[p] for p in params], result)
        row = {"node": node.name, "device": node.device, "build_s": build_s, "run_s": time.perf_counter() - t0}
        if node.device == "vta":
            st = kernel.stats()
            row.update(cycles=st.cycles, gemm_utilization=st.gemm_utilization, tiling=str(kernel.program.tiling))
        rows.append(row)
        values[node.name] = result
        # the same node on the whole graph's tensors, with the same parameter values, for the reference
        wout, wparams = node.make(*[whole[i] for i in node.inputs])
        feed.update({wp: pvals[p] for wp, p in zip(wparams, params)})
        whole[node.name] = wout
    summary = {"rows": rows, "vta_cycles": sum(r.get("cycles", 0) for r in rows),
               "host_seconds": sum(r["run_s"] for r in rows if r["device"] == "cpu"),
               "simulator_seconds": sum(r["run_s"] for r in rows if r["device"] == "vta")}
    if check:
        t0 = time.perf_counter()
        want = evaluate([whole["pool_fc"]], feed)[0]
        summary["reference_seconds"] = time.perf_counter() - t0
        summary["exact"] = bool(np.array_equal(values["pool_fc"], want))
        last = values["l4.1.add"]  # not degenerate: neither all clipped to 0 nor all saturated at 127
        summary["last_block_zero_fraction"] = float(np.mean(last == 0))
        summary["last_block_saturated_fraction"] = float(np.mean(last == 127))
    return summary


def table(summary: dict) -> str:
    lines = ["| node | device | tiling | cycles (simulated) | GEMM util | run s (host wall) |",
             "|---|---|---|---|---|---|"]
    for r in summary["rows"]:
        lines.append(f"| {r['node']} | {r['device']} | {r.get('tiling', '')} | "
                     f"{r['cycles'] if 'cycles' in r else ''} | "
                     f"{'%.0f%%' % (100 * r['gemm_utilization']) if 'cycles' in r else ''} | {r['run_s']:.3f} |")
    lines += ["", f"accelerator: {summary['vta_cycles']:,} cycles simulated "
                  f"({summary['vta_cycles'] / 200e6 * 1e3:.1f} ms at 200 MHz), simulator wall "
                  f"{summary['simulator_seconds']:.2f} s; host kernels {summary['host_seconds']:.3f} s; "
                  f"bit-exact against the reference evaluator: {summary.get('exact')}"]
    return "\n".join(lines)


def run_compiled(model: str = "resnet18", held_out: int = 3, seed: int = 0) -> tuple[dict, str]:
    """The in-tree torch model (seeded weights) through `tw.compile(..., target="vta")`: calibrated on one
    random image, checked bit for bit and against the float model on `held_out` others."""
    import torch

    import tilewright as tw

    from .. import models

    m = getattr(models, model)().eval()
    gen = torch.Generator().manual_seed(seed)
    image = lambda: torch.randn(1, 3, 224, 224, generator=gen)  # noqa: E731
    t0 = time.perf_counter()
    module = tw.compile(m, (image(),), target="vta")
    out = {"model": model, "compile_seconds": time.perf_counter() - t0, "held_out": []}
    for _ in range(held_out):
        x = image()
        got, want = module(x.numpy()), m(x).detach().numpy()
        out["held_out"].append({"exact": module.check(x.numpy()),
                                "relative_error": float(np.linalg.norm(got - want) / np.linalg.norm(want)),
                                "correlation": float(np.corrcoef(got.ravel(), want.ravel())[0, 1]),
                                "top1_agrees": bool(got.argmax() == want.argmax())})
    out["vta_cycles"] = sum(st.stats.get("cycles", 0) for st in module.steps)
    return out, module.summary()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compile", metavar="MODEL", default="",
                    help="instead: the in-tree torch model (e.g. resnet18) through tw.compile(target='vta')")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.compile:
        result, text = run_compiled(args.compile, seed=args.seed)
        text += "\n\n" + json.dumps(result["held_out"], indent=1)
        print(text)
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"vta_compile_{args.compile}.json").write_text(json.dumps(result, indent=1))
            (args.out / f"vta_compile_{args.compile}.md").write_text(text + "\n")
        return
    summary = run(args.seed)
    text = table(summary)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "vta_resnet18_network.json").write_text(json.dumps(summary, indent=1))
        (args.out / "vta_resnet18_network.md").write_text(text + "\n")


if __name__ == "__main__":
    main()

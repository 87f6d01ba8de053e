"""int8 convolution layers beside tilewright fp32, PyTorch's quantized conv and ONNX Runtime's
QLinearConv, with the same quantization parameters, in one process, one harness.

Every side takes NCHW uint8 activations and gives NCHW uint8 outputs (fp32: NCHW float32), so
our layout changes (NCHW -> NCHW4c in, NCHW8c -> NCHW out) are timed as part of our call; the
weights are constants every side packs once ahead (PyTorch's `set_weight_bias` prepacks,
ONNX Runtime packs at session creation, ours are packed [K/8][C/4][R][S][8][4] s8). Per-tensor
u8 activations (zero point 0, post-ReLU), per-channel symmetric s8 weights, a bias (float for
PyTorch, int32 in the accumulator's scale for ONNX Runtime and us); requantize rounds half to even
and saturates (ONNX QLinearConv).

Checks before any time counts: ours bit-exact against the reference evaluator of the same te
program; every side within one quantization step of ours on >= 99.9% of the elements.

    python -m tilewright.bench.int8_conv --layers r50 --out benchmarks/results/int8_r50
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from .provenance import provenance, provenance_line, save_run
from .timing import alternating_medians, median_seconds

SUITE = Path(__file__).resolve().parents[2].parent / "shared" / "benchmarks" / "resnet50_conv.json"
WINOGRAD_LAYERS = ("l1_3x3", "l2_3x3", "l3_3x3", "l4_3x3")  # the fp32 compiler's Winograd picks on R50


def _layers(path: Path, names=None) -> list[dict]:
    cases = json.loads(path.read_text())["cases"]
    return [c for c in cases if names is None or c["name"] in names]


def quantized_case(case: dict, seed: int = 0, bits: int = 7) -> dict:
    """Float data and the quantization every side shares; activations on `bits` bits (7: PyTorch's
    x86 `reduce_range`, what lets a u8 x s8 pair sum fit 16 bits)."""
    rng = np.random.default_rng(seed)
    C, H, K, R = case["in_channels"], case["height"], case["out_channels"], case["kernel"]
    x = np.maximum(rng.standard_normal((1, C, H, case["width"])), 0).astype(np.float32)  # post-ReLU
    w = (rng.standard_normal((K, C, R, R)) / math.sqrt(C * R * R)).astype(np.float32)
    b = (0.1 * rng.standard_normal(K)).astype(np.float32)
    top = 2 ** bits - 1
    sx = float(x.max() / top)
    sw = (np.abs(w).reshape(K, -1).max(axis=1) / 127).astype(np.float32)
    xq = np.clip(np.rint(x / sx), 0, top).astype(np.uint8)
    wq = np.clip(np.rint(w / sw[:, None, None, None]), -127, 127).astype(np.int8)
    ref = _float_conv(xq.astype(np.float32) * sx, wq.astype(np.float32) * sw[:, None, None, None], b, case)
    sy = float(max(ref.max(), 1e-6) / 255)
    return {"x": x, "w": w, "b": b, "xq": xq, "wq": wq, "sx": sx, "sw": sw, "sy": sy, "range": (0, top)}


def _float_conv(x, w, b, case):
    import torch

    out = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b),
                                     stride=case["stride"], padding=case["padding"])
    return out.numpy()


def _channels_to(n: int, block: int) -> int:
    return -(-n // block) * block


def ours_int8(case: dict, q: dict, target, trials: int = 0, seed: int = 0):
    """Our NCHW u8 -> NCHW u8 int8 conv: three kernels (to NCHW4c, conv + requantize, to NCHW), and
    the checked output of one call."""
    import tilewright as tw
    from tilewright.ops.pad import pad_axes

    C, K, R = case["in_channels"], case["out_channels"], case["kernel"]
    Cp = _channels_to(C, 4)
    H, W = case["height"], case["width"]
    Xn = tw.placeholder((1, C, H, W), "uint8", name="Xn")
    padded = pad_axes(Xn, [0, 0, 0, 0], [0, Cp - C, 0, 0], name="channels_to_4") if Cp != C else Xn
    X4 = tw.ops.layout_transform(padded, "NCHW", "NCHW4c", name="to_nchw4c")
    Xb = tw.placeholder(X4.shape, "uint8", name="Xb", value_range=q["range"])
    Wb = tw.placeholder((K // 8, Cp // 4, R, R, 8, 4), "int8", name="Wb")
    mult = tw.placeholder((K // 8, 8), "float32", name="mult")
    off = tw.placeholder((K // 8, 8), "int32", name="bias")
    acc = tw.ops.conv2d_nchwc(Xb, Wb, stride=case["stride"], padding=case["padding"], out_dtype="int32",
                              weight_layout="oi")
    Yb = tw.ops.requantize(acc, mult, off, zero_point=0, channel_axes=(1, 4))
    Ybp = tw.placeholder(Yb.shape, "uint8", name="Ybp")
    Yn = tw.ops.layout_transform(Ybp, "NCHW8c", "NCHW", name="to_nchw")

    wpad = np.zeros((K, Cp, R, R), np.int8)
    wpad[:, :C] = q["wq"]
    wb = np.ascontiguousarray(wpad.reshape(K // 8, 8, Cp // 4, 4, R, R).transpose(0, 2, 4, 5, 1, 3))
    m = (q["sx"] * q["sw"] / q["sy"]).astype(np.float32).reshape(K // 8, 8)
    o = np.rint(q["b"] / (q["sx"] * q["sw"])).astype(np.int32).reshape(K // 8, 8)
    if trials:
        best = tw.tune([Xb, Wb, mult, off, Yb], target=target, trials=trials, seed=seed, progress=False,
                       constants=[Wb, mult, off])
        conv = best.build()
    else:
        conv = tw.build([Xb, Wb, mult, off, Yb], target=target)
    to_b = tw.build([Xn, X4], target=target)
    to_n = tw.build([Ybp, Yn], target=target)
    xb = np.zeros(X4.shape, np.uint8)
    yb = np.zeros(Yb.shape, np.uint8)
    y = np.zeros(Yn.shape, np.uint8)

    def run():
        to_b(q["xq"], xb)
        conv(xb, wb, m, o, yb)
        to_n(yb, y)
        return y

    run()
    want = tw.evaluate(Yb, {Xb: xb, Wb: wb, mult: m, off: o})
    if not np.array_equal(yb, want):
        bad = int((yb != want).sum())
        raise AssertionError(f"{case['name']}: int8 kernel differs from the reference on {bad} elements")
    spelled = [n for n in ("maddubs", "dpbusd", "madd_epi16") if n in conv.source]
    plan_kind = f"tensorized ({spelled[0]})" if spelled else "plain"
    return run, y.copy(), plan_kind, lambda: conv(xb, wb, m, o, yb)


def torch_int8(case: dict, q: dict):
    import torch

    torch.backends.quantized.engine = "x86"
    K, C, R = case["out_channels"], case["in_channels"], case["kernel"]
    conv = torch.ao.nn.quantized.Conv2d(C, K, R, stride=case["stride"], padding=case["padding"])
    qw = torch.quantize_per_channel(torch.from_numpy(q["wq"].astype(np.float32) * q["sw"][:, None, None, None]),
                                    torch.from_numpy(q["sw"].astype(np.float64)), torch.zeros(K, dtype=torch.long),
                                    0, torch.qint8)
    conv.set_weight_bias(qw, torch.from_numpy(q["b"]))
    conv.scale, conv.zero_point = q["sy"], 0
    qx = torch._make_per_tensor_quantized_tensor(torch.from_numpy(q["xq"]), q["sx"], 0)

    def run():
        with torch.inference_mode():
            return conv(qx)
    return run, run().int_repr().numpy()


def ort_int8(case: dict, q: dict, threads: int):
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    K, R = case["out_channels"], case["kernel"]
    p, s = case["padding"], case["stride"]
    bq = np.rint(q["b"] / (q["sx"] * q["sw"])).astype(np.int32)
    inits = [numpy_helper.from_array(np.array(q["sx"], np.float32), "x_scale"),
             numpy_helper.from_array(np.array(0, np.uint8), "x_zp"),
             numpy_helper.from_array(q["wq"], "w"), numpy_helper.from_array(q["sw"].astype(np.float32), "w_scale"),
             numpy_helper.from_array(np.zeros(K, np.int8), "w_zp"),
             numpy_helper.from_array(np.array(q["sy"], np.float32), "y_scale"),
             numpy_helper.from_array(np.array(0, np.uint8), "y_zp"), numpy_helper.from_array(bq, "bias")]
    node = helper.make_node("QLinearConv", ["x", "x_scale", "x_zp", "w", "w_scale", "w_zp", "y_scale", "y_zp",
                                            "bias"], ["y"], kernel_shape=[R, R], pads=[p] * 4, strides=[s, s])
    graph = helper.make_graph([node], "qconv", [helper.make_tensor_value_info("x", TensorProto.UINT8,
                                                                                list(q["xq"].shape))],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    feed = {"x": q["xq"]}

    def run():
        return sess.run(None, feed)[0]
    return run, run()


def ours_fp32(case: dict, q: dict, target):
    """tilewright fp32, the path a user's model takes (graph compile, NCHWc, no Winograd), defaults."""
    import tempfile

    from ..graph.compile import compile as compile_graph
    from ..records.store import Records
    from .conv_layer import conv_graph

    with tempfile.TemporaryDirectory() as tmp:
        module = compile_graph(conv_graph(case, q["w"]), target=target, trials=0,
                               records=Records(Path(tmp) / "none.db"), progress=False, layout="NCHWc",
                               winograd=False)
    x = q["x"]

    def run():
        return module(x)
    got, want = np.asarray(run()), _float_conv(x, q["w"], np.zeros_like(q["b"]), case)
    err = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
    if err > 1e-4:
        raise AssertionError(f"{case['name']}: tilewright fp32 differs from PyTorch's conv by {err:.2e} (relative)")
    return run


def _within_one_step(a: np.ndarray, b: np.ndarray) -> float:
    return float((np.abs(a.astype(np.int32) - b.astype(np.int32)) <= 1).mean())


def run_layer(case: dict, target, threads: int, trials: int, rounds: int, bits: int = 7) -> dict:
    q = quantized_case(case, bits=bits)
    ours, y, kind, conv_only = ours_int8(case, q, target, trials)
    sides = {"tilewright int8": ours, "tilewright int8 conv kernel alone (NCHW4c in, NCHW8c out)": conv_only}
    row = {"name": case["name"], "plan": kind, "checks": {}}
    t_run, t_y = torch_int8(case, q)
    sides["PyTorch int8 (x86)"] = t_run
    row["checks"]["PyTorch int8 (x86)"] = _within_one_step(y, t_y)
    o_run, o_y = ort_int8(case, q, threads)
    sides["ONNX Runtime QLinearConv"] = o_run
    row["checks"]["ONNX Runtime QLinearConv"] = _within_one_step(y, o_y)
    sides["tilewright fp32"] = ours_fp32(case, q, target)
    for name, check in row["checks"].items():
        if check < 0.999:
            raise AssertionError(f"{case['name']}: {name} agrees within one step on only {check:.4%} of elements")
    times = alternating_medians({n: (lambda f=f: median_seconds(f)) for n, f in sides.items()}, rounds=rounds)
    row["seconds"] = times
    row["speedup"] = {n: times[n] / times["tilewright int8"] for n in times if n != "tilewright int8"}
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default="r50", help="r50 (the ResNet-50 list) or a comma list of its names")
    ap.add_argument("--trials", type=int, default=0, help="tuning trials per int8 layer (0: default schedule)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--activation-bits", type=int, default=7, choices=(7, 8),
                    help="7: activations in [0, 127] (PyTorch x86 reduce_range), vpmaddubsw proven exact; "
                         "8: full u8, the exact widening path on AVX2")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    import os

    import torch

    import tilewright as tw

    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    torch.set_num_threads(args.threads)
    target = tw.Target("cpu")
    names = None if args.layers == "r50" else set(args.layers.split(","))
    doc = {"provenance": provenance(args.threads, target, trials=args.trials, activation_bits=args.activation_bits),
           "cases": []}
    print(provenance_line(doc["provenance"]))
    for case in _layers(SUITE, names):
        start = time.time()
        row = run_layer(case, target, args.threads, args.trials, args.rounds, args.activation_bits)
        doc["cases"].append(row)
        sp = row["speedup"]
        print(f"{case['name']:12s} int8 {row['seconds']['tilewright int8'] * 1e3:7.3f} ms  vs fp32 "
              f"{sp['tilewright fp32']:.2f}x  vs PyTorch int8 {sp['PyTorch int8 (x86)']:.2f}x  vs ORT "
              f"{sp['ONNX Runtime QLinearConv']:.2f}x  ({row['plan']}, {time.time() - start:.0f} s)", flush=True)
    direct = [r for r in doc["cases"] if r["name"] not in WINOGRAD_LAYERS]
    doc["geomean"] = {}
    for label, rows in (("direct", direct), ("all", doc["cases"])):
        if rows:
            doc["geomean"][label] = {n: math.exp(sum(math.log(r["speedup"][n]) for r in rows)
                                              / len(rows)) for n in rows[0]["speedup"]}
    for label, g in doc["geomean"].items():
        print(f"geomean ({label}): " + ", ".join(f"vs {n} {v:.2f}x" for n, v in g.items()))
    if args.out:
        save_run(args.out, "int8_conv", doc, markdown(doc))
    return 0


def markdown(doc: dict) -> str:
    """The per-layer table: our time and each side's time over ours (> 1: we are faster)."""
    sides = list(doc["cases"][0]["speedup"]) if doc["cases"] else []
    lines = [provenance_line(doc["provenance"]), "",
             "| layer | ours (ms) | " + " | ".join(f"{s} (x)" for s in sides) + " | spelling |",
             "|---|---|" + "---|" * len(sides) + "---|"]
    for r in doc["cases"]:
        lines.append(f"| {r['name']} | {r['seconds']['tilewright int8'] * 1e3:.3f} | "
                     + " | ".join(f"{r['speedup'][s]:.2f}" for s in sides) + f" | {r['plan']} |")
    for label, g in doc.get("geomean", {}).items():
        lines.append(f"| geomean ({label}) | | " + " | ".join(f"{g[s]:.2f}" for s in sides) + " | |")
    return "\n".join(lines) + "\n"


def markdown_from(path: Path) -> None:
    """Rewrite the Markdown table of a finished run's JSON (`int8_conv.json` in `path`)."""
    doc = json.loads((path / "int8_conv.json").read_text())
    (path / "int8_conv.md").write_text(markdown(doc))


if __name__ == "__main__":
    raise SystemExit(main())

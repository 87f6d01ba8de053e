"""Models from Hugging Face transformers' own code, default (full-size) configs with seeded random
weights, batch 1: tilewright untuned (`tw.compile`, 0 trials) beside ONNX Runtime on the same
model exported by torch.onnx (TorchScript exporter, opset 17, all graph optimizations), same
threads, one harness, alternating rounds. Both checked against eager before any time counts.

    python -m tilewright.bench.transformers_models --models bert,gpt2,vit --out benchmarks/results/transformers
"""

from __future__ import annotations

import argparse
import io
import tempfile
import time
from pathlib import Path

import numpy as np

from .provenance import provenance, provenance_line, save_run
from .report import geomean
from .timing import alternating_medians, median_seconds


def build(name: str):
    """(module returning the last hidden state, example input) of a default-config model."""
    import torch
    import transformers as T

    torch.manual_seed(0)
    models = {
        "bert": (lambda: T.BertModel(T.BertConfig()), lambda: torch.randint(0, 30000, (1, 128))),
        "gpt2": (lambda: T.GPT2Model(T.GPT2Config()), lambda: torch.randint(0, 50000, (1, 128))),
        "vit": (lambda: T.ViTModel(T.ViTConfig()), lambda: torch.randn(1, 3, 224, 224)),
    }
    if name not in models:
        raise SystemExit(f"unknown model {name!r}; choose from {', '.join(models)}")
    model, example = models[name]
    return last_hidden(model()), example()


def last_hidden(model):
    """`model` (eval mode) wrapped to return its last hidden state, one tensor, as exporters want."""
    import torch

    class LastHidden(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x).last_hidden_state
    return LastHidden(model.eval()).eval()


def run_model(name: str, threads: int, rounds: int) -> dict:
    import onnxruntime as ort
    import torch

    import tilewright as tw

    net, x = build(name)
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        module = tw.compile(net, (x,), target=tw.Target("cpu").with_cores(threads), records=Path(tmp) / "r.db",
                            progress=False)
    compile_s = time.time() - start
    xn = x.numpy()
    with torch.no_grad():
        want = net(x).numpy()
    f = io.BytesIO()
    torch.onnx.export(net, (x,), f, dynamo=False, opset_version=17)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(f.getvalue(), opts, providers=["CPUExecutionProvider"])
    feed = {sess.get_inputs()[0].name: xn}
    errors = {}
    for side, got in (("tilewright", module(xn)), ("onnxruntime", sess.run(None, feed)[0])):
        errors[side] = float(np.abs(got - want).max() / np.abs(want).max())
        if errors[side] > 1e-3:
            raise AssertionError(f"{name}: {side} differs from eager by {errors[side]:.2e} (relative)")
    times = alternating_medians({"tilewright": lambda: median_seconds(lambda: module(xn)),
                                 "onnxruntime": lambda: median_seconds(lambda: sess.run(None, feed))}, rounds=rounds)
    return {"model": name, "ms": {k: v * 1e3 for k, v in times.items()}, "relative_error": errors,
            "speedup": times["onnxruntime"] / times["tilewright"], "compile_s": compile_s}


def markdown(doc: dict) -> str:
    lines = ["# Hugging Face transformers models, default configs, untuned, beside ONNX Runtime", "",
             provenance_line(doc["provenance"]), "",
             "| model | tilewright (ms) | ONNX Runtime (ms) | speedup | compile (s) | rel. error vs eager |",
             "|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        lines.append(f"| {r['model']} | {r['ms']['tilewright']:.1f} | {r['ms']['onnxruntime']:.1f} | "
                     f"{r['speedup']:.2f}x | {r['compile_s']:.0f} | {r['relative_error']['tilewright']:.1e} |")
    lines += ["", f"Geomean: **{doc['geomean']:.2f}x** ONNX Runtime (goal 1.0x untuned)."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="bert,gpt2,vit")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    rows = []
    for name in args.models.split(","):
        rows.append(run_model(name, args.threads, args.rounds))
        r = rows[-1]
        print(f"{name:6s} tilewright {r['ms']['tilewright']:8.1f} ms  ONNX Runtime {r['ms']['onnxruntime']:8.1f} ms  "
              f"x{r['speedup']:.2f}", flush=True)
    doc = {"rows": rows, "geomean": geomean([r["speedup"] for r in rows]),
           "provenance": provenance(threads=args.threads)}
    if args.out:
        save_run(args.out, "transformers_untuned", doc, markdown(doc))
    print(markdown(doc))
    return doc


if __name__ == "__main__":
    main()

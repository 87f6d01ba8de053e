"""Models from Hugging Face transformers' own code, default (full-size) configs with seeded random
weights, batch 1: tilewright untuned (`tw.compile`, 0 trials) beside ONNX Runtime in every
configuration of bench/ort_variants.py (both torch.onnx exporters, all graph optimizations, and
ORT's transformer optimizer for BERT and ViT); the fastest ORT variant is the baseline. Same
threads, one harness, alternating rounds; every side checked against eager on a held-out input
before any time counts.

    python -m tilewright.bench.transformers_models --models bert,gpt2,vit --out benchmarks/results/transformers
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from .provenance import provenance, provenance_line, save_run
from .report import geomean
from .timing import alternating_medians, median_seconds


def build(name: str):
    """(module returning the last hidden state, example input, a held-out input) of a default-config
    model; the wrapper carries num_heads / hidden_size where ORT's BERT optimizer applies (BERT, ViT)."""
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
    net = last_hidden(model())
    if name in ("bert", "vit"):
        net.num_heads, net.hidden_size = net.inner.config.num_attention_heads, net.inner.config.hidden_size
    return net, example(), example()


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
    import torch

    import tilewright as tw

    from .ort_variants import ort_variants

    net, x, x_check = build(name)
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        module = tw.compile(net, (x,), target=tw.Target("cpu").with_cores(threads), records=Path(tmp) / "r.db",
                            progress=False)
    compile_s = time.time() - start
    xn, xc = x.numpy(), x_check.numpy()
    with torch.no_grad():
        want = net(x_check).numpy()
    scale = float(np.abs(want).max())
    error = float(np.abs(module(xc) - want).max()) / scale
    if error > 1e-3:
        raise AssertionError(f"{name}: tilewright differs from eager by {error:.2e} (relative)")
    sides, notes = {"tilewright": lambda: median_seconds(lambda: module(xn))}, {}
    with tempfile.TemporaryDirectory() as work:
        for b in ort_variants(net, xn, xc, threads, Path(work)):
            err = None if b.check is None else float(np.abs(np.asarray(b.check) - want).max()) / scale
            if b.run is None or err is None or err > 1e-3:
                notes[b.name] = b.note or f"differs from eager by {err:.2e}"
                continue
            sides[b.name] = (lambda run: lambda: median_seconds(run))(b.run)
        times = alternating_medians(sides, rounds=rounds)
    ort = {k: v for k, v in times.items() if k != "tilewright"}
    if not ort:
        raise AssertionError(f"{name}: no ONNX Runtime variant ran: {notes}")
    best = min(ort, key=ort.get)
    return {"model": name, "ms": {k: v * 1e3 for k, v in times.items()}, "relative_error": error,
            "best_ort": best, "speedup": ort[best] / times["tilewright"], "compile_s": compile_s,
            "not_timed": notes}


def markdown(doc: dict) -> str:
    lines = ["# Hugging Face transformers models, default configs, untuned, beside ONNX Runtime", "",
             provenance_line(doc["provenance"]), "",
             "| model | tilewright (ms) | fastest ONNX Runtime (ms) | its variant | speedup | compile (s) | "
             "rel. error vs eager |", "|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        lines.append(f"| {r['model']} | {r['ms']['tilewright']:.1f} | {r['ms'][r['best_ort']]:.1f} | {r['best_ort']} | "
                     f"{r['speedup']:.2f}x | {r['compile_s']:.0f} | {r['relative_error']:.1e} |")
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
        best = r["best_ort"]
        print(f"{name:6s} tilewright {r['ms']['tilewright']:8.1f} ms  {best} {r['ms'][best]:8.1f} ms  "
              f"x{r['speedup']:.2f}", flush=True)
    doc = {"rows": rows, "geomean": geomean([r["speedup"] for r in rows]),
           "provenance": provenance(threads=args.threads)}
    if args.out:
        save_run(args.out, "transformers_untuned", doc, markdown(doc))
    print(markdown(doc))
    return doc


if __name__ == "__main__":
    main()

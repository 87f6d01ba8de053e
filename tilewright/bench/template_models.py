"""Templates and back-to-back fusion inside whole models on the CPU: each model compiled four ways in
one process: `kernels="search"` (tuned with `--trials` first), then `kernels="auto"` without and with
`fuse_b2b` from the same records (so the same searched kernels, plus the light profiler's
templates), and `kernels="templates"` with no search at all from empty records (the fast path:
templates where they fit, default schedules elsewhere); all checked against PyTorch's output and
timed in alternating rounds with one harness (`Module.time`: the model's kernels back to back in C).

Models: the BERT-base encoder layer (sequence 128), BERT-base's FFN alone (768 -> 3072 -> 768, GELU,
residual), Bolt's Table 1 GEMM pairs as two-layer MLPs (Linear -> ReLU -> Linear -> ReLU), and
ResNet-50 (batch 1, 224 x 224; layout and Winograd as `compile` chooses by default).

    python -m tilewright.bench.template_models --trials 96 --out benchmarks/results/templates"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from ..targets import Target
from .provenance import provenance, provenance_line, save_run

TABLE1 = [(2464, 1, 4, 4), (16384, 64, 256, 16), (32768, 128, 576, 64), (128320, 32, 96, 96)]
# (label, records file, compile options): the first three share one store, the last starts empty
VARIANTS = (("search", "r.db", {"kernels": "search"}),
            ("auto, unfused", "r.db", {"kernels": "auto", "fuse_b2b": False}),
            ("auto + b2b", "r.db", {"kernels": "auto"}),
            ("templates only", "t.db", {"kernels": "templates", "trials": 0}))


def _models() -> dict:
    import torch

    from ..models import MODELS

    class FFN(torch.nn.Module):
        def __init__(self, hidden: int, inner: int):
            super().__init__()
            self.fc1, self.fc2 = torch.nn.Linear(hidden, inner), torch.nn.Linear(inner, hidden)

        def forward(self, x):
            return x + self.fc2(torch.nn.functional.gelu(self.fc1(x)))

    def mlp(k: int, n0: int, n1: int):
        return torch.nn.Sequential(torch.nn.Linear(k, n0), torch.nn.ReLU(), torch.nn.Linear(n0, n1), torch.nn.ReLU())

    out = {"bert_layer": (lambda: MODELS["bert_layer"].build(), (1, 128, 768)),
           "resnet50": (lambda: MODELS["resnet50"].build(), (1, 3, 224, 224)),
           "bert_ffn": (lambda: FFN(768, 3072), (1, 128, 768))}
    for m, n0, k, n1 in TABLE1:
        out[f"table1_{m}x{n0}x{k}_{n1}"] = (lambda k=k, n0=n0, n1=n1: mlp(k, n0, n1), (m, k))
    return out


def run_model(name: str, target: Target, trials: int, seed: int, rounds: int = 9) -> dict:
    import torch

    from ..graph.compile import compile as compile_model

    build, shape = _models()[name]
    torch.manual_seed(seed)
    model = build().eval()
    x = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        want = model(x).numpy()
    modules, compile_s = {}, {}
    with tempfile.TemporaryDirectory(prefix="tw-bench-tpl-model-") as d:
        for label, db, kw in VARIANTS:
            t0 = time.perf_counter()
            modules[label] = compile_model(model, (x,), target=target, records=Path(d) / db, progress=False, name=name,
                                           **{"trials": trials, **kw})
            compile_s[label] = time.perf_counter() - t0
    xs = x.numpy()
    scale = max(1.0, float(np.abs(want).max()))
    for label, m in modules.items():
        err = float(np.abs(m(xs) - want).max()) / scale
        if not err <= 1e-3:
            raise RuntimeError(f"{name} ({label}): max error {err:.3g} of the output's scale against PyTorch")
    samples: dict[str, list[float]] = {label: [] for label in modules}
    for _ in range(rounds):
        for label, m in modules.items():
            samples[label].append(m.time(xs, repeat=3))
    ms = {label: float(np.median(s)) * 1e3 for label, s in samples.items()}
    fused = modules["auto + b2b"]
    row = {"model": name, "ms": ms, "compile_s": compile_s, "steps": {k: len(m.steps) for k, m in modules.items()},
           "auto_vs_search": ms["search"] / ms["auto, unfused"],
           "b2b_vs_unfused": ms["auto, unfused"] / ms["auto + b2b"],
           "templates_only_vs_search": ms["search"] / ms["templates only"],
           "spread": {label: [min(s) * 1e3, max(s) * 1e3] for label, s in samples.items()},
           "b2b": [d.line() for d in fused.b2b], "templates": [d.line() for d in fused.templates]}
    print(_line(row), flush=True)
    return row


def _line(r: dict) -> str:
    ms, c = r["ms"], r["compile_s"]
    return (f"| {r['model']} | {ms['search']:.3f} | {ms['auto, unfused']:.3f} | {ms['auto + b2b']:.3f} | "
            f"{r['auto_vs_search']:.2f}x | {r['b2b_vs_unfused']:.2f}x | {r['steps']['auto + b2b']} of "
            f"{r['steps']['auto, unfused']} | {ms['templates only']:.3f} ({r['templates_only_vs_search']:.2f}x) | "
            f"{c['search']:.0f} / {c['auto, unfused']:.0f} / {c['auto + b2b']:.0f} / {c['templates only']:.0f} |")


HEAD = ("| model | search ms | auto ms | auto + b2b ms | auto / search speed | b2b speed over unfused auto | "
        "kernels with b2b | templates only, no search: ms (speed / search) | compile s (search / auto / auto + b2b "
        "/ templates only) |\n|---|---|---|---|---|---|---|---|---|")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="bert_layer,bert_ffn," + ",".join(f"table1_{m}x{n0}x{k}_{n1}"
                                                                         for m, n0, k, n1 in TABLE1))
    ap.add_argument("--trials", type=int, default=96, help="the search budget of each model (all variants)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/results/templates")
    args = ap.parse_args(argv)
    target = Target("cpu")
    doc = provenance(target.cores, target, trials=args.trials)
    print(HEAD, flush=True)
    doc["models"] = [run_model(n, target, args.trials, args.seed) for n in args.models.split(",") if n]
    md = ["# Templates and back-to-back fusion in models", "", provenance_line(doc), "", HEAD]
    md += [_line(r) for r in doc["models"]] + [""]
    for r in doc["models"]:
        chosen = [t for t in r["templates"] if ": template (" in t]
        md += [f"- {r['model']}: {len(chosen)} of {len(r['templates'])} template-capable tasks on a template in "
               "'auto + b2b'; b2b: " + "; ".join(r["b2b"] or ["no pair of dense layers"])]
    save_run(args.out, "template_models", doc, "\n".join(md) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

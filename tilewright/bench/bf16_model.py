"""A whole model in bfloat16 beside PyTorch's bfloat16 paths and both sides' float32, in one process,
one harness.

tilewright: `tw.compile(model, dtype="bfloat16")` (convolutions and dense layers multiply bfloat16,
accumulate float32; activations between convolutions stored bfloat16; NCHWc) and float32 with the
same trials and records. PyTorch, each on channels_last for an image model (the caller's NCHW float32
input converted inside the timed call; the output returned as float32): the model cast to bfloat16 run eagerly,
autocast to bfloat16 (float32 weights, converted on every call, as autocast does), and the bfloat16
model through torch.compile with frozen weights (oneDNN's bfloat16 convolutions on weights packed
once; PyTorch's documented CPU inference setting). PyTorch float32 eager and frozen torch.compile
are timed too. ONNX Runtime's CPU provider has no bfloat16 convolution, so it is not a side.

Checks before any time counts: our output against our reference evaluator of the same bfloat16
graph (one bfloat16 step of its largest value: the same rounded operands, float32 sums in another
order), and every side's largest difference from the float32 model is reported.

    python -m tilewright.bench.bf16_model --model resnet50 --out benchmarks/results/bf16_r50
    python -m tilewright.bench.bf16_model --model hf-vit --out benchmarks/results/bf16_vit
"""

from __future__ import annotations

import argparse
import importlib
import tempfile
import time
from pathlib import Path

import numpy as np

from .provenance import provenance, provenance_line, publish
from .timing import alternating_medians, median_seconds

HF = "hf-"  # --model hf-bert / hf-gpt2 / hf-vit: bench/transformers_models.py's models


def _torch_sides(model, x: np.ndarray, x_check: np.ndarray) -> list:
    """PyTorch's bfloat16 and float32 baselines (bench/baseline.py Baselines), channels_last for 4-d inputs."""
    import copy

    import torch

    from .inductor_variants import inductor
    from .model_baselines import eager

    class Bfloat16(torch.nn.Module):
        """The model in bfloat16: input cast on the way in, output cast back to float32."""

        def __init__(self, m, autocast: bool):
            super().__init__()
            self.m, self.autocast = (m if autocast else m.to(torch.bfloat16)), autocast

        def forward(self, v):
            if self.autocast:
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    return self.m(v).float()
            return self.m(v.to(torch.bfloat16) if v.is_floating_point() else v).float()  # token ids stay

    last = x.ndim == 4
    layout = "channels_last" if last else "NCHW"
    sides = [("PyTorch bf16 eager", eager(Bfloat16(copy.deepcopy(model), False), x, x_check, channels_last=last)),
             ("PyTorch autocast bf16 eager", eager(Bfloat16(copy.deepcopy(model), True), x, x_check,
                                                  channels_last=last))]
    torch._dynamo.reset()
    sides.append(("PyTorch bf16 torch.compile frozen", inductor(Bfloat16(copy.deepcopy(model), False), x, x_check,
                                                                "frozen", layout)))
    sides.append(("PyTorch fp32 eager", eager(model, x, x_check, channels_last=last)))
    sides.append(("PyTorch fp32 torch.compile frozen", inductor(model, x, x_check, "frozen", layout)))
    return sides


def run(model_name: str, trials: int, threads: int, rounds: int, reduced: bool, records: Path | None) -> dict:
    import torch

    import tilewright as tw
    from tilewright.graph.bfloat16 import to_bfloat16
    from tilewright.graph.frontend.torch import from_torch
    from tilewright.graph.infer import infer_types
    from tilewright.models import MODELS

    reference = importlib.import_module("tilewright.graph.reference")
    optimize = importlib.import_module("tilewright.graph.optimize")
    torch.set_num_threads(threads)
    if model_name.startswith(HF):  # Hugging Face transformers' own code, default config
        from .transformers_models import build

        model, x, x_check = build(model_name[len(HF):])
        x, x_check = x.numpy(), x_check.numpy()
    else:
        spec = MODELS[model_name]
        model = spec.build(reduced).eval()
        x, x_check = spec.example_input(reduced, seed=7).numpy(), spec.example_input(reduced, seed=8).numpy()
    with tempfile.TemporaryDirectory() as tmp:
        store = records or Path(tmp) / "records.sqlite"
        graph = from_torch(model, [torch.from_numpy(x)], name=model_name)
        start = time.perf_counter()
        bf16 = tw.compile(graph, trials=trials, dtype="bfloat16", layout="NCHWc", progress=False, records=store)
        compile_s = time.perf_counter() - start
        fp32 = tw.compile(graph, trials=trials, layout="NCHWc", progress=False, records=store)
    with torch.inference_mode():
        exact = model(torch.from_numpy(x_check)).numpy()
    ours = np.asarray(bf16(x_check))
    want = reference.run_reference(to_bfloat16(optimize.optimize(infer_types(graph))), [x_check])[0]
    largest = float(np.abs(want).max())
    if np.abs(ours - want).max() > 2 ** -7 * largest:
        raise AssertionError(f"{model_name} bf16: our output differs from the reference evaluator of the bfloat16 "
                             f"graph by {np.abs(ours - want).max()} (largest output {largest})")
    errors = {"tilewright bf16": float(np.abs(ours - exact).max()),
              "tilewright fp32": float(np.abs(np.asarray(fp32(x_check)) - exact).max())}
    sides = {"tilewright bf16": lambda: median_seconds(lambda: bf16(x)),
             "tilewright fp32": lambda: median_seconds(lambda: fp32(x))}
    notes = {}
    for name, b in _torch_sides(model, x, x_check):
        if b.run is None:
            notes[name] = b.note
            continue
        errors[name] = float(np.abs(b.check - exact).max())
        sides[name] = lambda r=b.run: median_seconds(r)
    times = alternating_medians(sides, rounds)
    kinds = [n for n in bf16.graph.nodes if n.op in ("conv2d", "dense")]
    return {"model": model_name, "reduced": reduced, "threads": threads, "trials": trials,
            "compile_s": round(compile_s, 1), "ms": {k: v * 1e3 for k, v in times.items()},
            "max_abs_vs_fp32": errors, "largest_output": float(np.abs(exact).max()), "not_run": notes,
            "bf16_layers": sum(bf16.graph.type_of(n.inputs[1]).dtype == "bfloat16" for n in kinds),
            "fp32_layers": sum(bf16.graph.type_of(n.inputs[1]).dtype != "bfloat16" for n in kinds),
            "provenance": provenance(threads)}


def markdown(doc: dict) -> str:
    ms, ours = doc["ms"], doc["ms"]["tilewright bf16"]
    lines = [f"{doc['model']} bfloat16, {doc['trials']} trials each (tilewright), {doc['threads']} threads; "
             f"{provenance_line(doc['provenance'])}", "",
             "| side | ms | tilewright bf16 speedup | largest difference from fp32 |", "|---|---:|---:|---:|"]
    lines += [f"| {side} | {v:.2f} | {v / ours:.2f}x | {doc['max_abs_vs_fp32'][side]:.3g} |" for side, v in ms.items()]
    lines += ["", f"bfloat16 layers {doc['bf16_layers']}, left float32 {doc['fp32_layers']} (depthwise, grouped); "
                  f"largest fp32 output {doc['largest_output']:.4g}; compile {doc['compile_s']} s"]
    lines += [f"- not run: {k}: {v}" for k, v in doc["not_run"].items()]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet50", help="an in-tree model, or hf-bert / hf-gpt2 / hf-vit "
                                                         "(Hugging Face transformers, default configs)")
    p.add_argument("--trials", type=int, default=0, help="tuning budget of each tilewright model")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--reduced", action="store_true", help="the model's small test configuration")
    p.add_argument("--records", type=Path, help="the tuning records (default: a fresh store per run)")
    p.add_argument("--out", type=Path)
    a = p.parse_args(argv)
    doc = run(a.model, a.trials, a.threads, a.rounds, a.reduced, a.records)
    return publish(a.out, a.model, doc, markdown(doc))


if __name__ == "__main__":
    raise SystemExit(main())

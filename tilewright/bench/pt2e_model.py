"""A PT2E-quantized model beside PyTorch's own int8 path for it, in one process, one harness.

The float model is exported, quantized by torchao's `prepare_pt2e` / `convert_pt2e` with the x86
quantizer (u8 activations per tensor, s8 weights per channel; MinMax calibration on `--calibration`
random inputs). Both sides run that converted model: PyTorch through `torch.compile` with frozen
weights (Inductor's x86 int8 lowering to oneDNN's quantized convolutions, PyTorch's documented
deployment of a PT2E model on CPU), tilewright through `from_torch` and `tw.compile` (NCHWc). The float
model's PyTorch eager time and tilewright fp32 (defaults) are timed too.

Checks before any time counts: our output against our reference evaluator of the same graph, and every
side against the converted model run eagerly (which computes the quantization in float), each at most
5% of the largest output (a float convolution before a quantize can move that quantize one step).

    python -m tilewright.bench.pt2e_model --model resnet50 --out benchmarks/results/pt2e_r50
"""

from __future__ import annotations

import argparse
import importlib
import time
import warnings
from pathlib import Path

import numpy as np

from .provenance import provenance, provenance_line, publish
from .timing import alternating_medians, median_seconds


def convert(model, spec, reduced: bool, calibration: int):
    """The PT2E-converted model (torchao, x86 quantizer)."""
    import torch
    import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as xiq
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    x = spec.example_input(reduced)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exported = torch.export.export(model, (x,)).module()
        quantizer = xiq.X86InductorQuantizer()
        quantizer.set_global(xiq.get_default_x86_inductor_quantization_config())
        prepared = prepare_pt2e(exported, quantizer)
        for i in range(calibration):
            prepared(spec.example_input(reduced, seed=100 + i))
        return convert_pt2e(prepared)


def run(model_name: str, threads: int, rounds: int, reduced: bool, calibration: int,
        records: Path | None = None) -> dict:
    import torch

    import tilewright as tw
    from tilewright.graph.frontend.torch import from_torch
    from tilewright.models import MODELS

    reference = importlib.import_module("tilewright.graph.reference")
    optimize = importlib.import_module("tilewright.graph.optimize")
    torch.set_num_threads(threads)
    spec = MODELS[model_name]
    model = spec.build(reduced).eval()
    converted = convert(model, spec, reduced, calibration)
    xt = spec.example_input(reduced, seed=7)
    x = xt.numpy()
    graph = from_torch(converted, (xt,))
    start = time.perf_counter()
    module = tw.compile(graph, [x], layout="NCHWc", progress=False, records=records)
    compile_s = time.perf_counter() - start
    ours = np.asarray(module(x))
    optimized = optimize.optimize(graph)
    want = reference.run_reference(optimized, [x])[0]
    # convolutions left in float (a residual add before the quantize) round differently from the reference,
    # and a quantize after them can move one step: the check is the one against the converted model below
    if np.abs(ours - want).max() > 0.05 * max(np.abs(want).max(), 1.0):
        raise AssertionError(f"{model_name} PT2E: our output differs from the reference by {np.abs(ours - want).max()}")
    import torch._inductor.config as inductor_config

    start = time.perf_counter()
    compiled = torch.compile(converted)
    # freezing is read at the first call (where inductor compiles); the global config is restored after
    with inductor_config.patch(freezing=True), warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        theirs = compiled(xt).numpy()
    torch_compile_s = time.perf_counter() - start
    with torch.no_grad():
        eager_ref = converted(xt).numpy()
    for side, y in (("tilewright", ours), ("PyTorch compiled", theirs)):
        if np.abs(y - eager_ref).max() > 0.05 * np.abs(eager_ref).max():
            raise AssertionError(f"{side} differs from the converted model by {np.abs(y - eager_ref).max()}")
    fp32_module = tw.compile(from_torch(model, (xt,)), [x], layout="NCHWc", progress=False, records=records)
    kinds = {op: sum(1 for n in optimized.nodes if n.op == op) for op in ("qconv2d", "qdense", "conv2d", "dense")}

    def torch_call(fn):
        def call():
            with torch.no_grad():
                fn(xt)
        return call

    sides = {
        "tilewright int8": lambda: median_seconds(lambda: module(x)),
        "PyTorch int8 (torch.compile, frozen)": lambda: median_seconds(torch_call(compiled)),
        "PyTorch fp32 eager": lambda: median_seconds(torch_call(model)),
        "tilewright fp32 (defaults)": lambda: median_seconds(lambda: fp32_module(x)),
    }
    times = alternating_medians(sides, rounds)
    return {"model": model_name, "reduced": reduced, "threads": threads, "compile_s": round(compile_s, 1),
            "torch_compile_s": round(torch_compile_s, 1), "ms": {k: v * 1e3 for k, v in times.items()},
            "max_abs_vs_reference": float(np.abs(ours - want).max()),
            "max_abs_vs_converted": {"tilewright": float(np.abs(ours - eager_ref).max()),
                                     "PyTorch compiled": float(np.abs(theirs - eager_ref).max())},
            "largest_output": float(np.abs(eager_ref).max()), "kernels": kinds, "provenance": provenance(threads)}


def markdown(doc: dict) -> str:
    ms, ours = doc["ms"], doc["ms"]["tilewright int8"]
    diff = doc["max_abs_vs_converted"]
    head = f"{doc['model']} PT2E int8 (x86 quantizer), {doc['threads']} threads"
    lines = [f"{head}; {provenance_line(doc['provenance'])}", "", "| side | ms | tilewright int8 speedup |",
             "|---|---:|---:|"]
    lines += [f"| {side} | {v:.2f} | {v / ours:.2f}x |" for side, v in ms.items()]
    k = doc["kernels"]
    lines += ["", f"int8 kernels: {k['qconv2d']} qconv2d, {k['qdense']} qdense; left in float: "
                  f"{k['conv2d']} conv2d, {k['dense']} dense. Largest difference from the "
                  f"converted model run eagerly: ours {diff['tilewright']:.4g}, PyTorch compiled "
                  f"{diff['PyTorch compiled']:.4g} (largest output {doc['largest_output']:.4g}); compile: ours "
                  f"{doc['compile_s']} s, torch.compile {doc['torch_compile_s']} s"]
    return "\n".join(lines)


def main(argv=None) -> int:
    from .int8_model import model_arguments

    a = model_arguments(argparse.ArgumentParser(description=__doc__.split("\n\n")[0])).parse_args(argv)
    doc = run(a.model, a.threads, a.rounds, a.reduced, a.calibration, a.records)
    return publish(a.out, a.model, doc, markdown(doc))


if __name__ == "__main__":
    raise SystemExit(main())

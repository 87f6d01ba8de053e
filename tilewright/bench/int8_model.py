"""A whole int8 model beside ONNX Runtime on the same QDQ file, in one process, one harness.

The float model is exported to ONNX and quantized by ONNX Runtime's own `quantize_static`
(QDQ format, uint8 activations, per-channel symmetric int8 weights, MinMax calibration on
`--calibration` random inputs); with `--reduce-range` (the default) weights are quantized to
7 bits, ONNX Runtime's documented remedy for the `vpmaddubsw` saturation of its u8 x s8 path on
AVX2 / AVX-512 hosts. Both sides run that file: ONNX Runtime with every graph optimization
(it fuses the QDQ pairs into QLinearConv), tilewright through `from_onnx` and `tw.compile`.
ONNX Runtime fp32 and tilewright fp32 (default schedules, NCHWc, Winograd on) on the float model are
timed too, for the int8 speedup.

With `--dynamic` the float model is quantized by `quantize_dynamic` instead (what ONNX Runtime
recommends for transformers): DynamicQuantizeLinear of each activation at run time, MatMulInteger
with int8 weights, float scaling after; both sides run that file.

Checks before any time counts: our output bit-exact against our reference evaluator of the
same graph (dynamic: within 1e-5 of its largest value, the float tails round differently), and how
many output elements lie within one quantization step of ONNX Runtime's (dynamic: within 1e-5 of
the largest output).

    python -m tilewright.bench.int8_model --model resnet50 --trials 0 --out benchmarks/results/int8_r50
    python -m tilewright.bench.int8_model --model bert_layer --dynamic --out benchmarks/results/int8_bert
"""

from __future__ import annotations

import argparse
import importlib
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from .provenance import provenance, provenance_line, publish
from .timing import alternating_medians, median_seconds


def quantize_model(model, spec, workdir: Path, reduced: bool, reduce_range: bool, calibration: int,
                   dynamic: bool = False) -> tuple:
    """(float ONNX path, quantized ONNX path, input name) of `model` quantized by ONNX Runtime: statically
    (QDQ), or with `dynamic` by `quantize_dynamic` (DynamicQuantizeLinear + MatMulInteger, int8 weights)."""
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from .ort_variants import export_onnx

    fp32, pre, qdq = workdir / "fp32.onnx", workdir / "pre.onnx", workdir / "qdq.onnx"
    export_onnx(model, spec.example_input(reduced).numpy(), fp32, "torchscript")
    quant_pre_process(str(fp32), str(pre))
    name = onnx.load(str(fp32)).graph.input[0].name
    if dynamic:
        quantize_dynamic(str(pre), str(qdq), weight_type=QuantType.QInt8, reduce_range=reduce_range)
        return fp32, qdq, name

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.items = iter([{name: spec.example_input(reduced, seed=100 + i).numpy()} for i in range(calibration)])

        def get_next(self):
            return next(self.items, None)

    quantize_static(str(pre), str(qdq), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    reduce_range=reduce_range, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return fp32, qdq, name


def run(model_name: str, trials: int, threads: int, rounds: int, reduced: bool, reduce_range: bool,
        calibration: int, layout: str, records: Path | None, dynamic: bool = False) -> dict:
    import torch

    import tilewright as tw
    from tilewright.graph.frontend.onnx import from_onnx
    from tilewright.models import MODELS

    from .ort_variants import ort_session

    reference = importlib.import_module("tilewright.graph.reference")
    optimize = importlib.import_module("tilewright.graph.optimize")
    torch.set_num_threads(threads)
    spec = MODELS[model_name]
    model = spec.build(reduced).eval()
    with tempfile.TemporaryDirectory() as tmp:
        fp32, qdq, input_name = quantize_model(model, spec, Path(tmp), reduced, reduce_range, calibration, dynamic)
        x = spec.example_input(reduced, seed=7).numpy()
        ort_q, ort_f = ort_session(qdq, threads), ort_session(fp32, threads)
        graph = from_onnx(qdq, name=f"{model_name}_int8")
        start = time.perf_counter()
        module = tw.compile(graph, trials=trials, layout=layout, progress=False,
                            records=records or Path(tmp) / "records.sqlite")
        compile_s = time.perf_counter() - start
        ours = np.asarray(module(x))
        optimized = optimize.optimize(graph)
        want = reference.run_reference(optimized, [x])[0]
        exact = not dynamic  # a dynamic model's float tail (scales, layer norms) is compared within 1e-5
        if (exact and not np.array_equal(ours, want)) or \
                (not exact and np.abs(ours - want).max() > 1e-5 * max(np.abs(want).max(), 1.0)):
            raise AssertionError(f"{model_name} int8: our output differs from the reference evaluator by up to "
                                 f"{np.abs(ours - want).max()}")
        theirs = ort_q.run(None, {input_name: x})[0]
        fp32_module = tw.compile(from_onnx(fp32, name=model_name), trials=0, layout="NCHWc", progress=False,
                                 records=records or Path(tmp) / "records.sqlite")
        f_ours, f_ort = np.asarray(fp32_module(x)), ort_f.run(None, {input_name: x})[0]
        if np.abs(f_ours - f_ort).max() > 1e-4 * np.abs(f_ort).max():
            raise AssertionError(f"{model_name} fp32: our output differs from ONNX Runtime's by "
                                 f"{np.abs(f_ours - f_ort).max()} (largest output {np.abs(f_ort).max()})")
        kinds = Counter(n.op for n in optimized.nodes)
        # a dynamically quantized model's output is float: "one step" is then 1e-5 of its largest value
        step = 1e-5 * float(np.abs(theirs).max()) if dynamic else _step(qdq)
        close = float(np.mean(np.abs(ours - theirs) <= step * 1.001))
        sides = {
            "tilewright int8": lambda: median_seconds(lambda: module(x)),
            "ORT int8 (same file)": lambda: median_seconds(lambda: ort_q.run(None, {input_name: x})),
            "ORT fp32": lambda: median_seconds(lambda: ort_f.run(None, {input_name: x})),
            "tilewright fp32 (defaults)": lambda: median_seconds(lambda: fp32_module(x)),
        }
        times = alternating_medians(sides, rounds)
    return {"model": model_name, "reduced": reduced, "reduce_range": reduce_range, "trials": trials,
            "scheme": "dynamic (quantize_dynamic)" if dynamic else "static QDQ",
            "layout": module.layout, "compile_s": round(compile_s, 1), "ms": {k: v * 1e3 for k, v in times.items()},
            "within_one_step_of_ort": close, "output_step": step, "qconv2d": kinds.get("qconv2d", 0),
            "integer_kernels": sum(kinds.get(k, 0) for k in ("qconv2d", "qdense", "matmul_integer")),
            "float_left": sum(kinds.get(k, 0) for k in ("conv2d", "dense")), "exact": exact,
            "conv_left_float": kinds.get("conv2d", 0), "threads": threads, "provenance": provenance(threads)}


def _step(path: Path) -> float:
    """The scale of the model output's last QuantizeLinear (one quantization step of the output)."""
    import onnx
    from onnx import numpy_helper

    m = onnx.load(str(path))
    init = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    out = m.graph.output[0].name
    dq = next(n for n in m.graph.node if out in n.output)
    return float(init[dq.input[1]]) if dq.op_type == "DequantizeLinear" else 0.0


def markdown(doc: dict) -> str:
    ms = doc["ms"]
    ours = ms["tilewright int8"]
    scheme = doc.get("scheme", "static QDQ")
    lines = [f"{doc['model']} int8 ({scheme}, reduce_range={doc['reduce_range']}), "
             f"{doc['trials']} trials, layout {doc['layout']}, {doc['threads']} threads; "
             f"{provenance_line(doc['provenance'])}", "",
             "| side | ms | tilewright int8 speedup |", "|---|---:|---:|"]
    lines += [f"| {k} | {v:.2f} | {v / ours:.2f}x |" for k, v in ms.items()]
    check = "bit-exact vs our reference" if doc.get("exact", True) else "within 1e-5 of our reference"
    lines += ["", f"int8 kernels {doc.get('integer_kernels', doc['qconv2d'])}, convolutions and dense layers left in "
                  f"float {doc.get('float_left', doc['conv_left_float'])}; {check}; within {doc['output_step']:.4g} "
                  f"of ONNX Runtime on {100 * doc['within_one_step_of_ort']:.2f}% of elements; compile "
                  f"{doc['compile_s']} s"]
    return "\n".join(lines)


def model_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options every quantized-model bench takes (this one and `pt2e_model`)."""
    p.add_argument("--model", default="resnet50")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--reduced", action="store_true", help="the model's small test configuration")
    p.add_argument("--calibration", type=int, default=4, help="random inputs the quantizer calibrates on")
    p.add_argument("--records", type=Path, help="the tuning records to read (default: the user's store)")
    p.add_argument("--out", type=Path)
    return p


def main(argv=None) -> int:
    p = model_arguments(argparse.ArgumentParser(description=__doc__.split("\n\n")[0]))
    p.add_argument("--trials", type=int, default=0)
    p.add_argument("--full-range", action="store_true", help="8-bit weights (ONNX Runtime saturates on AVX2)")
    p.add_argument("--layout", default="NCHWc", help="compile's layout (NCHW leaves int8 convs plain and slow)")
    p.add_argument("--dynamic", action="store_true",
                   help="quantize_dynamic (DynamicQuantizeLinear + MatMulInteger) instead of static QDQ")
    a = p.parse_args(argv)
    doc = run(a.model, a.trials, a.threads, a.rounds, a.reduced, not a.full_range, a.calibration, a.layout,
              a.records, a.dynamic)
    return publish(a.out, a.model, doc, markdown(doc))


if __name__ == "__main__":
    raise SystemExit(main())

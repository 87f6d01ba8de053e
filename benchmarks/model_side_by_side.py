"""One model's kernels beside ONNX Runtime's nodes, layer by layer, in one process: our
kernels timed in place (`Module.kernel_times(in_place=True)`: inside whole runs back to
back, caches as the kernels before each left them), ONNX Runtime's from its own profiler
(`enable_profiling`, node medians; the profiler slows it a little). Nodes are matched to
our kernels in order by output channels and spatial size (features for 2-d outputs;
3-d ones are not matched); layers ONNX Runtime fuses away or we do (layout transforms,
reshapes) show without a partner, ONNX Runtime's at the end. Both whole-model times come
first, in alternating rounds (bench/timing.py), after both outputs are checked against
PyTorch eager.

Run: python benchmarks/model_side_by_side.py mobilenet_v2 --records tuned.db
     (a store tuned by `tilewright bench models`; without one the untuned defaults)
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import torch

import tilewright.models as models
from tilewright.bench.model_baselines import export_onnx, ort_session
from tilewright.bench.models import check_output
from tilewright.bench.timing import alternating_medians, median_seconds, settle
from tilewright.graph.compile import compile as tw_compile


def ort_nodes(session, feed, runs: int) -> list[tuple[float, str, list[int]]]:
    """(median seconds, op type, output shape) of each profiled node, in execution order."""
    for _ in range(runs):
        session.run(None, feed)
    events = json.loads(Path(session.end_profiling()).read_text())
    times: dict[str, list[float]] = {}
    info = {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            name = e["name"][: -len("_kernel_time")]
            shapes = e["args"].get("output_type_shape") or [{}]
            info.setdefault(name, (e["args"].get("op_name", "?"), next(iter(shapes[0].values()), [])))
            times.setdefault(name, []).append(e["dur"] * 1e-6)
    return [(float(np.median(times[n])), *info[n]) for n in info]


# ONNX Runtime nodes that only relabel a buffer: never partners
VIEW_OPS = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}


def channels_and_size(shape) -> tuple:
    """(channels, spatial dims) of an NCHW or NCHW[x]c shape, (features,) of a 2-d one; None
    otherwise (a transformer's 3-d outputs: every dense layer has the same features, and ONNX
    Runtime runs them in another order, so those are listed apart rather than matched)."""
    if len(shape) == 5:
        return shape[1] * shape[4], tuple(shape[2:4])
    if len(shape) == 4:
        return shape[1], tuple(shape[2:])
    return (shape[-1],) if len(shape) == 2 else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=sorted(models.MODELS))
    ap.add_argument("--records", default=None, help="a records store (default: untuned defaults)")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    spec = models.MODELS[args.model]
    model, example = spec.build(False), spec.example_input(False)
    x = example.numpy()
    with tempfile.TemporaryDirectory() as tmp:
        records = args.records or str(Path(tmp) / "empty.db")
        module = tw_compile(model, (example,), trials=0, records=records, progress=False)
        threads = module.target.cores  # all cores on both sides, as `tilewright bench models`
        path = Path(tmp) / "model.onnx"
        export_onnx(model, x, path)
        session = ort_session(path, threads)
        feed = {session.get_inputs()[0].name: x}
        with torch.no_grad():
            want = model(example).numpy()
        for side, got in (("tilewright", module(x)), ("onnxruntime", session.run(None, feed)[0])):
            check_output(side, got, want)
        whole = alternating_medians({"tilewright": lambda: module.time(x, repeat=3),
                                     "onnxruntime": lambda: median_seconds(lambda: session.run(None, feed), repeat=3)},
                                    rounds=args.rounds)
        settle()
        ours = module.kernel_times(x, in_place=True, repeat=5)
        theirs = ort_nodes(ort_session(path, threads, str(Path(tmp) / "profile")), feed, runs=40)
    print(f"{args.model}: whole model {whole['tilewright'] * 1e3:.2f} ms ours, {whole['onnxruntime'] * 1e3:.2f} ms "
          f"ONNX Runtime ({whole['onnxruntime'] / whole['tilewright']:.2f}x); kernels in place sum to "
          f"{sum(ours) * 1e3:.2f} ms, ONNX Runtime's profiled nodes to {sum(t for t, _, _ in theirs) * 1e3:.2f} ms")
    print(f"{'ours us':>9} {'ORT us':>9} {'diff':>8}  group (ops) -> output")
    j, matched = 0, set()
    for seconds, step in zip(ours, module.steps):
        shape = module.graph.type_of(step.group.outputs[0]).shape
        key = channels_and_size(shape)
        window = [k for k in range(j, len(theirs)) if theirs[k][1] not in VIEW_OPS][:4]
        partner = next((k for k in window if key is not None and channels_and_size(theirs[k][2]) == key), None)
        ops = "+".join(n.op for n in step.group.nodes)
        if partner is None:
            print(f"{seconds * 1e6:9.1f} {'':>9} {'':>8}  {step.group.name} ({ops}) -> {list(shape)}")
            continue
        j = partner + 1
        matched.add(partner)
        other = theirs[partner][0]
        print(f"{seconds * 1e6:9.1f} {other * 1e6:9.1f} {(seconds - other) * 1e6:+8.1f}  {step.group.name} ({ops}) "
              f"-> {list(shape)}  [{theirs[partner][1]}]")
    rest = [theirs[k] for k in range(len(theirs)) if k not in matched]
    if rest:  # what ONNX Runtime runs that no kernel of ours was matched to (its own fusions, reshapes)
        print(f"ONNX Runtime nodes without a partner: {sum(t for t, _, _ in rest) * 1e6:.1f} us in all")
        for seconds, op, shape in rest:
            print(f"{'':>9} {seconds * 1e6:9.1f} {'':>8}  {op} -> {list(shape)}")


if __name__ == "__main__":
    main()

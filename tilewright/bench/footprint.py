"""Total memory footprint of one side of the whole-model benchmark, measured the
same way for every side in a fresh process (Linux):

  1. import the libraries of every side (PRELOAD, the same list in every process: their
     code is not the model's), build the input; read the resident set (VmRSS) as the base;
  2. reset the high-water mark (writing "5" to /proc/self/clear_refs sets VmHWM to VmRSS);
  3. build the side (ours: tw.compile from the records, the tuned kernels; eager: the
     model; torch.compile: compile and first call; ONNX Runtime: a session on the file);
     read VmHWM: the build peak;
  4. reset again, run one inference, read VmHWM: the run peak.

`run_bytes` = run peak - base: what the side keeps resident (weights, packed or
transformed weight copies, code, allocator caches) plus its peak during an
inference. `build_bytes` = the larger peak - base, compile or export transients
included. `measure(spec)` runs `python -m tilewright.bench.footprint SPEC` and
returns its JSON; an error comes back as {"error": ...}."""

from __future__ import annotations

import gc
import json
import subprocess
import sys

STATUS = "/proc/self/status"
SIDES = ("ours", "eager", "compile", "ort")
# imported before the base by every process, whichever side it builds (dynamo alone is ~70 MiB)
PRELOAD = ("numpy", "torch", "torch._dynamo", "torch.export", "torch._inductor.compile_fx", "onnxruntime",
           "tilewright.graph.compile", "tilewright.graph.frontend")


def status_kib() -> dict[str, int]:
    with open(STATUS) as f:
        return {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in f) if k in ("VmRSS", "VmHWM")}


def reset_peak() -> None:
    """Set VmHWM to the current VmRSS; a RuntimeError where the kernel does not allow it."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    s = status_kib()
    if s["VmHWM"] > s["VmRSS"] + 1024:  # an untouched high-water mark stays far above the resident set
        raise RuntimeError(f"writing 5 to /proc/self/clear_refs did not reset VmHWM ({s})")


def _input(spec: dict):
    import numpy as np

    from ..models import MODELS
    from ..runtime.aligned import aligned_copy

    m = MODELS[spec["model"]]
    shape = m.reduced_shape if spec["reduced"] else m.input_shape
    return aligned_copy(np.random.default_rng(spec["seed"]).standard_normal(shape).astype(np.float32))


def _build(spec: dict, x):
    """The side's one-inference callable, built as the benchmark builds it."""
    import torch

    from ..models import MODELS

    side = spec["side"]
    if side == "ort":
        from .ort_variants import ort_session

        session = ort_session(spec["path"], spec["threads"])
        feed = {session.get_inputs()[0].name: x}
        return lambda: session.run(None, feed)
    model = MODELS[spec["model"]].build(reduced=spec["reduced"]).eval()
    t = torch.from_numpy(x)
    if side == "ours":
        from ..graph.compile import compile as compile_model
        from .flextensor import bench_target

        module = compile_model(model, [t], target=bench_target(spec["threads"]), trials=0, records=spec["records"],
                               progress=False, layout=spec["layout"], winograd=spec["winograd"])
        del model  # only the compiler's input: a deployment keeps the module alone
        return lambda: module(x)
    cl = spec.get("layout") == "channels_last"
    if cl:
        model = model.to(memory_format=torch.channels_last)
    if side == "compile":
        from .inductor_variants import compiling, options

        compiled = torch.compile(model, options=options(spec["mode"]))
        with compiling(spec["mode"]):
            compiled(t.contiguous(memory_format=torch.channels_last) if cl else t)
        model = compiled
    elif side != "eager":
        raise ValueError(f"footprint: unknown side {side!r} (choose from {', '.join(SIDES)})")

    def run():
        with torch.inference_mode():
            return model(t.contiguous(memory_format=torch.channels_last) if cl else t)
    return run


def child(spec: dict) -> dict:
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:  # a side that needs it fails in _build with the reason
            pass
    import torch

    torch.set_num_threads(spec["threads"])
    x = _input(spec)
    gc.collect()
    base = status_kib()["VmRSS"]
    reset_peak()
    run = _build(spec, x)
    gc.collect()
    build_peak = status_kib()["VmHWM"]
    reset_peak()
    run()
    run_peak = status_kib()["VmHWM"]
    return {"base_bytes": base * 1024, "run_bytes": (run_peak - base) * 1024,
            "build_bytes": (max(build_peak, run_peak) - base) * 1024}


def measure(spec: dict, timeout: float = 1800) -> dict:
    """`child(spec)` in a fresh interpreter; {"error": why} when it fails."""
    if spec.get("side") not in SIDES:
        return {"error": f"unknown side {spec.get('side')!r} (choose from {', '.join(SIDES)})"}
    try:
        done = subprocess.run([sys.executable, "-m", "tilewright.bench.footprint", json.dumps(spec)],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {done.returncode}: {tail[:300]}"}
    return json.loads(lines[-1])


if __name__ == "__main__":
    print(json.dumps(child(json.loads(sys.argv[1]))))

"""Whole models on a CUDA GPU: `tw.compile(model, target="cuda", dtype=...)` beside PyTorch eager and
torch.compile on the same GPU, with the same input tensor already on the device, batch 1.

Every side is checked against PyTorch fp32 eager before it is timed (fp32: max error relative to the
largest output under 1e-3; fp16: relative L2 error under 1e-2). Times are CUDA events around `number`
calls made back to back from Python (each side pays its own dispatch: a model's latency as a caller sees
it), the median of alternating rounds. torch.compile runs with frozen weights in each mode asked for
(`--compile-modes`, default "reduce-overhead": CUDA graphs, PyTorch's fastest for batch-1 latency;
"max-autotune" tunes its kernels too, minutes per model, so it is left to a second device call); its
compile time is reported beside ours.

Run: python benchmarks/gpu_models.py [--models resnet50] [--dtypes "float32 float16"]
                                     [--compile-modes "reduce-overhead"] [--trials 0] [--out results]"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import tilewright as tw
from tilewright.bench.gpu_timing import alternating
from tilewright.models import MODELS

ROUNDS = 5


def events_seconds(fn, number: int) -> float:
    """Seconds per call of `fn` over `number` calls made back to back (CUDA events, host dispatch included)."""
    import torch

    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(number):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e-3 / number


def timed(fn, min_s: float = 0.05):
    """A timing of `fn`: enough calls to last `min_s`, after two warm-up calls."""
    fn()
    fn()
    once = events_seconds(fn, 1)
    number = max(1, min(1000, int(min_s / max(once, 1e-6))))
    return lambda: events_seconds(fn, number)


def error(got, want, dtype: str) -> float:
    g, w = got.detach().float().cpu().numpy().astype(np.float64), want.detach().float().cpu().numpy()
    if dtype == "float16":
        return float(np.linalg.norm(g - w) / max(np.linalg.norm(w), 1e-30))
    return float(np.max(np.abs(g - w)) / max(float(np.max(np.abs(w))), 1e-30))


def bench_model(name: str, dtype: str, modes: list[str], trials: int, records: str | None, log) -> dict:
    import torch

    spec = MODELS[name]
    model = spec.build().eval().cuda()
    x = spec.example_input().cuda()
    tol = 1e-2 if dtype == "float16" else 1e-3
    with torch.no_grad():
        want = model(x)
    tdtype = getattr(torch, dtype)
    model_t, x_t = (model.half(), x.half()) if dtype == "float16" else (model, x)
    row = {"model": name, "dtype": dtype, "input": list(x.shape), "trials": trials, "errors": {}, "compile_s": {}}
    sides = {}

    t0 = time.perf_counter()
    module = tw.compile(spec.build().eval(), (spec.example_input(),), target="cuda", dtype=dtype, trials=trials,
                        records=records, progress=False)
    row["compile_s"]["tilewright"] = time.perf_counter() - t0
    x_ours = x.to(tdtype).contiguous()
    out = module(x_ours)
    row["errors"]["tilewright"] = error(out, want, dtype)
    sides["tilewright"] = timed(lambda: module(x_ours))

    with torch.no_grad():
        row["errors"]["eager"] = error(model_t(x_t), want, dtype)
        sides["eager"] = timed(lambda: model_t(x_t))
        for mode in modes:
            torch._dynamo.reset()
            t0 = time.perf_counter()
            compiled = torch.compile(model_t, mode=None if mode == "default" else mode)
            got = compiled(x_t)
            row["compile_s"][f"compile:{mode}"] = time.perf_counter() - t0
            row["errors"][f"compile:{mode}"] = error(got, want, dtype)
            sides[f"compile:{mode}"] = timed(lambda c=compiled: c(x_t))
    bad = {k: e for k, e in row["errors"].items() if not e <= tol}
    if bad:
        row["failed"] = f"outside tolerance {tol}: {bad}"
        log(f"{name} {dtype}: FAILED {row['failed']}")
        sides = {k: v for k, v in sides.items() if k not in bad}
    row["seconds"] = alternating(sides, ROUNDS)
    theirs = {k: v for k, v in row["seconds"].items() if k != "tilewright"}
    if "tilewright" in row["seconds"] and theirs:
        best = min(theirs, key=theirs.get)
        row["fastest_baseline"] = best
        row["speedup"] = theirs[best] / row["seconds"]["tilewright"]
    times = ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in row["seconds"].items())
    log(f"{name} {dtype}: {times}; tilewright compiled in {row['compile_s']['tilewright']:.0f} s"
        + (f"; {row['speedup']:.2f}x the fastest baseline ({row['fastest_baseline']})" if "speedup" in row else ""))
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="resnet50")
    p.add_argument("--dtypes", default="float32 float16")
    p.add_argument("--compile-modes", default="reduce-overhead",
                   help='torch.compile modes, space-separated ("default", "reduce-overhead", "max-autotune")')
    p.add_argument("--trials", type=int, default=0, help="tuning budget per model (0: the GPU space's defaults)")
    p.add_argument("--records", help="SQLite record file")
    p.add_argument("--out", default="results")
    args = p.parse_args(argv)
    import torch

    torch.backends.cudnn.benchmark = True
    import torch._inductor.config as inductor_config

    inductor_config.freezing = True  # weights folded as constants: torch.compile at its inference best
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32 on every side
    torch.backends.cudnn.allow_tf32 = False
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    failures = 0
    for name in args.models.replace(",", " ").split():
        for dtype in args.dtypes.replace(",", " ").split():
            try:
                rows.append(bench_model(name, dtype, args.compile_modes.split(), args.trials, args.records, print))
                failures += "failed" in rows[-1]
            except Exception as exc:  # noqa: BLE001 - a failing model is a row, the next one runs
                failures += 1
                rows.append({"model": name, "dtype": dtype, "failed": f"{type(exc).__name__}: {exc}"[:2000]})
                print(f"{name} {dtype}: FAILED {rows[-1]['failed']}", flush=True)
            (out / "gpu_models.json").write_text(json.dumps({
                "device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
                "cudnn": torch.backends.cudnn.version(), "rounds": ROUNDS, "tf32": "off", "rows": rows}, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())

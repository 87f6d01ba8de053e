"""Whole models against PyTorch eager, torch.compile and ONNX Runtime
(`tilewright bench models`): each model of `tilewright.models` compiled with
`tw.compile` (tuned over a trial budget spread across its tasks), checked
against PyTorch eager, then timed beside every baseline in alternating rounds
in the same process, with the same input and thread count. Reports latency,
tuning time and peak activation memory as JSON, Markdown and a PNG."""

from __future__ import annotations

import json
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..records import Records
from ..runtime.aligned import aligned_copy
from .flextensor import bench_target
from .model_baselines import eager, inductor, onnxruntime, torch_peak_activation_bytes
from .report import geomean, pyplot
from .timing import ROUNDS, alternating_medians, median_seconds

REPEAT = 3  # timings per round of each side
RTOL, ATOL = 1e-3, 1e-3


@dataclass
class ModelResult:
    model: str
    input_shape: tuple
    layout: str = "NCHW"  # which convolutions ran packed (compile's layout; "auto" resolved)
    ours_s: float | None = None
    tune_s: float = 0.0
    tasks: int = 0
    trials: int = 0  # the budget asked for
    new_trials: int = 0  # measured in this run (the rest of the budget came from the records)
    reused_records: int = 0
    max_abs_error: float | None = None
    peak_bytes: int | None = None
    torch_peak_bytes: int | None = None
    baselines: dict = field(default_factory=dict)  # name -> seconds
    setup_s: dict = field(default_factory=dict)  # baseline name -> compile/export seconds
    notes: dict = field(default_factory=dict)  # baseline name -> why it is missing or wrong
    error: str = ""

    @property
    def fastest(self) -> tuple[str, float] | None:
        if not self.baselines:
            return None
        name = min(self.baselines, key=self.baselines.get)
        return name, self.baselines[name]

    @property
    def speedup(self) -> float | None:
        best = self.fastest
        return best[1] / self.ours_s if best and self.ours_s else None


def check_output(name: str, got: np.ndarray, want: np.ndarray) -> float:
    """The largest absolute error of `got` against PyTorch eager's `want`; AssertionError beyond tolerance."""
    got = np.asarray(got)
    if got.shape != want.shape:
        raise AssertionError(f"{name}: output shape {list(got.shape)} differs from PyTorch eager's {list(want.shape)}")
    err = float(np.max(np.abs(got - want))) if want.size else 0.0
    if not np.allclose(got, want, rtol=RTOL, atol=ATOL * max(1.0, float(np.max(np.abs(want))))):
        raise AssertionError(f"{name}: output differs from PyTorch eager (max abs error {err:.3g})")
    return err


def run_model(name: str, trials: int, threads: int, records: Records, reduced: bool = False,
              baselines=("eager", "compile", "ort"), progress: bool = True, seed: int = 0,
              layout: str = "auto") -> ModelResult:
    import torch

    from ..graph.compile import compile as compile_model
    from ..models import MODELS

    spec = MODELS[name]
    model = spec.build(reduced=reduced).eval()
    shape = spec.reduced_shape if reduced else spec.input_shape
    x = aligned_copy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))  # as torch's
    row = ModelResult(name, tuple(shape), layout=layout, trials=trials)
    torch.set_num_threads(threads)
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    start = time.perf_counter()
    module = compile_model(model, [torch.from_numpy(x)], target=bench_target(threads), trials=trials,
                           records=records, progress=progress, seed=seed, name=name, layout=layout)
    row.tune_s = time.perf_counter() - start
    row.layout = module.layout
    row.tasks = len(module.tasks)
    row.new_trials, row.reused_records = module.tuning["trials"], module.tuning["reused"]
    out = module(x)
    row.max_abs_error = check_output(f"tilewright {name}", out[0] if isinstance(out, list) else out, want)
    row.peak_bytes = module.peak_bytes
    row.torch_peak_bytes = torch_peak_activation_bytes(model, x)
    sides = {"ours": lambda: median_seconds(lambda: module(x), repeat=REPEAT)}
    candidates = []
    if "eager" in baselines:
        candidates += [eager(model, x, channels_last=False), eager(model, x, channels_last=True)]
    if "compile" in baselines:
        candidates.append(inductor(model, x))
    if "ort" in baselines:
        candidates.append(onnxruntime(model, x, threads))
    for b in candidates:
        if b.run is None:
            row.notes[b.name] = b.note
            continue
        try:
            check_output(b.name, b.output, want)
        except AssertionError as exc:
            row.notes[b.name] = str(exc)
            continue
        row.setup_s[b.name] = b.setup_s
        sides[b.name] = lambda fn=b.run: median_seconds(fn, repeat=REPEAT)
    times = alternating_medians(sides)
    row.ours_s = times.pop("ours")
    row.baselines = times
    return row


def run_models(models=None, trials: int = 200, threads: int | None = None, out: Path | str = "results",
               records=None, reduced: bool = False, baselines=("eager", "compile", "ort"),
               progress: bool = True, name: str = "models", layout: str = "auto") -> dict:
    from ..models import MODELS

    target = bench_target(threads)
    threads = threads or target.cores
    store = records if isinstance(records, Records) else Records(records)
    rows, failures = [], []
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for m in models or list(MODELS):
        try:
            rows.append(run_model(m, trials, threads, store, reduced, baselines, progress, layout=layout))
        except Exception as exc:  # one model's failure is reported, the others still run
            failures.append({"model": m, "error": f"{type(exc).__name__}: {exc}"})
        write(out, name, target, rows, failures, threads, trials, reduced)  # per model: a long run keeps its rows
    return {"rows": rows, "failures": failures}


def _ms(s) -> str:
    return f"{s * 1e3:.2f}" if s else "n/a"


def _mib(b) -> str:
    return f"{b / 2**20:.1f}" if b is not None else "n/a"


def table(rows) -> list[str]:
    names = list(dict.fromkeys(n for r in rows for n in r.baselines))
    lines = ["| model | input | layout | tilewright ms | " + " | ".join(f"{n} ms" for n in names)
             + " | vs fastest | compile s (tasks, new trials) | peak MiB ours / PyTorch |",
             "|---|---|---|---|" + "---|" * len(names) + "---|---|---|"]
    for r in rows:
        cells = [_ms(r.baselines.get(n)) for n in names]
        speed = f"{r.speedup:.2f}x ({r.fastest[0]})" if r.speedup else "n/a"
        cost = f"{r.tune_s:.0f} ({r.tasks}, {r.new_trials})"
        memory = f"{_mib(r.peak_bytes)} / {_mib(r.torch_peak_bytes)}"
        lines.append(f"| {r.model} | {'x'.join(map(str, r.input_shape))} | {r.layout} | {_ms(r.ours_s)} | "
                     + " | ".join(cells)
                     + f" | {speed} | {cost} | {memory} |")
    g = geomean([r.speedup for r in rows if r.speedup])
    if g:
        lines += ["", f"Geomean against the fastest baseline of each model: **{g:.2f}x**."]
    return lines


def plot(rows, path: Path, title: str) -> bool:
    plt = pyplot()
    if plt is None:
        return False
    names = list(dict.fromkeys(n for r in rows for n in r.baselines))
    if not rows or not names:
        return False
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(rows)), 4))
    width = 0.8 / (len(names) + 1)
    for k, n in enumerate(["tilewright", *names]):
        vals = [(r.ours_s if n == "tilewright" else r.baselines.get(n)) or 0 for r in rows]
        ref = [r.ours_s or 1 for r in rows]
        ax.bar([i + k * width for i in range(len(rows))], [v / f if v else 0 for v, f in zip(vals, ref)], width,
               label=n)
    ax.set_xticks([i + 0.4 for i in range(len(rows))], [r.model for r in rows])
    ax.set_ylabel("latency relative to tilewright (lower is faster)")
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write(out: Path, name: str, target, rows, failures, threads: int, trials: int, reduced: bool) -> None:
    doc = {"host": str(target), "target_key": target.key, "machine": platform.processor() or platform.machine(),
           "date": time.strftime("%Y-%m-%d %H:%M:%S"), "threads": threads, "trials_per_model": trials,
           "reduced_sizes": reduced, "rounds": ROUNDS, "timings_per_round": REPEAT,
           "models": [dict(r.__dict__, speedup=r.speedup) for r in rows], "failures": failures}
    (out / f"{name}.json").write_text(json.dumps(doc, indent=2, default=str))
    head = [f"Whole models, batch 1, fp32, on {target}, {threads} threads; {trials} tuning trials per model spread "
            f"over its tasks{' (reduced sizes)' if reduced else ''}. Times are medians of {ROUNDS} alternating "
            f"rounds of {REPEAT} timings each, in one process, every output checked against PyTorch eager. "
            "PyTorch eager: the faster of NCHW and channels_last (input conversion timed); torch.compile: inductor, "
            "default mode; ONNX Runtime: CPU provider, all graph optimizations. Peak memory: activations only "
            "(ours: the memory plan's arena, which holds the kernels' large temporaries too, the output, and "
            "the most any one kernel allocates on its stack or per thread while it runs; PyTorch: the peak "
            "of its profiler's allocation and free events, output included).",
            ""]
    text = head + table(rows)
    notes = [f"- {r.model}: {n}: {why}" for r in rows for n, why in r.notes.items()]
    if notes:
        text += ["", "### baselines not timed", ""] + notes
    if failures:
        text += ["", "### failures", ""] + [f"- {f['model']}: {f['error']}" for f in failures]
    (out / f"{name}.md").write_text("\n".join(text) + "\n")
    plot(rows, out / f"{name}.png", "tilewright vs PyTorch / torch.compile / ONNX Runtime")

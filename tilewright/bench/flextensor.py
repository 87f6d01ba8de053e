"""The FlexTensor operator suite against PyTorch, case by case: tune (or reuse
the records), check the kernel against the NumPy reference, then time it, the
PyTorch baseline in each layout PyTorch offers (keeping the best) and NumPy
where it has the operator, in the same process run with the same threads.

Timing: medians of repeated calls, ours and the baselines in alternating
rounds, each after the others' thread pools have gone idle (`timing.py`). Our time includes every stage of the
program (padding, packing of activations and weights) on every call; PyTorch
eager re-packs conv weights on every call too, so neither side packs ahead."""

from __future__ import annotations

import json
import math
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..analysis.graph import analyze
from ..api import tune
from ..errors import TilewrightError
from ..records import Records
from ..reference import evaluate
from ..runtime.peak import fp32_peak_gflops, measure_fp32_peak_gflops
from ..targets import as_target
from ..workloads import suite
from ..workloads.baselines import torch_variants
from ..workloads.builders import suite_program
from .timing import alternating_medians, median_seconds

DEFAULT_OPS = ("C2D", "DEP", "GRP", "DIL", "T2D", "T3D", "C3D", "C1D", "T1D", "GEMM", "GEMV", "BIL")
GOALS = {"C2D": 1.0, "DEP": 2.0, "GRP": 2.0, "DIL": 1.0, "T2D": 1.0, "T3D": 1.0, "C3D": 1.0, "C1D": 1.0,
         "T1D": 1.0, "GEMM": 0.9, "GEMV": 0.9, "BIL": 0.9}


@dataclass
class CaseResult:
    op: str
    case: str
    flops: int
    bytes: int  # inputs + output, once: the least memory traffic a kernel can have
    tilewright_s: float
    max_rel_error: float
    tuned_trials: int
    torch_s: float | None = None
    torch_layout: str | None = None
    numpy_s: float | None = None
    default_s: float | None = None
    errors: dict = field(default_factory=dict)

    @property
    def speedup(self) -> float | None:
        return self.torch_s / self.tilewright_s if self.torch_s else None


def _numpy_variant(op: str, arrays: list[np.ndarray]):
    if op in ("GEMM", "GEMV"):
        return lambda: arrays[0] @ arrays[1]
    return None


def run_case(op: str, case: str, trials: int, threads: int, records: Records, method: str = "q",
             reuse: bool = False, seed: int = 0, progress: bool = False) -> CaseResult:
    tensors = suite_program(op, case)
    target = as_target("cpu")
    if threads != target.cores:  # another fingerprint: records of one thread count never serve another
        target = target.with_cores(threads)
    outputs = tensors[-1:]
    from ..analysis.workload import workload_key

    known = records.best(workload_key(outputs), target.key, k=1) if reuse else []
    errors, default_s, tuned = {}, None, 0
    if known:
        from ..api import build as build_kernel

        with records:  # the best record of this workload and target
            kernel = build_kernel(tensors, target=target)
    else:
        result = tune(tensors, target=target, trials=trials, method=method, seed=seed, records=records,
                      progress=progress)
        kernel, errors, tuned = result.build(), result.errors, len(result.history)
        default_s = result.default_cost if math.isfinite(result.default_cost) else None
    rng = np.random.default_rng(seed)
    ins = [rng.standard_normal(t.shape).astype(t.dtype.name) for t in tensors[:-1]]
    got = np.zeros(tensors[-1].shape, tensors[-1].dtype.name)
    kernel(*ins, got)
    want = evaluate(tensors[-1], dict(zip(tensors[:-1], ins)))
    err = float(np.abs(got - want).max() / max(float(np.abs(want).max()), 1e-30))
    if not err <= 1e-4:
        raise TilewrightError(f"{op} {case}: the tuned kernel disagrees with the reference "
                              f"(max relative error {err:.2e}); not timed")
    kernel.set_num_threads(threads)
    try:
        import torch

        torch.set_num_threads(threads)
        baselines = {f"torch:{layout}": fn for layout, fn in torch_variants(op, case, ins).items()}
    except ImportError:
        baselines = {}
    np_fn = _numpy_variant(op, ins)
    if np_fn is not None:
        baselines["numpy"] = np_fn
    sides = {"ours": lambda: kernel.time(*ins, got, repeat=3).median}
    sides.update({name: (lambda fn=fn: median_seconds(fn, repeat=3)) for name, fn in baselines.items()})
    times = alternating_medians(sides)
    graph = analyze(outputs)
    nbytes = sum(int(np.prod(t.shape)) * t.dtype.bytes for t in tensors)
    row = CaseResult(op, case, graph.flops, nbytes, times.pop("ours"), err, tuned, default_s=default_s,
                     errors=errors, numpy_s=times.pop("numpy", None))
    for name, t in times.items():
        if row.torch_s is None or t < row.torch_s:
            row.torch_s, row.torch_layout = t, name.split(":", 1)[1]
    return row


def geomean(values: list[float]) -> float | None:
    vals = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def tables(rows: list[CaseResult], peak: float) -> list[str]:
    lines = []
    for op in dict.fromkeys(r.op for r in rows):
        mine = [r for r in rows if r.op == op]
        lines += [f"### {op}: {suite()[op]['full_name']}", "",
                  "| case | tilewright ms | GFLOP/s | % peak | FLOP/byte | PyTorch ms (layout) | PyTorch GFLOP/s "
                  "| speedup |", "|---|---|---|---|---|---|---|---|"]
        for r in mine:
            g = r.flops / r.tilewright_s / 1e9
            torch_ms = f"{r.torch_s * 1e3:.3f} ({r.torch_layout})" if r.torch_s else "n/a"
            torch_g = f"{r.flops / r.torch_s / 1e9:.1f}" if r.torch_s else "n/a"
            speed = f"{r.speedup:.2f}x" if r.speedup else "n/a"
            lines.append(f"| {r.case} | {r.tilewright_s * 1e3:.3f} | {g:.1f} | {100 * g / peak:.1f}% "
                         f"| {r.flops / r.bytes:.1f} | {torch_ms} | {torch_g} | {speed} |")
        gm = geomean([r.speedup for r in mine])
        goal = GOALS.get(op)
        verdict = ""
        if gm is not None and goal is not None:
            verdict = f" (goal >= {goal:.1f}: {'met' if gm >= goal else 'NOT met'})"
        lines += ["", f"geometric-mean speedup over PyTorch: {gm:.2f}x{verdict}" if gm else "no PyTorch baseline",
                  ""]
    return lines


def summary(rows: list[CaseResult]) -> list[str]:
    lines = ["| operator | cases | geomean speedup over PyTorch | goal |", "|---|---|---|---|"]
    for op in dict.fromkeys(r.op for r in rows):
        gm = geomean([r.speedup for r in rows if r.op == op])
        goal = GOALS.get(op)
        lines.append(f"| {op} | {sum(r.op == op for r in rows)} | {f'{gm:.2f}x' if gm else 'n/a'} | "
                     f"{f'>= {goal}' if goal else ''} |")
    return lines


def plot(rows: list[CaseResult], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    labeled = [r for r in rows if r.speedup]
    if not labeled:
        return False
    fig, ax = plt.subplots(figsize=(max(6.0, 0.35 * len(labeled)), 4))
    ax.bar(range(len(labeled)), [r.speedup for r in labeled],
           color=[f"C{list(dict.fromkeys(x.op for x in labeled)).index(r.op)}" for r in labeled])
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(range(len(labeled)), [f"{r.op} {r.case}" for r in labeled], rotation=90, fontsize=7)
    ax.set_ylabel("speedup over PyTorch (fp32, batch 1)")
    ax.set_title("tilewright vs PyTorch on the FlexTensor suite")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def run_suite(ops=None, cases=None, trials: int = 300, threads: int | None = None, out: Path | str = "results",
              records=None, method: str = "q", reuse: bool = False, progress: bool = True,
              log: Callable[[str], None] = print) -> dict:
    """Benchmark the chosen operators/cases; writes flextensor.json/.md/.png under `out` after every case."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    data = suite()
    ops = list(ops or DEFAULT_OPS)
    for op in ops:
        if op not in data:
            raise TilewrightError(f"unknown suite operator {op!r}; the suite has {', '.join(data)}")
    target = as_target("cpu")
    threads = threads or target.cores
    peak = fp32_peak_gflops(target, threads=threads)
    store = records if isinstance(records, Records) else Records(records)
    rows: list[CaseResult] = []
    failures: list[dict] = []
    for op in ops:
        names = [c["name"] for c in data[op]["cases"] if cases is None or c["name"] in cases]
        for name in names:
            log(f"{op} {name}: tuning {trials} trials ({method}) on {threads} threads")
            try:
                row = run_case(op, name, trials, threads, store, method, reuse, progress=progress)
            except TilewrightError as exc:
                failures.append({"op": op, "case": name, "error": str(exc)})
                log(f"  FAILED: {exc}")
                continue
            rows.append(row)
            peak = max(peak, measure_fp32_peak_gflops(target, threads=threads))  # the best seen in the run
            speed = f"{row.speedup:.2f}x" if row.speedup else "n/a"
            log(f"  tilewright {row.tilewright_s * 1e3:.3f} ms, PyTorch "
                f"{row.torch_s * 1e3 if row.torch_s else float('nan'):.3f} ms ({row.torch_layout}): {speed}")
            _write(out, rows, failures, peak, threads, trials, method)
    _write(out, rows, failures, peak, threads, trials, method)
    return {"rows": rows, "failures": failures, "peak_gflops": peak}


def _write(out: Path, rows, failures, peak, threads, trials, method) -> None:
    doc = {"host": str(as_target("cpu")), "machine": platform.processor() or platform.machine(),
           "date": time.strftime("%Y-%m-%d %H:%M:%S"), "threads": threads, "trials": trials, "method": method,
           "peak_gflops": peak, "cases": [r.__dict__ for r in rows], "failures": failures}
    (out / "flextensor.json").write_text(json.dumps(doc, indent=2, default=str))
    head = [f"FlexTensor suite on {as_target('cpu')}, {threads} threads, fp32, <= {trials} trials ({method}); "
            f"fp32 peak {peak:.0f} GFLOP/s (best FMA-loop measurement of the run). Times are medians; PyTorch "
            f"in its faster layout; both sides pack weights inside every call.", ""]
    text = head + summary(rows) + [""] + tables(rows, peak)
    if failures:
        text += ["### failures", ""] + [f"- {f['op']} {f['case']}: {f['error']}" for f in failures]
    (out / "flextensor.md").write_text("\n".join(text) + "\n")
    plot(rows, out / "flextensor.png")

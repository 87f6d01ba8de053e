"""Tables, plots and files of a benchmark run (`run_suite`): per-case rows,
per-operator geomeans against PyTorch, how many untuned defaults held within
`DEFAULT_WITHIN` of the tuned kernel, and, for a network's layer list, the
count-weighted sum of its layers (each layer's time times its occurrences)."""

from __future__ import annotations

import json
import math
import platform
import time
from pathlib import Path

from ..stats import median
from ..workloads import suite
from .timing import ROUNDS

DEFAULT_WITHIN = 1.3  # an untuned default "holds" when within this factor of the tuned kernel
GOALS = {"R50": 1.1, "C2D": 1.0, "DEP": 2.0, "GRP": 2.0, "DIL": 1.0, "T2D": 1.0, "T3D": 1.0, "C3D": 1.0,
         "C1D": 1.0, "T1D": 1.0, "GEMM": 0.9, "GEMV": 0.9, "BIL": 0.9}


def geomean(values: list[float]) -> float | None:
    vals = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def _default_ratio(r) -> float | None:
    return r.default_s / r.tilewright_s if r.default_s else None


def _defaults_held(rows) -> str:
    ratios = [x for x in (_default_ratio(r) for r in rows) if x is not None]
    if not ratios:
        return "n/a"
    return f"{sum(x <= DEFAULT_WITHIN for x in ratios)}/{len(ratios)}"


def _tuning(r) -> str:
    """The case's search wall time in seconds: the direct kernel's, + the Winograd layer's when tuned too."""
    if r.tuning_s is None:
        return "reused" if r.tuned_trials == 0 else "n/a"
    wino = f" (+{r.winograd_tuning_s:.0f})" if r.winograd_tuning_s is not None else ""
    return f"{r.tuning_s:.0f}{wino}"


def tuning_spread(rows) -> str:
    """Median and max search seconds per case (direct kernel and Winograd layer together)."""
    spent = [r.tuning_s + (r.winograd_tuning_s or 0.0) for r in rows if r.tuning_s is not None]
    return f"{median(spent):.0f} / {max(spent):.0f}" if spent else "n/a"


def network_row(rows) -> tuple[float, float] | None:
    """(ours, PyTorch) count-weighted sums in seconds over rows that all have a baseline, or None
    when the rows are not a network's layer list."""
    if not rows or all(r.count == 1 for r in rows) or any(not r.torch_s for r in rows):
        return None
    return sum(r.tilewright_s * r.count for r in rows), sum(r.torch_s * r.count for r in rows)


def tables(rows, peak: float) -> list[str]:
    lines = []
    for op in dict.fromkeys(r.op for r in rows):
        mine = [r for r in rows if r.op == op]
        lines += [f"### {op}: {suite()[op]['full_name']}", "",
                  "| case | x | tilewright ms | GFLOP/s | % peak | default ms (x tuned) | PyTorch ms (layout) "
                  "| PyTorch GFLOP/s | speedup | tuning s |", "|---|---|---|---|---|---|---|---|---|---|"]
        for r in mine:
            g = r.flops / r.tilewright_s / 1e9
            torch_ms = f"{r.torch_s * 1e3:.3f} ({r.torch_layout})" if r.torch_s else "n/a"
            torch_g = f"{r.flops / r.torch_s / 1e9:.1f}" if r.torch_s else "n/a"
            speed = f"{r.speedup:.2f}x" if r.speedup else "n/a"
            dflt = f"{r.default_s * 1e3:.3f} ({_default_ratio(r):.2f}x)" if r.default_s else "n/a"
            wino = r.method == "winograd"  # its rate counts the direct FLOPs: an effective rate, past peak
            case = f"{r.case} (Winograd; direct {r.direct_s * 1e3:.3f})" if wino else r.case
            pct = f"{100 * g / peak:.1f}% eff." if wino else f"{100 * g / peak:.1f}%"
            lines.append(f"| {case} | {r.count} | {r.tilewright_s * 1e3:.3f} | {g:.1f} | {pct} "
                         f"| {dflt} | {torch_ms} | {torch_g} | {speed} | {_tuning(r)} |")
        net = network_row(mine)
        if net:
            lines.append(f"| network (count-weighted sum) | | {net[0] * 1e3:.3f} | | | | {net[1] * 1e3:.3f} | "
                         f"| {net[1] / net[0]:.2f}x | |")
        gm = geomean([r.speedup for r in mine])
        goal = GOALS.get(op)
        verdict = ""
        if gm is not None and goal is not None:
            verdict = f" (goal >= {goal:.1f}: {'met' if gm >= goal else 'NOT met'})"
        lines += ["", f"geometric-mean speedup over PyTorch: {gm:.2f}x{verdict}" if gm else "no PyTorch baseline",
                  f"untuned defaults within {DEFAULT_WITHIN}x of the tuned kernel: {_defaults_held(mine)}", ""]
    return lines


def summary(rows) -> list[str]:
    lines = ["| operator | cases | geomean speedup over PyTorch | goal | network sum speedup "
             f"| defaults within {DEFAULT_WITHIN}x of tuned | tuning s per case (median / max) |",
             "|---|---|---|---|---|---|---|"]
    for op in dict.fromkeys(r.op for r in rows):
        mine = [r for r in rows if r.op == op]
        gm = geomean([r.speedup for r in mine])
        goal = GOALS.get(op)
        net = network_row(mine)
        lines.append(f"| {op} | {len(mine)} | {f'{gm:.2f}x' if gm else 'n/a'} | {f'>= {goal}' if goal else ''} "
                     f"| {f'{net[1] / net[0]:.2f}x' if net else ''} | {_defaults_held(mine)} | {tuning_spread(mine)} |")
    return lines


def pyplot():
    """matplotlib's pyplot on the file-only backend, or None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def plot(rows, path: Path, title: str, ylabel: str = "speedup over PyTorch (fp32, batch 1)") -> bool:
    """A bar per case with a speedup (rows with .op, .case, .speedup), coloured by operator."""
    plt = pyplot()
    if plt is None:
        return False
    labeled = [r for r in rows if r.speedup]
    if not labeled:
        return False
    fig, ax = plt.subplots(figsize=(max(6.0, 0.35 * len(labeled)), 4))
    ax.bar(range(len(labeled)), [r.speedup for r in labeled],
           color=[f"C{list(dict.fromkeys(x.op for x in labeled)).index(r.op)}" for r in labeled])
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(range(len(labeled)), [f"{r.op} {r.case}" for r in labeled], rotation=90, fontsize=7)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write(out: Path, name: str, title: str, target, rows, failures, peak, threads, trials, method,
          repeat: int) -> None:
    """`name`.json, .md and .png under `out`."""
    doc = {"host": str(target), "target_key": target.key, "machine": platform.processor() or platform.machine(),
           "date": time.strftime("%Y-%m-%d %H:%M:%S"), "threads": threads, "trials": trials, "method": method,
           "rounds": ROUNDS, "timings_per_round": repeat, "peak_gflops": peak,
           "cases": [r.__dict__ for r in rows], "failures": failures}
    (out / f"{name}.json").write_text(json.dumps(doc, indent=2, default=str))
    head = [f"{title} on {target}, {threads} threads, fp32, <= {trials} trials ({method}); fp32 peak {peak:.0f} "
            f"GFLOP/s (best FMA-loop measurement of the run). Times are medians of {ROUNDS} alternating rounds of "
            f"{repeat} timings each, re-measured after tuning (tuned kernel, untuned default, PyTorch in each "
            f"layout, keeping its faster); both sides pack weights inside every call, except where a case says "
            f"Winograd: there our time is the layer compiled as a model (`tw.compile`, layout NCHWc, its "
            f"weights transformed once at compile time, the layout transforms timed; the tuned direct kernel's "
            f"time beside it; its GFLOP/s count the direct convolution's FLOPs, an effective rate), and PyTorch's "
            f"variants include its prepacked-weight path (TorchScript freeze + optimize_for_inference). Tuning s: "
            f"the search's wall time per case, compiles and measurements (the Winograd layer's in parentheses).", ""]
    text = head + summary(rows) + [""] + tables(rows, peak)
    if failures:
        text += ["### failures", ""] + [f"- {f['op']} {f['case']}: {f['error']}" for f in failures]
    (out / f"{name}.md").write_text("\n".join(text) + "\n")
    plot(rows, out / f"{name}.png", f"tilewright vs PyTorch: {title}")

"""Tables, plots and files of a benchmark run (`run_suite`): per-case rows,
per-operator geomeans against the fastest baseline (as reported, and with the
direct kernel only: Winograd off), how many untuned defaults held within
`DEFAULT_WITHIN` of the tuned kernel, each side's empty-call cost and the cases
it dominates, and, for a network's layer list, the count-weighted sum of its
layers (each layer's time times its occurrences). Every file records where it
comes from (`provenance.py`)."""

from __future__ import annotations

import json
import math
import platform
import time
from pathlib import Path

from ..stats import median
from ..workloads import suite
from .provenance import provenance, provenance_line
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
    """(ours, fastest baseline) count-weighted sums in seconds over rows that all have a baseline, or None
    when the rows are not a network's layer list."""
    if not rows or all(r.count == 1 for r in rows) or any(not r.baseline_s for r in rows):
        return None
    return sum(r.tilewright_s * r.count for r in rows), sum(r.baseline_s * r.count for r in rows)


def baseline_label(name: str, numpy_blas: dict | None = None) -> str:
    """ "torch:NCHW" -> "PyTorch (NCHW)", "numpy" -> "numpy (OpenBLAS <core name>)"."""
    if name == "numpy":
        return f"numpy (OpenBLAS {(numpy_blas or {}).get('corename', 'unknown')})"
    return f"PyTorch ({name.split(':', 1)[1]})" if name.startswith("torch:") else name


SMALL_S = 100e-6  # below this, a case's table cell shows the C-loop time beside the Python call's
DOMINATES = 0.2  # an empty call costing more than this share of a case's time "dominates" it


def ms(seconds: float) -> str:
    """Milliseconds, 3 decimals, or 3 significant digits below 0.1 ms (microsecond cases)."""
    v = seconds * 1e3
    return f"{v:.3f}" if v >= 0.1 else f"{v:.3g}"


def _ours_cell(r) -> str:
    if r.tilewright_s < SMALL_S and r.cloop_s and r.method == "direct":
        return f"{ms(r.tilewright_s)} (C loop {ms(r.cloop_s)})"
    return ms(r.tilewright_s)


def _baselines_cell(r) -> str:
    return "; ".join(f"{baseline_label(n, r.numpy_blas)} {ms(t)}" for n, t in sorted(r.baselines.items(),
                                                                                       key=lambda x: x[1])) or "n/a"


def _overhead_cell(r) -> str:
    """Empty-call microseconds: ours / the fastest baseline's side."""
    ours, theirs = r.overhead_s.get("ours"), r.overhead_s.get(r.baseline_side or "")
    return " / ".join(f"{x * 1e6:.1f}" if x else "n/a" for x in (ours, theirs))


def call_dominated(rows) -> list[str]:
    """One line per case where a side's empty call costs more than DOMINATES of its time."""
    lines = []
    for r in rows:
        shares = []
        for who, side, t in (("ours", "ours", r.tilewright_s), (r.baseline, r.baseline_side, r.baseline_s)):
            cost = r.overhead_s.get(side or "")
            if cost and t and cost > DOMINATES * t:
                shares.append(f"{who}: {cost * 1e6:.1f} us of {t * 1e6:.1f} us ({100 * cost / t:.0f}%)")
        if shares:
            lines.append(f"- {r.op} {r.case}: " + "; ".join(shares))
    return lines


def _geomeans(rows) -> tuple[float | None, float | None]:
    """(as reported, direct kernel only) geomean speedups over the fastest baseline."""
    return geomean([r.speedup for r in rows]), geomean([r.direct_speedup for r in rows])


def _x(v: float | None) -> str:
    return f"{v:.2f}x" if v else "n/a"


def tables(rows, peak: float) -> list[str]:
    lines = []
    for op in dict.fromkeys(r.op for r in rows):
        mine = [r for r in rows if r.op == op]
        lines += [f"### {op}: {suite()[op]['full_name']}", "",
                  "| case | x | tilewright ms | GFLOP/s | % peak | max rel err | default ms (x tuned) "
                  "| baselines ms | fastest baseline | speedup | direct only | empty call us (ours / baseline) "
                  "| tuning s |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in mine:
            g = r.flops / r.tilewright_s / 1e9
            dflt = f"{ms(r.default_s)} ({_default_ratio(r):.2f}x)" if r.default_s else "n/a"
            wino = r.method == "winograd"  # its rate counts the direct FLOPs: an effective rate, past peak
            case = f"{r.case} (Winograd; direct {ms(r.direct_s)})" if wino else r.case
            pct = f"{100 * g / peak:.1f}% eff." if wino else f"{100 * g / peak:.1f}%"
            lines.append(f"| {case} | {r.count} | {_ours_cell(r)} | {g:.1f} | {pct} | {r.max_rel_error:.1e} "
                         f"| {dflt} | {_baselines_cell(r)} | {r.baseline or 'n/a'} | {_x(r.speedup)} "
                         f"| {_x(r.direct_speedup)} | {_overhead_cell(r)} | {_tuning(r)} |")
        net = network_row(mine)
        if net:
            direct = sum((r.direct_s or r.tilewright_s) * r.count for r in mine)
            lines.append(f"| network (count-weighted sum) | | {ms(net[0])} | | | | | | {ms(net[1])} "
                         f"| {net[1] / net[0]:.2f}x | {net[1] / direct:.2f}x | | |")
        gm, direct = _geomeans(mine)
        goal = GOALS.get(op)
        verdict = ""
        if gm is not None and goal is not None:
            verdict = f" (goal >= {goal:.1f}: {'met' if gm >= goal else 'NOT met'})"
        lines += ["", f"geometric-mean speedup over the fastest baseline: {gm:.2f}x{verdict}; direct kernels only "
                      f"(Winograd off): {_x(direct)}" if gm else "no baseline",
                  f"untuned defaults within {DEFAULT_WITHIN}x of the tuned kernel: {_defaults_held(mine)}", ""]
    return lines


def summary(rows) -> list[str]:
    lines = ["| operator | cases | geomean speedup over the fastest baseline | direct only (Winograd off) | goal "
             f"| network sum speedup | defaults within {DEFAULT_WITHIN}x of tuned | tuning s per case (median / max) |",
             "|---|---|---|---|---|---|---|---|"]
    for op in dict.fromkeys(r.op for r in rows):
        mine = [r for r in rows if r.op == op]
        gm, direct = _geomeans(mine)
        goal = GOALS.get(op)
        net = network_row(mine)
        lines.append(f"| {op} | {len(mine)} | {_x(gm)} | {_x(direct)} | {f'>= {goal}' if goal else ''} "
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


def plot(rows, path: Path, title: str, ylabel: str = "speedup over the fastest baseline (fp32, batch 1)") -> bool:
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


def case_json(r) -> dict:
    """A row as stored: its fields and its speedups (`speedup`: the headline, against the fastest baseline)."""
    return {**r.__dict__, "speedup": r.speedup, "torch_speedup": r.torch_speedup, "direct_speedup": r.direct_speedup}


def head(title: str, target, threads, trials, method, repeat: int, peak: float) -> list[str]:
    return [f"{title} on {target}, {threads} threads, fp32, <= {trials} trials ({method}); fp32 peak {peak:.0f} "
            f"GFLOP/s (best FMA-loop measurement of the run). Every side is timed the same way: called from "
            f"Python (ours as `kernel(*inputs, out)`, argument checks and ctypes included), medians of {ROUNDS} "
            f"alternating rounds of {repeat} timings each, re-measured after tuning (tuned kernel, untuned "
            f"default, PyTorch in each layout, NumPy's BLAS in a process of its own with OpenBLAS's "
            f"OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE overrides removed). Outputs are preallocated where the function "
            f"takes one (ours, NumPy, torch.matmul/torch.mv `out=`); PyTorch's convolutions and F.bilinear take "
            f"no `out=` and allocate theirs. Speedup: against the fastest baseline; each baseline's time is "
            f"listed. Under {SMALL_S * 1e6:.0f} us our kernel's time in a C loop (no Python between calls) is "
            f"shown beside it; empty call: each side's function on 1-element data (ours: a kernel of the same "
            f"argument count doing one add). Both sides pack weights inside every call, except where a case "
            f"says Winograd: there our time is the layer compiled as a model (`tw.compile`, layout NCHWc, its "
            f"weights transformed once at compile time, the layout transforms timed; the tuned direct kernel's "
            f"time beside it, and \"direct only\" compares that kernel; its GFLOP/s count the direct "
            f"convolution's FLOPs, an effective rate; max rel err is the Winograd layer's), and PyTorch's "
            f"variants include its prepacked-weight path (TorchScript freeze + optimize_for_inference). Tuning "
            f"s: the search's wall time per case, compiles and measurements (the Winograd layer's in "
            f"parentheses)."]


def write(out: Path, name: str, title: str, target, rows, failures, peak, threads, trials, method,
          repeat: int) -> None:
    """`name`.json, .md and .png under `out`."""
    prov = provenance(threads, target, trials=trials, rounds=ROUNDS, timings_per_round=repeat, method=method)
    doc = {"host": str(target), "target_key": target.key, "machine": platform.processor() or platform.machine(),
           "date": time.strftime("%Y-%m-%d %H:%M:%S"), "threads": threads, "trials": trials, "method": method,
           "rounds": ROUNDS, "timings_per_round": repeat, "peak_gflops": peak, "provenance": prov,
           "geomeans": {op: dict(zip(("reported", "direct_only"), _geomeans([r for r in rows if r.op == op])))
                        for op in dict.fromkeys(r.op for r in rows)},
           "cases": [case_json(r) for r in rows], "failures": failures}
    (out / f"{name}.json").write_text(json.dumps(doc, indent=2, default=str))
    text = head(title, target, threads, trials, method, repeat, peak) + ["", provenance_line(prov), ""]
    text += summary(rows) + [""] + tables(rows, peak)
    dominated = call_dominated(rows)
    text += [f"### Where the Python call dominates (an empty call > {DOMINATES:.0%} of the time)", ""]
    text += (dominated or ["none"]) + [""]
    if failures:
        text += ["### failures", ""] + [f"- {f['op']} {f['case']}: {f['error']}" for f in failures]
    (out / f"{name}.md").write_text("\n".join(text) + "\n")
    plot(rows, out / f"{name}.png", f"tilewright vs the fastest baseline: {title}")

"""Random sampling vs P-method vs Q-method on suite cases (FlexTensor Figure 7):
each method tunes from scratch (its own empty records, same seed, no early
stop, not seeded with the heuristic default, which is measured on its own);
the best-so-far curves go to JSON and PNG, and the overall best kernel (the
default included) is checked against the reference and timed beside PyTorch
in the same run."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import numpy as np

import tilewright as tw
from tilewright.bench.timing import alternating_medians, median_seconds
from tilewright.workloads.baselines import torch_variants
from tilewright.workloads.builders import suite_program


def trials_to_fraction(best_costs: list[float], fraction: float = 0.9) -> int | None:
    """First trial (1-based) whose best-so-far speed reaches `fraction` of the final best speed."""
    final = best_costs[-1] if best_costs else math.inf
    if not math.isfinite(final):
        return None
    for n, c in enumerate(best_costs, 1):
        if final / c >= fraction:
            return n
    return None


def tune_case(op: str, case: str, trials: int, methods: list[str], seed: int = 0) -> dict:
    tensors = suite_program(op, case)
    out = {"op": op, "case": case, "trials": trials, "methods": {}}
    with tempfile.TemporaryDirectory() as tmp:  # one trial measures exactly the heuristic default
        default = tw.tune(tensors, trials=1, records=Path(tmp) / "records.db", progress=False)
    out["default_s"] = default.default_cost
    results = {"default": default}
    for method in methods:
        with tempfile.TemporaryDirectory() as tmp:
            r = tw.tune(tensors, trials=trials, method=method, seed=seed, records=Path(tmp) / "records.db",
                        early_stop=trials, progress=False, from_default=False)
        results[method] = r
        best = [t.best_cost for t in r.history]
        out["methods"][method] = {
            "best_s": r.best_cost, "gflops": r.gflops, "point": str(r.best_point),
            "errors": r.errors, "best_so_far_s": best, "elapsed_s": [t.elapsed_s for t in r.history],
            "trials_to_90pct": trials_to_fraction(best), "wall_s": r.history[-1].elapsed_s if r.history else 0.0,
        }
        print(f"  {op} {case} {method}: best {r.best_cost * 1e3:.3f} ms ({r.gflops:.1f} GFLOP/s), default "
              f"{out['default_s'] * 1e3:.3f} ms, 90% of final at trial {out['methods'][method]['trials_to_90pct']}, "
              f"{out['methods'][method]['wall_s']:.0f} s", flush=True)
    overall = min(results.values(), key=lambda r: r.best_cost)
    out.update(_time_against_torch(op, case, tensors, overall))
    return out


def _time_against_torch(op: str, case: str, tensors, result) -> dict:
    kernel = result.build()
    rng = np.random.default_rng(0)
    ins = [rng.standard_normal(t.shape, dtype=np.float32) for t in tensors[:-1]]
    got = np.zeros(tensors[-1].shape, np.float32)
    kernel(*ins, got)
    want = tw.evaluate(tensors[-1], dict(zip(tensors[:-1], ins)))
    err = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
    if err > 1e-4:
        raise SystemExit(f"{op} {case}: the tuned kernel is wrong (max relative error {err:.2e})")
    sides = {"ours": lambda: kernel.time(*ins, got, repeat=3).median}
    try:
        import torch

        torch.set_num_threads(tw.as_target("cpu").cores)
        sides.update({layout: (lambda fn=fn: median_seconds(fn, repeat=3))
                      for layout, fn in torch_variants(op, case, ins).items()})
    except ImportError:
        pass
    times = alternating_medians(sides)
    row = {"tilewright_s": times.pop("ours"), "max_rel_error": err, "flops": result.flops, "torch_s": None,
           "torch_layout": None}
    for layout, t in times.items():
        if row["torch_s"] is None or t < row["torch_s"]:
            row["torch_s"], row["torch_layout"] = t, layout
    return row


def plot(cases: list[dict], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(2, len(cases), figsize=(4.2 * len(cases), 7), squeeze=False)
    for col, c in enumerate(cases):
        for method, m in c["methods"].items():
            gf = [c["flops"] / s / 1e9 if math.isfinite(s) else 0.0 for s in m["best_so_far_s"]]
            axes[0][col].plot(range(1, len(gf) + 1), gf, label=method)
            axes[1][col].plot(m["elapsed_s"], gf, label=method)
        axes[0][col].set_title(f"{c['op']} {c['case']}")
        axes[0][col].set_xlabel("trials")
        axes[1][col].set_xlabel("wall seconds")
        for row in (0, 1):
            axes[row][col].set_ylabel("best GFLOP/s so far")
            axes[row][col].grid(alpha=0.3)
            axes[row][col].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True

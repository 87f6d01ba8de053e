"""Random sampling vs P-method vs Q-method on suite cases (FlexTensor Figure 7):
each method tunes from scratch (its own empty records, same seed, no early
stop, not seeded with the heuristic default, which is measured on its own);
the best-so-far curves go to JSON and PNG, and the overall best kernel (the
default included) is checked against the reference and timed beside PyTorch
in the same run: on the host for a CPU target, on the GPU (cuDNN / cuBLAS, TF32
off, every input already on the device) for a CUDA target; an OpenCL target has
no PyTorch baseline.

  python benchmarks/search_curves.py --target cuda --trials 200 --out results

runs FlexTensor's Figure 7 comparison on the issue's four cases: GEMM 1024 and
YOLO-v1's C2, C8 and C13 (Table 4's numbering of the 15 unique layers:
yolo_conv2, yolo_conv8 and yolo_conv21), writing search_<target>.json/.md/.png.
`benchmarks/bench.py search` calls the same functions for the CPU."""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path

import numpy as np

import tilewright as tw
from tilewright.bench.flextensor_gpu import device_arrays
from tilewright.bench.gpu_timing import alternating, device_median_seconds, kernel_median_seconds
from tilewright.bench.timing import alternating_medians, median_seconds
from tilewright.workloads.baselines import torch_variants
from tilewright.workloads.builders import suite_program
from tilewright.workloads.gpu_baselines import torch_gpu_variants


def trials_to_fraction(best_costs: list[float], fraction: float = 0.9) -> int | None:
    """First trial (1-based) whose best-so-far speed reaches `fraction` of the final best speed."""
    final = best_costs[-1] if best_costs else math.inf
    if not math.isfinite(final):
        return None
    for n, c in enumerate(best_costs, 1):
        if final / c >= fraction:
            return n
    return None


FIGURE7_CASES = "GEMM:gemm_1024,C2D:yolo_conv2,C2D:yolo_conv8,C2D:yolo_conv21"


def tune_case(op: str, case: str, trials: int, methods: list[str], seed: int = 0, target="cpu") -> dict:
    target = tw.as_target(target)
    tensors = suite_program(op, case)
    out = {"op": op, "case": case, "trials": trials, "methods": {}}
    with tempfile.TemporaryDirectory() as tmp:  # one trial measures exactly the heuristic default
        default = tw.tune(tensors, target=target, trials=1, records=Path(tmp) / "records.db", progress=False)
    out["default_s"] = default.default_cost
    results = {"default": default}
    for method in methods:
        with tempfile.TemporaryDirectory() as tmp:
            started = time.perf_counter()
            r = tw.tune(tensors, target=target, trials=trials, method=method, seed=seed,
                        records=Path(tmp) / "records.db", early_stop=trials, progress=False, from_default=False)
            total = time.perf_counter() - started
        results[method] = r
        best = [t.best_cost for t in r.history]
        out["methods"][method] = {
            "best_s": r.best_cost, "gflops": r.gflops, "point": str(r.best_point),
            "errors": r.errors, "best_so_far_s": best, "elapsed_s": [t.elapsed_s for t in r.history],
            "trials_to_90pct": trials_to_fraction(best), "wall_s": r.history[-1].elapsed_s if r.history else 0.0,
            "tuning_wall_s": total,  # the whole tw.tune call, space construction and compilation included
        }
        print(f"  {op} {case} {method}: best {r.best_cost * 1e3:.3f} ms ({r.gflops:.1f} GFLOP/s), default "
              f"{out['default_s'] * 1e3:.3f} ms, 90% of final at trial {out['methods'][method]['trials_to_90pct']}, "
              f"{out['methods'][method]['wall_s']:.0f} s", flush=True)
    overall = min(results.values(), key=lambda r: r.best_cost)
    timed = _time_against_torch if target.kind == "cpu" else _time_against_torch_gpu
    out.update(timed(op, case, tensors, overall))
    return out


def _checked_kernel(op: str, case: str, tensors, result):
    """(kernel, inputs, output, max relative error) of the tuned kernel, run once and compared with the
    reference; a wrong kernel ends the run (it is never timed)."""
    kernel = result.build()
    rng = np.random.default_rng(0)
    ins = [rng.standard_normal(t.shape, dtype=np.float32) for t in tensors[:-1]]
    got = np.zeros(tensors[-1].shape, np.float32)
    kernel(*ins, got)
    want = tw.evaluate(tensors[-1], dict(zip(tensors[:-1], ins)))
    err = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
    if err > 1e-4:
        raise SystemExit(f"{op} {case}: the tuned kernel is wrong (max relative error {err:.2e})")
    return kernel, ins, got, err


def _row(times: dict, err: float, flops: int) -> dict:
    """Our time ("ours" in `times`) and the fastest baseline of the rest."""
    ours = times.pop("ours")
    fastest = min(times, key=times.get) if times else None
    return {"tilewright_s": ours, "max_rel_error": err, "flops": flops,
            "torch_s": times[fastest] if fastest else None, "torch_layout": fastest}


def _time_against_torch(op: str, case: str, tensors, result) -> dict:
    kernel, ins, got, err = _checked_kernel(op, case, tensors, result)
    sides = {"ours": lambda: kernel.time(*ins, got, repeat=3).median}
    try:
        import torch

        torch.set_num_threads(tw.as_target("cpu").cores)
        sides.update({layout: (lambda fn=fn: median_seconds(fn, repeat=3))
                      for layout, fn in torch_variants(op, case, ins).items()})
    except ImportError:
        pass
    times = alternating_medians(sides)
    return _row(times, err, result.flops)


def _time_against_torch_gpu(op: str, case: str, tensors, result) -> dict:
    """The tuned kernel against PyTorch on the same GPU (TF32 off), inputs on the device on both sides."""
    kind = result.target.kind
    kernel, ins, got, err = _checked_kernel(op, case, tensors, result)
    args = device_arrays(kernel, kind, ins + [got])
    sides = {"ours": lambda: kernel_median_seconds(kernel, args)}
    if kind == "cuda":
        try:
            import torch

            if torch.cuda.is_available():
                sides.update({name: (lambda fn=fn: device_median_seconds(fn, "cuda"))
                              for name, fn in torch_gpu_variants(op, case, ins, device="cuda").items()})
        except ImportError:
            pass
    times = alternating(sides)
    return _row(times, err, result.flops)


def table(cases: list[dict], target) -> list[str]:
    lines = [f"Search methods on {target}: each from empty records, same seed, no early stop, not seeded with the "
             "default; tuning wall time is the whole tw.tune call.", "",
             "| case | method | best ms | GFLOP/s | trials to 90% of its best | tuning wall s | untuned default ms |",
             "|---|---|---|---|---|---|---|"]
    for c in cases:
        for m, r in c["methods"].items():
            gflops = c["flops"] / r["best_s"] / 1e9
            lines.append(f"| {c['op']} {c['case']} | {m} | {r['best_s'] * 1e3:.4f} | {gflops:.1f} "
                         f"| {r['trials_to_90pct']} | {r['tuning_wall_s']:.0f} | {c['default_s'] * 1e3:.4f} |")
    lines += ["", "| case | tilewright ms | library ms (variant) | speedup |", "|---|---|---|---|"]
    for c in cases:
        lib = f"{c['torch_s'] * 1e3:.4f} ({c['torch_layout']})" if c["torch_s"] else "n/a"
        speed = f"{c['torch_s'] / c['tilewright_s']:.2f}x" if c["torch_s"] else "n/a"
        lines.append(f"| {c['op']} {c['case']} | {c['tilewright_s'] * 1e3:.4f} | {lib} | {speed} |")
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="random vs P vs Q tuning curves (FlexTensor Figure 7)")
    parser.add_argument("--target", default="cpu", choices=["cpu", "cuda", "opencl"])
    parser.add_argument("--cases", default=FIGURE7_CASES, help="OP:CASE,... (default: GEMM 1024, YOLO C2, C8, C13)")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--methods", default="random,p,q")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("results"))
    args = parser.parse_args(argv)
    target = tw.Target(args.target)
    methods = args.methods.split(",")
    args.out.mkdir(parents=True, exist_ok=True)
    name = f"search_{args.target}"
    cases = []
    for spec in args.cases.split(","):
        op, case = spec.split(":")
        print(f"{op} {case} on {target}: {args.trials} trials x {methods}", flush=True)
        cases.append(tune_case(op, case, args.trials, methods, seed=args.seed, target=target))
        doc = {"target": str(target), "target_key": target.key, "date": time.strftime("%Y-%m-%d %H:%M:%S"),
               "cases": cases}
        (args.out / f"{name}.json").write_text(json.dumps(doc, indent=2, default=str))
        (args.out / f"{name}.md").write_text("\n".join(table(cases, target)) + "\n")
    plot(cases, args.out / f"{name}.png")
    print("\n".join(table(cases, target)))


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


if __name__ == "__main__":
    main()

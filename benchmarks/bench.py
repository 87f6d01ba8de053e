"""The benchmark driver: one script, one subcommand per benchmark; every run
writes JSON (all numbers) and a Markdown table to --out (default results/).

  python benchmarks/bench.py peak               # measured fp32 FMA peak of this host
  python benchmarks/bench.py gemm-hand [--size 1024] [--rows R] [--cols C]
  python benchmarks/bench.py reference          # tw.evaluate on GEMM 1024^3 and the C2D suite
  python benchmarks/bench.py search [--cases GEMM:gemm_1024,C2D:yolo_conv2] [--trials 200]
                                                # random vs P vs Q best-so-far curves, tuned vs PyTorch

Every kernel time is checked against the NumPy reference first and measured in
the same process run as the baselines (NumPy, PyTorch), same thread count."""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import time
from pathlib import Path

import tilewright as tw
from tilewright.runtime.peak import fp32_peak_gflops

ROOT = Path(__file__).resolve().parent.parent


def _lesson(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(out: Path, name: str, data: dict, table: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    data = {"host": str(tw.as_target("cpu")), "machine": platform.processor() or platform.machine(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S"), **data}
    (out / f"{name}.json").write_text(json.dumps(data, indent=2))
    (out / f"{name}.md").write_text("\n".join(table) + "\n")
    print("\n".join(table))
    print(f"\nwrote {out / name}.json and .md")


def cmd_peak(args) -> None:
    target = tw.as_target("cpu")
    all_cores = fp32_peak_gflops(target)
    one = fp32_peak_gflops(target, threads=1)
    table = ["| threads | fp32 FMA GFLOP/s |", "|---|---|", f"| 1 | {one:.1f} |",
             f"| {target.cores} | {all_cores:.1f} |"]
    _write(args.out, "peak", {"peak_gflops_1": one, "peak_gflops_all": all_cores, "cores": target.cores}, table)


def cmd_gemm_hand(args) -> None:
    r = _lesson("01_gemm_by_hand").run(args.size, args.rows, args.cols, args.repeat)
    peak = r["peak_gflops"]
    table = [f"fp32 GEMM {r['size']}^3, {r['threads']} threads, hand schedule rows={r['rows']} cols={r['cols']}; "
             f"measured fp32 peak {peak:.0f} GFLOP/s", "",
             "| implementation | ms (median) | GFLOP/s | % of peak |", "|---|---|---|---|"]
    for key in ("tilewright", "numpy", "torch"):
        if r[f"{key}_s"] is None:
            continue
        g = r[f"{key}_gflops"]
        table.append(f"| {key} | {r[f'{key}_s'] * 1e3:.2f} | {g:.1f} | {100 * g / peak:.1f}% |")
    if r["torch_s"]:
        table.append(f"\ntilewright / torch.matmul speed: {r['torch_s'] / r['tilewright_s']:.2f}x")
    _write(args.out, "gemm_hand", r, table)


def cmd_reference(args) -> None:
    """Seconds of the NumPy reference evaluator (bounded memory) on large programs."""
    import numpy as np

    from tilewright.workloads import suite
    from tilewright.workloads.builders import suite_program

    programs = {"GEMM gemm_1024": suite_program("GEMM", "gemm_1024")}
    for case in suite()["C2D"]["cases"]:
        programs[f"C2D {case['name']}"] = suite_program("C2D", case["name"])
    rng = np.random.default_rng(0)
    table = ["| program | seconds (median of 3) |", "|---|---|"]
    rows = {}
    for name, tensors in programs.items():
        inputs = {t: rng.standard_normal(t.shape).astype(t.dtype.name) for t in tensors[:-1]}
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            tw.evaluate(tensors[-1], inputs)
            times.append(time.perf_counter() - t0)
        rows[name] = sorted(times)[1]
        table.append(f"| {name} | {rows[name]:.3f} |")
    _write(args.out, "reference", {"seconds": rows}, table)


def cmd_search(args) -> None:
    from search_curves import plot, tune_case

    peak = fp32_peak_gflops(tw.as_target("cpu"))
    methods = args.methods.split(",")
    cases = []
    hand = None
    for spec in args.cases.split(","):
        op, case = spec.split(":")
        print(f"{op} {case}: {args.trials} trials x {methods}", flush=True)
        cases.append(tune_case(op, case, args.trials, methods, seed=args.seed))
        if (op, case) == ("GEMM", "gemm_1024") and hand is None:
            hand = _lesson("01_gemm_by_hand").run(1024)
        _write_search(args.out, cases, peak, hand, methods)
    if plot(cases, args.out / "search_curves.png"):
        print(f"plot: {args.out / 'search_curves.png'}")
    else:
        print("matplotlib is not installed (pip install -e '.[bench]'); no plot")


def _write_search(out: Path, cases: list, peak: float, hand, methods: list) -> None:
    table = [f"fp32 peak {peak:.0f} GFLOP/s; each method from empty records, same seed, no early stop, "
             "not seeded with the default", "",
             "| case | method | best ms | GFLOP/s | % peak | trials to 90% of its best | untuned default ms |",
             "|---|---|---|---|---|---|---|"]
    for c in cases:
        for m in methods:
            r = c["methods"][m]
            g = c["flops"] / r["best_s"] / 1e9
            table.append(f"| {c['op']} {c['case']} | {m} | {r['best_s'] * 1e3:.3f} | {g:.1f} | {100 * g / peak:.1f}% "
                         f"| {r['trials_to_90pct']} | {c['default_s'] * 1e3:.3f} |")
    table += ["", "| case | tilewright tuned ms | GFLOP/s | % peak | PyTorch ms (layout) | speedup |",
              "|---|---|---|---|---|---|"]
    for c in cases:
        g = c["flops"] / c["tilewright_s"] / 1e9
        torch_s = f"{c['torch_s'] * 1e3:.3f} ({c['torch_layout']})" if c["torch_s"] else "n/a"
        speed = f"{c['torch_s'] / c['tilewright_s']:.2f}x" if c["torch_s"] else "n/a"
        table.append(f"| {c['op']} {c['case']} | {c['tilewright_s'] * 1e3:.3f} | {g:.1f} | {100 * g / peak:.1f}% "
                     f"| {torch_s} | {speed} |")
    if hand:
        table.append(f"\nhand schedule (examples/01_gemm_by_hand.py) GEMM 1024^3: {hand['tilewright_s'] * 1e3:.3f} ms, "
                     f"{hand['tilewright_gflops']:.1f} GFLOP/s")
    _write(out, "search", {"peak_gflops": peak, "cases": cases, "hand_gemm": hand}, table)


def main() -> None:
    parser = argparse.ArgumentParser(description="tilewright benchmarks")
    parser.add_argument("--out", type=Path, default=ROOT / "results")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("peak", help="measured fp32 FMA peak").set_defaults(fn=cmd_peak)
    g = sub.add_parser("gemm-hand", help="hand-scheduled fp32 GEMM vs NumPy and PyTorch")
    g.add_argument("--size", type=int, default=1024)
    g.add_argument("--rows", type=int, default=None, help="register block rows (default: from the target)")
    g.add_argument("--cols", type=int, default=None, help="register block columns (default: from the target)")
    g.add_argument("--repeat", type=int, default=9)
    g.set_defaults(fn=cmd_gemm_hand)
    g = sub.add_parser("search", help="random vs P vs Q tuning curves on suite cases, tuned vs PyTorch")
    g.add_argument("--cases", default="GEMM:gemm_1024,C2D:yolo_conv2,C2D:yolo_conv8,C2D:yolo_conv21")
    g.add_argument("--trials", type=int, default=200)
    g.add_argument("--methods", default="random,p,q")
    g.add_argument("--seed", type=int, default=0)
    g.set_defaults(fn=cmd_search)
    sub.add_parser("reference", help="NumPy reference evaluator on large programs").set_defaults(fn=cmd_reference)
    args = parser.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()

"""GEMM in fp32, bf16 and int8 on the CPU, each tuned the same way, beside the peak of the instruction
it runs on: C[n, n] = A @ B with B a constant (packed once), bf16 x bf16 -> fp32 (tensorized with
AVX-512 BF16 `vdpbf16ps`) and u8 x s8 -> s32 (AVX-512 VNNI `vpdpbusd`), fp32 with plain FMAs. Each
side is tuned from empty records for `--trials`; every candidate is checked against the NumPy
reference before its time counts (int8 exactly). Peaks are measured by a C loop of the same
instruction on every core (runtime/peak.py). A dtype the host cannot run is reported, not run.

    python -m tilewright.bench.low_precision_gemm --size 1024 --trials 150"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from ..targets import Target
from .provenance import provenance, provenance_line, save_run

KINDS = {"float32": ("float32", "float32", None, None), "bfloat16": ("bfloat16", "bfloat16", "float32", "bf16"),
         "int8": ("uint8", "int8", "int32", "int8")}  # a dtype, b dtype, out dtype, peak kind


def run_kind(kind: str, n: int, trials: int, seed: int, target: Target) -> dict:
    import tilewright as tw
    from tilewright import ops

    from ..errors import TilewrightError
    from ..runtime.peak import dot_peak_gops, fp32_peak_gflops

    a_dt, b_dt, out_dt, peak_kind = KINDS[kind]
    try:
        peak = fp32_peak_gflops(target) if peak_kind is None else dot_peak_gops(peak_kind, target)
    except TilewrightError as e:
        return {"kind": kind, "skipped": str(e)}
    a, b = tw.placeholder((n, n), a_dt, name="A"), tw.placeholder((n, n), b_dt, name="B")
    c = ops.gemm(a, b, out_dtype=out_dt) if out_dt else ops.gemm(a, b)
    with tempfile.TemporaryDirectory(prefix="tw-bench-lpgemm-") as d:
        t0 = time.perf_counter()
        r = tw.tune([a, b, c], target=target, trials=trials, records=Path(d) / "r.db", constants=[b], seed=seed,
                    progress=False)
        wall = time.perf_counter() - t0
    source = r.build().source
    gops = 2 * n ** 3 / r.best_cost / 1e9
    row = {"kind": kind, "n": n, "ms": r.best_cost * 1e3, "gops": gops, "peak_gops": peak, "of_peak": gops / peak,
           "tuning_s": wall, "errors": r.errors,
           "instruction": next((i for i in ("dpbusd", "dpbf16", "maddubs", "madd_epi16") if i in source), "fma")}
    print(_line(row), flush=True)
    return row


def _line(r: dict) -> str:
    if "skipped" in r:
        return f"| {r['kind']} | - | - | - | - | - | not run: {r['skipped']} |"
    return (f"| {r['kind']} | {r['ms']:.3f} | {r['gops']:.0f} | {r['peak_gops']:.0f} | {100 * r['of_peak']:.0f}% | "
            f"{r['tuning_s']:.0f} | {r['instruction']} |")


HEAD = ("| dtype | ms | GOPS | peak GOPS (same instruction) | of peak | tuning s | inner instruction |\n"
        "|---|---|---|---|---|---|---|")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--trials", type=int, default=150)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/results/low_precision_gemm")
    args = ap.parse_args(argv)
    target = Target("cpu")
    doc = provenance(target.cores, target, trials=args.trials, size=args.size)
    print(HEAD, flush=True)
    doc["rows"] = [run_kind(k, args.size, args.trials, args.seed, target) for k in KINDS]
    by = {r["kind"]: r for r in doc["rows"] if "ms" in r}
    md = [f"# GEMM {args.size}^3 in fp32, bf16 and int8", "", provenance_line(doc), "", HEAD]
    md += [_line(r) for r in doc["rows"]] + [""]
    for k in ("bfloat16", "int8"):
        if k in by and "float32" in by:
            md.append(f"- {k}: {by['float32']['ms'] / by[k]['ms']:.2f}x the fp32 GEMM's speed")
    save_run(args.out, "gemm", doc, "\n".join(md) + "\n")
    print("\n".join(md[-2:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

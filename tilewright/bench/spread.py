"""A benchmark's spread over separate processes, each from scratch.

One run of a benchmark on a VM that drifts 10-30% proves little. This runs a
`tilewright bench ...` command in N separate processes, one after another
(never two at once: on a small host they would slow each other), each with a
fresh cache directory (`TILEWRIGHT_CACHE_DIR`: empty tuning records and an
empty compiled-kernel cache, so "from empty records" means it), then reports
each row's speedup as the median over the runs with its min-max, and the
geomean of every run.

Discard rule, applied to every row alike: no timing is discarded. A process
that fails is listed with its exit status and its rows count as missing in
that run; a row missing from a run (its model or case failed there) has its
median taken over the runs that have it, and the table says over how many.

    python -m tilewright.bench.spread --processes 3 --out results/spread_models -- \\
        bench models --models resnet18 --trials 120
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..stats import median
from .provenance import provenance, provenance_line
from .report import geomean


def run_processes(command: list[str], processes: int, out: Path, fresh_cache: bool = True) -> list[dict]:
    """Run `tilewright <command> --out <out>/run<i>` `processes` times in a row; one dict per run:
    its directory, exit status, seconds and the cache directory it used."""
    runs = []
    for i in range(processes):
        run_dir = out / f"run{i}"
        run_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        cache = None
        if fresh_cache:
            cache = tempfile.mkdtemp(prefix=f"tw_spread_cache{i}_")
            env["TILEWRIGHT_CACHE_DIR"] = cache
        start = time.perf_counter()
        with open(run_dir / "log.txt", "w") as log:
            done = subprocess.run([sys.executable, "-m", "tilewright.cli", *command, "--out", str(run_dir)],
                                  env=env, stdout=log, stderr=subprocess.STDOUT)
        runs.append({"dir": str(run_dir), "returncode": done.returncode, "seconds": time.perf_counter() - start,
                     "cache_dir": cache or "the user's"})
        print(f"run {i}: exit {done.returncode} in {runs[-1]['seconds']:.0f} s ({run_dir / 'log.txt'})", flush=True)
    return runs


def speedups(run_dir: Path) -> dict[str, float | None]:
    """{row: speedup} from every result JSON of one run: whole models ("models": model, speedup) and
    suite cases ("cases": op, case, speedup, or the PyTorch-over-ours ratio where no speedup is stored)."""
    out: dict[str, float | None] = {}
    for path in sorted(run_dir.glob("*.json")):
        doc = json.loads(path.read_text())
        for row in doc.get("models", []):
            out[row["model"]] = row.get("speedup")
        for row in doc.get("cases", []):
            ratio = row.get("speedup")
            if ratio is None and row.get("torch_s") and row.get("tilewright_s"):
                ratio = row["torch_s"] / row["tilewright_s"]
            out[f"{row['op']}:{row['case']}"] = ratio
    return out


def summarize(per_run: list[dict[str, float | None]]) -> dict:
    """Per row: median, min, max and how many runs had it; per run: the geomean of its rows."""
    names = list(dict.fromkeys(n for run in per_run for n in run))
    rows = {}
    for n in names:
        vals = [run[n] for run in per_run if run.get(n)]
        if vals:
            rows[n] = {"median": median(vals), "min": min(vals), "max": max(vals), "runs": len(vals),
                       "values": vals}
        else:
            rows[n] = {"median": None, "min": None, "max": None, "runs": 0, "values": []}
    means = [geomean([v for v in run.values() if v]) for run in per_run]
    means = [g for g in means if g]
    summary = {"median": median(means), "min": min(means), "max": max(means)} if means else None
    return {"rows": rows, "geomean_per_run": means, "geomean": summary}


def table(result: dict, processes: int) -> list[str]:
    lines = ["| row | median speedup | min | max | runs |", "|---|---|---|---|---|"]
    for name, r in result["rows"].items():
        if r["median"] is None:
            lines.append(f"| {name} | n/a | | | 0/{processes} |")
        else:
            lines.append(f"| {name} | {r['median']:.2f}x | {r['min']:.2f}x | {r['max']:.2f}x | "
                         f"{r['runs']}/{processes} |")
    g = result["geomean"]
    if g:
        lines += ["", f"Geomean: median **{g['median']:.2f}x** over {len(result['geomean_per_run'])} runs "
                      f"(range {g['min']:.2f}x-{g['max']:.2f}x)."]
    return lines


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = []
    if "--" in argv:
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1:]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--out", required=True, help="directory: run<i>/ per process, spread.json and spread.md")
    ap.add_argument("--warm-cache", action="store_true",
                    help="reuse the user's cache (records and compiled kernels) instead of a fresh one per run")
    args = ap.parse_args(argv)
    if not command or command[0] != "bench":
        ap.error("give the benchmark after --, e.g. -- bench models --models resnet18 --trials 120")
    if "--out" in command:
        ap.error("the runs' --out is set by this driver; leave it out of the command")
    out = Path(args.out)
    runs = run_processes(command, args.processes, out, fresh_cache=not args.warm_cache)
    per_run = [speedups(Path(r["dir"])) if r["returncode"] == 0 else {} for r in runs]
    result = summarize(per_run)
    threads = next((int(command[i + 1]) for i, a in enumerate(command[:-1]) if a == "--threads"), None)
    doc = {"provenance": provenance(threads or len(os.sched_getaffinity(0))), "command": command,
           "processes": args.processes, "fresh_cache": not args.warm_cache, "runs": runs, **result}
    (out / "spread.json").write_text(json.dumps(doc, indent=2))
    head = [f"`tilewright {' '.join(command)}` in {args.processes} separate processes, one after another, "
            + ("each from an empty cache (no records, no compiled kernels). " if not args.warm_cache
               else "sharing the user's cache. ")
            + "Speedup: the benchmark's own ratio (ours against its fastest baseline); median and min-max over the "
            "runs; no timing discarded, a failed run listed below.", "", provenance_line(doc["provenance"]), ""]
    failed = [f"- {r['dir']}: exit {r['returncode']}" for r in runs if r["returncode"] != 0]
    text = head + table(result, args.processes) + (["", "### failed runs", "", *failed] if failed else [])
    (out / "spread.md").write_text("\n".join(text) + "\n")
    print("\n".join(text))
    return 0 if not failed else 1


if __name__ == "__main__":
    raise SystemExit(main())


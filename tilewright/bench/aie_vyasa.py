"""Vyasa's evaluation on the AI-Engine-like target (simulated: our cycle model, not AMD's simulator):
each workload tuned against the cycle model, its best kernel run through the emulated intrinsics
and compared bit for bit with the te reference, MACs/cycle beside the paper's geomeans, and the
ablation (the tuned space with the reuse graph, lazy stores or column fusion switched off).

    python -m tilewright.bench.aie_vyasa --trials 60 --out benchmarks/results/aie"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np

from .. import tune
from ..errors import TilewrightError
from ..reference import evaluate
from ..targets import Target
from ..workloads.vyasa import CONV3D, TABLE_VI, TABLE_VII, random_inputs
from .provenance import provenance, provenance_line, save_run
from .report import geomean

PAPER = {("VI", 32): 7.67, ("VI", 16): 25.92, ("VII", 32): 7.67, ("VII", 16): 22.53, ("3D", 32): 7.55,
         ("3D", 16): 21.60, ("CONV2D", 32): 7.6, ("CONV2D", 16): 23.3}
SETS = {"VI": "Table VI (CV filters)", "VII": "Table VII (DL layers)", "3D": "CONV3D",
        "CONV2D": "CONV2D (VI + VII; the paper's 36 are both precisions)"}
ABLATIONS = (("reuse graph", {"reuse_graph": False}), ("lazy stores", {"lazy_stores": False}),
             ("column fusion", {"fuse_columns": False}))


def run_workload(w, bits: int, trials: int, target, ablate: bool) -> dict:
    inp, wgt, out = w.build(bits)
    row = {"workload": w.name, "table": w.table, "bits": bits, "macs": None}
    t0 = time.perf_counter()
    try:
        res = tune([inp, wgt, out], target=target, trials=trials, records=None)
    except TilewrightError as exc:
        return {**row, "error": str(exc).splitlines()[0][:200]}
    kernel = res.build()
    a, b, got = random_inputs([inp, wgt, out])
    kernel(a, b, got)
    ref = evaluate([out], {inp: a, wgt: b})
    ref = ref[0] if isinstance(ref, (list, tuple)) else ref
    stats = kernel.stats()
    counted = kernel.counters["vector_macs"] == stats["vector_macs"] * kernel.report.inner_trips * kernel.report.entries
    row.update(macs=kernel.report.macs, exact=bool(np.array_equal(got, ref)), counts_match=bool(counted),
               schedule=stats["schedule"], macs_per_cycle=stats["macs_per_cycle"], cycles=stats["cycles"],
               ii=stats["ii"], code_bytes=stats["code_bytes"], pipelined=stats["pipelined"],
               default_speedup=res.default_cycles / res.cycles if math.isfinite(res.default_cycles) else None,
               points=len(res.history), seconds=round(time.perf_counter() - t0, 1))
    if ablate:
        for label, passes in ABLATIONS:
            try:
                r = tune([inp, wgt, out], target=target, trials=trials, records=None, passes=passes)
                row[f"without {label}"] = kernel.report.macs / r.cycles
            except TilewrightError:
                row[f"without {label}"] = None
    return row


def markdown(doc: dict) -> str:
    lines = [f"# Vyasa workloads on the AIE-like target (cycle model: simulated), {doc['trials']} trials each", "",
             provenance_line(doc["provenance"]), "",
             "The host only runs the emulated kernels; every output is compared bit for bit with the te "
             "reference; MACs/cycle are the cycle model's.", ""]
    abl = [f"without {label}" for label, _ in ABLATIONS] if doc["ablation"] else []
    lines.append("| workload | bits | exact | MACs/cycle | schedule | II | code B | vs default |"
                 + "".join(f" {a} |" for a in abl))
    lines.append("|---|---|---|---|---|---|---|---|" + "---|" * len(abl))
    for r in doc["rows"]:
        if "error" in r:
            lines.append(f"| {r['workload']} | {r['bits']} | - | - | {r['error']} | | | |" + " |" * len(abl))
            continue
        vs = f"{r['default_speedup']:.2f}x" if r["default_speedup"] else "invalid"
        ii = r["ii"] if r["pipelined"] else f"{r['ii']} (unpipelined)"
        lines.append(f"| {r['workload']} | {r['bits']} | {'yes' if r['exact'] else 'NO'} | {r['macs_per_cycle']:.2f} "
                     f"| {r['schedule']} | {ii} | {r['code_bytes']} | {vs} |"
                     + "".join(f" {r[a]:.2f} |" if r.get(a) else " - |" for a in abl))
    lines += ["", "| set | bits | workloads | geomean MACs/cycle | paper |", "|---|---|---|---|---|"]
    for (table, bits), (g, n) in doc["geomeans"].items():
        lines.append(f"| {SETS[table]} | {bits} | {n} | {g:.2f} | {PAPER.get((table, bits), '-')} |")
    if doc.get("ablation_geomeans"):
        lines += ["", "Ablation: the same search with one pass switched off (geomean MACs/cycle, and the loss).", "",
                  "| set | bits | full | " + " | ".join(f"without {a}" for a, _ in ABLATIONS) + " |",
                  "|---|---|---|" + "---|" * len(ABLATIONS)]
        for (table, bits), g in doc["ablation_geomeans"].items():
            full = doc["geomeans"][(table, bits)][0]
            lines.append(f"| {SETS[table]} | {bits} | {full:.2f} | "
                         + " | ".join(f"{g[a]:.2f} ({full / g[a]:.2f}x)" for a, _ in ABLATIONS) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=60)
    ap.add_argument("--bits", type=int, nargs="+", default=[32, 16])
    ap.add_argument("--sets", nargs="+", default=["VI", "VII", "3D"], help="VI, VII (Tables VI, VII), 3D (CONV3D)")
    ap.add_argument("--ablation", action="store_true", help="also tune with each Vyasa pass switched off")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    target = Target("aie")
    work = [w for w in TABLE_VI + TABLE_VII + CONV3D if w.table in args.sets]
    rows = []
    for bits in args.bits:
        for w in work:
            rows.append(run_workload(w, bits, args.trials, target, args.ablation))
            r = rows[-1]
            print(f"{w.name:10s} {bits}-bit " + (f"{r['macs_per_cycle']:.2f} MACs/cycle exact={r['exact']} "
                                                 f"({r['schedule']})" if "error" not in r else r["error"]),
                  flush=True)
    geo, abl = {}, {}
    sets = args.sets + (["CONV2D"] if {"VI", "VII"} <= set(args.sets) else [])
    for table in sets:
        for bits in args.bits:
            sel = [r for r in rows if r["bits"] == bits and "error" not in r
                   and (r["table"] == table or table == "CONV2D" and r["table"] in ("VI", "VII"))]
            if sel:
                geo[(table, bits)] = (geomean([r["macs_per_cycle"] for r in sel]), len(sel))
                if args.ablation:
                    abl[(table, bits)] = {label: geomean([r[f"without {label}"] for r in sel])
                                          for label, _ in ABLATIONS}
    doc = {"trials": args.trials, "ablation": args.ablation, "provenance": provenance(threads=1), "rows": rows,
           "geomeans": geo, "ablation_geomeans": abl}
    if args.out:
        stem = f"vyasa_{'_'.join(args.sets)}_trials{args.trials}" + ("_ablation" if args.ablation else "")
        flat = {**doc, "geomeans": {f"{t}-{b}": g for (t, b), g in geo.items()},
                "ablation_geomeans": {f"{t}-{b}": g for (t, b), g in abl.items()}}
        save_run(args.out, stem, flat, markdown(doc))
    print(markdown(doc))
    return doc


if __name__ == "__main__":
    main()

"""Compile the untuned GPU default of every FlexTensor suite case for a CUDA preset (no GPU needed)
and read ptxas's report (kept with each binary: build/nvcc.py): registers per thread, spills, shared
memory, beside what the space's model estimated. A default that does not lower or compile, or that
spills, is listed.

Run: python benchmarks/gpu_defaults_check.py [--arch sm_90] [--ops C2D,GEMM] [--out results]"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import tilewright as tw
from tilewright.backends import backend_for
from tilewright.space.gpu import estimated_registers
from tilewright.space.gpu_model import describe
from tilewright.workloads import suite
from tilewright.workloads.builders import suite_program


def ptxas_report(binary) -> dict:
    """Registers, spill bytes and shared bytes of the module's kernels, from ptxas's report kept with the binary."""
    res = binary.resources
    return {"registers": max((r["registers"] for r in res), default=0), "spill_bytes": binary.spills}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--ops", help="comma-separated suite operators (default: all)")
    p.add_argument("--out", default="results")
    args = p.parse_args(argv)
    target = tw.Target(f"cuda -arch={args.arch}")
    backend = backend_for(target)
    data = suite()
    ops = args.ops.split(",") if args.ops else list(data)
    rows = []
    for op in ops:
        for case in data[op]["cases"]:
            name = case["name"]
            started = time.perf_counter()
            row = {"op": op, "case": name}
            try:
                tensors = suite_program(op, name)
                space, plan = backend.space(tensors[-1:], target)
                point = backend.default_point(space, plan)
                func = backend.lower(backend.apply(tensors[-1:], plan, point), tensors, "kernel", target)
                artefact = backend.compile(backend.render(func, target), target)
                row.update(point=str(point), model=describe(plan, point),
                           estimated_registers=estimated_registers(plan, point), **ptxas_report(artefact.binary),
                           smem=max(k.shared_bytes for k in artefact.module.kernels))
            except Exception as exc:  # noqa: BLE001 - every failure is a row of the report
                row["error"] = f"{type(exc).__name__}: {exc}"[:400]
            row["seconds"] = round(time.perf_counter() - started, 1)
            rows.append(row)
            print(f"{op} {name}: " + (row.get("error") or f"{row['registers']} registers (estimated "
                  f"{row['estimated_registers']}), {row['spill_bytes']} B spilled, {row['smem']} B shared"),
                  flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"gpu_defaults_{args.arch}.json").write_text(json.dumps(rows, indent=1))
    lines = [f"# GPU defaults compiled for {args.arch} ({target.gpu.compiler_version}, ptxas -v; no GPU run)", "",
             "| op | case | registers (estimated) | spilled B | shared B | model |", "|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['op']} | {r['case']} | FAILED: {r['error'][:120]} | | | |")
        else:
            lines.append(f"| {r['op']} | {r['case']} | {r['registers']} ({r['estimated_registers']}) | "
                         f"{r['spill_bytes']} | {r['smem']} | {r['model']} |")
    failed = sum("error" in r for r in rows)
    spilled = sum(r.get("spill_bytes", 0) > 0 for r in rows)
    lines += ["", f"{len(rows)} cases: {failed} failed, {spilled} spill."]
    (out / f"gpu_defaults_{args.arch}.md").write_text("\n".join(lines) + "\n")
    print(lines[-1])
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

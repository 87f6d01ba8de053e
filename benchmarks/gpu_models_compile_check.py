"""Compile every kernel of the in-tree models for a CUDA preset (no GPU needed), as
`tw.compile(model, target="cuda -arch=...", dtype=...)` builds them, and read ptxas's report
(registers and spills per kernel, kept with each binary). A model that does not build, or a
kernel that spills, is listed.

Run: python benchmarks/gpu_models_compile_check.py [--arch sm_90] [--models resnet50,...]
                                                   [--dtypes float32,float16] [--out results]"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import tilewright as tw
from tilewright.build.nvcc import compile_cuda
from tilewright.models import MODELS


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--models", default=",".join(sorted(MODELS)))
    p.add_argument("--dtypes", default="float32,float16")
    p.add_argument("--out", default="results")
    args = p.parse_args(argv)
    lines = [f"# In-tree models' kernels compiled for {args.arch} (full sizes, batch 1; ptxas -v; no GPU run)", "",
             "| model | dtype | kernels | max registers | kernels spilling | spilled B | build s |",
             "|---|---|---|---|---|---|---|"]
    failed = spilled = 0
    for name in args.models.split(","):
        spec = MODELS[name]
        for dtype in args.dtypes.split(","):
            started = time.perf_counter()
            try:
                with tempfile.TemporaryDirectory() as d:
                    module = tw.compile(spec.build(), (spec.example_input(),), target=f"cuda -arch={args.arch}",
                                        dtype=dtype, records=str(Path(d) / "r.db"), progress=False)
                binaries = [compile_cuda(k.module.source, args.arch) for k in module.kernels.values()]
            except Exception as exc:  # noqa: BLE001 - a failing model is a row
                failed += 1
                lines.append(f"| {name} | {dtype} | FAILED: {type(exc).__name__}: {str(exc)[:200]} | | | | |")
                print(lines[-1], flush=True)
                continue
            res = [r for b in binaries for r in b.resources]
            spills = [r for r in res if r["spill_stores"] + r["spill_loads"]]
            spilled += len(spills)
            lines.append(f"| {name} | {dtype} | {len(res)} | {max(r['registers'] for r in res)} | {len(spills)} | "
                         f"{sum(b.spills for b in binaries)} | {time.perf_counter() - started:.0f} |")
            print(lines[-1], flush=True)
    lines += ["", f"{failed} models failed to build; {spilled} kernels spill."]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"gpu_models_{args.arch}.md").write_text("\n".join(lines) + "\n")
    print(lines[-1])
    return 1 if failed or spilled else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Run points of the GPU space on a device and check each against the NumPy reference: for the
smallest case of every FlexTensor suite operator, the model's two best points and random ones.
The first thing to run on a newly lent GPU (before timing anything), and on PoCL in CI's absence.

Run: python benchmarks/gpu_space_sweep.py [--target opencl|cuda] [--random 3] [--seed 0]"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np

import tilewright as tw
from tilewright.analysis.graph import analyze
from tilewright.backends import backend_for
from tilewright.space.gpu_model import heuristic_points
from tilewright.workloads import suite
from tilewright.workloads.builders import suite_program


def smallest_case(op: str, cases: list[dict]):
    """(case name, program) of the operator's case with the fewest flops."""
    programs = [(c["name"], suite_program(op, c["name"])) for c in cases]
    return min(programs, key=lambda np_: analyze(np_[1][-1:]).flops)


def inputs(tensors, rng) -> list[np.ndarray]:
    """Random inputs; integer inputs (shift positions) small and non-negative."""
    return [rng.integers(0, 9, t.shape).astype(t.dtype.name) if t.dtype.name.startswith("int")
            else rng.standard_normal(t.shape).astype(t.dtype.name) for t in tensors[:-1]]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", default="opencl")
    p.add_argument("--random", type=int, default=3, help="random points per operator besides the model's two best")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    target = tw.Target(args.target)
    backend = backend_for(target)
    pick = random.Random(args.seed)
    failures = 0
    for op, entry in suite().items():
        started = time.perf_counter()
        name, tensors = smallest_case(op, entry["cases"])
        space, plan = backend.space(tensors[-1:], target)
        points = heuristic_points(space, plan, k=2) + [space.sample(pick) for _ in range(args.random)]
        ins = inputs(tensors, np.random.default_rng(args.seed))
        want = tw.evaluate(tensors[-1], dict(zip(tensors[:-1], ins)))
        bad = []
        for point in points:
            try:
                kernel = backend.build(backend.apply(tensors[-1:], plan, point), tensors, target)
                out = np.full(tensors[-1].shape, np.nan, tensors[-1].dtype.name)
                kernel(*ins, out)
                err = float(np.abs(out - want).max() / max(1e-30, float(np.abs(want).max())))
                if not err < 1e-4:
                    bad.append(f"{point}: max relative error {err:.2e}")
            except Exception as exc:  # noqa: BLE001 - every failure is reported, the sweep goes on
                bad.append(f"{point}: {type(exc).__name__}: {str(exc)[:300]}")
        failures += len(bad)
        status = "all correct" if not bad else "\n    " + "\n    ".join(bad)
        print(f"{op} {name}: {len(points)} points, {time.perf_counter() - started:.1f} s, {status}", flush=True)
    print(f"{failures} failing points on {target}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())

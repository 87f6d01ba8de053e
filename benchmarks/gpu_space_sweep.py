"""Run points of the GPU space on a device and check each against the NumPy reference: for the
smallest case of every FlexTensor suite operator, the model's two best points and random ones, each
measured in the isolated runner (a kernel that faults takes only its own process down).
The first thing to run on a newly lent GPU (before timing anything), and on PoCL in CI's absence.

Run: python benchmarks/gpu_space_sweep.py [--target opencl|cuda] [--random 3] [--seed 0]"""

from __future__ import annotations

import argparse
import random
import time

import tilewright as tw
from tilewright.analysis.graph import analyze
from tilewright.backends import backend_for
from tilewright.runtime.measure import Measurer
from tilewright.space.gpu_model import heuristic_points
from tilewright.workloads import suite
from tilewright.workloads.builders import suite_program


def smallest_case(op: str, cases: list[dict]):
    """(case name, program) of the operator's case with the fewest flops."""
    programs = [(c["name"], suite_program(op, c["name"])) for c in cases]
    return min(programs, key=lambda np_: analyze(np_[1][-1:]).flops)


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
        schedules = []
        for point in points:
            try:
                schedules.append(backend.apply(tensors[-1:], plan, point))
            except Exception as exc:  # noqa: BLE001 - the measurer reports it as the point's failure
                schedules.append(exc)
        # each point in the isolated runner: a faulting kernel (sticky on CUDA) takes only its own process down
        with Measurer(tensors[-1:], tensors, target, backend, timeout=60, seed=args.seed) as m:
            results = m.measure(schedules)
        bad = [f"{p}: {r.error_kind.value}: {r.error_msg[:300]}" for p, r in zip(points, results) if not r.ok]
        times = ", ".join(f"{r.cost * 1e6:.1f}" if r.ok else r.error_kind.value for r in results)
        failures += len(bad)
        status = "all correct" if not bad else "\n    " + "\n    ".join(bad)
        print(f"{op} {name}: {len(points)} points ({times} us; the first is the default), "
              f"{time.perf_counter() - started:.1f} s, {status}", flush=True)
    print(f"{failures} failing points on {target}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The untuned CPU default before and after a change to the default model, beside
PyTorch (best of NCHW and channels_last), timed in one process in alternating rounds.

The "before" default point is chosen by another checkout of tilewright (e.g. a
`git worktree add /tmp/before <base-commit>`), run in a subprocess; both points are
then built by this checkout, so the comparison is of the default model's choice
(the same lowering and code generator build both).

    .venv/bin/python benchmarks/default_ab.py --before /tmp/before \\
        --cases conv1,l1_3x3,l2_3x3_s2,l2_reduce2,l3_reduce,l1_expand --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

import tilewright as tw
from tilewright.analysis.graph import analyze
from tilewright.bench.timing import median_seconds, settle
from tilewright.space import apply_cpu, cpu_space, default_point
from tilewright.space.space import Point
from tilewright.stats import median
from tilewright.workloads.baselines import torch_variants
from tilewright.workloads.builders import suite_program

_POINTS = """
import json, sys
import tilewright as tw
from tilewright.space import cpu_space, default_point
from tilewright.workloads.builders import suite_program
target = tw.as_target("cpu")
out = {}
for spec in sys.argv[1:]:
    op, case = spec.split(":")
    space, plan = cpu_space(suite_program(op, case)[-1:], target)
    out[spec] = default_point(space, plan).to_json()
print(json.dumps(out))
"""


def before_points(checkout: str, specs: list[str]) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(checkout))
    done = subprocess.run([sys.executable, "-c", _POINTS, *specs], env=env, capture_output=True, text=True,
                          cwd=checkout, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _kernel(tensors, space, plan, point, target, threads):
    kernel = tw.build(apply_cpu(tensors[-1:], plan, space.check(point)), tensors, target=target)
    kernel.set_num_threads(threads)
    return kernel


def _thread_seconds(fn, min_s: float = 0.1) -> float:
    """CPU seconds of this thread per call of `fn` (calls repeated for `min_s`): with one
    thread the work runs on the calling thread, and its CPU time leaves out the time other
    processes on a shared machine hold the core (wall time counts it)."""
    fn()
    start = time.thread_time()
    calls = 0
    while time.thread_time() - start < min_s:
        fn()
        calls += 1
    return (time.thread_time() - start) / calls


def run(specs: list[str], checkout: str, rounds: int, threads: int, cpu_time: bool = False) -> list[dict]:
    target = tw.as_target("cpu")
    old = before_points(checkout, specs)
    rows = []
    for spec in specs:
        op, case = spec.split(":")
        tensors = suite_program(op, case)
        space, plan = cpu_space(tensors[-1:], target)
        points = {"before": space.upgrade(Point.from_json(old[spec])), "after": default_point(space, plan)}
        rng = np.random.default_rng(0)
        ins = [rng.standard_normal(t.shape).astype(t.dtype.name) for t in tensors[:-1]]
        want = tw.evaluate(tensors[-1], dict(zip(tensors[:-1], ins)))
        sides = {}
        for name, p in points.items():
            kernel = _kernel(tensors, space, plan, p, target, threads)
            got = np.zeros(tensors[-1].shape, tensors[-1].dtype.name)
            kernel(*ins, got)
            err = float(np.abs(got - want).max() / max(float(np.abs(want).max()), 1e-30))
            assert err <= 1e-4, f"{spec}: the {name} default disagrees with the reference ({err:.1e})"
            if cpu_time:
                sides[name] = lambda k=kernel, out=got, ins=ins: _thread_seconds(lambda: k(*ins, out))
            else:
                sides[name] = lambda k=kernel, out=got, ins=ins: k.time(*ins, out, repeat=3).median
        try:
            import torch

            torch.set_num_threads(threads)
            for layout, fn in torch_variants(op, case, ins).items():
                sides[f"torch:{layout}"] = ((lambda fn=fn: _thread_seconds(fn)) if cpu_time
                                            else (lambda fn=fn: median_seconds(fn, repeat=3)))
        except ImportError:
            pass
        samples = _alternating(sides, rounds)
        times = {k: median(v) for k, v in samples.items()}
        torch_layout = min((k for k in times if k.startswith("torch:")), key=times.get, default=None)
        row = {"case": spec, "gflop": analyze(tensors[-1:]).flops / 1e9, "before_ms": times["before"] * 1e3,
               "after_ms": times["after"] * 1e3, "before": old[spec], "after": points["after"].to_json()}
        if torch_layout:
            row.update(torch_ms=times[torch_layout] * 1e3, torch_layout=torch_layout.split(":", 1)[1])
        row["min_ms"] = {k: min(v) * 1e3 for k, v in samples.items()}  # the least disturbed round of each
        rows.append(row)
        print(_line(row), flush=True)
    return rows


def _alternating(sides: dict, rounds: int) -> dict[str, list[float]]:
    """Seconds of each side per round, the sides alternating, each after the others'
    thread pools have gone idle (as bench.timing.alternating_medians, keeping every round)."""
    samples: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, timed in sides.items():
            settle()
            samples[name].append(timed())
    return samples


def _line(r: dict) -> str:
    torch = f"{r['torch_ms']:8.3f} ms ({r['torch_layout']})" if "torch_ms" in r else "      -"
    ratio = f"{r['torch_ms'] / r['after_ms']:5.2f}x" if "torch_ms" in r else "    -"
    least = r["min_ms"]
    return (f"{r['case']:<14} {r['before_ms']:8.3f} ms {r['after_ms']:8.3f} ms  after/before "
            f"{r['before_ms'] / r['after_ms']:5.2f}x (min {least['before'] / least['after']:4.2f}x)  "
            f"torch {torch}  torch/after {ratio}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="another tilewright checkout choosing the before defaults")
    ap.add_argument("--cases", default="conv1,l1_3x3,l2_3x3_s2,l2_reduce2,l3_reduce,l1_expand",
                    help="suite cases, OP:case or (ResNet-50) case, comma-separated")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=tw.as_target("cpu").cores)
    ap.add_argument("--cpu-time", action="store_true",
                    help="with --threads 1: time each side as this thread's CPU time (a shared machine's other "
                         "processes then do not count), not wall time")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)
    specs = [c if ":" in c else f"R50:{c}" for c in args.cases.split(",")]
    clock = "thread CPU time" if args.cpu_time else "wall time"
    print(f"host: {tw.as_target('cpu')}; {args.threads} threads, {args.rounds} alternating rounds, medians, {clock}")
    if args.cpu_time and args.threads != 1:
        ap.error("--cpu-time measures the calling thread: use it with --threads 1")
    rows = run(specs, args.before, args.rounds, args.threads, args.cpu_time)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

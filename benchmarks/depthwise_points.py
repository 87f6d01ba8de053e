"""Depthwise convolutions (FlexTensor DEP set) at hand-picked points of the CPU
space, before and after strided vector loads (codegen/strided.py), beside
PyTorch (best of NCHW and channels_last), all timed in one process in
alternating rounds (bench/timing.py).

"before" builds the same point with vector loads limited to unit stride, as the
vectorizer was before strided loads (a stride-2 load then leaves an `omp simd`
loop); "after" is the current code; "+strip" also turns on the vectorizer's
strip-mining at the host's vector width (lower/vectorize.py, opt-in: the root
padding copy's 112-column interior is then vectors instead of a scalar loop).
Variants that produce the same C are timed once. Points: the untuned default, and "rows":
vectorized along the output width w, the M output channels that share one
input channel (o // M) as register rows, so one input vector feeds M FMAs.

    .venv/bin/python benchmarks/depthwise_points.py [--cases mbv2_dw_1,mbv2_dw_4] [--rounds 5]
                                                    [--threads 1] [--json out.json]

Each side's number per round is the fastest of REPEAT timings (each averaging
calls over >= 50 ms), the reported one the median over rounds: on a host shared
with other work, a 2-thread OpenMP kernel whose second thread is preempted waits
a scheduler slice (a 0.3 ms kernel read 16 ms), so --threads defaults to 1 for
both tilewright and PyTorch."""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

import tilewright as tw
from tilewright.bench.timing import alternating_medians, settle
from tilewright.lower import passes
from tilewright.lower import vectorize as vectorize_pass
from tilewright.space.cpu import apply_cpu, cpu_space
from tilewright.space.cpu_default import default_point
from tilewright.space.space import Point
from tilewright.targets.cpu import host_target
from tilewright.workloads import suite_case
from tilewright.workloads.baselines import torch_variants
from tilewright.workloads.builders import suite_program

REPEAT = 5  # timings per side per round (kernel.time repeats; a median of them)


def _point(space, plan, **changes) -> Point:
    p = default_point(space, plan)
    for name, value in changes.items():
        p = p.replace(name.replace("__", "."), value)
    if not space.valid(p):
        raise SystemExit(f"hand-picked point is not in the space: {p}")
    return p


def rows_points(case: str, space, plan) -> dict[str, Point]:
    """The hand-picked points: w vectorized (vec_axis 0 is the last spatial axis), the
    channel multiplier's M output channels as register rows, padding copied at root."""
    c = suite_case("DEP", case)
    m, ow, oh = c["channel_multiplier"], c["out_width"], c["out_height"]
    lanes = plan.lanes
    wt = ow + (-ow % lanes)  # rounded up to whole vectors (a guarded tail otherwise)
    # every knob but the splits and fuse set here (knobs the space lacks are ignored), not taken from the default
    common = dict(vec_axis=0, unroll=1, pack__w=0, place__depthwise_conv2d_pad=2, reduce_inner=0, reduce_order=0,
                  reduce_block=0, rolled=0, outer_order=0)
    points = {"rows": _point(space, plan, split__o=(c["out_channels"] // m, 1, m), split__h=(oh, 1, 1),
                             split__w=(wt // lanes, 1, lanes), fuse=2, **common)}
    if oh % 2 == 0:  # two output rows: each weight broadcast feeds two vectors
        points["rows_h2"] = _point(space, plan, split__o=(c["out_channels"] // m, 1, m),
                                   split__h=(oh // 2, 1, 2), split__w=(wt // lanes, 1, lanes), fuse=2, **common)
    return points


# how each variant lowers: vector loads of unit stride only (as before strided loads) or of stride <= 4
# (current), each without and with the vectorizer's opt-in strip-mining at the host's vector width
VARIANTS = {"before": (1, False), "after": (4, False), "before+strip": (1, True), "after+strip": (4, True)}


def build(tensors, space, plan, point: Point, variant: str):
    max_stride, strip = VARIANTS[variant]
    saved = vectorize_pass.MAX_LOAD_STRIDE, passes.vectorize
    vector_bytes = host_target().vector_bytes if strip else None
    vectorize_pass.MAX_LOAD_STRIDE = max_stride
    passes.vectorize = lambda body, *_, **__: vectorize_pass.vectorize(body, vector_bytes=vector_bytes)
    try:
        s = apply_cpu(tensors[-1:], plan, point)
        return tw.build(s, tensors, target=host_target())
    finally:
        vectorize_pass.MAX_LOAD_STRIDE, passes.vectorize = saved


def min_seconds(fn, repeat: int = REPEAT, min_s: float = 0.05) -> float:
    """Fastest of `repeat` timings of `fn`, each averaging calls over `min_s`."""
    settle()
    fn()
    start = time.perf_counter()
    fn()
    number = max(1, int(min_s / max(time.perf_counter() - start, 1e-7)))
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def run_case(case: str, rounds: int, threads: int) -> dict:
    tensors = suite_program("DEP", case)
    target = host_target()
    space, plan = cpu_space(tensors[-1:], target)
    rng = np.random.default_rng(0)
    ins = [rng.standard_normal(t.shape).astype(t.dtype.name) for t in tensors[:-1]]
    want = tw.evaluate(tensors[-1], dict(zip(tensors[:-1], ins)))
    points = {"default": default_point(space, plan), **rows_points(case, space, plan)}
    kernels, same = {}, {}
    for name, p in points.items():
        for variant in VARIANTS:
            k = build(tensors, space, plan, p, variant)
            twin = next((n for n, other in kernels.items() if other.source == k.source), None)
            if twin is None:
                kernels[f"{name}:{variant}"] = k
            else:  # the same C as a variant already built: timed once, under its first name
                same[f"{name}:{variant}"] = twin
    out = np.zeros(tensors[-1].shape, tensors[-1].dtype.name)
    for name, k in kernels.items():
        out[...] = np.nan
        k(*ins, out)
        np.testing.assert_allclose(out, want, rtol=2e-4, atol=2e-4, err_msg=f"{case} {name}")
        k.set_num_threads(threads)
    sides = {name: (lambda k=k: k.time(*ins, out, repeat=REPEAT).min) for name, k in kernels.items()}
    try:
        import torch

        torch.set_num_threads(threads)
        for layout, fn in torch_variants("DEP", case, ins).items():
            sides[f"torch:{layout}"] = lambda fn=fn: min_seconds(fn)
    except ImportError:
        pass
    times = alternating_medians(sides, rounds=rounds)
    torch_best = min((t for n, t in times.items() if n.startswith("torch:")), default=None)
    row = {"case": case, "threads": threads, "stride": suite_case("DEP", case)["stride"],
           "ms": {n: t * 1e3 for n, t in times.items()},
           "points": {n: str(p) for n, p in points.items()}, "same_code_as": same,
           "vector_loads_strided": {n: "tw_load_s" in k.source for n, k in kernels.items()},
           "omp_simd_loops": {n: k.source.count("omp simd") for n, k in kernels.items()}}
    if torch_best:
        row["torch_best_ms"] = torch_best * 1e3
        row["speedup_vs_torch"] = {n: torch_best / t for n, t in times.items() if not n.startswith("torch:")}
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="mbv2_dw_1,mbv2_dw_4")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    print(f"host: {host_target()}; {args.threads} thread(s), {args.rounds} alternating rounds")
    rows = []
    for case in args.cases.split(","):
        row = run_case(case, args.rounds, args.threads)
        rows.append(row)
        print(f"\n{case} (stride {row['stride']}); torch best {row.get('torch_best_ms', float('nan')):.3f} ms")
        for name, ms in sorted(row["ms"].items(), key=lambda kv: kv[1]):
            ratio = row.get("speedup_vs_torch", {}).get(name)
            extra = f"  x{ratio:.2f} vs torch" if ratio else ""
            print(f"  {name:18s} {ms:8.3f} ms  omp simd loops {row['omp_simd_loops'].get(name, '-')!s:>3}{extra}")
        for name, twin in row["same_code_as"].items():
            print(f"  {name:18s} same C as {twin}")
        for name, p in row["points"].items():
            print(f"  {name}: {p}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

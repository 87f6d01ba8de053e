"""int8 convolutions tensorized two ways, tuned with the same trials and timed in one harness:

- matched: the program written on the layouts the x86 dot products read (NCHW4c input, weights
  [K/8][C/4][R][S][8][4], NCHW8c output; the graph's layout pass writes a model's int8 convs so),
  with its layout conversions (NCHW -> NCHW4c in, NCHW8c -> NCHW out) as two more kernels;
- embedded: the plain NCHW / OIHW program; the CPU space asks the constraint-programming embedder
  (tw.intrin.embed) where the intrinsic goes and rewrites the layouts itself (space/cpu_embed.py):
  one kernel whose activation pack and output unpack run inside it.

The weights, multipliers and biases are constants on both sides: the matched program takes them
packed, the embedded kernel has its weight pack moved out and run once (lower/hoist_packs.py, as a
compiled model does). Intermediates are allocated once on both sides: the matched side's NCHW4c and
NCHW8c arrays, the embedded kernel's temporaries passed in (lower/workspace.py, as a compiled model
runs it; allocated in every call they cost 0.35 ms on a 56 x 56 layer, mostly page faults). Both
outputs are checked bit-exact against the reference evaluator before any time counts. Activations
on 7 bits (the quantization of bench/int8_conv.py) on both sides.

    python -m tilewright.bench.int8_embedded --trials 32 --out benchmarks/results/int8_embedded_zen3
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import numpy as np

from .int8_conv import SUITE, WINOGRAD_LAYERS, _layers, ours_int8, quantized_case
from .provenance import provenance, provenance_line, save_run
from .timing import alternating_medians, median_seconds


def deployed_kernel(args, constants, arrays, target, trials: int, seed: int = 0):
    """`args` (inputs..., output) tuned `trials` (0: the default point) and built as a compiled model
    runs it: the packs of `constants` moved out and run once, temporaries allocated once and passed
    in. (run, the output of one call checked bit-exact against the reference, the lowered function,
    the schedule.)"""
    import tilewright as tw
    from tilewright.backends import backend_for
    from tilewright.codegen.c import STACK_LIMIT
    from tilewright.graph.const_packs import PackFill
    from tilewright.lower.hoist_packs import hoist_constant_packs
    from tilewright.lower.workspace import lift_workspace
    from tilewright.search.best import best_schedule

    if trials:
        tw.tune(args, target=target, trials=trials, seed=seed, progress=False, constants=constants)
    backend = backend_for(target)
    s = best_schedule(backend, args, target, constants)
    func = backend.lower(s, args, "kernel", target)
    hoisted = hoist_constant_packs(func, {t.name for t in constants})
    y = np.zeros(args[-1].shape, args[-1].dtype.numpy)
    packed = [] if hoisted is None else PackFill(backend.build_func(hoisted.pack, target), hoisted).run(arrays + [y])
    # its temporaries passed in, allocated once: how a compiled model runs a kernel (graph/const_packs.py)
    lowered, lifted = lift_workspace(func if hoisted is None else hoisted.kernel, STACK_LIMIT)
    kernel = backend.build_func(lowered, target)
    workspace = [np.zeros(b.shape, b.dtype.numpy) for b in lifted]

    def run():
        kernel(*arrays, y, *packed, *workspace)
        return y

    run()
    want = tw.evaluate(args[-1], dict(zip(args[:-1], arrays)))
    if not np.array_equal(y, want):
        raise AssertionError(f"{args[-1].name}: the kernel differs from the reference on {int((y != want).sum())} "
                             f"elements")
    return run, y.copy(), func, s


def embedded_int8(case: dict, q: dict, target, trials: int, seed: int = 0):
    """The NCHW program, tuned (or its default), built with its constant packs moved out; (run, the
    output of one call, the intrinsic's spelling, the embedder's layout choice)."""
    import tilewright as tw

    C, K, R, H, W = case["in_channels"], case["out_channels"], case["kernel"], case["height"], case["width"]
    X = tw.placeholder((1, C, H, W), "uint8", name="X", value_range=q["range"])
    Wt = tw.placeholder((K, C, R, R), "int8", name="W")
    mult = tw.placeholder((K,), "float32", name="mult")
    off = tw.placeholder((K,), "int32", name="bias")
    acc = tw.ops.conv2d(X, Wt, None, stride=case["stride"], padding=case["padding"], out_dtype="int32")
    Y = tw.ops.requantize(acc, mult, off, zero_point=0, channel_axes=(1,))
    m = (q["sx"] * q["sw"] / q["sy"]).astype(np.float32)
    o = np.rint(q["b"] / (q["sx"] * q["sw"])).astype(np.int32)
    run, y, func, s = deployed_kernel([X, Wt, mult, off, Y], [Wt, mult, off], [q["xq"], q["wq"], m, o], target,
                                      trials, seed)
    spelled = [n for n in ("x86.dot_8x4_u7s8", "x86.dot_8x4_u8s8", "x86.dot_16x4") if n in str(func)]
    return run, y, spelled[0] if spelled else "plain", s.rewrite


def run_layer(case: dict, target, trials: int, rounds: int) -> dict:
    from tilewright.records import Records

    q = quantized_case(case)
    with tempfile.TemporaryDirectory() as tmp:
        with Records(Path(tmp) / "matched.sqlite"):
            matched, y_m, kind_m, _ = ours_int8(case, q, target, trials)
        with Records(Path(tmp) / "embedded.sqlite"):
            embedded, y_e, kind_e, choice = embedded_int8(case, q, target, trials)
    if not np.array_equal(y_m, y_e):
        raise AssertionError(f"{case['name']}: the matched and embedded kernels disagree")
    times = alternating_medians({"matched": lambda: median_seconds(matched),
                                 "embedded": lambda: median_seconds(embedded)}, rounds=rounds)
    return {"name": case["name"], "seconds": times, "matched_over_embedded": times["matched"] / times["embedded"],
            "spelling": {"matched": kind_m, "embedded": kind_e}, "layout_choice": choice}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default="direct", help="direct (ResNet-50's 20 non-Winograd layers), r50 (all "
                                                       "24), or a comma list of names")
    ap.add_argument("--trials", type=int, default=16, help="tuning trials per layer and side (0: defaults)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    import os

    import tilewright as tw

    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    target = tw.Target("cpu")
    names = None if args.layers in ("direct", "r50") else set(args.layers.split(","))
    cases = [c for c in _layers(SUITE, names) if args.layers != "direct" or c["name"] not in WINOGRAD_LAYERS]
    doc = {"provenance": provenance(args.threads, target, trials=args.trials), "cases": []}
    print(provenance_line(doc["provenance"]))
    for case in cases:
        start = time.time()
        row = run_layer(case, target, args.trials, args.rounds)
        doc["cases"].append(row)
        print(f"{case['name']:12s} matched {row['seconds']['matched'] * 1e3:7.3f} ms  embedded "
              f"{row['seconds']['embedded'] * 1e3:7.3f} ms  matched/embedded {row['matched_over_embedded']:.2f}x  "
              f"({row['spelling']['embedded']}, {time.time() - start:.0f} s)", flush=True)
    ratios = [r["matched_over_embedded"] for r in doc["cases"]]
    doc["geomean_matched_over_embedded"] = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None
    if ratios:
        print(f"geomean matched/embedded: {doc['geomean_matched_over_embedded']:.3f}x (> 1: embedded faster); "
              f"min {min(ratios):.2f}x")
    if args.out:
        save_run(args.out, "int8_embedded", doc, markdown(doc))
    return 0


def markdown(doc: dict) -> str:
    lines = [provenance_line(doc["provenance"]), "",
             "| layer | matched (ms) | embedded (ms) | matched / embedded | embedded spelling |",
             "|---|---|---|---|---|"]
    for r in doc["cases"]:
        ms = {k: f"{v * 1e3:.3f}" for k, v in r["seconds"].items()}
        lines.append(f"| {r['name']} | {ms['matched']} | {ms['embedded']} | {r['matched_over_embedded']:.2f} | "
                     f"{r['spelling']['embedded']} |")
    if doc.get("geomean_matched_over_embedded"):
        lines.append(f"| geomean | | | {doc['geomean_matched_over_embedded']:.2f} | |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())

"""Vyasa's column fusion on x86 for convolutions: FlexTensor's YOLO C2D layers in int16 (int16 x
int16 summed in int32, NCHW in and out, batch 1), tuned twice with the same trials:

- plain (`"cpu -intrinsics=off"`): tilewright's 1-D vectorization, each int16 widened to int32 and
  multiplied lane by lane;
- fused: the same NCHW / OIHW program on the target as it is; the constraint-programming embedder
  puts input-channel pairs in vpmaddwd's two columns and output channels in its 8 lanes
  (`x86.dot_8x2_s16`) and rewrites the layouts inside the kernel, so the activation pack and the
  output unpack are timed with it.

The weights are constants on both sides (packed once, as a compiled model does); temporaries are
allocated once on both. Both outputs are checked bit-exact against the reference evaluator (the
sums wrap in int32 as the te's do) before any time counts; median of alternating rounds.

    python -m tilewright.bench.int16_conv --trials 40 --isa avx2 --out benchmarks/results/vyasa_native
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from .int8_embedded import deployed_kernel
from .provenance import provenance, provenance_line, save_run
from .report import geomean
from .timing import alternating_medians, median_seconds

SPELLINGS = ("_mm256_madd_epi16", "_mm256_dpwssd_epi32", "_mm512_madd_epi16", "_mm512_dpwssd_epi32")


def yolo_layers(names=None) -> list[dict]:
    from ..workloads import suite

    cases = [c for c in suite()["C2D"]["cases"] if c["name"].startswith("yolo")]
    return [c for c in cases if names is None or c["name"] in names]


def int16_conv(case: dict):
    """[X, W, Y]: the layer's NCHW int16 convolution accumulating in int32."""
    import tilewright as tw

    C, K, R, H, W = case["in_channels"], case["out_channels"], case["kernel"], case["height"], case["width"]
    X = tw.placeholder((1, C, H, W), "int16", name="X")
    Wt = tw.placeholder((K, C, R, R), "int16", name="W")
    Y = tw.ops.conv2d(X, Wt, None, stride=case["stride"], padding=case["padding"], out_dtype="int32")
    return [X, Wt, Y]


def run_layer(case: dict, target, trials: int, rounds: int, seed: int = 0) -> dict:
    from ..records import Records

    args = int16_conv(case)
    rng = np.random.default_rng(seed)
    arrays = [rng.integers(-32768, 32768, size=t.shape, dtype=np.int16) for t in args[:2]]
    sides, used = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for side, t in (("plain", target.with_intrinsics(False)), ("fused", target)):
            with Records(Path(tmp) / f"{side}.sqlite"):
                run, y, func, _ = deployed_kernel(args, [args[1]], arrays, t, trials, seed)
            sides[side] = (run, y)
            source = str(func)
            used[side] = next((n for n in ("x86.dot_8x2_s16",) if n in source), "plain")
    if not np.array_equal(sides["plain"][1], sides["fused"][1]):
        raise AssertionError(f"{case['name']}: the plain and fused kernels disagree")
    times = alternating_medians({k: (lambda r=r: median_seconds(r)) for k, (r, _) in sides.items()}, rounds=rounds)
    macs = case["out_channels"] * case["in_channels"] * case["kernel"] ** 2 * case["out_height"] * case["out_width"]
    return {"name": case["name"], "macs": macs, "seconds": times, "speedup": times["plain"] / times["fused"],
            "fused_uses": used["fused"], "plain_uses": used["plain"]}


def markdown(doc: dict) -> str:
    lines = [f"# Vyasa's column fusion on x86 for int16 convolutions: YOLO C2D layers, {doc['threads']} threads, "
             f"ISA {doc['isa']}", "", provenance_line(doc["provenance"]), "",
             f"Both sides tilewright, tuned {doc['trials']} trials each into fresh records: plain = 1-D "
             "vectorization (`-intrinsics=off`), fused = channel pairs in vpmaddwd's columns (the embedder's "
             "layout rewrite, its activation pack and output unpack inside the timed kernel). Weights packed once "
             "on both sides; both bit-exact against the reference; medians of alternating rounds.", "",
             "| layer | GMACs | plain (ms) | fused (ms) | speedup | fused kernel |", "|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        s = r["seconds"]
        lines.append(f"| {r['name']} | {r['macs'] / 1e9:.3f} | {s['plain'] * 1e3:.3f} | {s['fused'] * 1e3:.3f} | "
                     f"{r['speedup']:.2f}x | {r['fused_uses']} |")
    lines += ["", f"Geomean speedup: **{doc['geomean']:.2f}x** (goal 1.5x on an AVX2 host)."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default="all", help="all (the 15 YOLO C2D layers) or a comma list of names")
    ap.add_argument("--trials", type=int, default=40, help="tuning trials per layer and side (0: defaults)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--isa", default="native", help="restrict both sides' host target (avx2: an AVX2-class run)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    from ..targets import Target

    target = Target("cpu").with_isa(args.isa).with_cores(args.threads)
    if "avx2" not in target.features:
        raise SystemExit("this benchmark needs an AVX2 host")
    layers = yolo_layers(None if args.layers == "all" else set(args.layers.split(",")))
    doc = {"trials": args.trials, "threads": args.threads, "isa": args.isa, "rows": [],
           "provenance": provenance(args.threads, target, trials=args.trials)}
    print(provenance_line(doc["provenance"]), flush=True)
    for case in layers:
        start = time.time()
        r = run_layer(case, target, args.trials, args.rounds)
        doc["rows"].append(r)
        print(f"{r['name']:12s} plain {r['seconds']['plain'] * 1e3:8.3f} ms  fused {r['seconds']['fused'] * 1e3:8.3f} "
              f"ms  x{r['speedup']:.2f}  ({r['fused_uses']}, {time.time() - start:.0f} s)", flush=True)
    doc["geomean"] = geomean([r["speedup"] for r in doc["rows"]])
    if args.out:
        save_run(args.out, f"yolo_int16_{args.isa}_trials{args.trials}", doc, markdown(doc))
    print(markdown(doc))
    return doc


if __name__ == "__main__":
    main()

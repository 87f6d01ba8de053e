"""ResNet-18's offloaded convolutions on the VTA-like accelerator, in the simulator
(every number here is simulated: cycles of our timing model, not hardware).

Per layer, with the int8 output TVM's VTA benchmarks check (clip((conv >> 8) +
bias, 0, 127)): bit-exactness against the reference evaluator; TVM's tutorial
tiling with 1 and with 2 virtual threads (latency hiding); the tiling found by
the FlexTensor search against the cycle model. The layer list is TVM's
(apache/tvm vta/tests/python/integration/test_benchmark_topi_conv2d.py, whose
later revisions name them C2, C4-C12 after dropping a 1x1 layer that ResNet-18
does not have); the multiplicities are how often each shape occurs in
ResNet-18, for the whole network's offloaded total.

    python -m tilewright.bench.vta_resnet --trials 60 --out DIR"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from ..errors import ScheduleError
from ..lower.vta_conv import TVM_EPILOGUE, ConvShape, Epilogue, VTATiling, blocked_shapes, check_fits, lower_conv2d
from ..runtime.vta_kernel import VTAKernel
from ..runtime.vta_sim import VTASimError
from ..search.vta_tune import default_tiling, tune_conv
from ..space.vta import tvm_tutorial_tiling
from ..targets.vta import VTAConfig

# (name, H=W, in, out, kernel, pad, stride, occurrences in ResNet-18)
RESNET18_CONVS = (
    ("C2", 56, 64, 64, 3, 1, 1, 4), ("C4", 56, 64, 128, 3, 1, 2, 1), ("C5", 56, 64, 128, 1, 0, 2, 1),
    ("C6", 28, 128, 128, 3, 1, 1, 3), ("C7", 28, 128, 256, 3, 1, 2, 1), ("C8", 28, 128, 256, 1, 0, 2, 1),
    ("C9", 14, 256, 256, 3, 1, 1, 3), ("C10", 14, 256, 512, 3, 1, 2, 1), ("C11", 14, 256, 512, 1, 0, 2, 1),
    ("C12", 7, 512, 512, 3, 1, 1, 3),
)


def resnet18_shapes(batch: int = 1) -> list[tuple[ConvShape, int]]:
    return [(ConvShape(batch, c, h, h, o, k, k, p, p, s, s, name), n) for name, h, c, o, k, p, s, n in RESNET18_CONVS]


def random_inputs(shape: ConvShape, cfg: VTAConfig, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    sh = blocked_shapes(shape, cfg)
    return {"data": rng.integers(-128, 128, sh["data"], dtype=np.int8),
            "kernel": rng.integers(-128, 128, sh["kernel"], dtype=np.int8),
            "bias": rng.integers(-64, 64, sh["bias"], dtype=np.int32)}


def reference(shape: ConvShape, inputs: dict, epilogue: Epilogue) -> np.ndarray:
    """The te reference evaluator on the same operator (ops/blocked_conv.py)."""
    from ..ops.blocked_conv import conv2d_blocked, shift_bias_clip
    from ..reference import evaluate
    from ..te import placeholder

    d = placeholder(inputs["data"].shape, "int8", "data")
    w = placeholder(inputs["kernel"].shape, "int8", "kernel")
    b = placeholder(inputs["bias"].shape, "int32", "bias") if epilogue.bias else None
    out = shift_bias_clip(conv2d_blocked(d, w, (shape.stride_h, shape.stride_w), (shape.pad_h, shape.pad_w)), b,
                          epilogue.shift, epilogue.lo, epilogue.hi, round_half_up=epilogue.round)
    feed = {d: inputs["data"], w: inputs["kernel"]}
    if b is not None:
        feed[b] = inputs["bias"]
    return evaluate([out], feed)[0]


def run_checked(shape: ConvShape, cfg: VTAConfig, tiling: VTATiling, inputs: dict, expect: np.ndarray,
                epilogue: Epilogue = TVM_EPILOGUE) -> dict:
    """Lower, simulate (dependence-checked timing mode) and compare bit for bit."""
    kernel = VTAKernel(lower_conv2d(shape, cfg, tiling, epilogue))
    t0 = time.perf_counter()
    got = kernel(inputs["data"], inputs["kernel"], inputs["bias"] if epilogue.bias else None)
    wall = time.perf_counter() - t0
    exact = bool(np.array_equal(got, expect))
    s = kernel.stats()
    return {"tiling": str(tiling), "cycles": s.cycles, "gemm_utilization": s.gemm_utilization, "exact": exact,
            "mismatches": int(np.count_nonzero(got != expect)), "instructions": len(kernel.program.insns),
            "uops": len(kernel.program.uops), "sim_seconds": wall}


def run_layer(shape: ConvShape, cfg: VTAConfig, trials: int, seed: int = 0) -> dict:
    epilogue = Epilogue()
    inputs = random_inputs(shape, cfg, seed)
    expect = reference(shape, inputs, epilogue)
    tut = tvm_tutorial_tiling(shape, cfg)
    try:
        check_fits(shape, cfg, tut, epilogue)
    except ScheduleError:  # another configuration (a smaller accumulator, batch 8): halved until it fits
        tut = default_tiling(shape, cfg, epilogue)
    row = {"layer": shape.name, "shape": str(shape), "macs": shape.macs}
    # latency hiding: the tutorial's tiles, 1 virtual thread against 2 (along whichever axis divides)
    one = replace(tut, vthreads=1)
    two = tut if tut.vthreads == 2 else _two_threads(shape, cfg, one)
    row["vt1"] = run_checked(shape, cfg, one, inputs, expect, epilogue)
    row["vt2"] = run_checked(shape, cfg, two, inputs, expect, epilogue) if two else None
    row["tutorial"] = row["vt2"] if tut.vthreads == 2 else row["vt1"]
    if trials:
        t0 = time.perf_counter()
        best, _ = tune_conv(shape, cfg, trials=trials, seed=seed, epilogue=epilogue)
        row["tune_seconds"] = time.perf_counter() - t0
        row["tuned"] = run_checked(shape, cfg, best, inputs, expect, epilogue)
    return row


def _two_threads(shape: ConvShape, cfg: VTAConfig, one: VTATiling):
    for axis in ("co", "h"):
        t = replace(one, vthreads=2, vthread_axis=axis)
        try:
            check_fits(shape, cfg, t)
            return t
        except ScheduleError:  # an axis that does not divide, or a buffer over: try the other
            continue
    return None


def table(rows: list[dict], counts: dict[str, int]) -> str:
    head = ("| layer | tutorial tiles | cycles 1 vthread | cycles 2 vthreads | change | GEMM util 1 -> 2 | "
            "tuned cycles | tuned util | tuned vs tutorial | exact |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        v1, v2, tut, tu = r["vt1"], r["vt2"], r["tutorial"], r.get("tuned")
        change = f"{100 * (v2['cycles'] / v1['cycles'] - 1):+.1f}%" if v2 else "n/a"
        util = f"{v1['gemm_utilization']:.0%}" + (f" -> {v2['gemm_utilization']:.0%}" if v2 else "")
        exact = all(x["exact"] for x in (v1, v2, tu) if x)
        tuned = (f"{tu['cycles']:,} | {tu['gemm_utilization']:.0%} | {tut['cycles'] / tu['cycles']:.2f}x" if tu
                 else "- | - | -")
        two = f"{v2['cycles']:,}" if v2 else "-"
        lines.append(f"| {r['layer']} | {tut['tiling']} | {v1['cycles']:,} | {two} | "
                     f"{change} | {util} | {tuned} | {'yes' if exact else 'NO'} |")
    total = lambda key: sum(counts[r["layer"]] * r[key]["cycles"] for r in rows if r.get(key))  # noqa: E731
    lines.append("")
    tuned = f", tuned {total('tuned'):,} cycles" if any(r.get("tuned") for r in rows) else ""
    lines.append(f"ResNet-18 offloaded convs (each shape x its occurrences): tutorial tiling {total('tutorial'):,} "
                 f"cycles{tuned} (simulated).")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=60, help="search trials per layer against the cycle model")
    ap.add_argument("--block", default="1x16x16", help="GEMM block BATCHxINxOUT")
    ap.add_argument("--layers", default="", help="comma-separated layer names (default: all)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    b, i, o = (int(x) for x in args.block.split("x"))
    cfg = VTAConfig(batch=b, block_in=i, block_out=o)
    want = set(filter(None, args.layers.split(",")))
    shapes = [(s, n) for s, n in resnet18_shapes(cfg.batch) if not want or s.name in want]
    counts = {s.name: n for s, n in shapes}
    rows = []
    for shape, _ in shapes:
        try:
            rows.append(run_layer(shape, cfg, args.trials))
        except VTASimError as exc:
            raise SystemExit(f"{shape.name}: simulator error: {exc}") from exc
        print(f"{shape.name}: done", flush=True)
    text = f"VTA-like accelerator, simulated: {cfg.describe()}\n\n" + table(rows, counts)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "vta_resnet18.json").write_text(json.dumps({"config": asdict(cfg), "rows": rows}, indent=1))
        (args.out / "vta_resnet18.md").write_text(text + "\n")


if __name__ == "__main__":
    main()

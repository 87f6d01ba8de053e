"""What embeddings buy on the VTA-like accelerator (Rieber et al. section 6):
the paper's low-channel and dilated layers on the 1 x 16 x 16 GEMM (Table 3)
and its ten layers on an 8 x 8 x 8 GEMM with batch 1 (Table 5), against
TVM's template, which pads batch and channels to the block and blows
dilation up into zero taps.

Per layer and side: the operator's time is **simulated** (cycles of our
timing model at the configured clock, every output checked bit for bit
against a NumPy reference); the layout transforms around it (input packing
and output unpacking) are **measured** on this host, one thread, one
harness: on both sides compiled te kernels of the layout's index maps
(search/vta_host_transforms.py), tuned with the same `--transform-trials`;
the reference takes NumPy's pad-and-transpose instead where that is faster.
Constant weights are packed once ahead of time on both sides and not timed.
The best of the top-k realizable embeddings by combined time is reported,
as the paper auto-tunes its top five and keeps the best; `--trials N` tunes
every candidate's tiling (and the reference's) with the same search against
the cycle model.

    python -m tilewright.bench.vta_embed_payoff [--table 3|5] [--trials N] [--transform-trials N]
        [--tilings-from JSON] [--out DIR]"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import time
from pathlib import Path

import numpy as np

from ..intrin import EmbeddingError, embed, vta_gemm
from ..search.vta_embed import (
    ConvProblem,
    Mapping,
    pad_and_block,
    realize,
    reference_embedding,
    run_realization,
    unblock,
)
from ..search.vta_host_transforms import HostTransforms
from ..search.vta_tune import tune_conv
from ..targets import host_target
from ..targets.vta import VTAConfig
from .embed_sweep import PAPER_EXTRA
from .provenance import provenance, provenance_line
from .report import geomean
from .timing import median_seconds

# Table 3 (1x16x16): DeepBench's twelve low-channel layers and two dilated ones (N, C, H, W, K, R, S, pad, stride,
# dilation), in the paper's order
TABLE3 = [
    ConvProblem(1, 1, 161, 700, 32, 5, 20, 0, 0, 2, 2, name="L0"),
    ConvProblem(2, 1, 161, 700, 32, 5, 20, 0, 0, 2, 2, name="L1"),
    ConvProblem(4, 1, 161, 700, 32, 5, 20, 0, 0, 2, 2, name="L2"),
    ConvProblem(1, 1, 48, 480, 16, 3, 3, 1, 1, 1, 1, name="L3"),
    ConvProblem(1, 3, 108, 108, 64, 3, 3, 1, 1, 2, 2, name="L4"),
    ConvProblem(1, 3, 224, 224, 64, 3, 3, 1, 1, 1, 1, name="L5"),
    ConvProblem(2, 3, 224, 224, 64, 3, 3, 1, 1, 1, 1, name="L6"),
    ConvProblem(1, 3, 224, 224, 64, 7, 7, 3, 3, 2, 2, name="L7"),
    ConvProblem(2, 3, 224, 224, 64, 7, 7, 3, 3, 2, 2, name="L8"),
    ConvProblem(**{**PAPER_EXTRA.__dict__, "name": "L9"}),
    ConvProblem(1, 1, 161, 700, 64, 5, 5, 1, 1, 2, 2, name="L10"),
    ConvProblem(2, 1, 161, 700, 64, 5, 5, 1, 1, 2, 2, name="L11"),
    ConvProblem(1, 304, 18, 18, 448, 3, 3, 0, 0, 1, 1, 2, 2, name="L12 (d=2)"),
    ConvProblem(1, 208, 72, 72, 304, 3, 3, 0, 0, 1, 1, 4, 4, name="L13 (d=4)"),
]
# Table 5 (8x8x8, batch 1)
TABLE5 = [
    ConvProblem(1, 32, 8, 8, 64, 3, 3, 1, 1, name="T0"), ConvProblem(1, 32, 16, 16, 64, 3, 3, 1, 1, name="T1"),
    ConvProblem(1, 32, 32, 32, 64, 3, 3, 1, 1, name="T2"), ConvProblem(1, 256, 8, 8, 256, 3, 3, 1, 1, name="T3"),
    ConvProblem(1, 128, 16, 16, 256, 3, 3, 1, 1, name="T4"),
    ConvProblem(1, 128, 32, 32, 256, 3, 3, 1, 1, name="T5"),
    ConvProblem(1, 72, 56, 56, 96, 1, 1, 0, 0, name="T6"), ConvProblem(1, 256, 7, 7, 512, 1, 1, 0, 0, name="T7"),
    ConvProblem(1, 8, 224, 224, 24, 3, 3, 1, 1, 2, 2, name="T8"),
    ConvProblem(1, 72, 56, 56, 96, 3, 3, 1, 1, 2, 2, name="T9"),
]


def random_conv_inputs(p: ConvProblem, seed: int = 0):
    """int8 data and weights, int32 bias, seeded."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (p.batch, p.in_channels, p.height, p.width), dtype=np.int8)
    w = rng.integers(-128, 128, (p.out_channels, p.in_channels, p.kernel_h, p.kernel_w), dtype=np.int8)
    return x, w, rng.integers(-64, 64, p.out_channels).astype(np.int32)


def transform_builder(trials: int, records):
    """How the bench builds a host transform: tuned for `trials` (records kept in `records`), or the default."""
    if not trials:
        return None
    from ..api import tune

    return lambda args, name, target: tune(args, target=target, trials=trials, records=records,
                                           progress=False).build()


def parse_tiling(text: str):
    """The VTATiling that `str(tiling)` printed (a previous run's JSON)."""
    from ..lower.vta_conv import VTATiling

    pattern = r"tile h(\d+) w(\d+) co(\d+) ci(\d+)(?: vthreads=(\d+)\((\w+)\))?(?: order ([\w-]+))?"
    m = re.fullmatch(pattern, text)
    if m is None:
        raise ValueError(f"not a printed VTA tiling: {text!r}")
    h, w, co, ci, vt, axis, order = m.groups()
    return VTATiling(int(h), int(w), int(co), int(ci), int(vt or 1), axis or "co",
                     order.replace("-", " ") if order else "h co w")


def recorded_tilings(path: Path) -> dict:
    """{(layer, realization): tiling} of every side of a previous run's JSON."""
    out = {}
    for row in json.loads(path.read_text())["layers"]:
        for side in [row["reference"]] + row["candidates"]:
            out[(row["layer"], side["realization"])] = parse_tiling(side["tiling"])
    return out


def _side(r, x, w, bias, want, trials: int, reference: bool, builder, known=None) -> dict:
    tiling, tune_s = (known or {}).get((r.problem.name, r.describe())), 0.0
    if trials and tiling is None:
        t0 = time.perf_counter()
        tiling, _ = tune_conv(r.shape, r.cfg, trials=trials)
        tune_s = time.perf_counter() - t0
    got, kernel = run_realization(r, x, w, bias, tiling)
    if not np.array_equal(got, want):
        raise AssertionError(f"{r.describe()}: {np.count_nonzero(got != want)} wrong outputs")
    lay, p, cfg = r.layout, r.problem, r.cfg
    blocked_out = np.random.default_rng(1).integers(-128, 128, kernel.shapes["out"], dtype=np.int8)
    t0 = time.perf_counter()
    host = HostTransforms(lay.geometry, dataclasses.replace(host_target(), cores=1), builder)
    packed, unpacked = np.empty(lay.geometry.data_shape, np.int8), np.empty(want.shape, np.int8)
    np.testing.assert_array_equal(host.pack(x, packed), lay.gather_data(x))
    np.testing.assert_array_equal(host.unpack(blocked_out, unpacked), lay.gather_out(blocked_out))
    transform_tune_s = time.perf_counter() - t0
    seconds = median_seconds(lambda: host.pack(x, packed), repeat=5) + \
        median_seconds(lambda: host.unpack(blocked_out, unpacked), repeat=5)
    how = f"compiled ({host.pack_passes}-pass pack)"
    if reference:  # TVM's pad + transpose, and its unblock + crop, in NumPy
        np.testing.assert_array_equal(pad_and_block(x, cfg, r.shape.in_channels), packed)
        template = median_seconds(lambda: pad_and_block(x, cfg, r.shape.in_channels), repeat=5) + \
            median_seconds(lambda: unblock(blocked_out, p.batch, p.out_channels), repeat=5)
        if template < seconds:
            seconds, how = template, "NumPy pad-and-transpose"
    s = kernel.stats()
    sh = kernel.shapes
    return {"realization": r.describe(), "tiling": str(kernel.program.tiling), "cycles": s.cycles,
            "gemm_utilization": s.gemm_utilization, "op_seconds": kernel.time().seconds,
            "transform_seconds": seconds, "transforms": how, "transform_tune_seconds": transform_tune_s,
            "data_bytes": math.prod(sh["data"]), "weight_bytes": math.prod(sh["kernel"]),
            "out_bytes": math.prod(sh["out"]), "weights_fit": math.prod(sh["kernel"]) <= cfg.wgt_buffer_bytes,
            "load_bytes_wgt": s.load_bytes_wgt, "tune_seconds": tune_s, "exact": True}


def run_layer(p: ConvProblem, cfg: VTAConfig, top_k: int, trials: int, builder=None, known=None) -> dict:
    x, w, bias = random_conv_inputs(p)
    ref_r = realize(p, reference_embedding(p, cfg), cfg)
    want = numpy_conv(p, x, w, bias)
    ref = _side(ref_r, x, w, bias, want, trials, reference=True, builder=builder, known=known)
    t0 = time.perf_counter()
    cands = embed(p.te(), vta_gemm(cfg), top_k=top_k)
    solve_s = time.perf_counter() - t0
    sides, skipped = [], []
    for e in cands:
        try:
            r = realize(p, Mapping.of(e), cfg)
        except EmbeddingError as exc:
            skipped.append(f"#{e.rank}: {exc}")
            continue
        side = _side(r, x, w, bias, want, trials, reference=False, builder=builder, known=known)
        sides.append({**side, "embedding": str(e).splitlines()[0]})
    best = min(sides, key=lambda s: s["op_seconds"] + s["transform_seconds"])
    combined = lambda s: s["op_seconds"] + s["transform_seconds"]  # noqa: E731
    return {"layer": p.name, "shape": str(p), "reference": ref, "best": best, "candidates": sides,
            "skipped": skipped, "embed_seconds": solve_s,
            "op_speedup": ref["op_seconds"] / best["op_seconds"],
            "transform_speedup": ref["transform_seconds"] / best["transform_seconds"],
            "combined_speedup": combined(ref) / combined(best),
            "data_ratio": best["data_bytes"] / ref["data_bytes"],
            "weight_ratio": best["weight_bytes"] / ref["weight_bytes"],
            "total_ratio": (best["data_bytes"] + best["weight_bytes"] + best["out_bytes"])
            / (ref["data_bytes"] + ref["weight_bytes"] + ref["out_bytes"])}


def numpy_conv(p: ConvProblem, x, w, bias) -> np.ndarray:
    """clip((conv >> 8) + bias, 0, 127), int64 NumPy, one strided view per kernel tap."""
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (p.pad_h, p.pad_h), (p.pad_w, p.pad_w)))
    acc = np.zeros((p.batch, p.out_channels, p.out_h, p.out_w), np.int64)
    for kh in range(p.kernel_h):
        for kw in range(p.kernel_w):
            r0, c0 = kh * p.dilation_h, kw * p.dilation_w
            patch = xp[:, :, r0:r0 + p.stride_h * (p.out_h - 1) + 1:p.stride_h,
                       c0:c0 + p.stride_w * (p.out_w - 1) + 1:p.stride_w]
            acc += np.einsum("nchw,oc->nohw", patch, w[:, :, kh, kw].astype(np.int64), optimize=True)
    return np.clip((acc >> 8) + bias[None, :, None, None], 0, 127).astype(np.int8)


def markdown(doc: dict) -> str:
    order = {p.name: k for k, p in enumerate(TABLE3 + TABLE5)}
    rows, s = sorted(doc["layers"], key=lambda r: order.get(r["layer"], 0)), doc["summary"]
    tiling = f"tuned, {doc['trials']} trials per side" if doc["trials"] else "untuned default"
    if doc.get("tilings_from"):
        tiling += f" (the tilings that run tuned, from `{Path(doc['tilings_from']).name}`, re-simulated)"
    host = (f"tuned, {doc['transform_trials']} trials per kernel" if doc.get("transform_trials")
            else "the CPU space's default point")
    lines = [f"# Embeddings against TVM's padding template, VTA {doc['block']} (Rieber et al. Table "
             f"{doc['table']})", "", provenance_line(doc["provenance"]), "",
             "Operator times are **simulated** (our cycle model at the configured clock, every output bit-exact "
             "against NumPy); transforms (input packing + output unpacking; weights packed once ahead on both "
             "sides) are **measured** on this host. Speed-ups are reference / embedding; memory ratios embedding "
             f"/ reference. Tiling: {tiling}. Host transforms: compiled, {host}, 1 thread.",
             "", "| layer | shape | best embedding | op | transforms | combined | data | weights | total | "
                 "weights fit (ref -> ours) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b, ref = r["best"], r["reference"]
        lines.append(f"| {r['layer']} | {r['shape'].split(': ', 1)[-1]} | "
                     f"{b['embedding'].split(': ', 1)[1].split('  MACs')[0]} | x{r['op_speedup']:.2f} | "
                     f"x{r['transform_speedup']:.2f} | x{r['combined_speedup']:.2f} | x{r['data_ratio']:.2f} | "
                     f"x{r['weight_ratio']:.2f} | x{r['total_ratio']:.2f} | "
                     f"{'yes' if ref['weights_fit'] else 'no'} -> {'yes' if b['weights_fit'] else 'no'} |")
    partial = "" if doc.get("complete", True) else f" (partial: {len(rows)} layers measured so far)"
    lines += ["", f"Geomean{partial}: operator x{s['op']:.2f}, transforms x{s['transform']:.2f}, combined "
                  f"x{s['combined']:.2f}; data memory x{s['data']:.2f}, weights x{s['weights']:.2f}, total "
                  f"x{s['total']:.2f}.", ""]
    for r in rows:
        ref, b = r["reference"], r["best"]
        lines.append(f"- {r['layer']}: reference {ref['cycles']:,} cycles + {ref['transform_seconds'] * 1e3:.2f} ms "
                     f"({ref['realization']}); best {b['cycles']:,} cycles + {b['transform_seconds'] * 1e3:.2f} ms "
                     f"({b['realization']}); embed {r['embed_seconds']:.2f} s; transforms: reference "
                     f"{ref.get('transforms', 'NumPy')}, ours {b.get('transforms', 'NumPy gathers')}"
                     + (f"; not realizable: {'; '.join(r['skipped'])}" if r["skipped"] else ""))
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", type=int, choices=(3, 5), default=3)
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--trials", type=int, default=0, help="tiling trials per side (0: untuned default tiling)")
    ap.add_argument("--transform-trials", type=int, default=0,
                    help="tuning trials per host transform kernel, both sides (0: the CPU space's default point)")
    ap.add_argument("--tilings-from", type=Path, default=None,
                    help="a previous run's JSON: its tuned tilings are reused (and re-simulated) for the same "
                         "realizations instead of tuning them again")
    ap.add_argument("--layers", default="", help="comma-separated layer names (default: all)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    cfg = VTAConfig() if args.table == 3 else VTAConfig(batch=8, block_in=8, block_out=8)
    problems = TABLE3 if args.table == 3 else TABLE5
    if args.layers:  # in the order given
        named = {p.name.split()[0]: p for p in problems}
        problems = [named[n] for n in args.layers.split(",")]
    rows: list[dict] = []
    known = recorded_tilings(args.tilings_from) if args.tilings_from else None
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    for p in problems:
        t0 = time.perf_counter()
        records = args.out / "host_transforms.jsonl" if args.out else None
        rows.append(run_layer(p, cfg, args.top_k, args.trials, transform_builder(args.transform_trials, records),
                              known))
        r = rows[-1]
        print(f"{p.name:10s} op x{r['op_speedup']:.2f} transforms x{r['transform_speedup']:.2f} combined "
              f"x{r['combined_speedup']:.2f} data x{r['data_ratio']:.2f} ({time.perf_counter() - t0:.0f} s)",
              flush=True)
        doc = _document(args, cfg, rows, complete=len(rows) == len(problems))
        if args.out:  # after every layer: a long run stopped early keeps what it measured, marked partial
            stem = f"payoff_table{args.table}_{cfg.block}" + (f"_tuned{args.trials}" if args.trials else "") \
                + (f"_host{args.transform_trials}" if args.transform_trials else "")
            (args.out / f"{stem}.json").write_text(json.dumps(doc, indent=1))
            (args.out / f"{stem}.md").write_text(markdown(doc))
    print(markdown(doc))
    return doc


def _document(args, cfg: VTAConfig, rows: list[dict], complete: bool) -> dict:
    summary = {k: geomean([r[f] for r in rows]) for k, f in
               (("op", "op_speedup"), ("transform", "transform_speedup"), ("combined", "combined_speedup"),
                ("data", "data_ratio"), ("weights", "weight_ratio"), ("total", "total_ratio"))}
    return {"table": args.table, "block": cfg.block, "trials": args.trials, "top_k": args.top_k,
            "transform_trials": args.transform_trials,
            "tilings_from": str(args.tilings_from) if args.tilings_from else None,
            "complete": complete, "provenance": provenance(threads=1), "summary": summary, "layers": rows}


if __name__ == "__main__":
    main()

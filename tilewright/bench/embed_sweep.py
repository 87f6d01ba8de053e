"""Every DeepBench inference convolution embedded into the VTA GEMM by
`tw.intrin.embed` (Rieber et al.'s coverage and fidelity claims), and how the
solve time grows with the channel counts (their Fig. 8).

Per layer: an embedding without padding, or CP-SAT's proof that none exists
followed by a padded one; the wall time of both (model build and solve), and
CP-SAT's own time; whether the first embedding of a layer that needs no
padding maps (n, oc, ic) onto the GEMM's (batch, out, in) as TVM's template
does. Then a 3x3 convolution with in = out channels 16 .. 512.

    python -m tilewright.bench.embed_sweep [--block 8x8x8 | --intrin x86.dot_16x4_u8s8] [--out DIR]"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from ..intrin import EmbeddingError, embed, get, vta_gemm
from ..search.vta_embed import ConvProblem
from ..stats import median
from ..targets.vta import VTAConfig
from ..workloads import deepbench_convs
from .provenance import provenance, provenance_line

# The paper's 108th layer: DeepBench's device set had a unique 151 x 40 speech layer (Table 3's row 10); the
# device list copied here no longer has it, so it is added from the paper.
PAPER_EXTRA = ConvProblem(1, 1, 40, 151, 32, 5, 20, 8, 8, 2, 2, name="rieber_table3_151x40")


def deepbench_problems() -> list[ConvProblem]:
    seen, out = set(), []
    for r in deepbench_convs():
        p = ConvProblem(r["N"], r["C"], r["H"], r["W"], r["K"], r["R"], r["S"], r["pad_h"], r["pad_w"],
                        r["stride_h"], r["stride_w"], name=r["name"])
        key = (p.batch, p.in_channels, p.height, p.width, p.out_channels, p.kernel_h, p.kernel_w, p.pad_h, p.pad_w,
               p.stride_h, p.stride_w)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return [*out, PAPER_EXTRA]


def resnet50_problems() -> list[ConvProblem]:
    """ResNet-50's unique convolution layers (workloads/resnet50_conv.json)."""
    from ..workloads import suite

    return [ConvProblem(c["batch"], c["in_channels"], c["height"], c["width"], c["out_channels"], c["kernel"],
                        c["kernel"], c["padding"], c["padding"], c["stride"], c["stride"], c["dilation"],
                        c["dilation"], name=f"resnet50_{c['name']}") for c in suite()["R50"]["cases"]]


def embed_layer(p: ConvProblem, intrin, workers: int = 2) -> dict:
    """Embed `intrin` (the VTA GEMM, or an x86 dot product reading uint8 activations) into layer `p`."""
    op = p.te("uint8" if intrin.inputs[0].dtype.name == "uint8" else "int8")
    start = time.perf_counter()
    try:
        first = embed(op, intrin, pad=False, top_k=1, workers=workers)[0]
        padded, proof = False, ""
    except EmbeddingError as exc:
        proof = str(exc)
        first = embed(op, intrin, pad=True, top_k=1, workers=workers)[0]
        padded = True
    seconds = time.perf_counter() - start
    axes = first.axis_map()
    out_axis, in_axis = [a.name for a in intrin.output.op.axis][-1], intrin.output.op.reduce_axis[0].name
    hand = axes[out_axis] == ("o",) and axes[in_axis] == ("rc",) and all(
        v in ((), ("n",)) for k, v in axes.items() if k not in (out_axis, in_axis))
    return {"name": p.name, "shape": str(p), "needs_padding": padded, "infeasible_without_padding": proof,
            "seconds": seconds, "solver_seconds": first.seconds, "mapping": {k: list(v) for k, v in axes.items()},
            "tvm_mapping": hand, "macs_ratio": first.macs / first.macs_min, "embedding": str(first)}


def run_first(p: ConvProblem, cfg: VTAConfig, row: dict) -> None:
    """Realize the layer's first embedding on the accelerator, run it in the simulator on random int8 data and
    compare bit for bit with NumPy (adds 'exact' and simulated 'cycles' to `row`)."""
    import numpy as np

    from ..search.vta_embed import Mapping, realize, run_realization
    from .vta_embed_payoff import numpy_conv, random_conv_inputs

    first = embed(p.te(), vta_gemm(cfg), pad=row["needs_padding"], top_k=1)[0]
    x, w, bias = random_conv_inputs(p)
    got, kernel = run_realization(realize(p, Mapping.of(first), cfg), x, w, bias)
    row["exact"] = bool(np.array_equal(got, numpy_conv(p, x, w, bias)))
    row["cycles"] = kernel.stats().cycles


def channel_growth(intrin, workers: int = 2) -> list[dict]:
    rows = []
    dtype = "uint8" if intrin.inputs[0].dtype.name == "uint8" else "int8"
    for c in (16, 32, 64, 128, 256, 512):
        p = ConvProblem(1, c, 28, 28, c, 3, 3, 1, 1, name=f"ic=oc={c}")
        start = time.perf_counter()
        top = embed(p.te(dtype), intrin, top_k=5, workers=workers)
        rows.append({"channels": c, "seconds_top5": time.perf_counter() - start,
                     "solver_seconds_first": top[0].seconds, "first": str(top[0]).splitlines()[0]})
    return rows


def summary(rows: list[dict], growth: list[dict]) -> dict:
    times = [r["seconds"] for r in rows]
    plain = [r for r in rows if not r["needs_padding"]]
    ran = [r for r in rows if "exact" in r]
    return {"layers": len(rows), "embedded": len(rows), "without_padding": len(plain),
            "simulated": len(ran), "bit_exact": sum(r["exact"] for r in ran),
            "padded_after_proof": len(rows) - len(plain),
            "tvm_mapping_on_unpadded": sum(r["tvm_mapping"] for r in plain),
            "median_seconds": median(times), "max_seconds": max(times), "sweep_seconds": sum(times),
            "median_solver_seconds": median([r["solver_seconds"] for r in rows]),
            "growth_16_to_512": growth[-1]["seconds_top5"] / growth[0]["seconds_top5"]}


def markdown(doc: dict) -> str:
    s = doc["summary"]
    what = "DeepBench inference convolutions" if doc["workload"] == "deepbench" else "ResNet-50's convolutions"
    lines = [f"# {what} embedded into {doc['intrin']}", "",
             provenance_line(doc["provenance"]), "",
             f"{s['embedded']} of {s['layers']} unique layers embedded: {s['without_padding']} without padding "
             f"(first embedding = the hand mapping, output channels on the intrinsic's output lanes and input "
             f"channels on its reduction, batch on its batch axis if any, on {s['tvm_mapping_on_unpadded']} of them), "
             f"{s['padded_after_proof']} padded after CP-SAT proved no unpadded embedding exists."
             + (f" First embeddings run in the simulator (random int8 data, clip((conv >> 8) + bias)): "
                f"{s['bit_exact']} of {s['simulated']} bit-exact against NumPy." if s.get("simulated") else ""), "",
             f"Time per layer (model build + solve, both attempts): median {s['median_seconds']:.3f} s, max "
             f"{s['max_seconds']:.3f} s; whole sweep {s['sweep_seconds']:.1f} s (CP-SAT alone: median "
             f"{s['median_solver_seconds'] * 1e3:.1f} ms).", "",
             "| layer | shape | padded | MACs | s | first embedding |", "|---|---|---|---|---|---|"]
    for r in doc["layers"]:
        lines.append(f"| {r['name']} | {r['shape']} | {'yes' if r['needs_padding'] else 'no'} | "
                     f"x{r['macs_ratio']:.3f} | {r['seconds']:.3f} | "
                     f"{r['embedding'].splitlines()[0].split(': ', 1)[1].split('  MACs')[0]} |")
    lines += ["", f"Channel growth (3x3, 28x28, in = out channels), top-5 embeddings: x{s['growth_16_to_512']:.2f} "
                  "from 16 to 512 channels.", "", "| channels | top-5 s | CP-SAT first s |", "|---|---|---|"]
    lines += [f"| {g['channels']} | {g['seconds_top5']:.3f} | {g['solver_seconds_first']:.3f} |"
              for g in doc["growth"]]
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--block", default="1x16x16", help="VTA GEMM block batch x in x out (default 1x16x16)")
    ap.add_argument("--intrin", default="", help="a registered intrinsic instead, e.g. x86.dot_16x4_u8s8")
    ap.add_argument("--workload", choices=("deepbench", "resnet50"), default="deepbench")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--run", action="store_true", help="also simulate every layer's first VTA embedding and check "
                                                       "it bit for bit against NumPy (minutes)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    b, i, o = (int(v) for v in args.block.split("x"))
    intrin_cfg = VTAConfig(batch=b, block_in=i, block_out=o)
    intrin = get(args.intrin) if args.intrin else vta_gemm(intrin_cfg)
    rows = []
    for p in deepbench_problems() if args.workload == "deepbench" else resnet50_problems():
        rows.append(embed_layer(p, intrin, args.workers))
        if args.run and not args.intrin:
            run_first(p, intrin_cfg, rows[-1])
        print(f"{p.name:26s} {'padded' if rows[-1]['needs_padding'] else 'exact '} {rows[-1]['seconds']:.3f} s  "
              f"{rows[-1]['embedding'].splitlines()[0].split(': ', 1)[1][:90]}", flush=True)
    growth = channel_growth(intrin, args.workers)
    doc = {"intrin": intrin.name, "workload": args.workload, "provenance": provenance(threads=args.workers),
           "summary": summary(rows, growth),
           "layers": rows, "growth": growth}
    text = markdown(doc)
    print(text.split("| layer")[0])
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        stem = f"{args.workload}_{intrin.name}"
        (args.out / f"{stem}.json").write_text(json.dumps(doc, indent=1))
        (args.out / f"{stem}.md").write_text(text)
    return doc


if __name__ == "__main__":
    main()

"""FlexTensor's FPGA evaluation (6.3, Fig. 6c) reproduced in our model: YOLO-v1's 15 conv layers on a
VU9P, each design searched against the analytic model, beside the FPGA'15 design family (one
<Tm, Tn> array for the network, Tr = Tc per layer) under the same model and the same resources.
Every number of time here is the model's (no synthesis ran); the closed form is checked against
the event-level simulation of each design, FPGA'15's own point (AlexNet, VC707, 100 MHz) against
its published 61.62 GFLOPS, and every searched design's HLS C++ against the te reference by C
simulation on the layer with its spatial size divided by `--scale` (int8 bit for bit).

    python -m tilewright.bench.hls_yolo --trials 4000 --out benchmarks/results/hls"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ..errors import TilewrightError
from ..reference import evaluate
from ..runtime.hls_des import simulate
from ..runtime.hls_model import estimate
from ..search.hls_tune import form_of, tune_operator
from ..targets import Target
from ..targets.hls import DEVICES
from ..workloads import suite
from .hls_baseline import best_per_layer, choose_tm_tn, fpga15_point
from .provenance import provenance, provenance_line, save_run
from .report import geomean


def yolo_layers() -> list[tuple]:
    """(name, (out ch, in ch, output size, kernel, stride, padding)) of the 15 YOLO-v1 layers."""
    return [(c["name"], (c["out_channels"], c["in_channels"], c["out_height"], c["kernel"], c["stride"],
                         c["padding"])) for c in suite()["C2D"]["cases"]]


def conv_tensors(layer, dtype: str, scale: int = 1):
    """[x, w, y] of a layer, its output size divided by `scale` (at least one row)."""
    from .. import ops, te

    m, n, out, k, stride, pad = layer
    out = max(1, out // scale)
    size = (out - 1) * stride + k - 2 * pad
    x = te.placeholder((1, n, size, size), dtype, name="x")
    w = te.placeholder((m, n, k, k), dtype, name="w")
    return [x, w, ops.conv2d(x, w, stride=stride, padding=pad, out_dtype=None if dtype == "float32" else "int32")]


def _inputs(args, rng):
    out = []
    for t in args[:-1]:
        if t.dtype.name == "float32":
            out.append(rng.standard_normal(t.shape).astype("float32"))
        else:
            out.append(rng.integers(-128, 128, t.shape).astype(t.dtype.name))
    return out


def csim_check(layer, dtype: str, scale: int, trials: int, target, seed: int = 0) -> dict:
    """Search the scaled layer, generate its HLS C++, run it by C simulation, compare with the reference."""
    args = conv_tensors(layer, dtype, scale)
    res = tune_operator(args, target, trials=trials, seed=seed, records=None)
    kernel = res.build()
    a, b = _inputs(args, np.random.default_rng(seed))
    got = np.zeros(args[-1].shape, args[-1].dtype.name)
    t0 = time.perf_counter()
    kernel(a, b, got)
    run = time.perf_counter() - t0
    ref = evaluate(args[-1], {args[0]: a, args[1]: b})
    if dtype == "float32":
        err = float(np.max(np.abs(got - ref)) / max(1e-30, float(np.max(np.abs(ref)))))
        ok = err <= 1e-5
    else:
        err = float(np.max(np.abs(got.astype(np.int64) - ref.astype(np.int64))))
        ok = err == 0
    return {"ok": ok, "error": err, "compile_s": round(kernel.compile_seconds, 2), "cached": kernel.cached,
            "csim_s": round(run, 2),
            "design": str(res.design), "shape": list(args[-1].shape)}


def _compile(cs: dict) -> str:
    return "compiled earlier, cached" if cs["cached"] else f"{cs['compile_s']} s to compile"


def run(trials: int, dtype: str, device_name: str, scale: int, csim_trials: int) -> dict:
    target = Target(f"hls -device={device_name}")
    dev = target.hls
    layers = yolo_layers()
    t0 = time.perf_counter()
    base = choose_tm_tn([spec for _, spec in layers], dev, dtype)
    if base is None:
        raise TilewrightError(f"no FPGA'15 array fits {dev.name}")
    base_seconds, tm, tn, base_rows = base
    dse_s = time.perf_counter() - t0
    rows = []
    for (name, spec), (b_est, b_design, tr, b_form, _) in zip(layers, base_rows):
        args = conv_tensors(spec, dtype)
        res = tune_operator(args, target, trials=trials, records=None)
        form = form_of(args)
        est = estimate(form, res.design, dev)
        des = simulate(form, res.design, dev)
        macs = form.macs
        row = {"layer": name, "macs": macs, "ours_ms": est.seconds * 1e3, "ours_gops": est.gops,
               "ours_bound": est.bound, "ours_dsp": est.dsp, "ours_bram36": est.bram36, "ours_design": str(res.design),
               "des_error": abs(est.cycles - des) / des, "search_s": round(res.seconds, 1),
               "fpga15_ms": b_est.seconds * 1e3, "fpga15_gops": 2 * macs / b_est.seconds / 1e9,
               "fpga15_tr": tr, "fpga15_bound": b_est.bound}
        bdes = simulate(b_form, b_design, dev)
        row["fpga15_des_error"] = abs(b_est.cycles - bdes) / bdes
        row["speedup"] = row["fpga15_ms"] / row["ours_ms"]
        own = best_per_layer(spec, dev, dtype)
        if own is not None:
            row.update(own_gops=2 * macs / own[0].seconds / 1e9, own_tm_tn=[own[4], own[5]],
                       own_speedup=own[0].seconds * 1e3 / row["ours_ms"])
        if scale:
            row["csim"] = csim_check(spec, dtype, scale, csim_trials, target)
        rows.append(row)
        print(f"{name}: ours {row['ours_gops']:.0f} GOPS ({row['ours_bound']}), FPGA'15 {row['fpga15_gops']:.0f} "
              f"GOPS, {row['speedup']:.2f}x; model vs DES {row['des_error']:.1%}; search {row['search_s']} s"
              + (f"; csim {'ok' if row['csim']['ok'] else 'WRONG'} ({_compile(row['csim'])})"
                 if scale else ""), flush=True)
    return {"device": dev.describe(), "dtype": dtype, "trials": trials, "fpga15_tm_tn": [tm, tn],
            "fpga15_dse_s": round(dse_s, 1), "rows": rows, "geomean_speedup": geomean([r["speedup"] for r in rows]),
            "max_des_error": max(max(r["des_error"], r["fpga15_des_error"]) for r in rows),
            "geomean_speedup_own": geomean([r.get("own_speedup") for r in rows])}


def markdown(doc: dict, point: dict) -> str:
    lines = ["# FlexTensor's FPGA path, YOLO-v1 (model results: no synthesis ran)", "",
             provenance_line(doc["provenance"]), ""]
    for res in doc["runs"]:
        tm, tn = res["fpga15_tm_tn"]
        lines += [f"## {res['dtype']} on {res['device']}", "",
                  f"FPGA'15 array chosen by its own exploration: <Tm, Tn> = <{tm}, {tn}> ({res['fpga15_dse_s']} s); "
                  f"ours searched per layer, {res['trials']} designs each.", "",
                  "| layer | ours GOPS | bound | DSP | BRAM36 | FPGA'15 GOPS | speedup | FPGA'15 tiling, own array, "
                  "GOPS | speedup | model vs DES | search s | C sim |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in res["rows"]:
            cs = r.get("csim")
            csim = "-" if cs is None else (f"{'exact' if res['dtype'] != 'float32' else 'ok'} ({_compile(cs)})"
                                           if cs["ok"] else f"WRONG ({cs['error']:.2g})")
            lines.append(f"| {r['layer']} | {r['ours_gops']:.0f} | {r['ours_bound']} | {r['ours_dsp']} | "
                         f"{r['ours_bram36']} | {r['fpga15_gops']:.0f} | {r['speedup']:.2f}x | "
                         f"{r.get('own_gops', 0):.0f} <{r.get('own_tm_tn', ['-', '-'])[0]}, "
                         f"{r.get('own_tm_tn', ['-', '-'])[1]}> | {r.get('own_speedup', 0):.2f}x | "
                         f"{max(r['des_error'], r['fpga15_des_error']):.1%} | {r['search_s']} | {csim} |")
        lines += ["", f"Geomean speedup over FPGA'15 tiling: **{res['geomean_speedup']:.2f}x** (model) with the "
                      f"paper's one array for the network, **{res['geomean_speedup_own']:.2f}x** against that tiling "
                      f"given its own best array per layer; largest "
                      f"closed form vs event simulation difference {res['max_des_error']:.1%}.", ""]
    lines += ["## FPGA'15's own point", "",
              f"AlexNet's conv layers at <64, 7> on the VC707 preset (100 MHz): **{point['gflops']:.2f} GFLOPS** "
              f"modelled ({point['ms']:.2f} ms) against the paper's {point['paper_gflops']} "
              f"({(point['gflops'] / point['paper_gflops'] - 1):+.1%}); per layer "
              + ", ".join(f"{x['ms']} ms" for x in point["layers"]) + ".", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=4000)
    ap.add_argument("--csim-trials", type=int, default=150)
    ap.add_argument("--device", default="vu9p", choices=sorted(DEVICES))
    ap.add_argument("--dtypes", default="float32,int8")
    ap.add_argument("--scale", type=int, default=4, help="C-simulate each layer with its output size divided by "
                                                         "this (0: no C simulation)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    point = fpga15_point(DEVICES["vc707"])
    print(f"FPGA'15 point (AlexNet, VC707, model): {point['gflops']:.2f} GFLOPS vs published {point['paper_gflops']}")
    runs = [run(args.trials, dt, args.device, args.scale, args.csim_trials) for dt in args.dtypes.split(",")]
    doc = {"provenance": provenance(1, None, trials=args.trials, scale=args.scale), "runs": runs,
           "fpga15_point": point}
    text = markdown(doc, point)
    print(text)
    if args.out:
        save_run(args.out, "hls_yolo", doc, text)
    return 0 if all(r.get("csim", {"ok": True})["ok"] for res in runs for r in res["rows"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Bolt's templates beside FlexTensor's search on the CPU, and what fusion and padding buy.

- `ops`: per GEMM (BERT-base's at sequence 128, DeepBench inference shapes run in fp32) and
  ResNet-50 convolution, the template path (the light profiler over the rules' tiles) beside a
  FlexTensor search of `--trials` from empty records: each side's kernel time (weights packed once
  on both sides), its tuning wall time, and the ratio. Convolutions: the template computes NHWC,
  the searched te kernel NCHW (each on its own layout; no conversion on either side).
- `b2b`: Bolt's Table 1 GEMM pairs, BERT-base's FFN, and Table 2's RepVGG conv pairs: the fused
  kernel beside the unfused pair of profiled templates called back to back through the native runner.
- `padding`: Table 3's convolutions with 46 and 174 input channels, unpadded beside padded to the
  vector alignment, the padding copy timed as part of the padded side.

    python -m tilewright.bench.templates ops b2b padding --trials 100 --out benchmarks/results/templates"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import numpy as np

from ..kernels import B2BProblem, ConvProblem, Epilogue, GemmProblem, profile
from ..kernels.b2b import build_b2b
from ..kernels.padding import pad_problem, padded_weight
from ..kernels.template_kernel import build_template
from ..records.store import Records
from ..runtime.aligned import aligned_copy
from ..runtime.kernel import c_loop_timing
from ..targets import Target
from ..workloads import suite, suite_case
from .provenance import provenance, provenance_line, save_run
from .report import geomean

BERT_GEMMS = [("bert_qkv", 128, 768, 768), ("bert_ffn1", 128, 3072, 768), ("bert_ffn2", 128, 768, 3072)]
DEEPBENCH = [(35, 700, 2048), (35, 1500, 2560), (512, 1500, 1536), (1024, 700, 512), (512, 4, 512),
             (1024, 3000, 2816)]
TABLE1 = [(2464, 1, 4, 4), (16384, 64, 256, 16), (32768, 128, 576, 64), (128320, 32, 96, 96)]
TABLE2 = [(224, 3, 48, 2), (112, 48, 48, 2), (56, 48, 48, 1), (224, 3, 64, 2), (112, 64, 64, 2), (56, 64, 64, 1)]
TABLE3 = [(32, 20, 26, 46, 32, 3, 3, 1), (32, 20, 26, 46, 32, 5, 5, 2), (128, 14, 19, 46, 32, 5, 7, 0),
          (288, 11, 15, 46, 32, 5, 7, 0), (32, 20, 26, 174, 64, 3, 3, 1), (32, 20, 26, 174, 64, 5, 5, 2)]


def _r50(name: str) -> ConvProblem:
    c = suite_case("R50", name)
    return ConvProblem(c["batch"], c["height"], c["width"], c["in_channels"], c["out_channels"], c["kernel"],
                       c["kernel"], c["stride"], c["padding"], c.get("dilation", 1))


def _search(problem, target: Target, trials: int, seed: int) -> tuple[float, float, int]:
    """(kernel seconds, tuning wall seconds, trials measured) of a FlexTensor search from empty records."""
    from .. import ops, te
    from ..api import tune

    if isinstance(problem, GemmProblem):
        a = te.placeholder((problem.M, problem.K), name="A")
        b = te.placeholder((problem.K, problem.N), name="B")
        tensors = [a, b, ops.gemm(a, b, name="C")]
    else:
        p = problem
        a = te.placeholder((p.batch, p.IC, p.H, p.W), name="x")
        b = te.placeholder((p.OC, p.IC, p.KH, p.KW), name="w")
        tensors = [a, b, ops.conv2d(a, b, stride=p.stride, padding=p.pad, dilation=p.dilation, name="y")]
    with tempfile.TemporaryDirectory(prefix="tw-bench-search-") as d:
        start = time.perf_counter()
        result = tune(tensors, target, trials=trials, records=Records(Path(d) / "r.db"), seed=seed, progress=False,
                      constants=[b])
        wall = time.perf_counter() - start
    return result.best_cost, wall, len(result.history)


def run_ops(target: Target, trials: int, seed: int, limit: int, only: str = "") -> list[dict]:
    cases = [(n, GemmProblem(m, nn, k)) for n, m, nn, k in BERT_GEMMS]
    cases += [(f"deepbench_{m}x{n}x{k}", GemmProblem(m, n, k)) for m, n, k in DEEPBENCH]
    cases += [(f"r50_{c['name']}", _r50(c["name"])) for c in suite()["R50"]["cases"]]
    cases = [c for c in cases if not only or any(o in c[0] for o in only.split(","))]
    rows = []
    for name, problem in cases:
        with tempfile.TemporaryDirectory(prefix="tw-bench-tpl-") as d:
            prof = profile(problem, target, records=Records(Path(d) / "t.db"), limit=limit, seed=seed)
        search_s, search_wall, measured = _search(problem, target, trials, seed)
        rows.append({"case": name, "problem": problem.name, "gflop": problem.flops / 1e9,
                     "template_ms": prof.best_seconds * 1e3, "template_tile": str(prof.best),
                     "template_tuning_s": prof.wall_seconds, "template_tiles": len(prof.trials),
                     "search_ms": search_s * 1e3, "search_tuning_s": search_wall, "search_trials": measured,
                     "speed_ratio": search_s / prof.best_seconds, "tuning_ratio": prof.wall_seconds / search_wall})
        print(_op_line(rows[-1]), flush=True)
    return rows


def _op_line(r: dict) -> str:
    return (f"| {r['case']} | {r['gflop']:.3f} | {r['template_ms']:.3f} | {r['search_ms']:.3f} | "
            f"{r['speed_ratio']:.2f}x | {r['template_tuning_s']:.0f} s ({r['template_tiles']} tiles) | "
            f"{r['search_tuning_s']:.0f} s ({r['search_trials']} trials) | {r['tuning_ratio']:.2f} |")


def _sequence_seconds(target: Target, kernels_and_arrays: list, repeat: int = 5) -> float:
    """Median seconds of the kernels called back to back through the native runner (one C loop)."""
    import ctypes

    from ..graph.native import Sequence, entry_point

    entries = [entry_point(k._lib) for k, _ in kernels_and_arrays]
    args = [(ctypes.c_void_p * len(a))(*[x.ctypes.data for x in a]) for _, a in kernels_and_arrays]
    seq = Sequence(target, entries, args)
    if seq.run() != 0:
        raise RuntimeError("a kernel of the unfused pair failed")
    once = max(seq.time(1), 1e-7)
    number = max(1, int(0.05 / once))
    return float(np.median([seq.time(number) for _ in range(repeat)]))


def _b2b_row(name: str, problem: B2BProblem, target: Target, seed: int, limit: int) -> dict:
    rng = np.random.default_rng(seed)
    f, g = problem.first, problem.gemm1
    x = aligned_copy(rng.standard_normal(f.input_shape, dtype=np.float32))
    w0 = rng.standard_normal(f.weight_shape, dtype=np.float32) / np.float32(math.sqrt(f.K))
    w1 = rng.standard_normal(problem.second.weight_shape, dtype=np.float32) / np.float32(math.sqrt(f.N))
    b0, b1 = rng.standard_normal(f.N, dtype=np.float32), rng.standard_normal(g.N, dtype=np.float32)
    e0, e1 = problem.epilogues
    with tempfile.TemporaryDirectory(prefix="tw-bench-b2b-") as d:
        db = Records(Path(d) / "t.db")
        p0, p1 = profile(f, target, e0, db, limit=limit), profile(g, target, e1, db, limit=limit)
        pf = profile(problem, target, records=db, limit=limit)
    k0 = build_template(f, w0, target, e0, b0, p0.best)
    k1 = build_template(g, w1.reshape(g.K, g.N), target, e1, b1, p1.best)
    kf = build_b2b(problem, w0, w1, target, b0, b1, pf.best)
    t = aligned_copy(np.zeros((f.M, f.N), np.float32)).reshape(f.output_shape)
    out_u, out_f = np.zeros(problem.output_shape, np.float32), np.zeros(problem.output_shape, np.float32)
    a0 = k0.arrays(x, t)
    a1 = k1.arrays(t.reshape(g.M, g.K), out_u.reshape(g.M, g.N))
    unfused = _sequence_seconds(target, [(k0, a0), (k1, a1)])
    kf(x, out_f)
    ref = problem.reference(x, w0, w1, b0, b1)
    scale = max(1.0, float(np.abs(ref).max()))
    for label, out in (("unfused", out_u), ("fused", out_f)):
        if not np.abs(out - ref).max() <= 2e-3 * scale:
            raise RuntimeError(f"{name}: the {label} result does not match the reference")
    fused = c_loop_timing(kf._lib, kf._pointers(kf.arrays(x, out_f)), repeat=5).median
    row = {"case": name, "problem": problem.name, "unfused_ms": unfused * 1e3, "fused_ms": fused * 1e3,
           "speedup": unfused / fused, "fused_tile": str(pf.best),
           "intermediate_mb": f.M * f.N * 4 / 2 ** 20}
    print(f"| {name} | {row['intermediate_mb']:.1f} | {row['unfused_ms']:.3f} | {row['fused_ms']:.3f} | "
          f"{row['speedup']:.2f}x |", flush=True)
    return row


def run_b2b(target: Target, seed: int, limit: int) -> list[dict]:
    relu, bias_relu = Epilogue(("relu",)), Epilogue(("bias", "relu"))
    rows = []
    for m, n0, k0, n1 in TABLE1:
        rows.append(_b2b_row(f"table1_{m}x{n0}x{k0}_{n1}", B2BProblem(GemmProblem(m, n0, k0), GemmProblem(m, n1, n0),
                                                                      (relu, relu)), target, seed, limit))
    ffn = B2BProblem(GemmProblem(128, 3072, 768), GemmProblem(128, 768, 3072),
                     (Epilogue(("bias", "gelu")), Epilogue(("bias",))))
    rows.append(_b2b_row("bert_ffn_128", ffn, target, seed, limit))
    for hw, ic, oc, s in TABLE2:
        c0 = ConvProblem(1, hw, hw, ic, oc, 3, 3, s, 1)
        c1 = ConvProblem(1, c0.OH, c0.OW, oc, oc, 1, 1)
        rows.append(_b2b_row(f"table2_{hw}_{ic}to{oc}_s{s}", B2BProblem(c0, c1, (bias_relu, bias_relu)), target,
                             seed, limit))
    return rows


def run_padding(target: Target, seed: int, limit: int) -> list[dict]:
    rows = []
    rng = np.random.default_rng(seed)
    for n, h, w, ic, oc, kh, kw, pad in TABLE3:
        p = ConvProblem(n, h, w, ic, oc, kh, kw, 1, pad)
        x = aligned_copy(rng.standard_normal(p.input_shape, dtype=np.float32))
        wt = rng.standard_normal(p.weight_shape, dtype=np.float32)
        with tempfile.TemporaryDirectory(prefix="tw-bench-pad-") as d:
            db = Records(Path(d) / "t.db")
            plain = profile(p, target, records=db, limit=limit)
            q = pad_problem(p, target)
            padded = profile(q, target, records=db, limit=limit)
        kp = build_template(q, padded_weight(wt, q), target, tile=padded.best)
        xq = aligned_copy(np.zeros(q.input_shape, np.float32))
        copy = _pad_copy_seconds(x, xq)
        out = np.zeros(q.output_shape, np.float32)
        xq[..., :p.IC] = x
        kp(xq, out)
        if not np.allclose(out, p.reference(x, wt), rtol=1e-3, atol=1e-3 * max(1.0, np.abs(out).max())):
            raise RuntimeError(f"{p.name}: the padded kernel does not match the reference")
        total = padded.best_seconds + copy
        rows.append({"case": p.name, "ic": ic, "padded_ic": q.IC, "unpadded_ms": plain.best_seconds * 1e3,
                     "padded_ms": total * 1e3, "padding_ms": copy * 1e3, "speedup": plain.best_seconds / total,
                     "overhead": copy / total})
        r = rows[-1]
        print(f"| {p.name} | {ic} -> {q.IC} | {r['unpadded_ms']:.3f} | {r['padded_ms']:.3f} | {r['padding_ms']:.3f} "
              f"({100 * r['overhead']:.0f}%) | {r['speedup']:.2f}x |", flush=True)
    return rows


def _pad_copy_seconds(x: np.ndarray, xq: np.ndarray, repeat: int = 5) -> float:
    """The padding pass's per-call copy into the wider channel layout (NumPy's strided copy)."""
    ic = x.shape[-1]
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        xq[..., :ic] = x
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("parts", nargs="*", default=["ops", "b2b", "padding"], choices=["ops", "b2b", "padding"])
    ap.add_argument("--trials", type=int, default=100, help="FlexTensor search budget per operator")
    ap.add_argument("--tiles", type=int, default=24, help="tiles the light profiler measures per problem")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cases", default="", help="ops: only cases whose name contains one of these (comma-separated)")
    ap.add_argument("--out", default="benchmarks/results/templates")
    args = ap.parse_args(argv)
    target = Target("cpu")
    doc = provenance(target.cores, target, trials=args.trials, tiles=args.tiles)
    md = ["# Templates beside search on the CPU", "", provenance_line(doc), ""]
    if "ops" in args.parts:
        md += ["| case | GFLOP | template ms | search ms | template speed / search | template tuning | "
               "search tuning | tuning ratio |", "|---|---|---|---|---|---|---|---|"]
        print("\n".join(md[-2:]))
        doc["ops"] = run_ops(target, args.trials, args.seed, args.tiles, args.cases)
        md += [_op_line(r) for r in doc["ops"]]
        g = geomean([r["speed_ratio"] for r in doc["ops"]])
        md += ["", f"Geomean template speed / search: {g:.3f}; template tuning time / search's: "
               f"{sum(r['template_tuning_s'] for r in doc['ops']) / sum(r['search_tuning_s'] for r in doc['ops']):.3f}",
               ""]
    for part, head, runner in (("b2b", "| pair | intermediate MB | unfused ms | fused ms | fused speedup |\n"
                                        "|---|---|---|---|---|", run_b2b),
                               ("padding", "| conv | channels | unpadded ms | padded ms (incl. copy) | copy ms "
                                           "(share) | speedup |\n|---|---|---|---|---|---|", run_padding)):
        if part in args.parts:
            print(head)
            doc[part] = runner(target, args.seed, args.tiles)
            md += [head]
            md += [_row_md(part, r) for r in doc[part]]
            md += ["", f"Geomean: {geomean([r['speedup'] for r in doc[part]]):.3f}", ""]
    save_run(args.out, "templates", doc, "\n".join(md) + "\n")
    return 0


def _row_md(part: str, r: dict) -> str:
    if part == "b2b":
        return (f"| {r['case']} | {r['intermediate_mb']:.1f} | {r['unfused_ms']:.3f} | {r['fused_ms']:.3f} | "
                f"{r['speedup']:.2f}x |")
    return (f"| {r['case']} | {r['ic']} -> {r['padded_ic']} | {r['unpadded_ms']:.3f} | {r['padded_ms']:.3f} | "
            f"{r['padding_ms']:.3f} ({100 * r['overhead']:.0f}%) | {r['speedup']:.2f}x |")


if __name__ == "__main__":
    raise SystemExit(main())

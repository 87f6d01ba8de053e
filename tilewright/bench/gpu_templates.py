"""The GPU templates on a CUDA device, one command: fp16 GEMMs on BERT's shapes (Bolt Fig. 1/8: M = 1280,
N and K of 768 and 3072) and 4096^2 beside cuBLAS (torch.matmul in fp16, the same inputs, the same
CUDA-event timing); epilogue fusion (bias + ReLU / GELU / Hardswish / Softplus in the template's store)
beside the template without it followed by PyTorch's element-wise kernels; Bolt's Table 1 GEMM pairs
fused (shared-memory resident) beside the unfused pair of templates; Table 3's convolutions (implicit
GEMM, NHWC) at their odd channel counts beside padded ones with the padding copy timed; the light
profiler's time over ResNet-50's convolutions. Every template result is checked
against the fp32 NumPy reference before its time counts. Needs a CUDA GPU, torch and cuda-bindings.

    python -m tilewright.bench.gpu_templates --out benchmarks/results/gpu_templates"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ..kernels import B2BProblem, ConvProblem, Epilogue, GemmProblem
from ..kernels.gpu_b2b import b2b_module, gpu_b2b_tiles
from ..kernels.gpu_kernel import conv_module, conv_tiles, gemm_module
from ..kernels.gpu_tiles import gpu_tiles
from ..targets.gpu import detect_cuda
from .provenance import provenance, provenance_line, save_run
from .report import geomean

SHAPES = [(1280, 768, 768), (1280, 3072, 768), (1280, 768, 3072), (4096, 4096, 4096)]
ACTIVATIONS = ("relu", "gelu", "hardswish", "softplus")
TABLE1 = [(2464, 1, 4, 4), (16384, 64, 256, 16), (32768, 128, 576, 64), (128320, 32, 96, 96)]
TABLE3 = [(32, 20, 26, 46, 32, 3, 3, 1), (32, 20, 26, 46, 32, 5, 5, 2), (128, 14, 19, 46, 32, 5, 7, 0),
          (288, 11, 15, 46, 32, 5, 7, 0), (32, 20, 26, 174, 64, 3, 3, 1), (32, 20, 26, 174, 64, 5, 5, 2)]


def _check(out: np.ndarray, ref: np.ndarray, what: str) -> None:
    scale = max(1.0, float(np.abs(ref).max()))
    err = float(np.abs(out.astype(np.float64) - ref).max()) / scale
    if not err <= 2e-2:  # fp16 inputs and outputs, fp32 accumulation
        raise RuntimeError(f"{what}: max error {err:.3g} of the reference's scale: a wrong kernel is not timed")


def _best_gemm(problem: GemmProblem, gpu, epilogue: Epilogue, arrays: list, ref: np.ndarray, limit: int):
    from ..runtime.cuda import CudaKernel

    best, start = None, time.perf_counter()
    for tile in gpu_tiles(gpu, problem.M, problem.N, problem.K, limit):
        k = CudaKernel(gemm_module("cuda", problem, tile, epilogue), device=gpu.device)
        out = np.zeros((problem.M, problem.N), np.float16)
        k(*arrays[:4], out)
        _check(out, ref, f"{problem.name} {tile}")
        t = k.time(*arrays[:4], out, number=20, repeat=5).median
        if best is None or t < best[0]:
            best = (t, tile)
    return best[0], best[1], time.perf_counter() - start


def _torch_seconds(fn, number: int = 20, repeat: int = 5) -> float:
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(number):
            fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) / 1e3 / number)
    return float(np.median(times))


def run(limit: int, seed: int) -> dict:
    import torch

    gpu = detect_cuda()
    if gpu is None:
        raise SystemExit("no CUDA GPU here: run this on a machine with one")
    rng = np.random.default_rng(seed)
    doc = {"gemm": [], "epilogue": [], "b2b": []}
    for m, n, k in SHAPES:
        p = GemmProblem(m, n, k)
        a = rng.standard_normal((m, k)).astype(np.float16)
        b = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float16)
        zero_bias, zero_res = np.zeros(n, np.float32), np.zeros((m, n), np.float16)
        ref = a.astype(np.float64) @ b.astype(np.float64).T
        ours, tile, prof_s = _best_gemm(p, gpu, Epilogue(), [a, b, zero_bias, zero_res], ref, limit)
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        cublas = _torch_seconds(lambda ta=ta, tb=tb: torch.matmul(ta, tb.t()))
        doc["gemm"].append({"shape": [m, n, k], "template_ms": ours * 1e3, "cublas_ms": cublas * 1e3,
                            "of_cublas": cublas / ours, "tile": str(tile), "profile_s": prof_s})
        print(f"gemm {m}x{n}x{k}: template {ours * 1e3:.3f} ms, cuBLAS {cublas * 1e3:.3f} ms, "
              f"{100 * cublas / ours:.0f}% of cuBLAS ({tile}, profiled in {prof_s:.0f} s)", flush=True)
        if (m, n, k) != (1280, 3072, 768):
            continue
        bias = rng.standard_normal(n).astype(np.float32)
        tbias = torch.from_numpy(bias).cuda().half()
        out = torch.empty((m, n), dtype=torch.float16, device="cuda")
        for act in ACTIVATIONS:
            ep = Epilogue(("bias", act))
            fused, _, _ = _best_gemm(p, gpu, ep, [a, b, bias, zero_res], ep.apply(ref, bias), limit)
            torch_act = {"relu": torch.relu, "gelu": torch.nn.functional.gelu,
                         "hardswish": torch.nn.functional.hardswish, "softplus": torch.nn.functional.softplus}[act]
            post = _torch_seconds(lambda: torch_act(torch.add(out, tbias)))  # noqa: B023
            doc["epilogue"].append({"activation": act, "fused_ms": fused * 1e3, "unfused_ms": (ours + post) * 1e3,
                                    "speedup": (ours + post) / fused})
            print(f"epilogue bias+{act}: fused {fused * 1e3:.3f} ms, template + PyTorch element-wise "
                  f"{(ours + post) * 1e3:.3f} ms: {(ours + post) / fused:.2f}x", flush=True)
    relu = Epilogue(("relu",))
    for m, n0, k0, n1 in TABLE1:
        doc["b2b"].append(_b2b_row(gpu, rng, m, n0, k0, n1, relu, limit))
    doc["padding"] = [_padding_row(gpu, rng, case, limit) for case in TABLE3]
    doc["resnet50_profile_s"] = _resnet50_profile(gpu, rng, limit)
    return doc


def _best_conv(p: ConvProblem, gpu, x, w, ref, limit: int) -> tuple[float, float]:
    """(seconds of the best correct tile, profiling seconds) of the implicit-GEMM template on NHWC x."""
    from ..runtime.cuda import CudaKernel

    start, best = time.perf_counter(), None
    zb, zr = np.zeros(p.OC, np.float32), np.zeros(p.output_shape, np.float16)
    for tile in conv_tiles(gpu, p, limit):
        k = CudaKernel(conv_module("cuda", p, tile), device=gpu.device)
        out = np.zeros(p.output_shape, np.float16)
        k(x, w, zb, zr, out)
        _check(out, ref, f"{p.name} {tile}")
        t = k.time(x, w, zb, zr, out, number=20, repeat=5).median
        best = t if best is None else min(best, t)
    return best, time.perf_counter() - start


def _conv_data(p: ConvProblem, rng):
    x = rng.standard_normal(p.input_shape).astype(np.float16)
    w = (rng.standard_normal((p.OC, p.KH, p.KW, p.IC)) / np.sqrt(p.K)).astype(np.float16)
    ref = p.reference(x.astype(np.float32), w.astype(np.float32).transpose(1, 2, 3, 0))
    return x, w, ref


def _padding_row(gpu, rng, case, limit) -> dict:
    """Bolt Table 3: the conv at its odd channel count (copies of gcd(IC, 8) halves) beside the conv on
    channels padded to a multiple of 8 (16-byte copies), the padding copy (a channel pad in PyTorch on the
    device) timed and counted."""
    import torch

    n, h, w_, ic, oc, kh, kw, pad = case
    p = ConvProblem(n, h, w_, ic, oc, kh, kw, 1, pad)
    q = ConvProblem(n, h, w_, (ic + 7) // 8 * 8, oc, kh, kw, 1, pad)
    x, w, ref = _conv_data(p, rng)
    xq = np.zeros(q.input_shape, np.float16)
    xq[..., :ic] = x
    wq = np.zeros((oc, kh, kw, q.IC), np.float16)
    wq[..., :ic] = w
    plain, _ = _best_conv(p, gpu, x, w, ref, limit)
    padded, _ = _best_conv(q, gpu, xq, wq, ref, limit)
    tx = torch.from_numpy(x).cuda()
    copy = _torch_seconds(lambda: torch.nn.functional.pad(tx, (0, q.IC - ic)))
    row = {"case": p.name, "unpadded_ms": plain * 1e3, "padded_ms": (padded + copy) * 1e3, "copy_ms": copy * 1e3,
           "speedup": plain / (padded + copy), "overhead": copy / (padded + copy)}
    print(f"padding {p.name}: {plain * 1e3:.3f} -> {(padded + copy) * 1e3:.3f} ms ({row['speedup']:.2f}x, copy "
          f"{100 * row['overhead']:.0f}%)", flush=True)
    return row


def _resnet50_profile(gpu, rng, limit) -> float:
    """Seconds the light profiler takes for every ResNet-50 convolution (batch 1, as listed)."""
    from ..workloads import suite

    start = time.perf_counter()
    for c in suite()["R50"]["cases"]:
        p = ConvProblem(c["batch"], c["height"], c["width"], c["in_channels"], c["out_channels"], c["kernel"],
                        c["kernel"], c["stride"], c["padding"])
        x, w, ref = _conv_data(p, rng)
        _best_conv(p, gpu, x, w, ref, limit)
    seconds = time.perf_counter() - start
    print(f"profiler: all {len(suite()['R50']['cases'])} ResNet-50 convs in {seconds:.0f} s", flush=True)
    return seconds


def _b2b_row(gpu, rng, m, n0, k0, n1, relu, limit) -> dict:
    from ..runtime.cuda import CudaKernel

    problem = B2BProblem(GemmProblem(m, n0, k0), GemmProblem(m, n1, n0), (relu, relu))
    a = rng.standard_normal((m, k0)).astype(np.float16)
    b0 = (rng.standard_normal((n0, k0)) / np.sqrt(k0)).astype(np.float16)
    b1 = (rng.standard_normal((n1, n0)) / np.sqrt(n0)).astype(np.float16)
    z0, z1 = np.zeros(n0, np.float32), np.zeros(n1, np.float32)
    t_ref = np.maximum(a.astype(np.float64) @ b0.astype(np.float64).T, 0)
    ref = np.maximum(t_ref.astype(np.float16).astype(np.float64) @ b1.astype(np.float64).T, 0)
    first, _, _ = _best_gemm(problem.first, gpu, relu, [a, b0, z0, np.zeros((m, n0), np.float16)], t_ref, limit)
    t16 = t_ref.astype(np.float16)
    second, _, _ = _best_gemm(problem.gemm1, gpu, relu, [t16, b1, z1, np.zeros((m, n1), np.float16)], ref, limit)
    best = None
    for bt in gpu_b2b_tiles(problem, gpu, limit):
        k = CudaKernel(b2b_module("cuda", problem, bt, gpu), device=gpu.device)
        out = np.zeros((m, n1), np.float16)
        args = [a, b0, z0, b1, z1, np.zeros((m, n1), np.float16)]
        k(*args, out)
        _check(out, ref, f"{problem.name} {bt}")
        t = k.time(*args, out, number=20, repeat=5).median
        best = t if best is None else min(best, t)
    row = {"shape": [m, n0, k0, n1], "unfused_ms": (first + second) * 1e3, "fused_ms": best * 1e3,
           "speedup": (first + second) / best}
    print(f"b2b {m}x{n0}x{k0} -> {n1}: unfused {(first + second) * 1e3:.3f} ms, fused {best * 1e3:.3f} ms: "
          f"{row['speedup']:.2f}x", flush=True)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiles", type=int, default=16, help="template configurations profiled per problem")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/results/gpu_templates")
    args = ap.parse_args(argv)
    doc = {**provenance(1), **run(args.tiles, args.seed)}
    md = ["# GPU templates", "", provenance_line(doc), "", "| GEMM | template ms | cuBLAS ms | of cuBLAS |",
          "|---|---|---|---|"]
    md += [f"| {'x'.join(map(str, r['shape']))} | {r['template_ms']:.3f} | {r['cublas_ms']:.3f} | "
           f"{100 * r['of_cublas']:.0f}% |" for r in doc["gemm"]]
    md += ["", f"Epilogue fusion geomean {geomean([r['speedup'] for r in doc['epilogue']]):.2f}x; b2b geomean "
           f"{geomean([r['speedup'] for r in doc['b2b']]):.2f}x; padding geomean "
           f"{geomean([r['speedup'] for r in doc['padding']]):.2f}x; profiler over ResNet-50's convs "
           f"{doc['resnet50_profile_s']:.0f} s.", ""]
    save_run(args.out, "gpu_templates", doc, "\n".join(md) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

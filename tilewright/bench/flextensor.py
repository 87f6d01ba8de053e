"""The FlexTensor operator suite against PyTorch, case by case: tune (or reuse
the records), check the kernel against the NumPy reference, then time it, the
PyTorch baseline in each layout PyTorch offers (keeping the best) and NumPy
where it has the operator, in the same process run with the same threads.

Timing: medians of repeated calls, ours and the baselines in alternating
rounds, each after the others' thread pools have gone idle (`timing.py`). Our time includes every stage of the
program (padding, packing of activations and weights) on every call; PyTorch
eager re-packs conv weights on every call too, so neither side packs ahead.
Conv layers that the compiler's Winograd rule takes are also compiled as a
one-layer model (`conv_layer.py`), weights prepared once; ours is then the
faster of the two, and PyTorch's prepacked-weight path joins its variants.
The tuned kernel's time is re-measured here (never the best of the tuning
measurements), and so is the untuned default's, in the same rounds."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..analysis.graph import analyze
from ..api import tune
from ..errors import TilewrightError
from ..records import Records
from ..reference import evaluate
from ..runtime.aligned import aligned_copy, aligned_zeros
from ..runtime.peak import fp32_peak_gflops, measure_fp32_peak_gflops
from ..targets import as_target
from ..workloads import suite, suite_case
from ..workloads.baselines import torch_variants
from ..workloads.builders import suite_program
from .conv_layer import CONV_SUITES, compiled_layer, torch_prepacked, winograd_takes
from .report import write
from .timing import alternating_medians, median_seconds

KERNEL_REPEAT = 3  # timings per round of each side
TOLERANCE = 1e-4  # max error relative to the output's largest magnitude (Winograd layers: ~1e-5)
SUITE_TITLES = {"flextensor": "FlexTensor suite", "resnet50": "ResNet-50 convolution layers (batch 1)"}

DEFAULT_OPS = ("C2D", "DEP", "GRP", "DIL", "T2D", "T3D", "C3D", "C1D", "T1D", "GEMM", "GEMV", "BIL")


@dataclass
class CaseResult:
    op: str
    case: str
    flops: int
    bytes: int  # inputs + output, once: the least memory traffic a kernel can have
    tilewright_s: float
    max_rel_error: float
    tuned_trials: int
    torch_s: float | None = None
    torch_layout: str | None = None
    numpy_s: float | None = None
    default_s: float | None = None  # the untuned default, re-timed in the same rounds
    errors: dict = field(default_factory=dict)
    count: int = 1  # occurrences in its network (ResNet-50 layers), 1 elsewhere
    method: str = "direct"  # the faster of ours: the direct te kernel or the compiled Winograd layer
    direct_s: float | None = None  # the tuned direct kernel, when the Winograd layer was timed beside it
    tuning_s: float | None = None  # wall time of the direct kernel's search (compiles and measurements)
    winograd_tuning_s: float | None = None  # the compiled Winograd layer's, when it was tuned too

    @property
    def speedup(self) -> float | None:
        return self.torch_s / self.tilewright_s if self.torch_s else None


def _numpy_variant(op: str, arrays: list[np.ndarray]):
    if op in ("GEMM", "GEMV"):
        return lambda: arrays[0] @ arrays[1]
    return None


def _checked(kernel, tensors, ins, want, what: str, op: str, case: str) -> float:
    """Run `kernel` once on `ins` and return its max relative error against `want`; a wrong kernel is
    an error, never a timing."""
    got = np.zeros(tensors[-1].shape, tensors[-1].dtype.name)
    kernel(*ins, got)
    return _within_tolerance(got, want, what, op, case)


def _within_tolerance(got, want, what: str, op: str, case: str) -> float:
    err = float(np.abs(got - want).max() / max(float(np.abs(want).max()), 1e-30))
    if not err <= TOLERANCE:
        raise TilewrightError(f"{op} {case}: the {what} kernel disagrees with the reference "
                              f"(max relative error {err:.2e}); not timed")
    return err


def bench_target(threads: int | None = None, isa: str = "native"):
    """The host as a CPU target restricted to `isa` (e.g. "avx2" on an AVX-512 host), using `threads`."""
    target = as_target("cpu").with_isa(isa)
    if threads and threads != target.cores:  # another fingerprint: one thread count's records never serve another
        target = target.with_cores(threads)
    return target


def tuned_kernel(tensors, target, records: Records, trials: int, method: str = "q", seed: int = 0,
                 progress: bool = False, reuse: bool = False):
    """(kernel, tuning errors, trials run): the case tuned for `trials`, or, with `reuse`, built from the
    best record of its workload and target where there is one; kernel None for `trials` 0 (the caller
    then times the untuned default as its own)."""
    from ..analysis.workload import workload_key
    from ..api import build as build_kernel

    if trials == 0:
        return None, {}, 0
    if reuse and records.best(workload_key(tensors[-1:]), target.key, k=1):
        with records:  # the best record of this workload and target
            return build_kernel(tensors, target=target), {}, 0
    result = tune(tensors, target=target, trials=trials, method=method, seed=seed, records=records,
                  progress=progress)
    return result.build(), result.errors, len(result.history)


def run_case(op: str, case: str, trials: int, threads: int, records: Records, method: str = "q",
             reuse: bool = False, seed: int = 0, progress: bool = False, isa: str = "native",
             winograd: bool = True) -> CaseResult:
    from ..api import build as build_kernel

    tensors = suite_program(op, case)
    target = bench_target(threads, isa)
    outputs = tensors[-1:]
    started = time.perf_counter()
    kernel, errors, tuned = tuned_kernel(tensors, target, records, trials, method, seed, progress, reuse)
    spent = {"direct": time.perf_counter() - started if tuned else None}
    default = build_kernel(tensors, target=target)  # no records active: the untuned default
    kernel = kernel or default
    rng = np.random.default_rng(seed)
    # on 64-byte boundaries for every side, as PyTorch's own tensors are (NumPy's are 16 bytes off one)
    ins = [aligned_copy(rng.standard_normal(t.shape).astype(t.dtype.name)) for t in tensors[:-1]]
    want = evaluate(tensors[-1], dict(zip(tensors[:-1], ins)))
    err = _checked(kernel, tensors, ins, want, "tuned", op, case)
    _checked(default, tensors, ins, want, "default", op, case)
    got = aligned_zeros(tensors[-1].shape, tensors[-1].dtype.name)
    kernel.set_num_threads(threads)
    default.set_num_threads(threads)
    try:
        import torch

        torch.set_num_threads(threads)
        baselines = {f"torch:{layout}": fn for layout, fn in torch_variants(op, case, ins).items()}
    except ImportError:
        baselines = {}
    np_fn = _numpy_variant(op, ins)
    if np_fn is not None:
        baselines["numpy"] = np_fn
    sides = {"ours": lambda: kernel.time(*ins, got, repeat=KERNEL_REPEAT).median,
             "default": lambda: default.time(*ins, got, repeat=KERNEL_REPEAT).median}
    if winograd and op in CONV_SUITES:
        c = suite_case(op, case)
        sides.update(_winograd_sides(op, c, ins, want, target, trials, records, baselines, seed, spent))
    sides.update({name: (lambda fn=fn: median_seconds(fn, repeat=KERNEL_REPEAT)) for name, fn in baselines.items()})
    times = alternating_medians(sides)
    direct_s, wino_s = times["ours"], times.pop("winograd", None)
    if wino_s is not None:
        times["ours"] = min(direct_s, wino_s)
        times["default"] = min(times["default"], times.pop("winograd default"))
    graph = analyze(outputs)
    nbytes = sum(int(np.prod(t.shape)) * t.dtype.bytes for t in tensors)
    row = CaseResult(op, case, graph.flops, nbytes, times.pop("ours"), err, tuned, default_s=times.pop("default"),
                     errors=errors, numpy_s=times.pop("numpy", None),
                     count=int(suite_case(op, case).get("count_in_network", 1)),
                     method="winograd" if wino_s is not None and wino_s < direct_s else "direct",
                     direct_s=direct_s if wino_s is not None else None, tuning_s=spent["direct"],
                     winograd_tuning_s=spent.get("winograd"))
    for name, t in times.items():
        if row.torch_s is None or t < row.torch_s:
            row.torch_s, row.torch_layout = t, name.split(":", 1)[1]
    return row


def _winograd_sides(op: str, c: dict, ins, want, target, trials: int, records: Records, baselines: dict,
                    seed: int, spent: dict | None = None) -> dict:
    """For a layer the compiler's Winograd rule takes: the tuned and the untuned compiled layer as timed
    sides (each checked against the reference first), and PyTorch with prepacked weights among the
    baselines, since the compiled layer prepares its weights once. `spent["winograd"]`: its tuning's
    wall time."""
    w = ins[1]
    if not winograd_takes(c, w, target):
        return {}
    with tempfile.TemporaryDirectory() as tmp:  # no records: the untuned default
        default = compiled_layer(c, w, target, 0, Records(Path(tmp) / "none.db"))
    started = time.perf_counter()
    tuned = compiled_layer(c, w, target, trials, records, seed=seed) if trials else default
    if spent is not None and trials:
        spent["winograd"] = time.perf_counter() - started
    for what, layer in (("Winograd", tuned), ("Winograd default", default)):
        _within_tolerance(np.asarray(layer(ins[0])), want, what, op, c["name"])
    prepacked = torch_prepacked(c, w, ins[0])
    if prepacked is not None:
        baselines["torch:prepacked"] = prepacked
    return {"winograd": lambda: median_seconds(lambda: tuned(ins[0]), repeat=KERNEL_REPEAT),
            "winograd default": lambda: median_seconds(lambda: default(ins[0]), repeat=KERNEL_REPEAT)}


def run_suite(ops=None, cases=None, trials: int = 300, threads: int | None = None, out: Path | str = "results",
              records=None, method: str = "q", reuse: bool = False, progress: bool = True,
              log: Callable[[str], None] = print, isa: str = "native", name: str = "flextensor",
              winograd: bool = True) -> dict:
    """Benchmark the chosen operators/cases on the host restricted to `isa`; writes `name`.json/.md/.png
    under `out` after every case."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    data = suite()
    ops = list(ops or DEFAULT_OPS)
    for op in ops:
        if op not in data:
            raise TilewrightError(f"unknown suite operator {op!r}; the suite has {', '.join(data)}")
    target = bench_target(threads, isa)
    threads = threads or target.cores
    peak = fp32_peak_gflops(target, threads=threads)
    store = records if isinstance(records, Records) else Records(records)
    rows: list[CaseResult] = []
    failures: list[dict] = []
    title = SUITE_TITLES.get(name, name)

    def save():
        write(out, name, title, target, rows, failures, peak, threads, trials, method, KERNEL_REPEAT)

    for op in ops:
        names = [c["name"] for c in data[op]["cases"] if cases is None or c["name"] in cases]
        for case in names:
            log(f"{op} {case}: tuning {trials} trials ({method}) on {threads} threads")
            started = time.perf_counter()
            try:
                row = run_case(op, case, trials, threads, store, method, reuse, progress=progress, isa=isa,
                               winograd=winograd)
            except TilewrightError as exc:
                failures.append({"op": op, "case": case, "error": str(exc)})
                log(f"  FAILED: {exc}")
                continue
            rows.append(row)
            peak = max(peak, measure_fp32_peak_gflops(target, threads=threads))  # the best seen in the run
            speed = f"{row.speedup:.2f}x" if row.speedup else "n/a"
            log(f"  tilewright {row.tilewright_s * 1e3:.3f} ms (default {row.default_s * 1e3:.3f}), PyTorch "
                f"{row.torch_s * 1e3 if row.torch_s else float('nan'):.3f} ms ({row.torch_layout}): {speed}; "
                f"{time.perf_counter() - started:.0f} s")
            save()
    save()
    return {"rows": rows, "failures": failures, "peak_gflops": peak}

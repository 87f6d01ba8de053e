"""The FlexTensor operator suite against its baselines, case by case: tune (or reuse the records),
check the kernel against the NumPy reference, then time it beside PyTorch in each layout PyTorch
offers and, for GEMM, GEMV and BIL, NumPy's BLAS (in a process of its own, `numpy_blas`), in the
same rounds with the same threads. Every baseline's time is kept; speedups are against the fastest.

One harness for every side: `timing.median_seconds` of a call from Python, ours as a user calls it
(`kernel(*ins, out)`, the argument checks and the ctypes call included), into a preallocated output
on every side that takes one. The kernel's time in a C loop (`Kernel.time`, no Python between calls)
is kept beside it, and so is each side's empty-call cost (`overhead.py`), the floor a microsecond
case's time stands on. Medians of repeated calls, the sides in alternating rounds, each after the
others' thread pools have gone idle (`timing.py`).

Our time includes every stage of the program (padding, packing of activations and weights) on every
call; PyTorch eager re-packs conv weights on every call too, so neither side packs ahead. Conv layers
that the compiler's Winograd rule takes are also compiled as a one-layer model (`conv_layer.py`),
weights prepared once; ours is then the faster of the two, with the direct kernel's time and the
error of the method reported kept beside it, and PyTorch's prepacked-weight path joins its variants.
The tuned kernel's time is re-measured here (never the best of the tuning measurements), and so is
the untuned default's, in the same rounds."""

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
from ..runtime.aligned import aligned_zeros
from ..runtime.peak import fp32_peak_gflops, measure_fp32_peak_gflops
from ..targets import as_target
from ..workloads import suite, suite_case
from ..workloads.baselines import torch_empty_call, torch_variants
from ..workloads.builders import suite_program
from .conv_layer import CONV_SUITES, compiled_layer, torch_prepacked, winograd_takes
from .numpy_blas import NUMPY_OPS, NumpyBaseline, seeded_inputs
from .overhead import ours_empty_call_seconds
from .report import baseline_label, write
from .timing import alternating_medians, median_seconds

KERNEL_REPEAT = 3  # timings per round of each side
TOLERANCE = 1e-4  # max error relative to the output's largest magnitude (Winograd layers: ~1e-5)
SUITE_TITLES = {"flextensor": "FlexTensor suite", "resnet50": "ResNet-50 convolution layers (batch 1)"}

DEFAULT_OPS = ("C2D", "DEP", "GRP", "DIL", "T2D", "T3D", "C3D", "C1D", "T1D", "GEMM", "GEMV", "BIL")


@dataclass
class CaseResult:
    """One case. Times in seconds, medians over the rounds; every `*_s` of a side is its call from
    Python through `median_seconds`, except `cloop_s`."""

    op: str
    case: str
    flops: int
    bytes: int  # inputs + output, once: the least memory traffic a kernel can have
    tilewright_s: float  # the headline: the reported method (direct kernel or Winograd layer) called from Python
    max_rel_error: float  # of the reported method's output
    tuned_trials: int
    torch_s: float | None = None  # the fastest PyTorch variant
    torch_layout: str | None = None
    numpy_s: float | None = None  # NumPy's BLAS, in its own process
    default_s: float | None = None  # the untuned default, re-timed in the same rounds
    errors: dict = field(default_factory=dict)
    count: int = 1  # occurrences in its network (ResNet-50 layers), 1 elsewhere
    method: str = "direct"  # the faster of ours: the direct te kernel or the compiled Winograd layer
    direct_s: float | None = None  # the tuned direct kernel (the headline unless Winograd is reported)
    tuning_s: float | None = None  # wall time of the direct kernel's search (compiles and measurements)
    winograd_tuning_s: float | None = None  # the compiled Winograd layer's, when it was tuned too
    cloop_s: float | None = None  # the tuned direct kernel in a C loop (Kernel.time): no Python per call
    winograd_s: float | None = None  # the compiled Winograd layer, when the rule takes the layer
    direct_max_rel_error: float | None = None
    winograd_max_rel_error: float | None = None
    baselines: dict = field(default_factory=dict)  # every baseline's time: "torch:<layout>", "numpy"
    baseline: str | None = None  # the fastest baseline's label, e.g. "PyTorch (NCHW)"
    baseline_s: float | None = None
    numpy_blas: dict | None = None  # the OpenBLAS NumPy ran (core name, config, the environment it saw)
    # empty-call seconds per side: "ours" (a single kernel's call path, also for a Winograd row), "torch", "numpy"
    overhead_s: dict = field(default_factory=dict)

    @property
    def speedup(self) -> float | None:
        """Against the fastest baseline, both called from Python."""
        return self.baseline_s / self.tilewright_s if self.baseline_s else None

    @property
    def torch_speedup(self) -> float | None:
        return self.torch_s / self.tilewright_s if self.torch_s else None

    @property
    def direct_speedup(self) -> float | None:
        """The direct kernel (Winograd off) against the same fastest baseline."""
        direct = self.direct_s or self.tilewright_s
        return self.baseline_s / direct if self.baseline_s else None

    @property
    def baseline_side(self) -> str | None:
        """"torch" or "numpy": whose overhead goes with `baseline_s`."""
        return None if self.baseline is None else ("numpy" if self.baseline.startswith("numpy") else "torch")


def _checked(kernel, tensors, ins, want, what: str, op: str, case: str) -> float:
    """Run `kernel` once on `ins` and return its max relative error against `want`; a wrong kernel is
    an error, never a timing."""
    got = np.zeros(tensors[-1].shape, tensors[-1].dtype.name)
    kernel(*ins, got)
    return _within_tolerance(got, want, f"{what} kernel", op, case)


def _within_tolerance(got, want, what: str, op: str, case: str) -> float:
    err = float(np.abs(np.asarray(got) - want).max() / max(float(np.abs(want).max()), 1e-30))
    if not err <= TOLERANCE:
        raise TilewrightError(f"{op} {case}: the {what} disagrees with the reference "
                              f"(max relative error {err:.2e}); not timed")
    return err


def bench_target(threads: int | None = None, isa: str = "native"):
    """The host as a CPU target restricted to `isa` (e.g. "avx2" on an AVX-512 host), using `threads`."""
    target = as_target("cpu").with_isa(isa)
    if threads and threads != target.cores:  # another fingerprint: one thread count's records never serve another
        target = target.with_cores(threads)
    return target


def tuned_kernel(tensors, target, records: Records, trials: int, method: str = "q", seed: int = 0,
                 progress: bool = False, reuse: bool = False, executor=None):
    """(kernel, tuning errors, trials run): the case tuned for `trials`, or, with `reuse`, built from the
    best record of its workload and target where there is one; kernel None for `trials` 0 (the caller
    then times the untuned default as its own). `executor`: where candidates are built and run."""
    from ..analysis.workload import workload_key
    from ..api import build as build_kernel

    if trials == 0:
        return None, {}, 0
    if reuse and records.best(workload_key(tensors[-1:]), target.key, k=1):
        with records:  # the best record of this workload and target
            return build_kernel(tensors, target=target), {}, 0
    result = tune(tensors, target=target, trials=trials, method=method, seed=seed, records=records,
                  progress=progress, executor=executor)
    return result.build(), result.errors, len(result.history)


def _torch_baselines(op: str, case: str, ins, threads: int) -> dict[str, Callable[[], object]]:
    try:
        import torch
    except ImportError:
        return {}
    torch.set_num_threads(threads)
    return {f"torch:{layout}": fn for layout, fn in torch_variants(op, case, ins).items()}


def _numpy_baseline(op: str, tensors, seed: int, threads: int) -> NumpyBaseline | None:
    if op not in NUMPY_OPS:
        return None
    ins, out = tensors[:-1], tensors[-1]
    return NumpyBaseline(op, [t.shape for t in ins], [t.dtype.name for t in ins], out.shape, out.dtype.name,
                         seed, threads, repeat=KERNEL_REPEAT)


def run_case(op: str, case: str, trials: int, threads: int, records: Records, method: str = "q",
             reuse: bool = False, seed: int = 0, progress: bool = False, isa: str = "native",
             winograd: bool = True, executor=None) -> CaseResult:
    from ..api import build as build_kernel

    tensors = suite_program(op, case)
    target = bench_target(threads, isa)
    started = time.perf_counter()
    kernel, errors, tuned = tuned_kernel(tensors, target, records, trials, method, seed, progress, reuse, executor)
    spent = time.perf_counter() - started if tuned else None
    default = build_kernel(tensors, target=target)  # no records active: the untuned default
    untuned = kernel is None  # then the default is ours, timed once
    kernel = kernel or default
    ins = seeded_inputs([t.shape for t in tensors[:-1]], [t.dtype.name for t in tensors[:-1]], seed)
    want = evaluate(tensors[-1], dict(zip(tensors[:-1], ins)))
    err = _checked(kernel, tensors, ins, want, "tuned", op, case)
    if not untuned:
        _checked(default, tensors, ins, want, "default", op, case)
    # on 64-byte boundaries for every side, as PyTorch's own tensors are (NumPy's are 16 bytes off one)
    got = aligned_zeros(tensors[-1].shape, tensors[-1].dtype.name)
    kernel.set_num_threads(threads)
    default.set_num_threads(threads)
    baselines = _torch_baselines(op, case, ins, threads)
    sides = {"ours": lambda: median_seconds(lambda: kernel(*ins, got), repeat=KERNEL_REPEAT),
             "ours C loop": lambda: kernel.time(*ins, got, repeat=KERNEL_REPEAT).median}
    if not untuned:
        sides["default"] = lambda: median_seconds(lambda: default(*ins, got), repeat=KERNEL_REPEAT)
    wino: dict = {}
    if winograd and op in CONV_SUITES:
        sides.update(_winograd_sides(op, suite_case(op, case), ins, want, target, trials, records, baselines,
                                     seed, wino, executor))
    for name, fn in baselines.items():  # a wrong baseline is no comparison either
        _within_tolerance(fn(), want, f"{baseline_label(name)} baseline", op, case)
    sides.update({name: (lambda fn=fn: median_seconds(fn, repeat=KERNEL_REPEAT)) for name, fn in baselines.items()})
    blas = _numpy_baseline(op, tensors, seed, threads)
    try:
        if blas is not None:
            _within_tolerance(blas.output, want, f"{blas.label()} baseline", op, case)
            sides["numpy"] = blas.time
        times = alternating_medians(sides)
        overhead = _empty_calls(op, len(tensors), target, threads, bool(baselines), blas)
    finally:
        if blas is not None:
            blas.close()
    direct_s, cloop_s = times.pop("ours"), times.pop("ours C loop")
    default_s = times.pop("default", direct_s)
    wino_s = times.pop("winograd", None)
    if wino_s is not None:
        default_s = min(default_s, times.pop("winograd default", wino_s))
    use_wino = wino_s is not None and wino_s < direct_s
    nbytes = sum(int(np.prod(t.shape)) * t.dtype.bytes for t in tensors)
    row = CaseResult(op, case, analyze(tensors[-1:]).flops, nbytes, wino_s if use_wino else direct_s,
                     wino["winograd_max_rel_error"] if use_wino else err, tuned, default_s=default_s, errors=errors,
                     count=int(suite_case(op, case).get("count_in_network", 1)),
                     method="winograd" if use_wino else "direct", direct_s=direct_s, tuning_s=spent,
                     winograd_tuning_s=wino.get("winograd_tuning_s"), cloop_s=cloop_s, winograd_s=wino_s,
                     direct_max_rel_error=err, winograd_max_rel_error=wino.get("winograd_max_rel_error"),
                     baselines=dict(times), numpy_s=times.get("numpy"), overhead_s=overhead,
                     numpy_blas=blas.info if blas is not None else None)
    for name, t in times.items():
        if name.startswith("torch:") and (row.torch_s is None or t < row.torch_s):
            row.torch_s, row.torch_layout = t, name.split(":", 1)[1]
    if times:
        best = min(times, key=times.get)
        row.baseline, row.baseline_s = baseline_label(best, row.numpy_blas), times[best]
    return row


def _empty_calls(op: str, n_args: int, target, threads: int, torch_side: bool, blas) -> dict[str, float]:
    """Each side's empty-call seconds (`overhead.py`), measured once after the rounds."""
    out = {"ours": ours_empty_call_seconds(n_args, target, threads, repeat=KERNEL_REPEAT)}
    empty_torch = torch_empty_call(op) if torch_side else None
    if empty_torch is not None:
        out["torch"] = median_seconds(empty_torch, repeat=KERNEL_REPEAT)
    if blas is not None:
        out["numpy"] = blas.empty_call()
    return out


def _winograd_sides(op: str, c: dict, ins, want, target, trials: int, records: Records, baselines: dict,
                    seed: int, notes: dict | None = None, executor=None) -> dict:
    """For a layer the compiler's Winograd rule takes: the tuned compiled layer (and, when tuned, the
    untuned one) as timed sides, each checked against the reference first, and PyTorch with prepacked
    weights among the baselines, since the compiled layer prepares its weights once. `notes` gets the
    tuned layer's max relative error ("winograd_max_rel_error") and its tuning's wall time
    ("winograd_tuning_s")."""
    w = ins[1]
    if not winograd_takes(c, w, target):
        return {}
    notes = {} if notes is None else notes
    with tempfile.TemporaryDirectory() as tmp:  # no records: the untuned default
        default = compiled_layer(c, w, target, 0, Records(Path(tmp) / "none.db"))
    started = time.perf_counter()
    tuned = compiled_layer(c, w, target, trials, records, seed=seed, executor=executor) if trials else default
    if trials:
        notes["winograd_tuning_s"] = time.perf_counter() - started
    notes["winograd_max_rel_error"] = _within_tolerance(tuned(ins[0]), want, "Winograd kernel", op, c["name"])
    if trials:
        _within_tolerance(default(ins[0]), want, "Winograd default kernel", op, c["name"])
    prepacked = torch_prepacked(c, w, ins[0])
    if prepacked is not None:
        baselines["torch:prepacked"] = prepacked
    sides = {"winograd": lambda: median_seconds(lambda: tuned(ins[0]), repeat=KERNEL_REPEAT)}
    if trials:  # else the default is the tuned layer, timed once
        sides["winograd default"] = lambda: median_seconds(lambda: default(ins[0]), repeat=KERNEL_REPEAT)
    return sides


def run_suite(ops=None, cases=None, trials: int = 300, threads: int | None = None, out: Path | str = "results",
              records=None, method: str = "q", reuse: bool = False, progress: bool = True,
              log: Callable[[str], None] = print, isa: str = "native", name: str = "flextensor",
              winograd: bool = True, executor=None) -> dict:
    """Benchmark the chosen operators/cases on the host restricted to `isa`; writes `name`.json/.md/.png
    under `out` after every case. `executor`: where tuning builds and runs candidates (a RayExecutor);
    every side is timed here, in this process."""
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
                               winograd=winograd, executor=executor)
            except TilewrightError as exc:
                failures.append({"op": op, "case": case, "error": str(exc)})
                log(f"  FAILED: {exc}")
                continue
            rows.append(row)
            peak = max(peak, measure_fp32_peak_gflops(target, threads=threads))  # the best seen in the run
            speed = f"{row.speedup:.2f}x" if row.speedup else "n/a"
            base = f"{row.baseline} {row.baseline_s * 1e3:.4g} ms" if row.baseline_s else "no baseline"
            log(f"  tilewright {row.tilewright_s * 1e3:.4g} ms ({row.method}; the direct kernel "
                f"{row.direct_s * 1e3:.4g}, in a C loop {row.cloop_s * 1e3:.4g}; default {row.default_s * 1e3:.4g}), "
                f"fastest baseline {base}: {speed}; {time.perf_counter() - started:.0f} s")
            save()
    save()
    return {"rows": rows, "failures": failures, "peak_gflops": peak}

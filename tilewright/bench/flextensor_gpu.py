"""The FlexTensor suite on a GPU against PyTorch's vendor libraries, case by
case: tune on the device (or reuse the records), check the tuned kernel AND
the untuned default against the NumPy reference (a wrong kernel is a failure
row, never a time), then time ours, the default and PyTorch (TF32 off, and
PyTorch's TF32 default as a second column) in alternating rounds in the same
process, with every input already on the device: our kernels get device
buffers (torch CUDA tensors through `__cuda_array_interface__`, pyopencl
arrays), PyTorch gets tensors copied once (`workloads/gpu_baselines.py`).

`trials=0` measures the untuned default as "ours" (no tuning): the driver
runs end to end on a kind whose schedule space has not landed. For OpenCL
there is no PyTorch GPU baseline unless `baseline_device` names one
("cpu" gives PyTorch on the host, labelled as such)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..analysis.graph import analyze
from ..errors import TilewrightError
from ..records import Records
from ..reference import evaluate
from ..targets import Target
from ..workloads import suite, suite_case
from ..workloads.builders import suite_program
from ..workloads.gpu_baselines import tf32_label, torch_gpu_variants
from .flextensor import DEFAULT_OPS, _checked, tuned_kernel
from .gpu_report import GpuCaseResult, write
from .gpu_timing import ROUNDS, alternating, device_median_seconds, kernel_median_seconds

GPU_KINDS = ("cuda", "opencl")
KERNEL_REPEAT = 3  # timings per round of each side


def gpu_target(kind: str) -> Target:
    """The detected device of `kind` ("cuda" or "opencl")."""
    if kind not in GPU_KINDS:
        raise TilewrightError(f"the GPU suite runs on {' or '.join(GPU_KINDS)}, not {kind!r}")
    return Target(kind)


def default_baseline_device(kind: str) -> str | None:
    """Where PyTorch runs as the baseline: the CUDA device beside a CUDA target, else nowhere."""
    if kind != "cuda":
        return None
    try:
        import torch
    except ImportError:
        return None
    return "cuda" if torch.cuda.is_available() else None


def device_arrays(kernel, kind: str, host: list[np.ndarray]) -> list:
    """`host` (inputs and the output) as buffers on the kernel's device, made once, so that timing our
    kernel copies nothing; the host arrays themselves where no device array type is at hand."""
    if kind == "cuda":
        try:
            import torch
        except ImportError:
            return host
        if not torch.cuda.is_available():
            return host
        return [torch.from_numpy(a).cuda() for a in host]
    queue = getattr(kernel, "queue", None)
    if queue is None:
        return host
    import pyopencl.array as cla

    return [cla.to_device(queue, np.ascontiguousarray(a)) for a in host]


def _fastest(times: dict[str, float], prefix: str) -> tuple[float | None, str | None]:
    mine = {k.split("/", 1)[1]: t for k, t in times.items() if k.startswith(prefix + "/")}
    if not mine:
        return None, None
    name = min(mine, key=mine.get)
    return mine[name], name


def run_gpu_case(op: str, case: str, target: Target, trials: int, records: Records, method: str = "q",
                 reuse: bool = False, baseline_device: str | None = None, tf32_column: bool = True,
                 seed: int = 0, progress: bool = False, rounds: int = ROUNDS) -> GpuCaseResult:
    from ..api import build as build_kernel

    tensors = suite_program(op, case)
    outputs = tensors[-1:]
    started = time.perf_counter()
    kernel, errors, tuned = tuned_kernel(tensors, target, records, trials, method, seed, progress, reuse)
    measured = kernel is not None
    wall = time.perf_counter() - started
    default = build_kernel(tensors, target=target)  # no records active: the untuned default
    kernel = kernel or default
    rng = np.random.default_rng(seed)
    ins = [rng.standard_normal(t.shape).astype(t.dtype.name) for t in tensors[:-1]]
    want = evaluate(tensors[-1], dict(zip(tensors[:-1], ins)))
    err = _checked(kernel, tensors, ins, want, "tuned" if measured else "default", op, case)
    _checked(default, tensors, ins, want, "default", op, case)

    args = device_arrays(kernel, target.kind, ins + [np.zeros(tensors[-1].shape, tensors[-1].dtype.name)])
    sides: dict[str, Callable[[], float]] = {
        "ours": lambda: kernel_median_seconds(kernel, args, repeat=KERNEL_REPEAT),
        "default": lambda: kernel_median_seconds(default, args, repeat=KERNEL_REPEAT)}
    if baseline_device is not None:
        for tf32 in (False, True) if tf32_column else (False,):
            for name, fn in torch_gpu_variants(op, case, ins, device=baseline_device, tf32=tf32).items():
                sides[f"tf32={tf32}/{name}"] = (lambda fn=fn: device_median_seconds(
                    fn, baseline_device, repeat=KERNEL_REPEAT))
    times = alternating(sides, rounds)
    row = GpuCaseResult(op, case, analyze(outputs).flops, times.pop("ours"), err, tuned, wall,
                        default_s=times.pop("default"), errors=errors,
                        count=int(suite_case(op, case).get("count_in_network", 1)))
    row.torch_s, row.torch_variant = _fastest(times, "tf32=False")
    row.torch_tf32_s, row.torch_tf32_variant = _fastest(times, "tf32=True")
    return row


def _header(target: Target, trials: int, method: str, baseline_device: str | None, tf32_column: bool) -> dict:
    facts = target.gpu
    try:
        import torch

        torch_version = torch.__version__
        if baseline_device and baseline_device.startswith("cuda"):
            torch_version += f" (CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()})"
    except ImportError:
        torch_version = "not installed"
    where = baseline_device
    if where == "cpu":
        where = "the host CPU (NOT a GPU baseline)"
    return {"target": str(target), "target_key": target.key, "device": facts.name, "arch": facts.arch,
            "driver": facts.driver_version, "compiler": facts.compiler_version, "trials": trials, "method": method,
            "torch": torch_version, "baseline_device": where, "tf32_off": tf32_label(False),
            "tf32_default": tf32_label(True) if tf32_column else "not measured", "rounds": ROUNDS,
            "timings_per_round": KERNEL_REPEAT}


def run_gpu_suite(target_kind: str, ops=None, cases=None, trials: int = 200, out: Path | str = "results",
                  records=None, method: str = "q", reuse: bool = False, tf32_column: bool = True,
                  log: Callable[[str], None] = print, name: str | None = None, baseline_device: str | None = "auto",
                  progress: bool = False, rounds: int = ROUNDS) -> dict:
    """Benchmark the chosen operators/cases on the detected `target_kind` device; writes (merging with an
    earlier slice of the same `out`/`name`, default "flextensor_<kind>") .json/.md/.png after every case.
    Returns {"rows", "failures"} of the merged table and "target"."""
    out = Path(out)
    target = gpu_target(target_kind)
    data = suite()
    ops = list(ops or DEFAULT_OPS)
    for op in ops:
        if op not in data:
            raise TilewrightError(f"unknown suite operator {op!r}; the suite has {', '.join(data)}")
    known = {c["name"] for op in ops for c in data[op]["cases"]}
    missing = sorted(set(cases or ()) - known)
    if missing:
        raise TilewrightError(f"no case {', '.join(missing)} in {', '.join(ops)}; their cases are "
                              f"{', '.join(sorted(known))}")
    if baseline_device == "auto":
        baseline_device = default_baseline_device(target_kind)
    name = name or f"flextensor_{target_kind}"
    store = records if isinstance(records, Records) else Records(records)
    header = _header(target, trials, method, baseline_device, tf32_column)
    rows: list[GpuCaseResult] = []
    failures: list[dict] = []
    merged = {"rows": [], "failures": []}

    def save():
        merged["rows"], merged["failures"] = write(out, name, header, rows, failures)

    log(f"{target}; baseline: PyTorch on {baseline_device or 'nothing'}")
    for op in ops:
        for case in [c["name"] for c in data[op]["cases"] if cases is None or c["name"] in cases]:
            log(f"{op} {case}: tuning {trials} trials ({method})")
            try:
                row = run_gpu_case(op, case, target, trials, store, method, reuse, baseline_device, tf32_column,
                                   progress=progress, rounds=rounds)
            except TilewrightError as exc:
                failures.append({"op": op, "case": case, "error": str(exc)})
                log(f"  FAILED: {exc}")
                save()
                continue
            rows.append(row)
            lib = f"{row.torch_s * 1e3:.4f} ms ({row.torch_variant}): {row.speedup:.2f}x" if row.torch_s else "n/a"
            log(f"  tilewright {row.tilewright_s * 1e3:.4f} ms (default {row.default_s * 1e3:.4f}), library {lib}; "
                f"tuned {row.tuned_trials} trials in {row.tune_wall_s:.0f} s")
            save()
    save()
    return {**merged, "target": target}


__all__ = ["GPU_KINDS", "default_baseline_device", "device_arrays", "gpu_target", "run_gpu_case", "run_gpu_suite"]

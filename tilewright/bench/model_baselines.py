"""The baselines a whole model is compared with, with the thread count we use:
PyTorch eager (NCHW and channels_last, the faster kept; the caller's NCHW input
converted inside the timed call), PyTorch `torch.compile` (inductor in its
default mode, as a user calls it: weights not frozen; its compile time reported) and ONNX
Runtime (CPU provider, all graph optimizations, the model exported by
`torch.onnx.export`). A baseline that cannot run here (package missing, export
failure) is reported with its reason, never silently dropped."""

from __future__ import annotations

import contextlib
import logging
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass
class Baseline:
    name: str
    run: Callable[[], object] | None  # one inference on the benchmark input
    output: np.ndarray | None = None  # its result, checked against eager
    setup_s: float = 0.0  # compile / export time
    note: str = ""
    extra: dict = field(default_factory=dict)


def _numpy(out) -> np.ndarray:
    out = out[0] if isinstance(out, (tuple, list)) else out
    return out.detach().numpy() if hasattr(out, "detach") else np.asarray(out)


def eager(model, x: np.ndarray, channels_last: bool) -> Baseline:
    import torch

    t = torch.from_numpy(x)
    if channels_last and t.ndim == 4:
        model = _clone(model).to(memory_format=torch.channels_last)

        def run():
            with torch.no_grad():
                return model(t.contiguous(memory_format=torch.channels_last))
    elif channels_last:
        return Baseline("eager channels_last", None, note="input is not 4-d")
    else:
        def run():
            with torch.no_grad():
                return model(t)
    return Baseline(f"eager {'channels_last' if channels_last else 'NCHW'}", run, _numpy(run()))


def _clone(model):
    import copy

    return copy.deepcopy(model)


def inductor(model, x: np.ndarray) -> Baseline:
    import torch

    t = torch.from_numpy(x)
    try:
        compiled = torch.compile(_clone(model))
        start = time.perf_counter()
        with torch.no_grad():
            out = compiled(t)
        setup = time.perf_counter() - start
    except Exception as exc:  # inductor needs a working C++ toolchain; say why it is missing
        return Baseline("torch.compile", None, note=f"failed: {type(exc).__name__}: {str(exc)[:200]}")

    def run():
        with torch.no_grad():
            return compiled(t)
    return Baseline("torch.compile", run, _numpy(out), setup)


def onnxruntime(model, x: np.ndarray, threads: int) -> Baseline:
    try:
        import onnxruntime  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        return Baseline("onnxruntime", None, note=f"not installed ({exc.name})")
    path = Path(tempfile.mkdtemp(prefix="tw_ort_")) / "model.onnx"
    start = time.perf_counter()
    try:
        export_onnx(model, x, path)
    except Exception as exc:
        return Baseline("onnxruntime", None, note=f"torch.onnx.export failed: {type(exc).__name__}: {str(exc)[:200]}")
    session = ort_session(path, threads)
    import shutil

    shutil.rmtree(path.parent, ignore_errors=True)  # the session holds the model; a ResNet-50 file is ~100 MB
    name = session.get_inputs()[0].name
    feed = {name: x}
    out = session.run(None, feed)[0]
    setup = time.perf_counter() - start
    return Baseline("onnxruntime", lambda: session.run(None, feed), np.asarray(out), setup)


def export_onnx(model, x: np.ndarray, path: Path) -> None:
    """`model` on input `x` as an ONNX file (torch.onnx's dynamo exporter, on a copy of the model)."""
    import torch

    with _quiet_exporter():
        torch.onnx.export(_clone(model), (torch.from_numpy(x),), str(path), dynamo=True, verbose=False)


def ort_session(path: Path, threads: int, profile_prefix: str | None = None):
    """The ONNX Runtime session the benchmark times: CPU provider, all graph optimizations,
    `threads` intra-op threads; with `profile_prefix`, its node profiler on."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if profile_prefix is not None:
        opts.enable_profiling = True
        opts.profile_file_prefix = profile_prefix
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


@contextlib.contextmanager
def _quiet_exporter():
    """The exporter logs a warning per torchvision op it skips (torchvision is not installed beside
    this torch) and its tracer warns about a deprecated pytree class: noise between a user and the table."""
    log = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*treespec, LeafSpec", category=FutureWarning)
            yield
    finally:
        log.setLevel(level)


def torch_peak_activation_bytes(model, x: np.ndarray) -> int:
    """Peak bytes held by tensors PyTorch allocates during one eager inference
    (its profiler's allocation and free events in time order; weights excluded)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    t = torch.from_numpy(x)
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        model(t)
    events = sorted((e.time_range.start, e.self_cpu_memory_usage) for e in prof.events() if e.self_cpu_memory_usage)
    current = peak = 0
    for _, delta in events:
        current += delta
        peak = max(peak, current)
    return int(peak)

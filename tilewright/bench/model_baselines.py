"""The baselines a whole model is compared with, every one at the thread count
we use and in each configuration a user would try, each variant labelled:

  eager          PyTorch under torch.inference_mode, NCHW and channels_last (the
                 caller's NCHW input converted inside the timed call);
  torch.compile  inductor default, frozen and max-autotune+frozen, each NCHW and
                 channels_last (inductor_variants.py);
  onnxruntime    the TorchScript and dynamo exporters, and for a transformer ORT's
                 BERT optimizer on each (ort_variants.py).

Which variants run is the caller's choice (`Choice`); a variant asked for that
cannot run here is kept with its reason, never silently dropped."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .baseline import Baseline, as_numpy, clone, skipped
from .inductor_variants import LAYOUTS, MODES, inductor_variants
from .ort_variants import EXPORTERS, export_onnx, ort_session, ort_variants

__all__ = ["Baseline", "Choice", "FAMILY_KEYS", "baseline_variants", "eager", "export_onnx", "ort_session",
           "torch_peak_activation_bytes", "torch_weight_bytes"]

FAMILY_KEYS = ("eager", "compile", "ort")  # the names --baselines takes


@dataclass(frozen=True)
class Choice:
    """Which baseline variants to build: families of FAMILY_KEYS, torch.compile modes and layouts
    (inductor_variants.MODES, LAYOUTS), ONNX exporters (ort_variants.EXPORTERS)."""
    families: tuple[str, ...] = FAMILY_KEYS
    compile_modes: tuple[str, ...] = MODES
    compile_layouts: tuple[str, ...] = LAYOUTS
    exporters: tuple[str, ...] = tuple(EXPORTERS)

    def __post_init__(self):
        for what, given, known in (("baseline", self.families, FAMILY_KEYS), ("torch.compile variant",
                                   self.compile_modes, MODES), ("torch.compile layout", self.compile_layouts, LAYOUTS),
                                   ("ONNX exporter", self.exporters, tuple(EXPORTERS))):
            bad = [g for g in given if g not in known]
            if bad:
                raise ValueError(f"unknown {what} {bad[0]!r}: choose from {', '.join(known)}")

    def as_dict(self) -> dict:
        return {"families": list(self.families), "compile_modes": list(self.compile_modes),
                "compile_layouts": list(self.compile_layouts), "onnx_exporters": list(self.exporters)}


def eager(model, x: np.ndarray, x_check: np.ndarray, channels_last: bool) -> Baseline:
    import torch

    name = f"eager {'channels_last' if channels_last else 'NCHW'}"
    if channels_last and x.ndim != 4:
        return skipped(name, "eager", f"not run: channels_last needs a 4-d input, this one is {x.ndim}-d")
    t, t_check = torch.from_numpy(x), torch.from_numpy(x_check)
    if channels_last:
        model = clone(model).to(memory_format=torch.channels_last)

    def call(v):
        with torch.inference_mode():
            return model(v.contiguous(memory_format=torch.channels_last) if channels_last else v)
    return Baseline(name, "eager", lambda: call(t), as_numpy(call(t_check)),
                    rebuild={"side": "eager", "layout": "channels_last" if channels_last else "NCHW"})


def baseline_variants(model, x: np.ndarray, x_check: np.ndarray, threads: int, workdir: Path,
                      choice: Choice = Choice(), progress=None) -> list[Baseline]:
    """Every chosen variant, built on `x` (the compile input) and run once on `x_check`."""
    out = []
    if "eager" in choice.families:
        out += [eager(model, x, x_check, channels_last=False), eager(model, x, x_check, channels_last=True)]
    if "compile" in choice.families:
        out += inductor_variants(model, x, x_check, choice.compile_modes, choice.compile_layouts, progress)
    if "ort" in choice.families:
        out += ort_variants(model, x, x_check, threads, workdir, choice.exporters, progress)
    return out


def torch_peak_activation_bytes(model, x: np.ndarray) -> int:
    """Peak bytes held by tensors PyTorch allocates during one eager inference
    (its profiler's allocation and free events in time order; weights excluded)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    t = torch.from_numpy(x)
    with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        model(t)
    events = sorted((e.time_range.start, e.self_cpu_memory_usage) for e in prof.events() if e.self_cpu_memory_usage)
    current = peak = 0
    for _, delta in events:
        current += delta
        peak = max(peak, current)
    return int(peak)


def torch_weight_bytes(model) -> int:
    """Bytes of the model's parameters and buffers (BN statistics)."""
    return sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))

"""torch.compile (inductor) in the configurations a CPU user would try:

  default       torch.compile(model), weights not frozen;
  frozen        inductor's `freezing` (weights as constants: conv-BN folding, mkldnn
                weight prepacking), PyTorch's documented CPU-inference setting;
  max-autotune  the options of mode="max-autotune" (its C++ GEMM templates) plus freezing;

each on the caller's layout and, for 4-d inputs, channels_last (model converted
once, the input converted inside the timed call). Every variant is compiled
and called under torch.inference_mode, and its compile time (the first call
included: inductor compiles lazily) is recorded.

A variant's settings are given twice, both needed (checked on torch 2.13 in
the generated code): as `torch.compile(options=...)`, which makes them part of
the compiled callable, so dynamo cannot hand a variant the cached graph of
another compiled from the same `forward`; and as a patch of
`torch._inductor.config` around the first call only (restored after),
because dynamo reads `freezing` while tracing, outside the per-compile
options, and without it nothing is frozen. Reuse is checked anyway: dynamo's
graph counter must grow on each variant's first call."""

from __future__ import annotations

import contextlib
import time
import warnings

import numpy as np

from .baseline import Baseline, as_numpy, clone, failure, skipped

MODES = ("default", "frozen", "max-autotune")
LAYOUTS = ("NCHW", "channels_last")
# display only: max-autotune otherwise prints a table per GEMM it tunes between the benchmark's lines
QUIET = {"autotune_num_choices_displayed": 0, "max_autotune_report_choices_stats": False}


def label(mode: str, layout: str) -> str:
    words = {"default": "default", "frozen": "frozen", "max-autotune": "max-autotune frozen"}[mode]
    return f"torch.compile {words}" + (" channels_last" if layout == "channels_last" else "")


def options(mode: str) -> dict:
    """The inductor options of a variant (mode "default": none)."""
    import torch

    if mode not in MODES:
        raise ValueError(f"torch.compile variant {mode!r}: choose from {', '.join(MODES)}")
    if mode == "default":
        return {}
    opts = {"freezing": True}
    if mode == "max-autotune":
        opts.update(torch._inductor.list_mode_options("max-autotune"))
    return opts


def compiling(mode: str) -> contextlib.ExitStack:
    """Around a variant's first call (where inductor compiles): its options in inductor's global
    config (restored on exit) and inference mode."""
    import torch

    stack = contextlib.ExitStack()
    stack.enter_context(torch._inductor.config.patch({**options(mode), **QUIET}))
    stack.enter_context(torch.inference_mode())
    stack.enter_context(warnings.catch_warnings())
    warnings.filterwarnings("ignore", message="TypedStorage is deprecated")  # inductor's own use, in max-autotune
    return stack


def inductor(model, x: np.ndarray, x_check: np.ndarray, mode: str = "default", layout: str = "NCHW") -> Baseline:
    """One torch.compile variant, compiled on `x` and checked on `x_check`."""
    import torch
    from torch._dynamo.utils import counters

    name = label(mode, layout)
    channels_last = layout == "channels_last"
    if channels_last and x.ndim != 4:
        return skipped(name, "torch.compile", f"not run: channels_last needs a 4-d input, this one is {x.ndim}-d")
    t, t_check = torch.from_numpy(x), torch.from_numpy(x_check)
    model = clone(model)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)

    def convert(v):
        return v.contiguous(memory_format=torch.channels_last) if channels_last else v

    try:
        compiled = torch.compile(model, options=options(mode))  # lazy: compiles on the first call
        graphs = counters["stats"]["unique_graphs"]
        start = time.perf_counter()
        with compiling(mode):
            compiled(convert(t))
        setup = time.perf_counter() - start
        if counters["stats"]["unique_graphs"] == graphs:
            return skipped(name, "torch.compile", "not timed: dynamo compiled no new graph for it (it reused "
                           "another variant's graph or hit its recompile limit), so the time would not be its own")
        with torch.inference_mode():
            check = as_numpy(compiled(convert(t_check)))
    except Exception as exc:  # inductor needs a working C++ toolchain; say why it is missing
        return skipped(name, "torch.compile", failure(exc))

    def run():
        with torch.inference_mode():
            return compiled(convert(t))
    return Baseline(name, "torch.compile", run, check, setup,
                    rebuild={"side": "compile", "mode": mode, "layout": layout})


def inductor_variants(model, x: np.ndarray, x_check: np.ndarray, modes=MODES, layouts=LAYOUTS,
                      progress=None) -> list[Baseline]:
    """Every requested (mode, layout) variant, in that order. Dynamo's caches are reset first:
    they still hold an earlier model's graphs, which count against its recompile limit."""
    import torch

    for m in modes:
        options(m)  # an unknown mode fails before anything is compiled
    bad = [lay for lay in layouts if lay not in LAYOUTS]
    if bad:
        raise ValueError(f"torch.compile layout {bad[0]!r}: choose from {', '.join(LAYOUTS)}")
    torch._dynamo.reset()
    out = []
    for mode in modes:
        for layout in layouts:
            b = inductor(model, x, x_check, mode, layout)
            if progress:
                progress(b)
            out.append(b)
    return out

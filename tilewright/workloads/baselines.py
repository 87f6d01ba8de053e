"""PyTorch baselines for the FlexTensor suite: the same computation on the
same arrays through PyTorch's vendor kernels (oneDNN/MKL on CPU), in each
layout PyTorch offers, so a benchmark can time every one and keep the best.

Where the function takes `out=` (torch.matmul, torch.mv) the output is
preallocated once, as ours is; the convolutions (F.conv*d, F.conv_transpose*d)
and F.bilinear take no `out=`, so they allocate their output in every call
(PyTorch's caching CPU allocator makes that cheap, and it is what a user's call
costs). `torch_empty_call` is each operator's function on 1-element tensors: its
per-call cost with (almost) no arithmetic."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import suite_case


def torch_variants(op: str, case_name: str, arrays: list[np.ndarray]) -> dict[str, Callable[[], object]]:
    """Layout name -> a no-argument callable running the case in PyTorch on
    `arrays` (the suite program's inputs, in order). Empty when PyTorch is
    missing or has no such operator (BCM, SHO)."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return {}
    c = suite_case(op, case_name)
    t = [torch.from_numpy(a) for a in arrays]

    def no_grad(fn):
        def run():
            with torch.no_grad():
                return fn()
        return run

    if op in ("C2D", "GRP", "DIL", "DEP", "R50"):
        groups = c["in_channels"] if op == "DEP" else c.get("groups", 1)
        kw = dict(stride=c["stride"], padding=c["padding"], dilation=c.get("dilation", 1), groups=groups)
        out = {}
        for layout, fmt in (("NCHW", torch.contiguous_format), ("channels_last", torch.channels_last)):
            x, w = t[0].contiguous(memory_format=fmt), t[1].contiguous(memory_format=fmt)
            out[layout] = no_grad(lambda x=x, w=w: F.conv2d(x, w, **kw))
        return out
    if op in ("C1D", "C3D"):
        fn = F.conv1d if op == "C1D" else F.conv3d
        kw = dict(stride=c["stride"], padding=c["padding"], dilation=c.get("dilation", 1), groups=c.get("groups", 1))
        out = {"NCW" if op == "C1D" else "NCDHW": no_grad(lambda: fn(t[0], t[1], **kw))}
        if op == "C3D":
            x, w = (a.contiguous(memory_format=torch.channels_last_3d) for a in t[:2])
            out["channels_last_3d"] = no_grad(lambda: fn(x, w, **kw))
        return out
    if op in ("T1D", "T2D", "T3D"):
        fn = {"T1D": F.conv_transpose1d, "T2D": F.conv_transpose2d, "T3D": F.conv_transpose3d}[op]
        kw = dict(stride=c["stride"], padding=c["padding"], output_padding=c.get("output_padding", 0),
                  groups=c.get("groups", 1), dilation=c.get("dilation", 1))
        out = {"NC*": no_grad(lambda: fn(t[0], t[1], **kw))}
        if op == "T2D":
            x, w = (a.contiguous(memory_format=torch.channels_last) for a in t[:2])
            out["channels_last"] = no_grad(lambda: fn(x, w, **kw))
        return out
    if op == "GEMM":
        out = torch.empty((t[0].shape[0], t[1].shape[1]), dtype=t[0].dtype)
        return {"row-major": no_grad(lambda: torch.matmul(t[0], t[1], out=out))}
    if op == "GEMV":
        out = torch.empty((t[0].shape[0],), dtype=t[0].dtype)
        return {"row-major": no_grad(lambda: torch.mv(t[0], t[1], out=out))}
    if op == "BIL":
        return {"row-major": no_grad(lambda: F.bilinear(t[0], t[1], t[2]))}
    return {}


CONV_FUNCTIONS = {"C1D": "conv1d", "T1D": "conv_transpose1d", "T2D": "conv_transpose2d", "C3D": "conv3d",
                  "T3D": "conv_transpose3d", "C2D": "conv2d", "GRP": "conv2d", "DIL": "conv2d", "DEP": "conv2d",
                  "R50": "conv2d"}


def torch_empty_call(op: str) -> Callable[[], object] | None:
    """`op`'s PyTorch function (the one `torch_variants` times, `out=` where it takes one) on 1-element
    tensors made once, or None without PyTorch or such an operator: its dispatch, checks and output
    allocation with (almost) no arithmetic."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None

    def ones(*shape):
        return torch.ones(shape, dtype=torch.float32)

    if op in CONV_FUNCTIONS:  # one channel, a 1-element input and kernel
        conv = getattr(F, CONV_FUNCTIONS[op])
        dims = int(CONV_FUNCTIONS[op][-2])
        x, w = ones(*[1] * (dims + 2)), ones(*[1] * (dims + 2))
        fn = lambda: conv(x, w)  # noqa: E731
    elif op == "GEMM":
        a, b, out = ones(1, 1), ones(1, 1), ones(1, 1)
        fn = lambda: torch.matmul(a, b, out=out)  # noqa: E731
    elif op == "GEMV":
        a, v, out = ones(1, 1), ones(1), ones(1)
        fn = lambda: torch.mv(a, v, out=out)  # noqa: E731
    elif op == "BIL":
        x1, x2, w = ones(1, 1), ones(1, 1), ones(1, 1, 1)
        fn = lambda: F.bilinear(x1, x2, w)  # noqa: E731
    else:
        return None

    def run():
        with torch.no_grad():
            return fn()
    return run

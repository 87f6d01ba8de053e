"""PyTorch baselines for the FlexTensor suite on a GPU: the same computation on
the same arrays through PyTorch's vendor kernels (cuDNN for convolutions with
`cudnn.benchmark`, cuBLAS for GEMM/GEMV/bilinear, PyTorch's native depthwise
kernel where cuDNN declines), in each layout PyTorch offers.

Inputs are copied to `device` once, when the variants are made; each callable
only launches and returns the result tensor, left on the device, so a timer
around it never times a host<->device copy. fp32 is compared with TF32 off on
both matmul and cuDNN unless `tf32=True`, which restores PyTorch's own
defaults (TF32 for cuDNN convolutions, none for matmul). The TF32 flags are
process-wide, so every callable sets them before it launches: variants of
both settings can alternate in one process. `device="cpu"` runs the same
mapping on the host (tests check it against the NumPy reference)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import suite_case

# PyTorch's defaults (torch.backends docs, "TensorFloat-32 (TF32) on Ampere (and later) devices")
TORCH_DEFAULT_TF32 = {"matmul": False, "cudnn": True}


def _set_tf32(torch, tf32: bool) -> None:
    matmul, cudnn = (TORCH_DEFAULT_TF32["matmul"], TORCH_DEFAULT_TF32["cudnn"]) if tf32 else (False, False)
    torch.backends.cuda.matmul.allow_tf32 = matmul
    torch.backends.cudnn.allow_tf32 = cudnn


def tf32_label(tf32: bool) -> str:
    """How a column's TF32 setting reads in a table."""
    if not tf32:
        return "TF32 off (matmul and cuDNN)"
    return "PyTorch's TF32 default (cuDNN convolutions TF32, matmul fp32)"


def _conv_kwargs(op: str, c: dict) -> dict:
    kw = dict(stride=c["stride"], padding=c["padding"], dilation=c.get("dilation", 1), groups=c.get("groups", 1))
    if op == "DEP":
        kw["groups"] = c["in_channels"]
    if op in ("T1D", "T2D", "T3D"):
        kw["output_padding"] = c.get("output_padding", 0)
    return kw


def _layouts(torch, op: str, x, w) -> dict[str, tuple]:
    """Layout name -> (input, weight) in that memory format."""
    out = {{3: "NCW", 4: "NCHW", 5: "NCDHW"}[x.dim()]: (x, w)}
    fmt = {"C2D": torch.channels_last, "GRP": torch.channels_last, "DIL": torch.channels_last,
           "DEP": torch.channels_last, "R50": torch.channels_last, "T2D": torch.channels_last,
           "C3D": torch.channels_last_3d, "T3D": torch.channels_last_3d}.get(op)
    if fmt is not None:
        out["channels_last"] = (x.contiguous(memory_format=fmt), w.contiguous(memory_format=fmt))
    return out


def torch_gpu_variants(op: str, case: str, arrays: list[np.ndarray], device: str = "cuda",
                       tf32: bool = False) -> dict[str, Callable[[], object]]:
    """Variant name -> a no-argument callable running suite case `op`/`case` in PyTorch on `device`
    with `arrays` (the suite program's inputs, in order), returning the result on the device. Empty
    when PyTorch is missing or has no such operator (BCM, SHO)."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return {}
    c = suite_case(op, case)
    if str(device).startswith("cuda"):
        torch.backends.cudnn.benchmark = True  # cuDNN picks its fastest algorithm per shape (first call)
    t = [torch.from_numpy(np.ascontiguousarray(a)).to(device) for a in arrays]  # once, outside any timing
    library = "cudnn" if str(device).startswith("cuda") else "torch"

    def launch(fn):
        def run():
            _set_tf32(torch, tf32)
            with torch.no_grad():
                return fn()
        return run

    conv = {"C1D": F.conv1d, "C2D": F.conv2d, "GRP": F.conv2d, "DIL": F.conv2d, "DEP": F.conv2d, "R50": F.conv2d,
            "C3D": F.conv3d, "T1D": F.conv_transpose1d, "T2D": F.conv_transpose2d, "T3D": F.conv_transpose3d}
    if op in conv:
        fn, kw = conv[op], _conv_kwargs(op, c)
        # depthwise: PyTorch picks the kernel (its native depthwise kernel for fp32 NCHW), not always cuDNN
        name = "depthwise" if op == "DEP" and library == "cudnn" else library
        return {f"{name}:{layout}": launch(lambda x=x, w=w: fn(x, w, **kw))
                for layout, (x, w) in _layouts(torch, op, t[0], t[1]).items()}
    blas = "cublas" if library == "cudnn" else "torch"
    if op == "GEMM":
        return {f"{blas}:row-major": launch(lambda: torch.matmul(t[0], t[1]))}
    if op == "GEMV":
        return {f"{blas}:row-major": launch(lambda: torch.mv(t[0], t[1]))}
    if op == "BIL":
        return {f"{blas}:row-major": launch(lambda: F.bilinear(t[0], t[1], t[2]))}
    return {}


__all__ = ["TORCH_DEFAULT_TF32", "tf32_label", "torch_gpu_variants"]

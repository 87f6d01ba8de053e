"""torch.export for the PyTorch frontend: a module traced, and decomposed to core ATen where asked."""

from __future__ import annotations

import warnings

from .builder import UnsupportedOpError
from .torch_quantized import in_eval_mode


def exported(module, example_inputs, decompose: bool):
    """The ExportedProgram of `module` (or `module` itself, when it is one) on `example_inputs`; in core
    ATen when `decompose`. A failure of torch's is an UnsupportedOpError naming the module and the cause."""
    import torch

    with warnings.catch_warnings():  # torch 2.13's export trips its own pytree deprecation warning
        warnings.filterwarnings("ignore", message=r".*treespec, LeafSpec", category=FutureWarning)
        if isinstance(module, torch.export.ExportedProgram):
            ep = module
        else:
            try:
                ep = torch.export.export(in_eval_mode(module), tuple(example_inputs))
            except Exception as e:  # noqa: BLE001 - torch raises many kinds; name the module and the cause
                raise UnsupportedOpError(f"from_torch: torch.export could not trace {type(module).__name__}: "
                                         f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from e
        return _decomposed(ep, module, example_inputs) if decompose else ep


def _decomposed(ep, module, example_inputs):
    """`ep` in core ATen. torch's decomposition of a fused attention can yield strides a later `view` rejects
    (Hugging Face GPT-2 at batch > 1); traced again with the math attention, the same graph decomposes."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    try:
        return ep.run_decompositions()
    except Exception as first:  # noqa: BLE001 - torch raises many kinds; name the module and the cause
        why = f"{type(first).__name__}: {str(first).splitlines()[0] if str(first) else ''}"
        if isinstance(module, torch.export.ExportedProgram):
            raise UnsupportedOpError(f"from_torch: torch could not decompose the ExportedProgram to core ATen: "
                                     f"{why}") from first
        try:
            with sdpa_kernel([SDPBackend.MATH]):
                return torch.export.export(in_eval_mode(module), tuple(example_inputs)).run_decompositions()
        except Exception as e:  # noqa: BLE001
            raise UnsupportedOpError(f"from_torch: torch could not decompose {type(module).__name__} to core "
                                     f"ATen: {why}") from e

"""Exporting a GPU module and loading it back without recompiling: a directory
holding each distinct kernel's artefact (`kernels/k<n>/`: device source,
binaries for CUDA, launch.json, as the runtime exports one kernel),
`weights.bin` (the weights block as the device holds it) and `model.json`
(the device plan: arena size, where each kernel argument lives, the steps of a
run, the inputs and outputs; plus the target and which artefact is which
kernel). A CUDA export is written without a GPU; loading it where there is
none gives a module that says why it cannot run."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np

from ..errors import MeasureError
from .device_module import GpuModule
from .device_plan import DevicePlan

FORMAT = "tilewright-gpu-module/1"


def export_gpu_module(module: GpuModule, directory) -> Path:
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    names = {}
    for n, (key, kernel) in enumerate(module.kernels.items()):
        names[key] = f"k{n}"
        kernel.export(d / "kernels" / names[key])
    (d / "weights.bin").write_bytes(module.weights.tobytes())
    t = module.target
    desc = {"format": FORMAT, "target": {"kind": t.kind, "arch": t.arch, "key": t.key}, "kernels": names,
            "plan": module.plan.to_json()}
    (d / "model.json").write_text(json.dumps(desc, indent=1))
    return d


def load_gpu_module(directory, target=None) -> GpuModule:
    """The GpuModule exported into `directory`, its kernels loaded from their artefacts on the device of
    `target` (default: the exported kind; for CUDA without a GPU, the exported arch, compile-only)."""
    from ..backends import backend_for
    from ..runtime.cuda_driver import NoCudaDevice
    from ..runtime.device_export import read_artefact
    from ..runtime.unrunnable import UnrunnableKernel
    from ..targets import as_target

    d = Path(directory)
    try:
        desc = json.loads((d / "model.json").read_text())
        weights = np.fromfile(d / "weights.bin", dtype=np.uint8)
    except (OSError, ValueError) as exc:
        raise MeasureError(f"cannot load the GPU module in {d}: {exc}") from None
    if desc.get("format") != FORMAT:
        raise MeasureError(f"{d / 'model.json'} is not a tilewright GPU module export (format "
                           f"{desc.get('format')!r}, expected {FORMAT!r})")
    kind = desc["target"]["kind"]
    if target is None:
        from ..targets.gpu import detect_cuda
        from .device_io import CUDA

        target = f"cuda -arch={desc['target']['arch']}" if kind == CUDA and detect_cuda() is None else kind
    target = as_target(target)
    loader = importlib.import_module(backend_for(target).loader).load_exported
    kernels = {}
    for key, name in desc["kernels"].items():
        path = d / "kernels" / name
        try:
            kernels[key] = loader(path)
        except NoCudaDevice as exc:  # no GPU here: readable and exportable, not runnable
            kernels[key] = UnrunnableKernel(read_artefact(path, kind)[0], path, str(exc))
    return GpuModule(DevicePlan.from_json(desc["plan"]), kernels, target, weights)


__all__ = ["export_gpu_module", "load_gpu_module"]

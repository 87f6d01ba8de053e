"""Device artefacts on disk, cached by content hash: a directory holding the
device source, its binaries (CUDA: .ptx and .cubin) and `launch.json`, which
an isolated measurement process loads. OpenCL programs are compiled by the
driver when loaded; they are compiled here once too, where pyopencl is
present, so a compile error is reported as one (not as a runtime failure)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..codegen.device import DeviceModule
from ..config import cache_dir
from ..errors import BuildError
from ..targets import Target

DESCRIPTOR = "launch.json"
SOURCE_FILE = {"cuda": "kernel.cu", "opencl": "kernel.cl"}


@dataclass(frozen=True)
class DeviceArtefact:
    path: Path  # the directory: source, binaries, launch.json
    module: DeviceModule
    binary: object = None  # build.nvcc.CudaBinary for CUDA


def _directory(module: DeviceModule, target: Target) -> Path:
    key = hashlib.sha256("\0".join([module.source, json.dumps(module.descriptor(), sort_keys=True), target.key])
                         .encode()).hexdigest()[:32]
    return cache_dir() / "kernels" / f"{module.dialect}-{key}"


def _write(d: Path, module: DeviceModule, binaries: dict) -> None:
    """Source, binaries and launch.json, written to a temporary directory renamed into place,
    so a concurrent reader never sees half an artefact."""
    if (d / DESCRIPTOR).exists():
        return
    try:
        d.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=d.name + ".", dir=d.parent))
        (tmp / SOURCE_FILE[module.dialect]).write_text(module.source)
        for name, data in binaries.items():
            (tmp / name).write_bytes(data) if isinstance(data, bytes) else (tmp / name).write_text(data)
        desc = module.descriptor() | {"source": SOURCE_FILE[module.dialect]}
        (tmp / DESCRIPTOR).write_text(json.dumps(desc, indent=1) + "\n")
        try:
            os.rename(tmp, d)
        except OSError:  # another process wrote the same artefact first
            shutil.rmtree(tmp, ignore_errors=True)
    except OSError as exc:
        raise BuildError(f"cannot write the device artefact {d}: {exc}; check that the cache directory is "
                         f"writable and has space (TILEWRIGHT_CACHE_DIR)") from None


def compile_cuda_artefact(module: DeviceModule, target: Target, timeout: float = 300.0) -> DeviceArtefact:
    from .nvcc import compile_cuda

    binary = compile_cuda(module.source, target.gpu.arch, timeout=timeout)
    d = _directory(module, target)
    _write(d, module, {"kernel.ptx": binary.ptx, "kernel.cubin": binary.cubin})
    return DeviceArtefact(d, module, binary)


def compile_opencl_artefact(module: DeviceModule, target: Target, context=None) -> DeviceArtefact:
    """With a pyopencl `context`, the program is built once here so that a compile error is a
    BuildError; the driver builds it again (from its cache) where the artefact is loaded."""
    if context is not None:
        from .opencl import build_program

        build_program(module.source, context)
    d = _directory(module, target)
    _write(d, module, {})
    return DeviceArtefact(d, module)


__all__ = ["DESCRIPTOR", "SOURCE_FILE", "DeviceArtefact", "compile_cuda_artefact", "compile_opencl_artefact"]

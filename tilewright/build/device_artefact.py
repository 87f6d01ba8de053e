"""Device artefacts on disk (written by `write_artefact`, cached by content hash): a directory holding the
device source, its binaries (CUDA: .ptx and .cubin) and `launch.json`, which
an isolated measurement process loads. OpenCL programs are compiled by the
driver when loaded; they are compiled here once too, where pyopencl is
present, so a compile error is reported as one (not as a runtime failure)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..codegen.device import DeviceModule
from ..errors import BuildError
from ..targets import Target
from .artefact_cache import cached_dir, content_key, publish, staging_dir

DESCRIPTOR = "launch.json"
SOURCE_FILE = {"cuda": "kernel.cu", "opencl": "kernel.cl"}


@dataclass(frozen=True)
class DeviceArtefact:
    path: Path  # the directory: source, binaries, launch.json
    module: DeviceModule
    binary: object = None  # build.nvcc.CudaBinary for CUDA


def write_artefact(directory, module: DeviceModule, binaries: dict[str, bytes | str] | None = None,
                   extra: dict | None = None) -> Path:
    """The device source, its binaries and launch.json in `directory`."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    (d / SOURCE_FILE[module.dialect]).write_text(module.source)
    for name, data in (binaries or {}).items():
        (d / name).write_bytes(data) if isinstance(data, bytes) else (d / name).write_text(data)
    desc = module.descriptor() | {"source": SOURCE_FILE[module.dialect]} | dict(extra or {})
    (d / DESCRIPTOR).write_text(json.dumps(desc, indent=1) + "\n")
    return d


# Part of every cache key: a change of what an artefact holds must not reuse directories written before it.
ARTEFACT_FORMAT = "device-artefact/2"  # 2: launch.json names the binary's arch, its compiler and the device


def _cached(module: DeviceModule, target: Target, binaries: dict, extra: dict | None = None) -> Path:
    """The artefact's cache directory, written once (staged, then renamed into place)."""
    key = content_key(module.source, json.dumps(module.descriptor(), sort_keys=True), target.key, ARTEFACT_FORMAT,
                      json.dumps(extra or {}, sort_keys=True))
    final = cached_dir(key, f"{module.dialect}-artefact")
    if (final / DESCRIPTOR).exists():
        return final
    try:
        tmp = staging_dir(key)
        write_artefact(tmp, module, binaries, extra)
        publish(tmp, final)
    except OSError as exc:
        raise BuildError(f"cannot write the device artefact {final}: {exc}; check that the cache directory is "
                         f"writable and has space (TILEWRIGHT_CACHE_DIR)") from None
    return final


def compile_cuda_artefact(module: DeviceModule, target: Target, timeout: float = 300.0) -> DeviceArtefact:
    from .nvcc import compile_cuda

    binary = compile_cuda(module.source, target.gpu.arch, timeout=timeout)
    d = _cached(module, target, {"kernel.ptx": binary.ptx, "kernel.cubin": binary.cubin},
                {"arch": binary.arch, "compiler": binary.compiler, "device": target.gpu.device})
    return DeviceArtefact(d, module, binary)


def compile_opencl_artefact(module: DeviceModule, target: Target, context=None) -> DeviceArtefact:
    """With a pyopencl `context`, the program is built here, so that a compile error is a BuildError, and
    kept as the artefact's `binary` for a kernel loaded in this process; a measuring process builds it
    again from the source (pyopencl caches the binary). launch.json names the platform and device."""
    program = None
    if context is not None:
        from .opencl import build_program

        program = build_program(module.source, context)
    extra = {"platform": target.gpu.platform, "device": target.gpu.device}
    return DeviceArtefact(_cached(module, target, {}, extra), module, program)


__all__ = ["ARTEFACT_FORMAT", "DESCRIPTOR", "SOURCE_FILE", "DeviceArtefact", "compile_cuda_artefact",
           "compile_opencl_artefact", "write_artefact"]

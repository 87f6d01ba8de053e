"""Exported device artefacts: a directory holding the device source, any
binaries and `launch.json` (grid, block, shared bytes, argument order, dtypes,
shapes), so an isolated measurement process can load a kernel from disk."""

from __future__ import annotations

import json
from pathlib import Path

from ..codegen.device import DeviceModule
from ..errors import MeasureError

DESCRIPTOR = "launch.json"
SOURCE_FILE = {"cuda": "kernel.cu", "opencl": "kernel.cl"}


def write_artefact(directory, module: DeviceModule, binaries: dict[str, bytes | str] | None = None,
                   extra: dict | None = None) -> Path:
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    (d / SOURCE_FILE[module.dialect]).write_text(module.source)
    for name, data in (binaries or {}).items():
        (d / name).write_bytes(data) if isinstance(data, bytes) else (d / name).write_text(data)
    desc = module.descriptor() | {"source": SOURCE_FILE[module.dialect]} | dict(extra or {})
    (d / DESCRIPTOR).write_text(json.dumps(desc, indent=1) + "\n")
    return d


def read_artefact(directory, dialect: str) -> tuple[DeviceModule, dict, Path]:
    d = Path(directory)
    try:
        desc = json.loads((d / DESCRIPTOR).read_text())
        source = (d / desc.get("source", SOURCE_FILE[dialect])).read_text()
    except (OSError, ValueError, KeyError) as exc:
        raise MeasureError(f"cannot load the device artefact in {d}: {exc}") from None
    if desc.get("dialect") != dialect:
        raise MeasureError(f"the artefact in {d} is for {desc.get('dialect')!r}, not {dialect!r}")
    return DeviceModule.from_descriptor(source, desc), desc, d


__all__ = ["DESCRIPTOR", "read_artefact", "write_artefact"]

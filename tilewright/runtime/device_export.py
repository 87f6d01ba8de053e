"""Exported device artefacts: a directory holding the device source, any
binaries and `launch.json` (grid, block, shared bytes, argument order, dtypes,
shapes), so an isolated measurement process can load a kernel from disk."""

from __future__ import annotations

import json
from pathlib import Path

from ..build.device_artefact import DESCRIPTOR, SOURCE_FILE, write_artefact
from ..codegen.device import DeviceModule
from ..errors import MeasureError


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

"""A kernel compiled for a device this machine does not have (CUDA without a
GPU: `target="cuda -arch=sm_90"`): its source, binaries and launch descriptor
can be read and exported; calling or timing it says why it cannot run."""

from __future__ import annotations

import shutil
from pathlib import Path

from ..errors import MeasureError


class UnrunnableKernel:
    def __init__(self, module, artefact_dir, reason: str):
        self.module, self._dir, self.reason = module, Path(artefact_dir), reason

    @property
    def source(self) -> str:
        return str(self.module)

    def __call__(self, *arrays) -> None:
        raise MeasureError(f"kernel '{self.module.func_name}' was compiled but cannot run here: {self.reason}")

    def time(self, *arrays, **options):
        self(*arrays)

    def export(self, directory) -> Path:
        """Copy the artefact (source, binaries, launch.json) into `directory`."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        for f in self._dir.iterdir():
            shutil.copyfile(f, d / f.name)
        return d


__all__ = ["UnrunnableKernel"]

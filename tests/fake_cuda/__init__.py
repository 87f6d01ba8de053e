"""A CUDA driver double for tests on machines without a GPU (fake_libcuda.c: the real cuda-bindings resolve
its entry points; memory is host memory, kernels are checked but never run). A process loads it when
LD_LIBRARY_PATH puts its folder first, so tests run their cases in fresh interpreters (`fake_env`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tilewright.config import c_compiler

SOURCE = Path(__file__).parent / "fake_libcuda.c"
ROOT = Path(__file__).resolve().parents[2]


def build_fake_driver(directory: Path) -> Path:
    """Compile libcuda.so.1 into `directory`; returns the directory."""
    subprocess.run([c_compiler(), "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-Wl,-soname,libcuda.so.1",
                    "-o", str(directory / "libcuda.so.1"), str(SOURCE)], check=True)
    return directory


def fake_env(driver_dir: Path, log: Path, cache: Path, extra_path: tuple = (), **env: str) -> dict[str, str]:
    """The environment of a process that loads the double (its calls logged to `log`) and imports this checkout
    (and the folders `extra_path`)."""
    path = os.pathsep.join([str(ROOT), str(ROOT / "tests"), *map(str, extra_path), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "LD_LIBRARY_PATH": f"{driver_dir}:{os.environ.get('LD_LIBRARY_PATH', '')}",
            "TW_FAKE_CUDA_LOG": str(log), "PYTHONPATH": path,
            "TILEWRIGHT_CACHE_DIR": os.environ.get("TILEWRIGHT_CACHE_DIR", str(cache)), **env}

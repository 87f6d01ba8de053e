"""Compiling C source to a shared library with the system compiler, cached by
a content hash of (source, flags, compiler version)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..config import cache_dir
from ..errors import BuildError
from ..targets import Target

# -fno-tree-loop-vectorize: our vectors are explicit (and `omp simd` loops still vectorize); GCC 12.2's
# auto-vectorizer miscompiled a legal conv schedule (tests/lower/test_random_schedules.py).
# -fno-predictive-commoning: GCC carries a conv's input broadcasts from one kernel-window tap to the
# next in extra registers and spills the register tile's accumulators (a synthetic loop of the 6x16
# conv step ran at 55% of a core's peak with it, 95% without; checked kernels gained 1.1-1.5x).
BASE_FLAGS = ("-O3", "-std=gnu11", "-fPIC", "-shared", "-fopenmp", "-Wall", "-Wno-unused-variable",
              "-Wno-unused-function", "-ffp-contract=fast", "-fno-tree-loop-vectorize", "-fno-predictive-commoning")


@dataclass(frozen=True)
class BuildResult:
    library: Path
    source: str
    flags: tuple[str, ...]
    cached: bool

    @property
    def path(self) -> Path:
        """What a measuring process loads (every backend's artefact has one)."""
        return self.library


def compile_flags(target: Target) -> tuple[str, ...]:
    return BASE_FLAGS + target.cflags


def build_library(source: str, target: Target, timeout: float = 300.0) -> BuildResult:
    flags = compile_flags(target)
    key = hashlib.sha256("\0".join([source, " ".join(flags), target.compiler, target.compiler_version])
                         .encode()).hexdigest()[:32]
    out_dir = cache_dir() / "kernels"
    out_dir.mkdir(parents=True, exist_ok=True)
    lib = out_dir / f"{key}.so"
    if lib.exists():
        return BuildResult(lib, source, flags, True)
    src = out_dir / f"{key}.c"
    src.write_text(source)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=out_dir)
    os.close(fd)
    cmd = [target.compiler, *flags, str(src), "-o", tmp, "-lm"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.unlink(tmp)
        raise BuildError(f"compiler timed out after {timeout:.0f}s: {' '.join(cmd)}") from None
    except OSError as exc:
        os.unlink(tmp)
        raise BuildError(f"cannot run the C compiler {target.compiler!r}: {exc}") from None
    if proc.returncode != 0:
        os.unlink(tmp)
        raise BuildError(f"C compilation failed ({' '.join(cmd)}):\n{proc.stderr.strip()[:4000]}")
    os.replace(tmp, lib)  # atomic: a concurrent reader never sees half a library
    return BuildResult(lib, source, flags, False)

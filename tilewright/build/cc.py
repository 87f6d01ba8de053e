"""Compiling C source to a shared library with the system compiler, cached by
a content hash of (source, flags, compiler version)."""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..config import cache_dir
from ..errors import BuildError, TilewrightError
from ..targets import Target
from .vector_math import libmvec_flags

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
    return BASE_FLAGS + target.cflags + libmvec_flags(target.compiler)[0]


def link_libraries(target: Target) -> tuple[str, ...]:
    """What every kernel library links after its objects: libm, and libmvec where it links."""
    return ("-lm", *libmvec_flags(target.compiler)[1])


def build_library(source: str, target: Target, timeout: float = 300.0) -> BuildResult:
    """Compile `source` to a shared library, or return the cached one. A cached
    library that is not a whole ELF file (empty, truncated, foreign) is deleted and
    rebuilt. Every failure of the compiler or the file system is a BuildError
    naming the path and what to do."""
    flags = compile_flags(target)
    key = hashlib.sha256("\0".join([source, " ".join(flags), target.compiler, target.compiler_version])
                         .encode()).hexdigest()[:32]
    try:
        out_dir = cache_dir() / "kernels"
        out_dir.mkdir(parents=True, exist_ok=True)
    except (OSError, TilewrightError) as exc:
        raise BuildError(f"cannot create the kernel cache directory ({exc}); {_FIX}") from None
    lib = out_dir / f"{key}.so"
    if lib.exists():
        bad = elf_problem(lib)
        if bad is None:
            return BuildResult(lib, source, flags, True)
        discard(lib)  # never loaded again: rebuilt below
    src = out_dir / f"{key}.c"
    cmd = [target.compiler, *flags, str(src), "-o", "<tmp>", *link_libraries(target)]
    tmp = None
    try:
        src.write_text(source)
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=out_dir)
        os.close(fd)
        cmd[cmd.index("<tmp>")] = tmp
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise BuildError(f"compiler timed out after {timeout:.0f}s: {' '.join(cmd)}") from None
        except OSError as exc:
            raise BuildError(f"cannot run the C compiler {target.compiler!r}: {exc}; set TILEWRIGHT_CC or CC "
                             "to a working C compiler") from None
        if proc.returncode != 0:
            raise BuildError(f"C compilation failed ({' '.join(cmd)}):\n{proc.stderr.strip()[:4000]}")
        bad = elf_problem(Path(tmp))
        if bad:
            raise BuildError(f"the C compiler {target.compiler!r} exited 0 but {bad} ({' '.join(cmd)}); set "
                             "TILEWRIGHT_CC or CC to a compiler that writes shared libraries")
        os.replace(tmp, lib)  # atomic: a concurrent reader never sees half a library
        tmp = None
    except OSError as exc:  # read-only (EROFS, EACCES) or full (ENOSPC) cache directory
        raise BuildError(f"cannot write to the kernel cache {out_dir} ({exc.strerror or exc}: "
                         f"{exc.filename or out_dir}); {_FIX}") from None
    finally:
        if tmp is not None:
            discard(Path(tmp))
    return BuildResult(lib, source, flags, False)


_FIX = "free space there or point TILEWRIGHT_CACHE_DIR at a writable directory with free space"


def rebuild(result: BuildResult, target: Target, reason: str, timeout: float = 300.0) -> BuildResult:
    """A cached library that failed to load: delete it and compile it again (once)."""
    discard(result.library)
    fresh = build_library(result.source, target, timeout)
    if fresh.library != result.library:  # another source or flags: not the artefact that failed
        raise BuildError(f"cannot load {result.library} ({reason}) and it does not rebuild to the same path")
    return fresh


def discard(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise BuildError(f"cannot delete the bad cached library {path} ({exc.strerror}); delete it by hand "
                         f"or {_FIX}") from None


def elf_problem(path: Path) -> str | None:
    """Why `path` is not a whole 64- or 32-bit ELF file (missing, empty, truncated
    before its section headers, not ELF), or None. Cheaper than dlopen, and it
    never runs the library's code in this process."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror})"
    if size == 0:
        return f"{path} is empty"
    if head[:4] != b"\x7fELF" or len(head) < 52 or head[4] not in (1, 2) or head[5] not in (1, 2):
        return f"{path} is not an ELF shared library"
    end = "<" if head[5] == 1 else ">"
    if head[4] == 2:
        if len(head) < 64:
            return f"{path} is truncated ({size} bytes)"
        shoff, = struct.unpack(end + "Q", head[40:48])
        shentsize, shnum = struct.unpack(end + "HH", head[58:62])
    else:
        shoff, = struct.unpack(end + "I", head[32:36])
        shentsize, shnum = struct.unpack(end + "HH", head[46:50])
    if shoff + shentsize * shnum > size:
        return f"{path} is truncated ({size} bytes, its section headers end at {shoff + shentsize * shnum})"
    return None

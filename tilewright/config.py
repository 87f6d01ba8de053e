"""Every configuration knob in one place. Environment variables:

| variable               | meaning                                         | default                    |
|------------------------|-------------------------------------------------|----------------------------|
| TILEWRIGHT_CACHE_DIR   | compiled kernels (with their .c), records, logs  | $XDG_CACHE_HOME/tilewright |
| TILEWRIGHT_CC          | C compiler (falls back to $CC, then `cc`)        | cc                         |
| TILEWRIGHT_BUILD_CPUS  | CPUs the tuner compiles on, e.g. "2-15"          | the process's own          |
| TILEWRIGHT_RUNNER_STDERR | file the measuring processes append their stderr | a temporary file, its tail |
|                        | to (tracebacks of failed candidates)             | quoted when a runner dies  |
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import TilewrightError


def usable_cores() -> int:
    """The cores this process may run on (`taskset` narrows them), not the machine's count."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def build_cpus() -> set[int] | None:
    """TILEWRIGHT_BUILD_CPUS: the CPUs (a list like "2-15" or "2,4-7") that the tuner's compiles run on,
    so that a process pinned to the cores it times kernels on (`taskset -c 0,1`) compiles on others
    without disturbing the timings; None (unset): compiles share the process's own cores."""
    text = os.environ.get("TILEWRIGHT_BUILD_CPUS", "").strip()
    if not text:
        return None
    n = os.cpu_count() or 1
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        cpus = set()
    if not cpus or min(cpus) < 0 or max(cpus) >= n:
        raise TilewrightError(f"TILEWRIGHT_BUILD_CPUS={text!r} is not a list of CPUs of this machine; give numbers "
                              f"or ranges between 0 and {n - 1}, e.g. '2-{n - 1}' or '2,3'")
    return cpus


def pin_this_thread(cpus: set[int] | None) -> None:
    """Move the calling thread (and the compilers it starts) to `cpus` (None: leave it). On Linux the
    affinity of pid 0 is the calling thread's, so the timing runner started from the main thread
    keeps the process's cores."""
    if cpus is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cpus)


def cache_dir() -> Path:
    base = os.environ.get("TILEWRIGHT_CACHE_DIR")
    if base:
        path = Path(base)
    else:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = Path(xdg) / "tilewright"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # read-only home, a file in the way, no space
        raise TilewrightError(f"cannot create the tilewright cache directory {path} ({exc.strerror or exc}); "
                              "set TILEWRIGHT_CACHE_DIR to a writable directory") from None
    return path


def c_compiler() -> str:
    return os.environ.get("TILEWRIGHT_CC") or os.environ.get("CC") or "cc"


def runner_stderr_path() -> str | None:
    """TILEWRIGHT_RUNNER_STDERR: where measuring processes append their stderr (None: a temporary file)."""
    return os.environ.get("TILEWRIGHT_RUNNER_STDERR") or None

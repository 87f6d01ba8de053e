"""Every configuration knob in one place. Environment variables:

| variable               | meaning                                         | default                    |
|------------------------|-------------------------------------------------|----------------------------|
| TILEWRIGHT_CACHE_DIR   | compiled kernels (with their .c), records, logs  | $XDG_CACHE_HOME/tilewright |
| TILEWRIGHT_CC          | C compiler (falls back to $CC, then `cc`)        | cc                         |
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import TilewrightError


def usable_cores() -> int:
    """The cores this process may run on (`taskset` narrows them), not the machine's count."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


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

"""The content-hash cache of device artefacts (PTX, cubins, OpenCL sources):
one directory per key under `config.cache_dir()/"kernels"`, filled through a
temporary directory and renamed into place, so a concurrent reader never sees
half an artefact."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from ..config import cache_dir


def content_key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def cached_dir(key: str, suffix: str) -> Path:
    """Where the artefacts of `key` live (it exists only once they are complete)."""
    return cache_dir() / "kernels" / f"{key}.{suffix}"


def staging_dir(key: str) -> Path:
    base = cache_dir() / "kernels"
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{key}.", dir=base))


def publish(tmp: Path, final: Path) -> None:
    """Move a finished staging directory into place (another process may have won the race)."""
    try:
        os.rename(tmp, final)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)

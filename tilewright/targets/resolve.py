"""Turning what a user passes as `target=` into a Target."""

from __future__ import annotations

from ..errors import TilewrightError
from .cpu import Target, host_target


def as_target(target=None, isa: str | None = None) -> Target:
    """None/"cpu"/"llvm"/"c" -> the host CPU; a Target passes through;
    `isa` (or "cpu -isa=avx2") forces a lower ISA level."""
    if isinstance(target, Target):
        return target.with_isa(isa) if isa else target
    if target is None:
        target = "cpu"
    if not isinstance(target, str):
        raise TilewrightError(f"target must be a string like 'cpu' or a tw.Target, got {target!r}")
    words = target.split()
    if not words or words[0] not in ("cpu", "llvm", "c"):
        raise TilewrightError(f"unknown target {target!r}; available: 'cpu' (optionally 'cpu -isa=avx2')")
    for w in words[1:]:
        if w.startswith("-isa="):
            isa = w[5:]
        else:
            raise TilewrightError(f"unknown target option {w!r} in {target!r}; valid: -isa=<scalar|sse4.2|avx2|avx512>")
    t = host_target()
    return t.with_isa(isa) if isa else t

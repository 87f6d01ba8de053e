"""Host CPU detection: cores, ISA features, caches and compiler, read at run
time (nothing assumes AVX-512 or AMX are present)."""

from __future__ import annotations

import functools
import os
import platform
import re
import subprocess

from .target import KNOWN_FEATURES, Target


def _cpu_flags() -> set[str]:
    try:
        text = open("/proc/cpuinfo").read()
    except OSError:
        return set()
    m = re.search(r"^(flags|Features)\s*:\s*(.*)$", text, re.M)
    return set(m.group(2).split()) if m else set()


def _sysfs_caches() -> list[dict]:
    """cpu0's cache descriptions from sysfs: one {file name: text} per cache (level,
    type, size and, where the kernel gives it, ways_of_associativity, else None); a cache
    whose level, type or size cannot be read is left out."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = sorted(e for e in os.listdir(base) if e.startswith("index"))
    except OSError:
        return []

    def read(entry, name):
        try:
            return open(f"{base}/{entry}/{name}").read().strip()
        except OSError:
            return None

    out = []
    for entry in entries:
        c = {f: read(entry, f) for f in ("level", "type", "size", "ways_of_associativity")}
        if None not in (c["level"], c["type"], c["size"]):
            out.append(c)
    return out


def _l1_ways(caches: list[dict]) -> int:
    for c in caches:
        if c["level"] == "1" and c["type"] in ("Data", "Unified") and (c["ways_of_associativity"] or "").isdigit():
            return int(c["ways_of_associativity"]) or 8
    return 8


def _caches(caches: list[dict]) -> tuple:
    out = []
    for c in caches:
        size = c["size"]
        mult = {"K": 1024, "M": 1 << 20}.get(size[-1:], 1)
        try:
            out.append((int(c["level"]), c["type"], int(size.rstrip("KM")) * mult))
        except ValueError:
            continue
    return tuple(out)


def compiler_version(cc: str) -> str:
    try:
        first = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=20).stdout.splitlines()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return first[0].strip() if first else "unknown"


@functools.cache
def host_target() -> Target:
    from ..config import c_compiler

    cc = c_compiler()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    flags = _cpu_flags()
    caches = _sysfs_caches()
    return Target(kind="cpu", arch=platform.machine(), cores=cores,
                  features=frozenset(f for f in flags if f in KNOWN_FEATURES), isa="native", caches=_caches(caches),
                  l1_ways=_l1_ways(caches), compiler=cc, compiler_version=compiler_version(cc))

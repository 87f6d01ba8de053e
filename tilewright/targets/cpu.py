"""Host CPU detection: cores, ISA features, caches, execution units (from the
vendor, family and model) and compiler, read at run time (nothing assumes
AVX-512 or AMX are present)."""

from __future__ import annotations

import functools
import os
import platform
import re
import subprocess

from ..config import usable_cores
from .target import KNOWN_FEATURES, Target


def cpu_flags() -> set[str]:
    """cpu0's feature flags from /proc/cpuinfo (`flags` on x86, `Features` on ARM; empty elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return set()
    m = re.search(r"^(flags|Features)\s*:\s*(.*)$", text, re.M)
    return set(m.group(2).split()) if m else set()


def cpu_identity() -> dict[str, str]:
    """cpu0's vendor_id, cpu family, model and model name from /proc/cpuinfo (x86; empty elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return {}
    out: dict[str, str] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("vendor_id", "cpu family", "model", "model name"):
            out[key.strip()] = value.strip()
    return out


def execution_units(vendor: str, family: int, model: int, name: str, features) -> dict[str, int]:
    """The Target fields fma_units, fma_bits, fma_latency, load_ports, load_bits of an x86 core,
    from its vendor, family, model and name (what /proc/cpuinfo says); Target's defaults (2 x 256-bit
    FMA of latency 4, 2 x 256-bit loads: AVX2 cores from Zen 3 and Skylake on) where nothing is known.
    - AMD Zen/Zen+ (family 0x17, model < 0x30): 128-bit units, FMA latency 5; Zen 2: 256-bit, latency 5;
      Zen 3 and Zen 4 (0x19): 256-bit, latency 4, so Zen 4 runs a 512-bit FMA or load as two halves
      (one zmm FMA per cycle); Zen 5 (0x1a) with AVX-512: full 512-bit units.
    - Intel with AVX-512: Xeons two 512-bit FMA units (Silver and Bronze parts, and client cores,
      fuse ports 0 and 1 into one: one zmm FMA per cycle, as 2 x 256 bits), 512-bit loads."""
    units = {"fma_units": 2, "fma_bits": 256, "fma_latency": 4, "load_ports": 2, "load_bits": 256}
    avx512 = "avx512f" in features
    if vendor in ("AuthenticAMD", "HygonGenuine"):
        if family == 0x17:
            units.update(fma_latency=5, **({"fma_bits": 128, "load_bits": 128} if model < 0x30 else {}))
        elif family >= 0x1A and avx512:
            units.update(fma_bits=512, load_bits=512)
    elif vendor == "GenuineIntel" and avx512:
        units.update(load_bits=512)
        if "Xeon" in name and not any(tier in name for tier in ("Silver", "Bronze")):
            units.update(fma_bits=512)
    return units


def _execution_units(features) -> dict[str, int]:
    ident = cpu_identity()

    def number(key):
        try:
            return int(ident.get(key, ""))
        except ValueError:
            return 0

    return execution_units(ident.get("vendor_id", ""), number("cpu family"), number("model"),
                           ident.get("model name", ""), features)


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
            with open(f"{base}/{entry}/{name}") as f:
                return f.read().strip()
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
    cores = usable_cores()
    flags = cpu_flags()
    caches = _sysfs_caches()
    features = frozenset(f for f in flags if f in KNOWN_FEATURES)
    return Target(kind="cpu", arch=platform.machine(), cores=cores, features=features, isa="native",
                  caches=_caches(caches), l1_ways=_l1_ways(caches), **_execution_units(features), compiler=cc,
                  compiler_version=compiler_version(cc))

"""CPU targets: host detection (cores, ISA features, vector width, caches,
compiler) and forcing a lower ISA. Code asks a Target for facts; nothing
assumes AVX-512 or AMX are present."""

from __future__ import annotations

import functools
import os
import platform
import re
import subprocess
from dataclasses import dataclass, field, replace

from ..errors import TilewrightError

# ISA levels we can force, from lowest to highest; each implies the ones before.
ISA_FEATURES = {
    "scalar": (),
    "sse4.2": ("sse4_2",),
    "avx2": ("sse4_2", "avx", "avx2", "fma"),
    "avx512": ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"),
}
_GCC_MARCH = {"scalar": "x86-64", "sse4.2": "x86-64-v2", "avx2": "x86-64-v3", "avx512": "x86-64-v4"}
_KNOWN = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni",
          "avx512_bf16", "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16", "avx_vnni")


@dataclass(frozen=True)
class Target:
    kind: str = "cpu"
    arch: str = "x86_64"
    cores: int = 1
    features: frozenset = field(default_factory=frozenset)
    isa: str = "native"  # "native" or a key of ISA_FEATURES
    caches: tuple = ()  # ((level, kind, bytes), ...)
    l1_ways: int = 8  # L1 data cache associativity (x86 cores since Nehalem: 8 or 12)
    compiler: str = "cc"
    compiler_version: str = ""

    @property
    def vector_bytes(self) -> int:
        if "avx512f" in self.features:
            return 64
        if "avx2" in self.features or "avx" in self.features:
            return 32
        if "sse4_2" in self.features or self.arch in ("aarch64", "arm64"):
            return 16
        return 0

    @property
    def vector_registers(self) -> int:
        """Architectural SIMD registers: what a register tile of accumulators must fit in."""
        if "avx512f" in self.features or self.arch in ("aarch64", "arm64"):
            return 32
        return 16

    def vector_lanes(self, dtype_bytes: int) -> int:
        """Lanes of a native vector of elements of `dtype_bytes` (1 = scalar)."""
        return max(1, self.vector_bytes // dtype_bytes) if self.vector_bytes else 1

    def has(self, feature: str) -> bool:
        return feature in self.features

    def cache_bytes(self, level: int) -> int:
        for lvl, kind, size in self.caches:
            if lvl == level and kind in ("Data", "Unified"):
                return size
        return 0

    @property
    def cflags(self) -> tuple[str, ...]:
        if self.arch != "x86_64":
            return ("-mcpu=native",) if self.isa == "native" else ()
        if self.isa == "native":
            return ("-march=native",)
        return (f"-march={_GCC_MARCH[self.isa]}", "-mtune=native")

    @property
    def key(self) -> str:
        """Identity for records: what a kernel's speed and legality depend on."""
        feats = ",".join(sorted(self.features))
        return f"{self.kind}-{self.arch}-{self.isa}[{feats}]-{self.compiler_version}"

    def with_isa(self, isa: str) -> Target:
        """This host restricted to a lower ISA level (e.g. "avx2"); "native" keeps it as it is."""
        if isa == "native":
            return self
        if isa not in ISA_FEATURES:
            raise TilewrightError(f"unknown ISA level {isa!r}; valid: {', '.join(ISA_FEATURES)} or 'native'")
        if not set(ISA_FEATURES[isa]) <= set(self.features):
            raise TilewrightError(f"the host lacks {isa}; its features are {sorted(self.features)}")
        return replace(self, isa=isa, features=frozenset(ISA_FEATURES[isa]) & self.features)

    def __str__(self) -> str:
        vec = f"{self.vector_bytes * 8}-bit vectors" if self.vector_bytes else "scalar"
        return f"{self.kind} {self.arch} ({self.isa}, {vec}, {self.cores} cores, {self.compiler_version})"


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
                  features=frozenset(f for f in flags if f in _KNOWN), isa="native", caches=_caches(caches),
                  l1_ways=_l1_ways(caches), compiler=cc, compiler_version=compiler_version(cc))

"""`Target`: what a kernel is built for, as data. One dataclass for every
kind (cpu, cuda, opencl, vta, aie, hls): CPU facts in its own fields, a GPU's in `gpu`, a
VTA-like accelerator's configuration in `vta` (targets/vta.py), an AI-Engine-like
core's in `aie` (targets/aie.py), an FPGA's in `hls` (targets/hls.py).
`Target("cpu")`, `Target("cuda")`, `Target("opencl")` detect the host or
device; any other call (fields by keyword) builds a synthetic target, as the
tests do. `key` is the full fingerprint records are filed under."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import TilewrightError

KINDS = ("cpu", "cuda", "opencl", "vta", "aie", "hls")

# ISA levels we can force, from lowest to highest; each implies the ones before.
ISA_FEATURES = {
    "scalar": (),
    "sse4.2": ("sse4_2",),
    "avx2": ("sse4_2", "avx", "avx2", "fma"),
    "avx512": ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"),
}
_GCC_MARCH = {"scalar": "x86-64", "sse4.2": "x86-64-v2", "avx2": "x86-64-v3", "avx512": "x86-64-v4"}
KNOWN_FEATURES = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni",
                  "avx512_bf16", "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16", "avx_vnni")


# (fma_units, fma_bits, fma_latency, load_ports, load_bits) of Target's defaults
DEFAULT_EXECUTION_UNITS = (2, 256, 4, 2, 256)


class _Detecting(type):
    """`Target("cuda")` (the kind alone, or a target string) detects; fields by keyword build data."""

    def __call__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs and isinstance(args[0], str):
            from .resolve import as_target

            return as_target(args[0])
        return super().__call__(*args, **kwargs)


@dataclass(frozen=True)
class Target(metaclass=_Detecting):
    kind: str = "cpu"
    arch: str = "x86_64"
    cores: int = 1
    features: frozenset = field(default_factory=frozenset)
    isa: str = "native"  # "native" or a key of ISA_FEATURES
    caches: tuple = ()  # ((level, kind, bytes), ...)
    l1_ways: int = 8  # L1 data cache associativity (x86 cores since Nehalem: 8 or 12)
    # Execution units of one core, for the default schedule model (targets/cpu.py detects them).
    # A vector op wider than its unit issues once per fma_bits of it: a 512-bit FMA on Zen 4's
    # 256-bit units (or Intel client cores' fused ports 0+1) takes two unit-cycles, one zmm per cycle.
    fma_units: int = 2  # FMA pipes
    fma_bits: int = 256  # widest operation one pipe completes in one pass
    fma_latency: int = 4  # cycles from an FMA's issue to its result
    load_ports: int = 2  # vector loads issued per cycle
    load_bits: int = 256  # widest load one port completes in one pass (Zen 4: a 512-bit load takes two)
    compiler: str = "cc"
    compiler_version: str = ""
    intrinsics: bool = True  # False: the search never tensorizes, plain vector arithmetic ("cpu -intrinsics=off")
    gpu: object = None  # targets.gpu.GpuFacts for cuda and opencl
    vta: object = None  # targets.vta.VTAConfig for vta
    aie: object = None  # targets.aie.AIEConfig for aie
    hls: object = None  # targets.hls.FPGADevice for hls

    def __post_init__(self):
        if self.kind not in KINDS:
            raise TilewrightError(f"unknown target kind {self.kind!r}; valid: {', '.join(KINDS)}")
        if self.kind == "vta":
            if self.vta is None:
                raise TilewrightError("a vta target needs its configuration (vta=VTAConfig(...)); Target('vta') "
                                      "builds the default one")
        elif self.kind == "aie":
            if self.aie is None:
                raise TilewrightError("an aie target needs its configuration (aie=AIEConfig(...)); Target('aie') "
                                      "builds the default one")
        elif self.kind == "hls":
            if self.hls is None:
                raise TilewrightError("an hls target needs its FPGA's facts (hls=FPGADevice(...)); Target('hls') "
                                      "builds the VU9P, 'hls -device=zu9eg' another part")
        elif self.kind != "cpu" and self.gpu is None:
            raise TilewrightError(f"a {self.kind} target needs its device facts (gpu=GpuFacts(...)); "
                                  f"Target({self.kind!r}) detects them")
        for name, value in zip(("fma_units", "fma_bits", "fma_latency", "load_ports", "load_bits"),
                               self.execution_units):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise TilewrightError(f"Target.{name} must be a positive int, got {value!r}")

    @property
    def is_gpu(self) -> bool:
        return self.kind in ("cuda", "opencl")

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

    def fmas_per_cycle(self, bits: int) -> float:
        """Vector FMAs of `bits` (one vector of that width) a core completes per cycle:
        2 on AVX2 cores at 256 bits; at 512 bits 1 on Zen 4, 2 on Xeons with two 512-bit units."""
        return self.fma_units * min(1.0, self.fma_bits / max(bits, 1))

    def loads_per_cycle(self, bits: int) -> float:
        """Vector loads of `bits` a core issues per cycle (a broadcast of one element counts as
        a narrow load)."""
        return self.load_ports * min(1.0, self.load_bits / max(bits, 1))

    @property
    def execution_units(self) -> tuple[int, int, int, int, int]:
        """(fma_units, fma_bits, fma_latency, load_ports, load_bits)."""
        return (self.fma_units, self.fma_bits, self.fma_latency, self.load_ports, self.load_bits)

    def has(self, feature: str) -> bool:
        return feature in self.features

    @property
    def compiler_is_gcc(self) -> bool:
        """Whether the C compiler is GCC (`cc --version` of Debian's gcc says "cc (Debian ...)"):
        the one whose per-function optimize attribute Schedule.compiler_hint uses."""
        v = self.compiler_version.lower()
        return self.kind == "cpu" and "clang" not in v and ("gcc" in v or v.startswith("cc ("))

    @property
    def last_level_cache_bytes(self) -> int:
        """The largest data or unified cache (0: none known)."""
        return max((size for _, kind, size in self.caches if kind in ("Data", "Unified")), default=0)

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
        """The full fingerprint records are filed under: everything a kernel's speed or legality
        depends on. CPU: ISA features, cores used, cache sizes and L1 ways, execution units
        (named only where they differ from the 2 x 256-bit FMA, latency 4, 2 x 256-bit load
        units of AVX2 cores and Zen 4, so those keys are what they were before the units were
        known), compiler; GPU: device name, architecture, driver and compiler versions."""
        if self.gpu is not None:
            return f"{self.kind}-{self.gpu.fingerprint}"
        if self.vta is not None:
            return self.vta.key
        if self.aie is not None:
            return self.aie.key
        if self.hls is not None:
            return self.hls.key
        feats = ",".join(sorted(self.features))
        caches = ",".join(f"L{lvl}{kind[0]}{size // 1024}K" for lvl, kind, size in sorted(self.caches))
        units = ""
        if self.execution_units != DEFAULT_EXECUTION_UNITS:
            fu, fb, lat, lp, lb = self.execution_units
            units = f"-fma{fu}x{fb}l{lat}-ld{lp}x{lb}"
        return (f"{self.kind}-{self.arch}-{self.isa}[{feats}]-{self.cores}c-[{caches}]w{self.l1_ways}{units}"
                f"-{self.compiler}-{self.compiler_version}{'' if self.intrinsics else '-nointrin'}")

    def with_isa(self, isa: str) -> Target:
        """This host restricted to a lower ISA level (e.g. "avx2"); "native" keeps it as it is."""
        if isa == "native":
            return self
        if self.kind != "cpu":
            raise TilewrightError(f"-isa= applies to cpu targets, not {self.kind}")
        if isa not in ISA_FEATURES:
            raise TilewrightError(f"unknown ISA level {isa!r}; valid: {', '.join(ISA_FEATURES)} or 'native'")
        if not set(ISA_FEATURES[isa]) <= set(self.features):
            raise TilewrightError(f"the host lacks {isa}; its features are {sorted(self.features)}")
        return replace(self, isa=isa, features=frozenset(ISA_FEATURES[isa]) & self.features)

    def with_intrinsics(self, on: bool) -> Target:
        """The same machine with (True) or without (False) its declared intrinsics: without, every
        kernel is plain vector arithmetic, the comparison point of what tensorizing gains."""
        if not isinstance(on, bool):
            raise TilewrightError(f"with_intrinsics takes True or False, got {on!r}")
        return replace(self, intrinsics=on)

    def with_cores(self, cores: int) -> Target:
        """The same machine using `cores` threads: a different fingerprint, so kernels tuned
        for one thread count are never silently applied to another."""
        if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
            raise TilewrightError(f"cores must be a positive int, got {cores!r}")
        return replace(self, cores=cores)

    def __str__(self) -> str:
        if self.gpu is not None:
            return f"{self.kind} {self.gpu.name} ({self.gpu.arch})"
        if self.vta is not None:
            return f"vta: {self.vta.describe()} (simulated)"
        if self.aie is not None:
            return f"aie: {self.aie.describe()} (simulated)"
        if self.hls is not None:
            return f"hls: {self.hls.describe()} (C simulation, modelled cycles)"
        vec = f"{self.vector_bytes * 8}-bit vectors" if self.vector_bytes else "scalar"
        if self.vector_bytes * 8 > self.fma_bits:
            vec += f" on {self.fma_bits}-bit units"
        plain = "" if self.intrinsics else ", no intrinsics"
        return f"{self.kind} {self.arch} ({self.isa}, {vec}, {self.cores} cores{plain}, {self.compiler_version})"

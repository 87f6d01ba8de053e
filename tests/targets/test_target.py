"""Host detection and forced ISA levels: the detected facts are sane, `-isa=avx2` / `-isa=scalar` kernels run
and agree with the reference, and their compiler flags (and cached libraries) differ."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess

import pytest
from oracle import check_kernel

import tilewright as tw
from tilewright.build import compile_flags
from tilewright.targets import ISA_FEATURES, Target, host_target
from tilewright.targets.target import KNOWN_FEATURES as _KNOWN

HOST = tw.as_target("cpu")
X86 = HOST.arch == "x86_64"


def needs(feature):
    return pytest.mark.skipif(not HOST.has(feature), reason=f"host lacks {feature}")


def gemm_schedule():
    A = tw.placeholder((9, 7), "float32", name="A")
    B = tw.placeholder((7, 20), "float32", name="B")
    k = tw.reduce_axis(7, name="k")
    C = tw.compute((9, 20), lambda i, j: tw.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = tw.create_schedule(C)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
    s[C].reorder(io, jo, k, ii, ji)
    s[C].vectorize(ji)
    s[C].parallel(io)
    return s, [A, B, C]


# ---- detection ----------------------------------------------------------------------------------------

def test_host_detection_fields():
    t = HOST
    assert isinstance(t, Target) and t.kind == "cpu"
    assert t.arch == platform.machine()
    assert 1 <= t.cores <= (os.cpu_count() or 1)
    if hasattr(os, "sched_getaffinity"):
        assert t.cores == len(os.sched_getaffinity(0))
    assert t.features <= frozenset(_KNOWN)
    assert t.isa == "native"
    assert t.compiler and shutil.which(t.compiler), t.compiler
    assert t.compiler_version and t.compiler_version != "unknown"
    assert t.vector_bytes in (0, 16, 32, 64)
    for level, kind, size in t.caches:
        assert level in (1, 2, 3, 4) and kind in ("Data", "Instruction", "Unified") and size > 0
    if t.caches:
        assert t.cache_bytes(1) > 0
    assert t.cache_bytes(9) == 0
    assert str(t).startswith(f"cpu {t.arch} (native")
    assert t.key.startswith(f"cpu-{t.arch}-native[")


def test_features_match_proc_cpuinfo():
    try:
        text = open("/proc/cpuinfo").read()
    except OSError:
        pytest.skip("no /proc/cpuinfo")
    flags = set()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            flags = set(line.split(":", 1)[1].split())
            break
    assert HOST.features == frozenset(f for f in flags if f in _KNOWN)


def test_vector_width_follows_features():
    t = HOST
    if t.has("avx512f"):
        assert t.vector_bytes == 64
    elif t.has("avx2") or t.has("avx"):
        assert t.vector_bytes == 32
    for size in (1, 2, 4, 8):
        assert t.vector_lanes(size) == (t.vector_bytes // size if t.vector_bytes else 1)


def test_host_target_is_cached_and_aliases():
    assert host_target() is host_target()
    for spelling in (None, "cpu", "llvm", "c", "  cpu  "):
        assert tw.as_target(spelling) == HOST
    assert tw.as_target(HOST) is HOST


@pytest.mark.parametrize("bad,match", [
    ("gpu", "unknown target 'gpu'"), ("", "unknown target ''"), ("cpu -mcpu=x", "unknown target option '-mcpu=x'"),
    ("cpu -isa=avx9000", "unknown ISA level 'avx9000'"), (42, "target must be a string"),
])
def test_bad_targets(bad, match):
    with pytest.raises(tw.TilewrightError, match=match):
        tw.as_target(bad)


@pytest.mark.skipif(not X86, reason="ISA levels are x86 levels")
def test_forcing_an_isa_the_host_lacks():
    missing = [isa for isa, feats in ISA_FEATURES.items() if not set(feats) <= HOST.features]
    if not missing:
        pytest.skip("the host has every ISA level")
    with pytest.raises(tw.TilewrightError, match=f"the host lacks {missing[-1]}"):
        tw.as_target(f"cpu -isa={missing[-1]}")


# ---- forced ISA levels --------------------------------------------------------------------------------

@pytest.mark.skipif(not X86, reason="ISA levels are x86 levels")
@needs("avx2")
def test_forced_avx2():
    t = tw.as_target("cpu -isa=avx2")
    assert t.isa == "avx2"
    assert t.features == frozenset(ISA_FEATURES["avx2"]) & HOST.features
    assert not any(f.startswith("avx512") for f in t.features)
    assert t.vector_bytes == 32 and t.vector_lanes(4) == 8
    assert "-march=x86-64-v3" in t.cflags
    assert tw.as_target("cpu", isa="avx2") == t
    assert tw.as_target(HOST, isa="avx2") == t
    assert t.key != HOST.key or HOST.isa == "avx2"


@pytest.mark.skipif(not X86, reason="ISA levels are x86 levels")
def test_forced_scalar():
    t = tw.as_target("cpu -isa=scalar")
    assert t.isa == "scalar" and t.features == frozenset()
    assert t.vector_bytes == 0 and t.vector_lanes(4) == 1
    assert "-march=x86-64" in t.cflags
    assert str(t).split("(")[1].startswith("scalar, scalar")


@pytest.mark.parametrize("spec", ["cpu", "cpu -isa=avx2", "cpu -isa=scalar", "cpu -isa=sse4.2"])
def test_forced_isa_kernels_agree_with_reference(spec, rng):
    if spec != "cpu" and not X86:
        pytest.skip("ISA levels are x86 levels")
    isa = spec.partition("-isa=")[2]
    if isa and not set(ISA_FEATURES[isa]) <= HOST.features:
        pytest.skip(f"host lacks {isa}")
    s, args = gemm_schedule()
    kernel = check_kernel(s, args, rng, target=spec)
    assert kernel.target == tw.as_target(spec)
    assert kernel.build_result.flags == compile_flags(tw.as_target(spec))


@pytest.mark.skipif(not X86, reason="ISA levels are x86 levels")
@needs("avx2")
def test_forced_isa_flags_and_libraries_differ(rng):
    s, args = gemm_schedule()
    native = tw.build(s, args, target="cpu")
    avx2 = tw.build(s, args, target="cpu -isa=avx2")
    scalar = tw.build(s, args, target="cpu -isa=scalar")
    flags = {k.build_result.flags for k in (native, avx2, scalar)}
    assert len(flags) == 3
    # lowering strip-mines vector loops at the target's width, so the C is the same for the same
    # vector width (native and avx2 on an AVX2 host), differing only in code generation flags
    if HOST.vector_bytes == 32:
        assert native.source == avx2.source
    assert scalar.source != avx2.source or "tw_float32x" not in avx2.source
    libs = {k.build_result.library for k in (native, avx2, scalar)}
    assert len(libs) == 3  # the kernel cache is keyed by the flags too


def _disassembly(kernel) -> str:
    objdump = shutil.which("objdump")
    if objdump is None:
        pytest.skip("objdump not available")
    return subprocess.run([objdump, "-d", "--no-show-raw-insn", str(kernel.build_result.library)],
                          capture_output=True, text=True, timeout=60).stdout


@pytest.mark.skipif(not X86, reason="ISA levels are x86 levels")
@needs("avx2")
def test_forced_isa_limits_the_instructions():
    s, args = gemm_schedule()
    avx2 = _disassembly(tw.build(s, args, target="cpu -isa=avx2"))
    scalar = _disassembly(tw.build(s, args, target="cpu -isa=scalar"))
    assert "zmm" not in avx2  # no AVX-512 registers
    assert "ymm" in avx2
    assert "ymm" not in scalar and "zmm" not in scalar


def test_peak_is_plausible():
    from tilewright.runtime.peak import fp32_peak_gflops

    peak = fp32_peak_gflops(HOST, 1)
    lanes = max(HOST.vector_bytes, 16) // 4
    assert 0.5 < peak < 2 * 2 * lanes * 2 * 6.0  # 2 FMA ports, 2 flops per FMA, at most 6 GHz, 2x margin


@pytest.mark.parametrize("kind,feature,macs", [("int8", "avx512_vnni", 64), ("bf16", "avx512_bf16", 32)])
def test_dot_product_peak_is_plausible_or_refused(kind, feature, macs):
    from tilewright.runtime.peak import dot_peak_gops

    if feature not in HOST.features:
        with pytest.raises(tw.TilewrightError, match=f"no {feature}"):
            dot_peak_gops(kind, HOST, 1)
        return
    peak = dot_peak_gops(kind, HOST, 1)
    assert 0.5 < peak < 2 * macs * 2 * 6.0  # at most 2 per cycle, 2 ops per multiply-add, 6 GHz
    with pytest.raises(tw.TilewrightError, match=f"no {feature}"):
        dot_peak_gops(kind, Target(features=frozenset(ISA_FEATURES["avx2"])), 1)


def test_isa_native_is_accepted():
    assert tw.as_target("cpu -isa=native") == HOST
    assert tw.as_target("cpu", isa="native") == HOST


def test_forcing_avx512_needs_every_avx512_feature():
    no_dq = Target(features=frozenset(ISA_FEATURES["avx512"]) - {"avx512dq"})
    with pytest.raises(tw.TilewrightError, match="lacks avx512"):
        no_dq.with_isa("avx512")


def test_forcing_a_level_checks_features_of_synthetic_targets():
    avx2_only = Target(features=frozenset(ISA_FEATURES["avx2"]))
    assert avx2_only.with_isa("sse4.2").features == frozenset({"sse4_2"})
    with pytest.raises(tw.TilewrightError, match="the host lacks avx512"):
        avx2_only.with_isa("avx512")
    with pytest.raises(tw.TilewrightError, match="the host lacks avx2"):
        Target(features=frozenset({"sse4_2"})).with_isa("avx2")


# ---- execution units -------------------------------------------------------------------------------

AVX2 = frozenset(ISA_FEATURES["avx2"])
AVX512 = frozenset(ISA_FEATURES["avx512"])


@pytest.mark.parametrize("vendor, family, model, name, features, want", [
    ("AuthenticAMD", 0x19, 0x01, "AMD EPYC 7763 64-Core Processor", AVX2, (2, 256, 4, 2, 256)),  # Zen 3
    ("AuthenticAMD", 0x19, 0x11, "AMD EPYC 9654 96-Core Processor", AVX512, (2, 256, 4, 2, 256)),  # Zen 4
    ("AuthenticAMD", 0x1A, 0x02, "AMD EPYC 9755 128-Core Processor", AVX512, (2, 512, 4, 2, 512)),  # Zen 5
    ("AuthenticAMD", 0x17, 0x31, "AMD EPYC 7742 64-Core Processor", AVX2, (2, 256, 5, 2, 256)),  # Zen 2
    ("AuthenticAMD", 0x17, 0x01, "AMD EPYC 7601 32-Core Processor", AVX2, (2, 128, 5, 2, 128)),  # Zen 1
    ("GenuineIntel", 6, 0x8F, "Intel(R) Xeon(R) Platinum 8480+", AVX512, (2, 512, 4, 2, 512)),  # SPR
    ("GenuineIntel", 6, 0x55, "Intel(R) Xeon(R) Silver 4214 CPU @ 2.20GHz", AVX512, (2, 256, 4, 2, 512)),
    ("GenuineIntel", 6, 0x7E, "Intel(R) Core(TM) i7-1065G7 CPU @ 1.30GHz", AVX512, (2, 256, 4, 2, 512)),
    ("GenuineIntel", 6, 0x9E, "Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz", AVX2, (2, 256, 4, 2, 256)),
    ("", 0, 0, "", frozenset(), (2, 256, 4, 2, 256)),  # nothing known: the defaults
])
def test_execution_units_from_vendor_family_and_model(vendor, family, model, name, features, want):
    from tilewright.targets.cpu import execution_units

    units = execution_units(vendor, family, model, name, features)
    t = Target(features=features, **units)
    assert t.execution_units == want


def test_fma_rate_follows_the_units_not_the_register_width():
    zen4 = Target(features=AVX512, fma_units=2, fma_bits=256)
    xeon = Target(features=AVX512, fma_units=2, fma_bits=512, load_bits=512)
    assert zen4.fmas_per_cycle(512) == 1 and zen4.fmas_per_cycle(256) == 2
    assert xeon.fmas_per_cycle(512) == 2 and xeon.fmas_per_cycle(256) == 2
    assert zen4.loads_per_cycle(512) == 1 and xeon.loads_per_cycle(512) == 2
    assert zen4.loads_per_cycle(32) == 2  # a broadcast is one narrow load


def test_key_names_execution_units_only_where_they_differ_from_the_defaults():
    base = Target(features=AVX2, cores=2, caches=((1, "Data", 32768),))
    assert base.key == "cpu-x86_64-native[avx,avx2,fma,sse4_2]-2c-[L1D32K]w8-cc-"  # as before units were known
    xeon = Target(features=AVX2, cores=2, caches=((1, "Data", 32768),), fma_bits=512, load_bits=512)
    assert xeon.key != base.key and "fma2x512l4-ld2x512" in xeon.key
    with pytest.raises(tw.TilewrightError, match="fma_units"):
        Target(fma_units=0)


def test_host_execution_units_are_sane():
    t = HOST
    assert t.fma_units >= 1 and t.fma_bits in (128, 256, 512) and 3 <= t.fma_latency <= 6
    assert t.load_ports >= 1 and t.load_bits in (128, 256, 512)

"""Synthetic CPU targets for tests of defaults and models: what they decide must not depend on the
host (a Zen 1 host's 128-bit FMA units, an AVX-512 host's 16 lanes). A test that builds and runs
with one skips where the host cannot execute its ISA."""

import dataclasses

from tilewright.targets import ISA_FEATURES, Target, as_target

# AVX2 + FMA with full-width (256-bit) units, 2 cores, 32 KiB L1 and 512 KiB L2: a Zen 3 core
AVX2 = Target(kind="cpu", arch="x86_64", cores=2, features=frozenset(ISA_FEATURES["avx2"]), isa="avx2",
              caches=((1, "Data", 32 * 1024), (2, "Unified", 512 * 1024)), l1_ways=8, compiler="cc",
              compiler_version="synthetic", fma_units=2, fma_bits=256, load_bits=256)

# AVX-512 executed as two 256-bit halves, the rest as AVX2 above: a Zen 4 core
AVX512 = dataclasses.replace(AVX2, features=frozenset(ISA_FEATURES["avx512"]), isa="avx512")


def host_runs(target: Target) -> bool:
    """Whether kernels built for `target` execute on this host: it has every feature the target uses."""
    return target.isa == "native" or target.features <= as_target("cpu").features

"""Hardware descriptions shared by every layer, as data: `Target("cpu")` is
the host, `Target("cpu -isa=avx2")` the host restricted to AVX2,
`Target("cuda")` / `Target("opencl")` the first device found (facts from
the driver: targets/gpu.py). Imports `errors` only. Public names: Target,
as_target, host_target, ISA_FEATURES, KINDS."""

from .cpu import host_target
from .resolve import as_target
from .target import ISA_FEATURES, KINDS, Target

__all__ = ["ISA_FEATURES", "KINDS", "Target", "as_target", "host_target"]

"""Hardware descriptions shared by every layer: `Target("cpu")` is the host,
`Target("cpu", isa="avx2")` the host restricted to AVX2. Imports `errors`.
Public names: Target, as_target, host_target."""

from .cpu import ISA_FEATURES, Target, host_target
from .resolve import as_target

__all__ = ["ISA_FEATURES", "Target", "as_target", "host_target"]

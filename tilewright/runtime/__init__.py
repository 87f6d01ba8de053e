"""Running compiled kernels: argument checks, calls, timing, export.
Imports `build`, `ir`, `errors`. Public names: Kernel, TimingResult."""

from .kernel import Kernel, TimingResult

__all__ = ["Kernel", "TimingResult"]

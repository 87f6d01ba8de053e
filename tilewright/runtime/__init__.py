"""Running compiled kernels: argument checks, calls, timing, export.
Imports `build`, `ir`, `errors`. Public names: Kernel, TimingResult."""

from .cuda import CudaKernel
from .kernel import Kernel, TimingResult
from .opencl import OpenCLKernel

__all__ = ["Kernel", "TimingResult", "CudaKernel", "OpenCLKernel"]

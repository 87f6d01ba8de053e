"""Source generation from loop IR: one C-family renderer base (`base.py`) and
its dialects (`c.py` for CPUs, `cuda.py` and `opencl.py` for GPUs, sharing `gpu.py`).
Imports `ir`, `errors`. Public names: generate_c, CSource, generate_cuda, generate_opencl,
DeviceModule, KernelLaunch, DeviceBuffer."""

from .c import CSource, generate_c
from .cuda import generate_cuda
from .device import DeviceBuffer, DeviceModule, KernelLaunch
from .opencl import generate_opencl

__all__ = ["CSource", "generate_c", "generate_cuda", "generate_opencl", "DeviceModule", "KernelLaunch",
           "DeviceBuffer"]

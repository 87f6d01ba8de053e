"""A one-thread kernel that spins for a number of clock cycles, as PTX text the
driver compiles itself (no CUDA compiler needed at run time). Launches queued
behind it start back to back when it ends, so events around them measure the
GPU's time even for kernels shorter than a launch from Python."""

from __future__ import annotations

import numpy as np

from .cuda_driver import check

# PTX ISA 7.8 (CUDA 11.8) for sm_75: every driver that runs CUDA 12/13 JIT-compiles it for its GPU.
SPIN_PTX = """.version 7.8
.target sm_75
.address_size 64

.visible .entry tw_spin(.param .u64 cycles)
{
  .reg .pred %p<2>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [cycles];
  mov.u64 %rd2, %clock64;
SPIN:
  mov.u64 %rd3, %clock64;
  sub.s64 %rd4, %rd3, %rd2;
  setp.lt.s64 %p1, %rd4, %rd1;
  @%p1 bra SPIN;
  ret;
}
"""


class SpinKernel:
    def __init__(self, device):
        cu = self.cu = device.cu
        device.make_current()
        self.module = check(cu, cu.cuModuleLoadData(SPIN_PTX.encode() + b"\0"), "cuModuleLoadData (spin kernel)")
        self.function = check(cu, cu.cuModuleGetFunction(self.module, b"tw_spin"), "cuModuleGetFunction (tw_spin)")
        self._cycles = np.zeros(1, dtype=np.int64)
        self._params = np.array([self._cycles.ctypes.data], dtype=np.uint64)

    def launch(self, cycles: int, stream) -> None:
        self._cycles[0] = cycles  # the driver copies the parameter values at launch
        check(self.cu, self.cu.cuLaunchKernel(self.function, 1, 1, 1, 1, 1, 1, 0, stream,
                                              self._params.ctypes.data, 0), "launch of the spin kernel")


__all__ = ["SPIN_PTX", "SpinKernel"]

"""The native analog's kernels (codegen/x86_vyasa.py) on the host: compiled like every CPU kernel,
called on NumPy arrays packed into the program's layouts, and timed by the same C loop as
tilewright's own kernels (`c_loop_timing`), on data already in those layouts."""

from __future__ import annotations

import ctypes

import numpy as np

from ..build.cc import build_library
from ..codegen.x86_vyasa import render_x86
from ..errors import ShapeError
from ..lower.aie_program import AIEProgram
from ..targets import Target
from .aie_kernel import offsets, pack
from .aligned import aligned_zeros
from .kernel import c_loop_timing


def has_vnni16(target: Target) -> bool:
    """Whether `target` runs the 256-bit vpdpwssd (int16 pairs, accumulated)."""
    return {"avx512_vnni", "avx512vl"} <= set(target.features)


class NativeVyasaKernel:
    """Call with (first operand, second operand, output) NumPy arrays, in the te's read order."""

    def __init__(self, program: AIEProgram, target: Target, threads: int | None = None, parallel: bool = True,
                 vnni: bool = False):
        if vnni and not has_vnni16(target):
            raise ShapeError(f"vpdpwssd needs AVX512-VNNI with AVX512VL; {target} has {sorted(target.features)}")
        self.program = program
        self.parallel, self.vnni = parallel, vnni
        self.source = render_x86(program, parallel=parallel, vnni=vnni)
        self._lib = ctypes.CDLL(str(build_library(self.source, target).library))
        self._lib.tw_time.restype = ctypes.c_double
        self._lib.tw_time.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int32]
        self._lib.tw_set_num_threads(threads or target.cores)

    def _buffers(self, arrays):
        if len(arrays) != 3:
            raise ShapeError(f"the x86 Vyasa kernel takes (operand, operand, output), got {len(arrays)} arrays")
        roles = self.program.roles
        ins = [pack(self.program.layouts[r], np.asarray(a), f"operand {r}") for r, a in zip(roles, arrays[:2])]
        out = aligned_zeros((self.program.layouts["o"].size,), np.int32)
        ptrs = (ctypes.c_void_p * 3)(*(b.ctypes.data for b in ins), out.ctypes.data)
        return ins, out, ptrs

    def __call__(self, *arrays):
        keep, out, ptrs = self._buffers(arrays)
        self._lib.tw_call(ptrs)
        np.copyto(arrays[2], out[offsets(self.program.layouts["o"])])
        return arrays[2]

    def time(self, *arrays, **options):
        """Seconds per call (TimingResult) of the kernel alone, on operands already in its layouts."""
        keep, out, ptrs = self._buffers(arrays)
        return c_loop_timing(self._lib, ptrs, **options)


__all__ = ["NativeVyasaKernel", "has_vnni16"]

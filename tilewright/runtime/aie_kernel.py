"""An AIE kernel on the host: the emitted intrinsic C compiled against aie_emu.h (our emulation of the
intrinsics' documented semantics) and called on NumPy arrays in the padded layouts the program
reads; its time is the cycle model's (simulated). Every call checks the emulation's fault
counters: a misaligned load or store, or an accumulator lane that wrapped, is an error, never a
result."""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import numpy as np

from ..build.cc import build_library
from ..codegen.aie import render_aie
from ..errors import MeasureError, ShapeError
from ..lower.aie_program import AIEProgram, Layout
from ..targets import host_target
from .aie_cycles import cycles
from .aligned import aligned_zeros

HEADER = Path(__file__).with_name("aie_emu.h")
_COUNTERS = ("loads", "stores", "vector_macs", "srs", "misaligned", "wrapped_lanes")


@functools.cache
def _header() -> str:
    return HEADER.read_text()


def host_source(source: str) -> str:
    """`source` with the emulation header inlined: one file for the host compiler (and its cache key)."""
    return source.replace('#include "aie_emu.h"', _header())


@functools.lru_cache(maxsize=64)
def offsets(layout: Layout) -> np.ndarray:
    """Every element's offset in `layout`'s buffer, indexed like the logical tensor."""
    return layout.offset(np.indices(layout.shape))


def pack(layout: Layout, array: np.ndarray, what: str) -> np.ndarray:
    """`array` copied into a zeroed, aligned buffer in `layout`."""
    if tuple(array.shape) != layout.shape:
        raise ShapeError(f"{what} must have shape {layout.shape}, got {tuple(array.shape)}")
    flat = aligned_zeros((layout.size,), array.dtype)
    flat[offsets(layout)] = array
    return flat


class AIEKernel:
    """Call with NumPy arrays in `arg_names` order (default: the product's two operands, then the output)."""

    def __init__(self, program: AIEProgram, config, name: str = "kernel", arg_names=None):
        self.program = program
        self.config = config
        self.name = name
        self.source = render_aie(program, name)
        self.report = cycles(program, config)
        self._lib = ctypes.CDLL(str(build_library(host_source(self.source), host_target()).library))
        self._fn = getattr(self._lib, name)
        self._fn.restype = None
        self.counters: dict[str, int] = {}
        form = program.form
        self.arg_names = list(arg_names or [o.name for o in form.operands] + [form.output.name])

    def _packed(self, role: str, array: np.ndarray) -> np.ndarray:
        return pack(self.program.layouts[role], array, f"AIE kernel '{self.name}': operand {role}")

    def __call__(self, *arrays):
        form = self.program.form
        a, b = form.operands
        if len(arrays) != 3:
            raise ShapeError(f"AIE kernel '{self.name}' takes ({', '.join(self.arg_names)}), got {len(arrays)} arrays")
        by_name = dict(zip(self.arg_names, arrays))
        ins = {}
        for op, role in zip((a, b), self.program.roles):
            arr = np.asarray(by_name[op.name])
            arr = np.asarray(arr)
            if arr.dtype != np.dtype(op.tensor.dtype.name):
                raise ShapeError(f"AIE kernel '{self.name}': '{op.name}' must be {op.tensor.dtype}, got {arr.dtype}")
            ins[role] = self._packed(role, arr)
        lay = self.program.layouts["o"]
        out = aligned_zeros((lay.size,), form.output.dtype.name)
        self._lib.aie_reset_counters()
        self._fn(ctypes.c_void_p(out.ctypes.data), *(ctypes.c_void_p(ins[r].ctypes.data)
                                                      for r in self.program.roles))
        raw = (ctypes.c_longlong * 6)()
        self._lib.aie_read_counters(raw)
        self.counters = dict(zip(_COUNTERS, raw))
        if self.counters["misaligned"] or self.counters["wrapped_lanes"]:
            raise MeasureError(f"AIE kernel '{self.name}' faulted in emulation: {self.counters['misaligned']} "
                               f"misaligned accesses, {self.counters['wrapped_lanes']} accumulator lanes wrapped")
        result = out[offsets(lay)]
        target = by_name[form.output.name]
        np.copyto(target, result)
        return target

    def stats(self) -> dict:
        """The cycle model's counts (simulated), with the schedule they are for."""
        return {"schedule": str(self.program.schedule), **self.report.as_dict()}


__all__ = ["AIEKernel", "host_source", "offsets", "pack"]

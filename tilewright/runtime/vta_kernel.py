"""A compiled VTA program as a callable kernel: NumPy arrays in, the accelerator
simulator runs the instruction stream on a device memory image, NumPy out.

`kernel.source` is the disassembly, `kernel.binary` the encoded instructions
and micro-ops, `kernel.stats()` the simulator's counters of the last call and
`kernel.time()` the simulated time at the configured clock (labelled as
simulated: no hardware ran)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..codegen.vta_isa import disassemble, encode, encode_uops
from ..errors import ShapeError
from ..lower.vta_conv import blocked_shapes
from .vta_sim import VTAStats, simulate


@dataclass(frozen=True)
class SimulatedTime:
    seconds: float
    cycles: int
    clock_mhz: float

    def __str__(self) -> str:
        return f"{self.seconds * 1e3:.3f} ms simulated ({self.cycles:,} cycles at {self.clock_mhz:g} MHz)"


class _Simulated:
    """What the simulator counted in a kernel's last call, and the simulated time."""

    cfg = None
    _stats: VTAStats | None = None

    def stats(self) -> VTAStats:
        if self._stats is None:
            raise ShapeError("VTA kernel: stats() needs one call first (the simulator counts what it ran)")
        return self._stats

    def time(self) -> SimulatedTime:
        s = self.stats()
        return SimulatedTime(s.cycles / (self.cfg.clock_mhz * 1e6), s.cycles, self.cfg.clock_mhz)


class VTAKernel(_Simulated):
    """Runs a `lower.vta_conv.VTAProgram`: kernel(data, weight[, bias]) -> output (blocked layouts)."""

    def __init__(self, program, checked: bool = True):
        self.program = program
        self.cfg = program.cfg
        self.checked = checked
        self.insn_bytes = encode(program.insns, self.cfg)
        self.uop_bytes = encode_uops(program.uops, self.cfg)
        self._stats: VTAStats | None = None
        self.shapes = blocked_shapes(program.shape, self.cfg)

    @property
    def source(self) -> str:
        p = self.program
        head = f"; {p.shape}  {p.tiling}  epilogue {p.epilogue}"
        return head + "\n" + disassemble(p.insns, p.uops, self.cfg)

    @property
    def binary(self) -> bytes:
        return self.insn_bytes + self.uop_bytes

    def _put(self, dram: np.ndarray, name: str, array, dtype) -> None:
        want = self.shapes[name]
        a = np.asarray(array)
        if a.shape != want or a.dtype != np.dtype(dtype):
            raise ShapeError(f"VTA kernel argument '{name}': expected {np.dtype(dtype)} {list(want)}, got "
                             f"{a.dtype} {list(a.shape)}")
        off, n = self.program.regions[name]
        dram[off:off + n] = np.ascontiguousarray(a).view(np.uint8).reshape(-1)

    def __call__(self, data, kernel, bias=None, out=None) -> np.ndarray:
        p = self.program
        if p.epilogue.bias and bias is None:
            raise ShapeError("VTA kernel: this program adds a bias; pass bias (int32 "
                             f"{list(self.shapes['bias'])})")
        dram = np.zeros(p.dram_bytes, np.uint8)
        off, n = p.regions["uop"]
        dram[off:off + n] = np.frombuffer(self.uop_bytes, np.uint8)
        self._put(dram, "data", data, np.int8)
        self._put(dram, "kernel", kernel, np.int8)
        if p.epilogue.bias:
            self._put(dram, "bias", bias, np.int32)
        self._stats = simulate(self.insn_bytes, dram, self.cfg, checked=self.checked)
        off, n = p.regions["out"]
        result = dram[off:off + n].view(np.int8).reshape(self.shapes["out"])
        if out is not None:
            if out.shape != result.shape or out.dtype != result.dtype:
                raise ShapeError(f"VTA kernel argument 'out': expected int8 {list(result.shape)}, got {out.dtype} "
                                 f"{list(out.shape)}")
            out[...] = result
            return out
        return result.copy()



def by_role(roles: tuple[str, ...], arrays) -> dict:
    """A kernel call's arrays by role ("data", "kernel", "bias", "out"), checked: one per role, the
    output a writable NumPy array."""
    if len(arrays) != len(roles):
        raise ShapeError(f"VTA kernel: expected {len(roles)} arrays ({', '.join(roles)}), got {len(arrays)}")
    named = dict(zip(roles, arrays))
    out = named["out"]
    if not isinstance(out, np.ndarray) or not out.flags.writeable:
        raise ShapeError("VTA kernel: the output argument must be a writable NumPy array")
    return named


class VTAOperatorKernel:
    """`tw.build([...], target="vta")`'s kernel: called with every argument in the build's order
    (outputs preallocated, as every tilewright kernel), it runs the program and fills the output."""

    def __init__(self, kernel: VTAKernel, roles: tuple[str, ...]):
        self.kernel, self.roles = kernel, roles
        self.program = kernel.program

    def __call__(self, *arrays):
        named = by_role(self.roles, arrays)
        return self.kernel(named["data"], named["kernel"], named.get("bias"), out=named["out"])

    @property
    def source(self) -> str:
        return self.kernel.source

    @property
    def binary(self) -> bytes:
        return self.kernel.binary

    def stats(self) -> VTAStats:
        return self.kernel.stats()

    def time(self) -> SimulatedTime:
        return self.kernel.time()


class VTAFunction(_Simulated):
    """A te schedule compiled for the accelerator (lower/vta_select.py): called with every argument
    in order, NumPy arrays of the declared shapes and dtypes; the arguments the program stores into
    are filled."""

    def __init__(self, program, checked: bool = True):
        self.program, self.cfg, self.checked = program, program.cfg, checked
        self.insn_bytes = encode(program.insns, self.cfg)
        self.uop_bytes = encode_uops(program.uops, self.cfg)
        self._stats: VTAStats | None = None

    @property
    def source(self) -> str:
        p = self.program
        head = "; " + p.name + "(" + ", ".join(f"{n}: {d}{list(sh)}" for n, sh, d, _, _ in p.args) + ")"
        return head + "\n" + disassemble(p.insns, p.uops, self.cfg)

    @property
    def binary(self) -> bytes:
        return self.insn_bytes + self.uop_bytes

    def __call__(self, *arrays):
        p = self.program
        if len(arrays) != len(p.args):
            raise ShapeError(f"VTA kernel '{p.name}': expected {len(p.args)} arrays "
                             f"({', '.join(a[0] for a in p.args)}), got {len(arrays)}")
        dram = np.zeros(p.dram_bytes, np.uint8)
        dram[p.uop_offset:p.uop_offset + len(self.uop_bytes)] = np.frombuffer(self.uop_bytes, np.uint8)
        for a, (name, shape, dtype, off, _) in zip(arrays, p.args):
            if not isinstance(a, np.ndarray) or a.shape != shape or a.dtype != np.dtype(dtype):
                got = f"{a.dtype} {list(a.shape)}" if isinstance(a, np.ndarray) else type(a).__name__
                raise ShapeError(f"VTA kernel argument '{name}': expected {dtype} {list(shape)}, got {got}")
            dram[off:off + a.nbytes] = np.ascontiguousarray(a).view(np.uint8).reshape(-1)
        self._stats = simulate(self.insn_bytes, dram, self.cfg, checked=self.checked)
        for a, (name, shape, dtype, off, written) in zip(arrays, p.args):
            if written:
                if not a.flags.writeable:
                    raise ShapeError(f"VTA kernel argument '{name}' is written by the program; pass a writable array")
                a[...] = dram[off:off + a.nbytes].view(np.dtype(dtype)).reshape(shape)



__all__ = ["SimulatedTime", "VTAFunction", "VTAKernel", "VTAOperatorKernel"]

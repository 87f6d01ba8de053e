"""A fast simulator for the VTA-like accelerator (tilewright/targets/vta.py): `simulate` runs an
encoded program (tilewright/codegen/vta_isa.py) on a caller-owned DRAM array and returns its
simulated statistics.

The work is done by a small C core (vta_sim.c next to this file), compiled once per content
hash with the system C compiler into the tilewright cache and called through ctypes. The C
core hard-codes no bit position: this module hands it the ISA's field table. Two modes:

- checked (default): the load, compute and store modules run concurrently under an
  event-driven timing model with their command queues and dependence-token FIFOs; a deadlock,
  a token left unpopped, or two modules' accesses to an SRAM element that no token chain
  orders (found with vector clocks) is an error.
- functional: program order, tokens ignored, cycles the serial sum of instruction costs.

Cycle counts are the model's, not measurements of any hardware."""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..codegen.vta_isa import Opcode, field_positions, uop_field_widths
from ..config import c_compiler, cache_dir
from ..errors import MeasureError
from ..targets.vta import VTAConfig

# The orders of the arrays the C core reads and writes (its enums list the same names).
FIELDS = ("opcode", "pop_prev", "pop_next", "push_prev", "push_next", "mem", "sram_base", "dram_base", "y_size",
          "x_size", "x_stride", "y_pad0", "y_pad1", "x_pad0", "x_pad1", "reset", "uop_bgn", "uop_end", "iter_out",
          "iter_in", "dst_out", "dst_in", "src_out", "src_in", "wgt_out", "wgt_in", "op", "use_imm", "imm")
CONFIG = ("batch", "block_in", "block_out", "uop_depth", "inp_depth", "wgt_depth", "acc_depth", "inp_elem_bytes",
          "wgt_elem_bytes", "acc_elem_bytes", "out_elem_bytes", "bus_bytes", "gemm_ii", "gemm_setup", "alu_ii",
          "alu_imm_ii", "alu_setup", "dma_setup", "dep_queue_depth", "cmd_queue_depth")
UOP_FIELDS = ("dst", "src", "wgt")
STATS = ("cycles", "gemm_cycles", "alu_cycles", "load_busy", "compute_busy", "store_busy", "load_bytes_uop",
         "load_bytes_wgt", "load_bytes_inp", "load_bytes_acc", "store_bytes", "gemm_uops", "gemm_reset_uops",
         "alu_uops", "pad_elements", "load_insns", "compute_insns", "store_insns")
# return codes of vta_sim_run -> VTASimError.kind
KINDS = {1: "bounds", 2: "deadlock", 3: "race", 4: "unmatched_push", 5: "invalid_flag", 6: "program",
         7: "memory", 8: "internal", 9: "early_finish"}

CFLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fwrapv", "-std=gnu11")
_SOURCE = Path(__file__).with_name("vta_sim.c")


class VTASimError(MeasureError):
    """A program the simulator cannot run. `kind`: "bounds", "deadlock", "race", "unmatched_push",
    "invalid_flag", "program" (no or misplaced FINISH, unknown opcode), "input" (bad arguments),
    "build" (the C core did not compile), "memory", "internal"; `insn`: the instruction at fault
    (index into the program) or None."""

    def __init__(self, kind: str, message: str, insn: int | None = None):
        super().__init__(message)
        self.kind = kind
        self.insn = insn
        self.message = message


@dataclass(frozen=True)
class VTAStats:
    """What a simulated run did. Cycle counts come from the simulator's cost model (VTAConfig's
    setup and per-micro-op costs), not from hardware. Busy counts sum the costs of each module's
    instructions; `*_uops` count micro-op iterations (uops x iter_out x iter_in)."""
    cycles: int
    gemm_cycles: int
    alu_cycles: int
    load_busy: int
    compute_busy: int
    store_busy: int
    load_bytes_uop: int
    load_bytes_wgt: int
    load_bytes_inp: int
    load_bytes_acc: int
    store_bytes: int
    gemm_uops: int  # excludes reset GEMMs
    gemm_reset_uops: int
    alu_uops: int
    pad_elements: int  # zeros written by padded loads
    load_insns: int
    compute_insns: int  # FINISH included
    store_insns: int
    clock_mhz: float
    checked: bool  # timed with overlap (True) or the serial sum of costs (False)

    @property
    def load_bytes(self) -> int:
        return self.load_bytes_uop + self.load_bytes_wgt + self.load_bytes_inp + self.load_bytes_acc

    @property
    def gemm_utilization(self) -> float:
        """Fraction of cycles the GEMM array did useful work (one micro-op iteration keeps the whole
        batch x block_in x block_out array busy for one cycle)."""
        return self.gemm_uops / self.cycles if self.cycles else 0.0

    @property
    def seconds(self) -> float:
        return self.cycles / (self.clock_mhz * 1e6)

    def counts(self) -> dict[str, int]:
        """Every work count (all of STATS but `cycles`): the same in both modes for a race-free program."""
        return {name: getattr(self, name) for name in STATS if name != "cycles"}

    def report(self) -> str:
        mode = "checked timing, modules overlapped" if self.checked else "functional, costs summed serially"
        rows = [
            f"VTA simulated run ({mode}); cycle counts are simulated, not measured",
            f"  cycles        {self.cycles:,} ({self.seconds * 1e6:.2f} us at {self.clock_mhz:g} MHz)",
            f"  GEMM          {self.gemm_uops:,} micro-ops, {self.gemm_cycles:,} cycles, "
            f"utilization {100 * self.gemm_utilization:.1f}% ({self.gemm_reset_uops:,} reset micro-ops)",
            f"  ALU           {self.alu_uops:,} micro-ops, {self.alu_cycles:,} cycles",
            f"  busy          load {self.load_busy:,}, compute {self.compute_busy:,}, store {self.store_busy:,} "
            f"cycles",
            f"  DMA           loaded inp {self.load_bytes_inp:,} B, wgt {self.load_bytes_wgt:,} B, "
            f"acc {self.load_bytes_acc:,} B, uop {self.load_bytes_uop:,} B ({self.pad_elements:,} padding "
            f"elements); stored {self.store_bytes:,} B",
            f"  instructions  load {self.load_insns:,}, compute {self.compute_insns:,}, store {self.store_insns:,}",
        ]
        return "\n".join(rows)


def _host_tag() -> str:
    """-march=native code runs only on CPUs like this one; a shared cache must keep them apart."""
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith(("flags", "Features"))), "")
    except OSError:
        pass
    return f"{platform.machine()} {flags}"


def library_path() -> Path:
    """The compiled C core, built now if the cache lacks this source's build for this compiler and CPU."""
    source = _SOURCE.read_bytes()
    cc = c_compiler()
    key = hashlib.sha256(source + "\0".join((cc, *CFLAGS, _host_tag())).encode()).hexdigest()[:24]
    directory = cache_dir() / "vta_sim"
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"vta_sim_{key}.so"
    if target.exists():
        return target
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=directory)
    os.close(fd)
    try:
        cmd = [*shlex.split(cc), *CFLAGS, "-o", tmp, str(_SOURCE)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True)
        except OSError as exc:
            raise VTASimError("build", f"cannot run the C compiler {cc!r} ({exc}); set TILEWRIGHT_CC") from None
        if proc.returncode != 0:
            raise VTASimError("build", f"compiling the VTA simulator failed ({' '.join(cmd)}):\n"
                                       f"{proc.stderr.strip()[-2000:]}")
        os.replace(tmp, target)  # atomic: a concurrent process sees the whole library or none
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


@functools.cache
def _library() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(library_path()))
    p, i64 = ctypes.c_void_p, ctypes.c_int64
    lib.vta_sim_run.argtypes = [ctypes.c_char_p, i64, p, i64, p, i64, p, i64, ctypes.c_int32, p, i64,
                                ctypes.c_char_p, i64, ctypes.POINTER(i64)]
    lib.vta_sim_run.restype = ctypes.c_int
    return lib


@functools.cache
def _tables(cfg: VTAConfig) -> tuple[np.ndarray, np.ndarray]:
    """The config values and the [opcode][field] -> (bit offset, width) table, as the C core reads them."""
    index = {name: k for k, name in enumerate(FIELDS)}
    table = np.zeros((len(Opcode), len(FIELDS), 2), dtype=np.int64)
    for op, rows in field_positions(cfg).items():
        for name, off, width in rows:
            if name not in index:
                raise VTASimError("internal", f"the VTA ISA has a field {name!r} ({op.name}) the simulator does "
                                              f"not know; update FIELDS in vta_sim.py and vta_sim.c")
            table[int(op), index[name]] = (off, width)
    if any((table[int(op), 0] != table[0, 0]).any() for op in Opcode):
        raise VTASimError("internal", "the VTA ISA places the opcode differently per opcode; the simulator "
                                      "decodes it before knowing the layout")
    uop = uop_field_widths(cfg)
    if tuple(name for name, _ in uop) != UOP_FIELDS:
        raise VTASimError("internal", f"the VTA micro-op fields are {uop}, the simulator expects {UOP_FIELDS}")
    values = [getattr(cfg, name) for name in CONFIG]
    bad = [name for name, v in zip(CONFIG, values) if int(v) != v]
    if bad:
        raise VTASimError("input", f"VTAConfig {', '.join(bad)} must be whole numbers for the simulator")
    config = np.array([int(v) for v in values] + [w for _, w in uop], dtype=np.int64)
    table.flags.writeable = config.flags.writeable = False
    return config, table


def _check_dram(dram) -> None:
    if not isinstance(dram, np.ndarray):
        raise VTASimError("input", f"dram must be a NumPy uint8 array, got {type(dram).__name__}")
    problems = [why for bad, why in ((dram.dtype != np.uint8, f"its dtype is {dram.dtype}, not uint8"),
                                     (not dram.flags.c_contiguous, "it is not C-contiguous"),
                                     (not dram.flags.writeable, "it is read-only")) if bad]
    if problems:
        raise VTASimError("input", f"dram must be a writable, C-contiguous uint8 array (the simulator writes "
                                   f"stores into it in place): {'; '.join(problems)}")


def simulate(insns: bytes, dram: np.ndarray, cfg: VTAConfig, checked: bool = True) -> VTAStats:
    """Run the encoded program `insns` (16 bytes an instruction, `vta_isa.encode`) on `dram`, the
    device memory, which loads read and stores write in place (micro-ops, inputs, weights and
    accumulators are loaded from it too). Returns the run's statistics; raises VTASimError.
    On an error, `dram` holds whatever the stores before it wrote."""
    if not isinstance(cfg, VTAConfig):
        raise VTASimError("input", f"cfg must be a VTAConfig, got {type(cfg).__name__}")
    try:
        data = bytes(insns)
    except TypeError:
        raise VTASimError("input", f"insns must be bytes (vta_isa.encode's output), got "
                                   f"{type(insns).__name__}") from None
    if len(data) % 16:
        raise VTASimError("input", f"insns holds {len(data)} bytes, not a whole number of 16-byte instructions")
    _check_dram(dram)
    config, table = _tables(cfg)
    stats = np.zeros(len(STATS), dtype=np.int64)
    err = ctypes.create_string_buffer(4096)
    err_insn = ctypes.c_int64(-1)
    rc = _library().vta_sim_run(data, len(data) // 16, dram.ctypes.data, dram.nbytes, config.ctypes.data,
                                len(config), table.ctypes.data, len(FIELDS), int(bool(checked)), stats.ctypes.data,
                                len(STATS), err, len(err), ctypes.byref(err_insn))
    if rc:
        insn = err_insn.value if err_insn.value >= 0 else None
        raise VTASimError(KINDS.get(rc, "internal"), "VTA simulator: " + err.value.decode(errors="replace"), insn)
    return VTAStats(**{name: int(v) for name, v in zip(STATS, stats)}, clock_mhz=cfg.clock_mhz,
                    checked=bool(checked))


__all__ = ["VTASimError", "VTAStats", "library_path", "simulate"]

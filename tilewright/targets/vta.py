"""A VTA-like tensor accelerator, as data: the GEMM core's block, operand widths,
on-chip buffer sizes, the DMA bus, the clock and the cycle costs the simulator's
timing model charges.

Defaults are VTA's published configuration (apache/tvm-vta config/vta_config.json,
pynq_sample.json: LOG_BATCH 0, LOG_BLOCK 4, int8 inputs and weights, int32
accumulators, buffers UOP 32 KB, INP 32 KB, WGT 256 KB, ACC 128 KB) and the TVM
paper's PYNQ design (section 5.3: a 16 x 16 GEMM core at 200 MHz, 102.4 GOPS).
The per-instruction costs take the form of VTA's published static cost model
(apache/tvm-vta config/vta_cost.py, fitted on its 32 x 32 intelfocl design: GEMM
x + 80, ALU 2x + 46 (x + 46 with an immediate), loads and stores x + 150 cycles);
a load here costs its bus beats (bytes / `bus_bytes`) plus one cycle per padding
element written, instead of that file's per-element slope, so the bus width is a
knob. `bus_bytes` 8 is a 64-bit AXI port (the PYNQ's HP ports)."""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..errors import TilewrightError


def _log2(n: int, what: str) -> int:
    if n < 1 or n & (n - 1):
        raise TilewrightError(f"VTA {what} must be a power of two, got {n}")
    return n.bit_length() - 1


@dataclass(frozen=True)
class VTAConfig:
    batch: int = 1
    block_in: int = 16
    block_out: int = 16
    inp_bits: int = 8
    wgt_bits: int = 8
    acc_bits: int = 32
    uop_buffer_bytes: int = 32 * 1024
    inp_buffer_bytes: int = 32 * 1024
    wgt_buffer_bytes: int = 256 * 1024
    acc_buffer_bytes: int = 128 * 1024
    bus_bytes: int = 8
    clock_mhz: float = 200.0
    gemm_ii: int = 1  # cycles per micro-op of a GEMM (VTA's pipelined core: II=1)
    gemm_setup: int = 80
    alu_ii: int = 2  # cycles per micro-op of an ALU op reading a second operand
    alu_imm_ii: int = 1
    alu_setup: int = 46
    dma_setup: int = 150
    dep_queue_depth: int = 128  # dependence-token FIFO between two modules
    cmd_queue_depth: int = 512  # fetched instructions waiting in one module's queue

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
                raise TilewrightError(f"VTAConfig.{f.name} must be a positive number, got {v!r}")
        if (self.inp_bits, self.wgt_bits, self.acc_bits) != (8, 8, 32):
            raise TilewrightError(f"VTAConfig: this simulator implements int8 inputs and weights with int32 "
                                  f"accumulators, got {self.inp_bits}/{self.wgt_bits}/{self.acc_bits} bits")
        for name in ("batch", "block_in", "block_out", "uop_buffer_bytes", "inp_buffer_bytes", "wgt_buffer_bytes",
                     "acc_buffer_bytes", "bus_bytes"):
            _log2(getattr(self, name), name)
        for name, elem in (("inp", self.inp_elem_bytes), ("wgt", self.wgt_elem_bytes), ("acc", self.acc_elem_bytes)):
            if getattr(self, f"{name}_buffer_bytes") < elem:
                raise TilewrightError(f"VTAConfig: the {name} buffer is smaller than one {elem}-byte element")
        if 2 * self.log_acc_depth + self.log_wgt_depth > 32:
            raise TilewrightError(f"VTAConfig: a micro-op (acc {self.log_acc_depth} + src {self.log_acc_depth} + "
                                  f"wgt {self.log_wgt_depth} bits) does not fit in 32 bits; use smaller buffers")

    # element sizes: the unit every SRAM address and DRAM address of that buffer counts in
    @property
    def inp_elem_bytes(self) -> int:
        return self.batch * self.block_in * self.inp_bits // 8

    @property
    def wgt_elem_bytes(self) -> int:
        return self.block_out * self.block_in * self.wgt_bits // 8

    @property
    def acc_elem_bytes(self) -> int:
        return self.batch * self.block_out * self.acc_bits // 8

    @property
    def out_elem_bytes(self) -> int:
        return self.batch * self.block_out

    @property
    def uop_depth(self) -> int:
        return self.uop_buffer_bytes // 4

    @property
    def inp_depth(self) -> int:
        return self.inp_buffer_bytes // self.inp_elem_bytes

    @property
    def wgt_depth(self) -> int:
        return self.wgt_buffer_bytes // self.wgt_elem_bytes

    @property
    def acc_depth(self) -> int:
        return self.acc_buffer_bytes // self.acc_elem_bytes

    @property
    def log_uop_depth(self) -> int:
        return _log2(self.uop_depth, "micro-op buffer depth")

    @property
    def log_inp_depth(self) -> int:
        return _log2(self.inp_depth, "input buffer depth")

    @property
    def log_wgt_depth(self) -> int:
        return _log2(self.wgt_depth, "weight buffer depth")

    @property
    def log_acc_depth(self) -> int:
        return _log2(self.acc_depth, "accumulator buffer depth")

    @property
    def dram_align(self) -> int:
        """Bytes every operand region of device memory starts on: whole elements of every buffer."""
        return max(256, self.inp_elem_bytes, self.wgt_elem_bytes, self.acc_elem_bytes)

    @property
    def macs_per_cycle(self) -> int:
        return self.batch * self.block_in * self.block_out

    @property
    def peak_gops(self) -> float:
        return 2 * self.macs_per_cycle * self.clock_mhz / 1e3

    @property
    def block(self) -> str:
        return f"{self.batch}x{self.block_in}x{self.block_out}"

    @property
    def key(self) -> str:
        """Everything a kernel's legality or simulated time depends on (records are filed under it)."""
        return "vta-" + "-".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self))

    def describe(self) -> str:
        kb = lambda n: f"{n // 1024} KB"  # noqa: E731
        return (f"VTA-like {self.block} GEMM core (int8 x int8 -> int32) at {self.clock_mhz:g} MHz "
                f"({self.peak_gops:.1f} GOPS peak); buffers inp {kb(self.inp_buffer_bytes)}, "
                f"wgt {kb(self.wgt_buffer_bytes)}, acc {kb(self.acc_buffer_bytes)}, "
                f"uop {kb(self.uop_buffer_bytes)}; {self.bus_bytes * 8}-bit DMA bus")


# what "vta -name=value" may set; -block takes BATCHxINxOUT
OPTIONS = {"block": "BATCHxINxOUT", "inp_buffer": "bytes", "wgt_buffer": "bytes", "acc_buffer": "bytes",
           "uop_buffer": "bytes", "bus_bytes": "bytes", "clock_mhz": "MHz"}


def parse_vta_options(opts: dict[str, str]) -> VTAConfig:
    """`vta -block=8x8x8 -wgt_buffer=131072` -> a VTAConfig (unnamed fields keep VTA's defaults)."""
    kw: dict = {}
    for name, value in opts.items():
        try:
            if name == "block":
                b, i, o = (int(x) for x in value.lower().split("x"))
                kw.update(batch=b, block_in=i, block_out=o)
            elif name == "clock_mhz":
                kw[name] = float(value)
            elif name == "bus_bytes":
                kw[name] = int(value)
            else:
                kw[f"{name}_bytes"] = int(value)
        except ValueError:
            raise TilewrightError(f"target option -{name}={value!r}: expected {OPTIONS[name]}") from None
    return VTAConfig(**kw)


__all__ = ["OPTIONS", "VTAConfig", "parse_vta_options"]

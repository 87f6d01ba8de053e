"""An AI-Engine-like VLIW core with a 2-D SIMD datapath, as data (the first-generation Versal AI
Engine that Vyasa targets; its numbers are Vyasa's Table V and section II-B, and AMD's UG1078 /
UG1079 / AM009 for the intrinsics' lane addressing and the accumulator widths).

A vector MAC on `lanes` x `columns` multiplies per lane `columns` operand pairs, reduces them in
the lane and adds the sum to a wide accumulator: 8 x 1 for 32-bit operands (80-bit accumulator
lanes), 16 x 2 for 16-bit (48-bit), 16 x 8 for 8-bit (48-bit). Operands reach the datapath through
a shuffle network that selects, per lane and column, any 32-bit word of a register of up to 1024
bits (16-bit operands in pairs: UG1079's pairing rule). Loads and stores are aligned to 128 bits.
One VLIW bundle issues 2 vector loads, 1 store, 1 vector op and 2 scalar ops.

The pipeline latencies and the loop overheads have no public figure for this core; the values below
are this model's assumptions (named as such in every report), fixed before any workload was tuned."""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..errors import TilewrightError


@dataclass(frozen=True)
class AIEConfig:
    # datapath shape per operand width in bits: (lanes, columns)
    datapath32: tuple = (8, 1)
    datapath16: tuple = (16, 2)
    datapath8: tuple = (16, 8)
    acc_bits32: int = 80
    acc_bits16: int = 48
    vector_registers: int = 16  # of register_bits each: a 256-byte register file
    register_bits: int = 128
    max_register_bits: int = 1024  # widest group of registers one operand may name
    accumulators: int = 4  # 768-bit accumulator registers (AM009: bm0..bm3)
    local_memory_bytes: int = 128 * 1024
    load_slots: int = 2  # vector loads per bundle, one 256-bit port each
    store_slots: int = 1
    vector_slots: int = 1
    scalar_slots: int = 2
    port_bits: int = 256
    align_bits: int = 128
    program_memory_bytes: int = 16 * 1024
    bundle_bytes: int = 16  # the widest VLIW bundle, the code-size proxy's unit
    # model assumptions (no public figure): cycles from a load's issue to its data's first use, a MAC's
    # issue to its accumulator being readable by srs, and cycles a loop nest level costs on entry
    load_latency: int = 7
    mac_latency: int = 4
    loop_entry: int = 4

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            vals = v if isinstance(v, tuple) else (v,)
            if any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in vals):
                raise TilewrightError(f"AIEConfig.{f.name} must be positive integers, got {v!r}")
        if self.max_register_bits > self.vector_registers * self.register_bits:
            raise TilewrightError(f"AIEConfig: max_register_bits {self.max_register_bits} exceeds the register file "
                                  f"({self.vector_registers} x {self.register_bits} bits)")

    def datapath(self, bits: int) -> tuple[int, int]:
        """(lanes, columns) of a MAC on `bits`-bit operands."""
        shapes = {32: self.datapath32, 16: self.datapath16, 8: self.datapath8}
        if bits not in shapes:
            raise TilewrightError(f"the AIE datapath takes 32-, 16- or 8-bit integer operands, not {bits}-bit")
        return shapes[bits]

    def acc_bits(self, bits: int) -> int:
        return self.acc_bits32 if bits == 32 else self.acc_bits16

    def peak_macs(self, bits: int) -> int:
        lanes, cols = self.datapath(bits)
        return lanes * cols

    @property
    def register_file_bits(self) -> int:
        return self.vector_registers * self.register_bits

    @property
    def key(self) -> str:
        """Everything a kernel's legality or modelled cycles depend on (records are filed under it)."""
        return "aie-" + "-".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self))

    def describe(self) -> str:
        return (f"AIE-like core: {self.datapath32[0]}x{self.datapath32[1]} (32-bit), "
                f"{self.datapath16[0]}x{self.datapath16[1]} (16-bit) MAC datapath, "
                f"{self.vector_registers} x {self.register_bits}-bit vector registers, "
                f"{self.local_memory_bytes // 1024} KB local memory")


# what "aie -name=value" may set (the rest keep Table V's values)
OPTIONS = ("vector_registers", "accumulators", "load_latency", "mac_latency")


def parse_aie_options(opts: dict[str, str]) -> AIEConfig:
    kw = {}
    for name, value in opts.items():
        if not value.isdigit():
            raise TilewrightError(f"target option -{name}={value!r}: expected a positive integer")
        kw[name] = int(value)
    return AIEConfig(**kw)


__all__ = ["OPTIONS", "AIEConfig", "parse_aie_options"]

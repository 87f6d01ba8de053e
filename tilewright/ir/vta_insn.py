"""The instructions of a VTA-like tensor accelerator as data (the lowering's
output, before encoding): loads and stores between device memory and the
on-chip buffers, GEMM and ALU instructions driving micro-op loops, FINISH, and
the four dependence flags of each. Semantics and the binary layout:
codegen/vta_isa.py."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class Opcode(IntEnum):
    LOAD = 0
    STORE = 1
    GEMM = 2
    FINISH = 3
    ALU = 4


class MemType(IntEnum):
    UOP = 0
    WGT = 1
    INP = 2
    ACC = 3


class AluOp(IntEnum):
    MIN = 0
    MAX = 1
    ADD = 2
    SHR = 3


class Module(IntEnum):
    """The three decoupled units; each runs its instructions in order."""
    LOAD = 0
    COMPUTE = 1
    STORE = 2


@dataclass(frozen=True)
class Deps:
    pop_prev: bool = False
    pop_next: bool = False
    push_prev: bool = False
    push_next: bool = False

    def text(self) -> str:
        return " ".join(n.replace("_", "-") for n in ("pop_prev", "pop_next", "push_prev", "push_next")
                        if getattr(self, n))


@dataclass(frozen=True)
class MemInsn:
    opcode: Opcode  # LOAD or STORE
    mem: MemType
    sram_base: int
    dram_base: int
    y_size: int
    x_size: int
    x_stride: int
    y_pad0: int = 0
    y_pad1: int = 0
    x_pad0: int = 0
    x_pad1: int = 0
    deps: Deps = Deps()


@dataclass(frozen=True)
class GemmInsn:
    uop_bgn: int
    uop_end: int
    iter_out: int = 1
    iter_in: int = 1
    dst_out: int = 0
    dst_in: int = 0
    src_out: int = 0
    src_in: int = 0
    wgt_out: int = 0
    wgt_in: int = 0
    reset: bool = False
    deps: Deps = Deps()
    opcode: Opcode = Opcode.GEMM


@dataclass(frozen=True)
class AluInsn:
    op: AluOp
    uop_bgn: int
    uop_end: int
    iter_out: int = 1
    iter_in: int = 1
    dst_out: int = 0
    dst_in: int = 0
    src_out: int = 0
    src_in: int = 0
    use_imm: bool = False
    imm: int = 0
    reset: bool = False
    deps: Deps = Deps()
    opcode: Opcode = Opcode.ALU


@dataclass(frozen=True)
class FinishInsn:
    deps: Deps = Deps()
    opcode: Opcode = Opcode.FINISH


@dataclass(frozen=True)
class Uop:
    dst: int
    src: int = 0
    wgt: int = 0


Insn = MemInsn | GemmInsn | AluInsn | FinishInsn


def module_of(insn: Insn) -> Module:
    """Which unit runs `insn`: input and weight loads on the load unit, stores on the
    store unit, everything else (micro-op and accumulator loads too) on compute."""
    if isinstance(insn, MemInsn):
        if insn.opcode is Opcode.STORE:
            return Module.STORE
        return Module.LOAD if insn.mem in (MemType.INP, MemType.WGT) else Module.COMPUTE
    return Module.COMPUTE


__all__ = ["AluInsn", "AluOp", "Deps", "FinishInsn", "GemmInsn", "Insn", "MemInsn", "MemType", "Module", "Opcode",
           "Uop", "module_of"]

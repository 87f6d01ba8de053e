"""The VTA-like ISA's binary layout (hw_spec.h's bit fields), round trips and field overflow errors."""

import pytest

from tilewright.codegen.vta_isa import (
    AluInsn,
    AluOp,
    Deps,
    FinishInsn,
    GemmInsn,
    MemInsn,
    MemType,
    Module,
    Opcode,
    Uop,
    decode,
    decode_uops,
    disassemble,
    encode,
    encode_uops,
    field_positions,
    module_of,
)
from tilewright.errors import LoweringError
from tilewright.targets.vta import VTAConfig

CFG = VTAConfig()
PROGRAM = [
    MemInsn(Opcode.LOAD, MemType.INP, 3, 1000, 14, 14, 56, 1, 1, 1, 1, Deps(pop_next=True)),
    MemInsn(Opcode.LOAD, MemType.WGT, 0, 77, 2, 9, 36, deps=Deps(push_next=True)),
    GemmInsn(0, 9, 14, 14, 14, 1, 16, 1, 3, 4, deps=Deps(pop_prev=True, push_next=True)),
    AluInsn(AluOp.SHR, 0, 1, 7, 7, 1, 0, use_imm=True, imm=-8),
    AluInsn(AluOp.ADD, 2, 4, 7, 49, 1, 0, 1, 0),
    MemInsn(Opcode.STORE, MemType.ACC, 0, 5, 2, 392, 3136, deps=Deps(pop_prev=True, push_prev=True)),
    FinishInsn(Deps(pop_next=True)),
]


@pytest.mark.parametrize("cfg", [CFG, VTAConfig(batch=8, block_in=8, block_out=8)])
def test_instructions_and_uops_round_trip(cfg):
    data = encode(PROGRAM, cfg)
    assert len(data) == 16 * len(PROGRAM)
    assert decode(data, cfg) == PROGRAM
    uops = [Uop(1, 2, 3), Uop(cfg.acc_depth - 1, cfg.acc_depth - 1, cfg.wgt_depth - 1)]
    assert decode_uops(encode_uops(uops, cfg), cfg) == uops


def test_layout_follows_hw_spec_bit_fields():
    pos = {op: {name: (off, w) for name, off, w in fields} for op, fields in field_positions(CFG).items()}
    # the default configuration's widths: uop 13, inp 11, wgt 10, acc 11 bits of index
    assert pos[Opcode.LOAD]["dram_base"] == (25, 32) and pos[Opcode.LOAD]["y_size"] == (64, 16)
    assert pos[Opcode.LOAD]["x_pad1"] == (124, 4)
    assert pos[Opcode.GEMM]["iter_in"] == (49, 14) and pos[Opcode.GEMM]["wgt_in"] == (118, 10)
    assert pos[Opcode.ALU]["imm"] == (111, 16)
    word = int.from_bytes(encode([FinishInsn(Deps(pop_prev=True))], CFG), "little")
    assert word == (Opcode.FINISH | 1 << 3)


def test_values_that_do_not_fit_name_instruction_and_field():
    with pytest.raises(LoweringError, match=r"instruction 1 \(GEMM\): iter_out=16384 does not fit its 14-bit"):
        encode([FinishInsn(), GemmInsn(0, 1, iter_out=16384)], CFG)
    with pytest.raises(LoweringError, match="immediate 40000"):
        encode([AluInsn(AluOp.ADD, 0, 1, use_imm=True, imm=40000)], CFG)
    with pytest.raises(LoweringError, match="micro-op 0: wgt=1024"):
        encode_uops([Uop(0, 0, 1024)], CFG)


def test_units_and_disassembly():
    assert [module_of(i) for i in PROGRAM] == [Module.LOAD, Module.LOAD, Module.COMPUTE, Module.COMPUTE,
                                               Module.COMPUTE, Module.STORE, Module.COMPUTE]
    assert module_of(MemInsn(Opcode.LOAD, MemType.UOP, 0, 0, 1, 1, 1)) is Module.COMPUTE
    text = disassemble(PROGRAM, [Uop(1, 2, 3)], CFG)
    assert "LOAD  INP  sram=3 dram=1000 14x14 stride=56 pad y(1,1) x(1,1)  [pop-next]" in text
    assert "ALU   SHR imm=-8" in text and "STORE OUT" in text and "u0" in text

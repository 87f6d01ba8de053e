"""From a te schedule to an accelerator program: `lower_for_vta` (the loop nest
with virtual threads interleaved nest by nest and storage flattened, none of
the CPU passes), `select_program` (the arguments placed in device memory, the
nests selected into instructions by lower/vta_select.py, the micro-ops loaded
first, the dependence tokens inserted)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import LoweringError, ScheduleError
from ..ir.stmt import Seq
from ..ir.vta_insn import MemInsn, MemType, Opcode
from ..targets.vta import VTAConfig
from .bounds_check import check_bounds
from .flatten import flatten
from .lower import lower
from .simplify_stmt import simplify_stmt
from .vta_select import Selector
from .vta_sync import Access, Step, insert_tokens
from .vthreads import lower_vthreads


@dataclass
class SelectedProgram:
    """The instruction stream of a lowered function and where its arguments live in device memory."""

    cfg: VTAConfig
    name: str
    insns: list
    uops: list
    args: tuple  # (name, shape, dtype name, byte offset, written by the program)
    uop_offset: int
    dram_bytes: int


def lower_for_vta(s, args, name: str = "kernel"):
    """`lower` for the accelerator: the loop nest with virtual threads interleaved (lower/vthreads.py)
    and storage flattened, none of the CPU passes (vectorizing, unrolling, registers)."""
    func = lower(s, args, name, passes=False)
    check_bounds(func)
    return replace(func, body=simplify_stmt(flatten(lower_vthreads(func.body, coprocessor=True))) or Seq(()))


def select_program(func, cfg: VTAConfig) -> SelectedProgram:
    """Instructions for `func` (lowered without the CPU passes: vthreads injected, storage flat)."""
    align = cfg.dram_align
    offsets, at = {}, 0
    for b in func.args:
        offsets[id(b)] = at
        n = b.dtype.bytes
        for d in b.shape:
            n *= d
        at += -(-n // align) * align
    sel = Selector(cfg, offsets)
    sel.visit(func.body, {})
    if not sel.steps:
        raise LoweringError(f"VTA lowering: '{func.name}' does nothing on the accelerator")
    if len(sel.uops) > cfg.uop_depth:
        raise ScheduleError(f"VTA buffer 'vta.uop' overflows: {len(sel.uops)} micro-ops ({4 * len(sel.uops)} bytes), "
                            f"the buffer holds {cfg.uop_buffer_bytes} bytes")
    uop_at = at
    at += -(-4 * len(sel.uops) // align) * align
    load_uops = Step(MemInsn(Opcode.LOAD, MemType.UOP, 0, uop_at // 4, 1, len(sel.uops), len(sel.uops)),
                     writes=(Access("uop", 0, len(sel.uops)),))
    depths = {"inp": cfg.inp_depth, "wgt": cfg.wgt_depth, "acc": cfg.acc_depth, "uop": cfg.uop_depth}
    insns = insert_tokens([load_uops, *sel.steps], depths)
    args = tuple((b.name, tuple(b.shape), b.dtype.name, offsets[id(b)], id(b) in sel.stored) for b in func.args)
    return SelectedProgram(cfg, func.name, insns, sel.uops, args, uop_at, max(at, 256))


__all__ = ["SelectedProgram", "lower_for_vta", "select_program"]

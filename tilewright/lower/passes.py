"""The ordered pass pipeline applied by `lower`. `registers` is the register file
register tiles must fit (default: the host's)."""

from __future__ import annotations

from dataclasses import replace

from ..ir.stmt import Seq
from .accumulators import promote_accumulators
from .barriers import insert_barriers
from .bounds_check import check_bounds
from .flatten import flatten
from .lane_reductions import lane_reductions
from .operand_pins import pin_operands
from .partition import partition
from .registers import RegisterFile, host_register_file, promote_registers
from .simplify_stmt import simplify_stmt
from .thread_loops import thread_loops
from .unroll import unroll
from .vectorize import vectorize
from .verify import verify
from .vthreads import lower_vthreads
from .widen import widen_indices
from .zero_taps import skip_zero_taps


def run_passes(func, zero_boxes: dict | None = None, registers: RegisterFile | None = None):
    registers = registers or host_register_file()
    check_bounds(func)  # before any pass: accesses still have one index per tensor axis
    body = thread_loops(lower_vthreads(func.body))  # GPU kernels only; CPU bodies pass unchanged
    body = flatten(skip_zero_taps(body, zero_boxes or {}))
    body = simplify_stmt(body) or Seq(())
    body = partition(body)
    body = simplify_stmt(body) or Seq(())
    body = unroll(body)
    body = simplify_stmt(body) or Seq(())
    body = lane_reductions(body)
    body = vectorize(body, vector_bytes=registers.vector_bytes)  # strip-mined at the target's width
    body = promote_accumulators(body, registers)  # after unroll/vectorize: accesses have their final shape
    body = insert_barriers(body)
    body = simplify_stmt(body) or Seq(())
    func = widen_indices(replace(func, body=body))
    func = replace(func, body=promote_registers(func.body, registers.vector_bytes))  # every access is final now
    func = replace(func, body=pin_operands(func.body, registers))
    verify(func)
    return func

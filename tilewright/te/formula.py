"""Text form of a te program: one line per tensor, producers first."""

from __future__ import annotations

from ..ir.printer import expr_str
from .program import collect_program
from .tensor import PlaceholderOp


def tensor_line(t) -> str:
    dims = ", ".join(str(n) for n in t.shape)
    if isinstance(t.op, PlaceholderOp):
        return f"{t.name} = placeholder({t.dtype}[{dims}])"
    axes = ", ".join(f"{a.name}:{a.extent}" for a in t.op.axis)
    return f"{t.name}[{axes}] = {expr_str(t.op.body)}    # {t.dtype}[{dims}]"


def program_str(outputs) -> str:
    return "\n".join(tensor_line(t) for t in collect_program(outputs).tensors)

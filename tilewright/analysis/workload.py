"""Canonical workload keys: the structure of a te program (operations, shapes,
dtypes, index expressions), independent of the names the user chose, so a
tuning record is found again for the same computation written another day."""

from __future__ import annotations

import hashlib

from ..ir.expr import Binary, Call, Cast, Compare, Const, Expr, IterVar, Load, Reduce, Select, Unary, Var
from ..ir.traverse import children
from ..te.program import collect_program
from ..te.tensor import PlaceholderOp


def _canon(e: Expr, names: dict[int, str], tensors: dict[int, str]) -> str:
    if isinstance(e, Const):
        return f"{e.value!r}:{e.dtype}"
    if isinstance(e, IterVar):
        return names.setdefault(id(e), f"{'r' if e.kind.value == 'reduce' else 's'}{len(names)}[{e.begin},{e.extent}]")
    if isinstance(e, Var):
        return names.setdefault(id(e), f"v{len(names)}")
    if isinstance(e, Load):
        return f"{tensors[id(e.tensor)]}[{','.join(_canon(i, names, tensors) for i in e.indices)}]"
    if isinstance(e, Reduce):
        axes = ",".join(_canon(a, names, tensors) for a in e.axes)
        comb = _canon(e.combiner.result, names, tensors)
        cond = _canon(e.condition, names, tensors) if e.condition is not None else "-"
        return f"reduce<{comb}|{e.combiner.identity.value!r}>({_canon(e.source, names, tensors)};{axes};{cond})"
    head = type(e).__name__
    if isinstance(e, (Binary, Compare, Unary)):
        head = e.op.name
    elif isinstance(e, Call):
        head = e.func.name
    elif isinstance(e, (Cast, Select)):
        head = type(e).__name__
    return f"{head}:{e.dtype}({','.join(_canon(c, names, tensors) for c in children(e))})"


def canonical_text(outputs) -> str:
    program = collect_program(outputs)
    tensors: dict[int, str] = {}
    lines = []
    for n, t in enumerate(program.tensors):
        tensors[id(t)] = f"t{n}"
        shape = "x".join(map(str, t.shape))
        if isinstance(t.op, PlaceholderOp):
            # a promised value range decides which intrinsics are exact: it is part of the workload
            promise = f" in {list(t.op.value_range)}" if t.op.value_range else ""
            lines.append(f"t{n}=input({t.dtype}[{shape}]{promise})")
        else:
            names: dict[int, str] = {}
            for a in t.op.axis:
                _canon(a, names, tensors)
            lines.append(f"t{n}={_canon(t.op.body, names, tensors)} #{t.dtype}[{shape}]")
    outs = ",".join(tensors[id(t)] for t in program.outputs)
    return "\n".join(lines) + f"\nout={outs}"


def workload_key(outputs) -> str:
    """A short stable hash of `canonical_text`."""
    return hashlib.sha256(canonical_text(outputs).encode()).hexdigest()[:24]

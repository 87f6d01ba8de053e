"""Test inputs from each operator's domain. A measurement is only a check if the
reference it is compared with is a number: `log` of uniform(-1, 1) inputs is
NaN half the time, and a NaN reference checks nothing. So the program's
expressions are walked, and every input that feeds a `log`, `sqrt`, `rsqrt`,
a `pow` base or a float divisor (through any chain of computed stages) is drawn
from a positive range; the rest from the usual symmetric one."""

from __future__ import annotations

import numpy as np

from ..errors import TilewrightError
from ..ir.expr import Binary, BinOp, Call, Expr, Intrinsic, Load
from ..ir.traverse import children, walk
from ..te.program import collect_program
from ..te.tensor import ComputeOp, PlaceholderOp

# The argument positions of each call whose domain excludes negatives (or zero).
POSITIVE_ARGS = {Intrinsic.LOG: (0,), Intrinsic.SQRT: (0,), Intrinsic.RSQRT: (0,), Intrinsic.POW: (0,)}
POSITIVE_RANGE = (0.5, 1.5)  # away from 0: log, rsqrt and 1/x stay moderate
SYMMETRIC_RANGE = (-1.0, 1.0)


def _domain_args(e: Expr) -> list[Expr]:
    """Subexpressions of `e` whose value must be positive."""
    out = []
    for node in walk(e):
        if isinstance(node, Call) and node.func in POSITIVE_ARGS:
            out += [node.args[n] for n in POSITIVE_ARGS[node.func] if n < len(node.args)]
        elif isinstance(node, Binary) and node.op is BinOp.DIV and node.dtype.is_float:
            out.append(node.b)
    return out


def _value_loads(e: Expr) -> list:
    """Tensors whose values (not only indices) flow into `e`."""
    out, stack = [], [e]
    while stack:
        node = stack.pop()
        if isinstance(node, Load):
            out.append(node.tensor)  # its indices pick elements, they are not values
            continue
        stack.extend(children(node))
    return out


def positive_inputs(outputs) -> set[int]:
    """ids of the placeholders of the program of `outputs` that should be positive."""
    program = collect_program(outputs)
    roots = []
    for t in program.stages:
        for arg in _domain_args(t.op.body):
            roots += _value_loads(arg)
    positive, seen, stack = set(), set(), roots
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        if isinstance(t.op, PlaceholderOp):
            positive.add(id(t))
        elif isinstance(t.op, ComputeOp):
            stack.extend(_value_loads(t.op.body))
    return positive


def random_input(rng: np.random.Generator, t, positive: bool = False) -> np.ndarray:
    """Random values for input tensor `t`: floats in a symmetric range (or a positive
    one), ints in [-64, 64] (or [1, 64]), bools."""
    d = t.dtype
    if d.is_float:
        lo, hi = POSITIVE_RANGE if positive else SYMMETRIC_RANGE
        return rng.uniform(lo, hi, size=t.shape).astype(np.float32 if d.name == "bfloat16" else d.numpy)
    if d.is_bool:
        return rng.integers(0, 2, size=t.shape).astype(bool)
    lo, hi = d.int_range
    lo = max(lo, 1 if positive else -64)
    return rng.integers(lo, min(hi, 64) + 1, size=t.shape).astype(d.numpy)


def _mem_available() -> int | None:
    """Bytes the kernel says can be allocated without swapping (Linux), or None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_fits_in_memory(outputs, args, available: int | None = None) -> None:
    """Raise before allocating when the reference run cannot fit in memory: the
    evaluator holds every tensor of the program in float64, the runner a copy of
    each argument and reference output in its storage dtype."""
    available = _mem_available() if available is None else available
    if available is None:
        return
    tensors = collect_program(outputs).tensors
    sizes = {id(t): (t, int(np.prod(t.shape, dtype=object))) for t in (*tensors, *args)}
    need = sum(n * 8 for t, n in sizes.values())
    need += sum(sizes[id(t)][1] * np.dtype(t.dtype.numpy).itemsize * 2 for t in args)
    if need > available:
        t, n = max(sizes.values(), key=lambda tn: tn[1])
        raise TilewrightError(
            f"tuning needs reference inputs and outputs of about {need / 2**30:.1f} GiB, more than the "
            f"{available / 2**30:.1f} GiB of memory available; the largest tensor is '{t.name}' "
            f"{list(t.shape)} {t.dtype} ({n * 8 / 2**30:.1f} GiB in float64); tune a smaller instance of the "
            "same operator (the schedule space depends on the shape) or free memory")

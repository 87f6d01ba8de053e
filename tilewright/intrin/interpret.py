"""`run_lowered(func, *arrays)`: execute lowered loop IR in NumPy, each intrinsic
call replaced by its declared semantics (the reference evaluator on strided
views of the operands). A wrong layout map, a wrong stride or an out-of-bounds
operand then shows on any host, without the instruction.

Slow (one NumPy operation per IR node and iteration): for tests on small shapes.
bfloat16 buffers hold float32 values, as in the reference evaluator."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..errors import EvaluationError
from ..ir.expr import Broadcast, Expr, Ramp
from ..ir.stmt import Allocate, Barrier, Fence, For, IfThenElse, IntrinCall, LetStmt, Seq, Stmt, Store
from ..reference import evaluate
from ..reference.expr_eval import ExprEvaluator
from ..reference.values import to_storage


class _Evaluator(ExprEvaluator):
    """Expressions of lowered IR: flat buffers, scalars as shape-(1,) arrays, vectors as (lanes,)."""

    def _eval(self, e: Expr, mask):
        if isinstance(e, Ramp):
            return self._eval(e.base, mask) + e.stride * np.arange(e.lanes, dtype=e.dtype.scalar.numpy)
        if isinstance(e, Broadcast):
            return np.broadcast_to(self._eval(e.value, mask), (e.lanes,)).copy()
        return super()._eval(e, mask)


class _Machine:
    def __init__(self, func, arrays):
        self.buffers: dict[int, np.ndarray] = {}
        for b, a in zip(func.args, arrays):
            if not isinstance(a, np.ndarray) or not a.flags.c_contiguous:
                raise EvaluationError(f"run_lowered: argument '{b.name}' must be a C-contiguous NumPy array")
            if a.size != b.size or a.dtype != b.dtype.numpy:
                raise EvaluationError(f"run_lowered: argument '{b.name}' must hold {b.size} {b.dtype.numpy} values, "
                                      f"got {a.size} {a.dtype}")
            self.buffers[id(b)] = a.reshape(-1)
        self.vars: dict[int, np.ndarray] = {}
        self.ev = _Evaluator(self.vars, self.buffers, func.name, 1)
        self.calls = 0

    def value(self, e: Expr) -> np.ndarray:
        return self.ev(e)

    def scalar(self, e: Expr) -> int:
        v = self.value(e)
        return int(v.reshape(-1)[0])

    def run(self, s: Stmt) -> None:
        if isinstance(s, Seq):
            for c in s.stmts:
                self.run(c)
        elif isinstance(s, For):
            begin, extent = self.scalar(s.begin), self.scalar(s.extent)
            for n in range(begin, begin + extent):
                self.vars[id(s.var)] = np.array([n], dtype=s.var.dtype.numpy)
                self.run(s.body)
            self.vars.pop(id(s.var), None)
        elif isinstance(s, LetStmt):
            self.vars[id(s.var)] = self.value(s.value)
            self.run(s.body)
            self.vars.pop(id(s.var), None)
        elif isinstance(s, IfThenElse):
            if bool(self.value(s.cond).reshape(-1)[0]):
                self.run(s.then)
            elif s.orelse is not None:
                self.run(s.orelse)
        elif isinstance(s, Store):
            buf = self.buffers[id(s.buffer)]
            index = self.value(s.indices[0])
            if (index < 0).any() or (index >= buf.size).any():
                raise EvaluationError(f"store to '{s.buffer.name}' out of bounds at {index.tolist()}")
            buf[index] = to_storage(self.value(s.value), s.buffer.dtype.scalar)
        elif isinstance(s, Allocate):
            self.buffers[id(s.buffer)] = np.zeros(s.buffer.size, s.buffer.dtype.numpy)
            self.run(s.body)
            del self.buffers[id(s.buffer)]
        elif isinstance(s, IntrinCall):
            self.intrinsic(s)
        elif not isinstance(s, (Barrier, Fence)):
            raise EvaluationError(f"run_lowered: cannot execute {type(s).__name__}")

    def view(self, call: IntrinCall, n: int, shape) -> np.ndarray:
        op = call.operands[n]
        flat = self.buffers[id(op.tensor)]
        base = self.scalar(op.indices[0])
        strides = call.strides[n]
        last = base + sum(st * (d - 1) for st, d in zip(strides, shape))
        first = base + sum(min(0, st * (d - 1)) for st, d in zip(strides, shape))
        if first < 0 or max(last, base) >= flat.size:
            raise EvaluationError(f"intrinsic '{call.intrin.name}' operand {n} reads '{op.tensor.name}' at "
                                  f"[{first}, {last}], outside its {flat.size} elements")
        return as_strided(flat[base:], shape=tuple(shape), strides=tuple(st * flat.itemsize for st in strides),
                          writeable=True)

    def intrinsic(self, call: IntrinCall) -> None:
        intrin = call.intrin
        ins = {t: self.view(call, n, t.shape).copy() for n, t in enumerate(intrin.inputs)}
        out = self.view(call, len(intrin.inputs), intrin.output.shape)
        result = evaluate(intrin.output, ins)
        with np.errstate(over="ignore"):
            new = out + result if call.update else result
        out[...] = to_storage(new, intrin.output.dtype)
        self.calls += 1


def run_lowered(func, *arrays) -> int:
    """Run lowered function `func` on `arrays` (its arguments in order, written in
    place); returns the number of intrinsic calls executed."""
    if len(arrays) != len(func.args):
        raise EvaluationError(f"run_lowered: '{func.name}' takes {len(func.args)} arrays "
                              f"({', '.join(b.name for b in func.args)}), got {len(arrays)}")
    m = _Machine(func, arrays)
    m.run(func.body)
    return m.calls


__all__ = ["run_lowered"]

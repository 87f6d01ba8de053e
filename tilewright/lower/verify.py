"""The verifier: after lowering, every variable is bound by an enclosing loop or
let, every buffer is an argument or allocated around its use, vector lanes
agree between a store's index and value, and no te-only node (Reduce, a Load
of a tensor) is left. Violations are LoweringErrors (a compiler bug, not a
user error)."""

from __future__ import annotations

from ..errors import LoweringError
from ..ir.expr import Expr, Load, Reduce, Var
from ..ir.stmt import Allocate, Barrier, Buffer, Fence, For, IfThenElse, IntrinCall, LetStmt, Seq, Stmt, Store
from ..ir.traverse import walk_unique


def _check_expr(e: Expr, bound: set[int], buffers: set[int], where: str) -> None:
    for n in walk_unique(e):  # a shared subtree (a transform's partial sums) checked once
        if isinstance(n, Reduce):
            raise LoweringError(f"{where}: a reduction survived lowering: {n}")
        if isinstance(n, Var) and id(n) not in bound:
            raise LoweringError(f"{where}: variable '{n.name}' is used outside any loop that binds it")
        if isinstance(n, Load):
            if not isinstance(n.tensor, Buffer):
                raise LoweringError(f"{where}: read of tensor '{n.tensor.name}' has no buffer")
            if id(n.tensor) not in buffers:
                raise LoweringError(f"{where}: buffer '{n.tensor.name}' is read outside its allocation")


def verify(func) -> None:
    def visit(s: Stmt, bound: set[int], buffers: set[int]) -> None:
        if isinstance(s, For):
            _check_expr(s.begin, bound, buffers, f"loop {s.var.name}")
            _check_expr(s.extent, bound, buffers, f"loop {s.var.name}")
            visit(s.body, bound | {id(s.var)}, buffers)
        elif isinstance(s, LetStmt):
            _check_expr(s.value, bound, buffers, f"let {s.var.name}")
            visit(s.body, bound | {id(s.var)}, buffers)
        elif isinstance(s, Allocate):
            visit(s.body, bound, buffers | {id(s.buffer)})
        elif isinstance(s, Seq):
            for c in s.stmts:
                visit(c, bound, buffers)
        elif isinstance(s, IfThenElse):
            _check_expr(s.cond, bound, buffers, "if")
            visit(s.then, bound, buffers)
            if s.orelse is not None:
                visit(s.orelse, bound, buffers)
        elif isinstance(s, Store):
            where = f"store to {s.buffer.name}"
            if id(s.buffer) not in buffers:
                raise LoweringError(f"{where}: buffer is written outside its allocation")
            for e in (*s.indices, s.value):
                _check_expr(e, bound, buffers, where)
            if s.indices[0].dtype.lanes != s.value.dtype.lanes:
                raise LoweringError(f"{where}: index has {s.indices[0].dtype.lanes} lanes, value "
                                    f"{s.value.dtype.lanes}")
        elif isinstance(s, IntrinCall):
            where = f"intrinsic {getattr(s.intrin, 'name', '?')}"
            for op in s.operands:
                if not isinstance(op, Load) or not isinstance(op.tensor, Buffer) or id(op.tensor) not in buffers:
                    raise LoweringError(f"{where}: operand `{op}` is not an element of a buffer in scope")
                _check_expr(op, bound, buffers, where)
        elif not isinstance(s, (Barrier, Fence)):
            raise LoweringError(f"unknown statement {type(s).__name__}")

    visit(func.body, set(), {id(b) for b in func.args})

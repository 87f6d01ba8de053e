"""C-like pseudo-code for loop IR (what `print(tw.lower(s, args))` shows)."""

from __future__ import annotations

from .printer import expr_str
from .stmt import Allocate, Barrier, Fence, For, ForKind, IfThenElse, IntrinCall, LetStmt, Seq, Stmt, Store

_e = expr_str


def stmt_str(stmt: Stmt, indent: int = 0) -> str:
    pad = "  " * indent
    if isinstance(stmt, For):
        kind = "" if stmt.kind is ForKind.SERIAL else f"{stmt.kind.value} "
        if stmt.kind is ForKind.THREAD_BINDING:
            kind = f"bound to {stmt.thread_tag}: "
        begin = _e(stmt.begin)
        rng = _e(stmt.extent) if begin == "0" else f"{begin}, {begin} + {_e(stmt.extent)}"
        return f"{pad}{kind}for {stmt.var.name} in range({rng}):\n" + stmt_str(stmt.body, indent + 1)
    if isinstance(stmt, Seq):
        return "\n".join(stmt_str(s, indent) for s in stmt.stmts)
    if isinstance(stmt, IfThenElse):
        text = f"{pad}if {_e(stmt.cond)}:\n" + stmt_str(stmt.then, indent + 1)
        if stmt.orelse is not None:
            text += f"\n{pad}else:\n" + stmt_str(stmt.orelse, indent + 1)
        return text
    if isinstance(stmt, Store):
        idx = ", ".join(_e(i) for i in stmt.indices)
        return f"{pad}{stmt.buffer.name}[{idx}] = {_e(stmt.value)}"
    if isinstance(stmt, Allocate):
        b = stmt.buffer
        head = f"{pad}allocate {b.name}: {b.dtype}[{', '.join(map(str, b.shape))}] ({b.scope.value})"
        return head + "\n" + stmt_str(stmt.body, indent)
    if isinstance(stmt, LetStmt):
        return f"{pad}{stmt.var.name} = {_e(stmt.value)}\n" + stmt_str(stmt.body, indent)
    if isinstance(stmt, Barrier):
        return f"{pad}barrier({stmt.scope.value})"
    if isinstance(stmt, IntrinCall):
        ops = ", ".join(f"&{_e(o)} strides {list(st)}" for o, st in zip(stmt.operands, stmt.strides))
        return f"{pad}{getattr(stmt.intrin, 'name', stmt.intrin)}{' +=' if stmt.update else ''}({ops})"
    if isinstance(stmt, Fence):
        return f"{pad}fence"
    return f"{pad}<{type(stmt).__name__}>"

"""Barrier insertion for shared memory.

After `insert_barriers`, in every kernel, between a write of a shared buffer
and a later read of it (read-after-write), and between a read and a later
write (write-after-read, e.g. the next fetch of a tile in the enclosing
reduce loop, or the next use of a reduction buffer), every thread of the
block passes a `Barrier`, and only there: each barrier separates such a pair
that no earlier barrier separates. Conflicts are tracked per buffer (two
threads may touch the same element of it); loops are scanned twice so that
accesses at the end of one iteration meet those at the start of the next.
Two writes need no barrier between them (a copy or an init writes each element
once; a reduction reads before it writes again). A barrier goes before the
outermost statement whose first shared accesses conflict (before a copy's
loops, not inside them; at the top of a loop's body when one iteration
conflicts with the next, and then not also before the loop), and never under
a branch on a thread index: such a branch is split around the barrier (its condition
is pushed into the pieces). Loops bound to threads are transparent (one
iteration per thread). Without shared buffers it returns its input."""

from __future__ import annotations

from dataclasses import replace

from ..errors import LoweringError
from ..ir import arith
from ..ir.expr import BinOp, Const, Load, UnOp
from ..ir.stmt import Allocate, Barrier, For, IfThenElse, LetStmt, Scope, Seq, Stmt, Store, seq
from ..ir.stmt_functor import stmt_exprs, walk_stmt
from ..ir.traverse import free_vars, walk
from .gpu_checks import is_bound, map_top_level

Accesses = frozenset  # of (id(buffer), "r" | "w")


def _own(s: Stmt) -> set:
    """Shared-buffer accesses of `s` itself (not of nested statements)."""
    out = {(id(n.tensor), "r") for e in stmt_exprs(s) for n in walk(e)
           if isinstance(n, Load) and getattr(n.tensor, "scope", None) is Scope.SHARED}
    if isinstance(s, Store) and s.buffer.scope is Scope.SHARED:
        out.add((id(s.buffer), "w"))
    return out


class _Planner:
    def __init__(self, thread_vars: set[int]):
        self.thread_vars = thread_vars
        self.memo: dict[int, tuple[Stmt, frozenset, bool]] = {}

    def summary(self, s: Stmt) -> tuple[frozenset, bool]:
        """(every shared access under `s`, whether a barrier is under it)."""
        hit = self.memo.get(id(s))
        if hit is None:
            acc, bar = set(), False
            for n in walk_stmt(s):
                acc |= _own(n)
                bar = bar or isinstance(n, Barrier)
            hit = self.memo[id(s)] = (s, frozenset(acc), bar)
        return hit[1], hit[2]

    def head(self, s: Stmt) -> tuple[set, bool]:
        """Accesses `s` may make before its first barrier, and whether it surely meets one."""
        acc, bar = self.summary(s)
        if not bar:
            return set(acc), False
        if isinstance(s, Barrier):
            return set(), True
        if isinstance(s, Seq):
            out: set = set()
            for c in s.stmts:
                a, stop = self.head(c)
                out |= a
                if stop:
                    return out, True
            return out, False
        own = _own(s)
        if isinstance(s, IfThenElse):
            a, st = self.head(s.then)
            b, se = self.head(s.orelse) if s.orelse is not None else (set(), False)
            return own | a | b, st and se
        a, stop = self.head(s.body)
        return own | a, stop

    def divergent(self, exprs) -> bool:
        return any(id(v) in self.thread_vars for e in exprs for v in free_vars(e))

    def visit(self, s: Stmt, pending: set) -> tuple[Stmt, set]:
        """`s` with barriers so that it runs safely after the accesses `pending`
        (made since the last barrier), and the accesses pending after it."""
        acc, bar = self.summary(s)
        if not acc and not bar:
            return s, pending
        if isinstance(s, Barrier):
            return s, set()
        if isinstance(s, Seq):
            out = []
            for c in s.stmts:
                c, pending = self.visit(c, pending)
                out.append(c)
            return seq(*out), pending
        node, after = self.alone(s)
        first, stops = self.head(node)
        if _conflict(pending, first):  # before the whole statement, not inside its loops
            return seq(Barrier(Scope.SHARED), node), after
        return node, after if stops else after | pending

    def alone(self, s: Stmt) -> tuple[Stmt, set]:
        """`s` with the barriers it needs when entered right after a barrier."""
        own = _own(s)
        if isinstance(s, Store):
            return s, own
        if isinstance(s, IfThenElse):
            then, out = self.visit(s.then, own)
            orelse = None
            if s.orelse is not None:
                orelse, out_e = self.visit(s.orelse, own)
                out = out | out_e
            node = IfThenElse(s.cond, then, orelse)
            return (_sink(node, self) if self.divergent([s.cond]) else node), out
        body, out = self.visit(s.body, own)
        if isinstance(s, For) and not is_bound(s) and not (isinstance(s.extent, Const) and int(s.extent.value) <= 1):
            body, out = self.visit(s.body, own | out)  # every later iteration starts after the one before
            self._check_loop(s, body)
        return replace(s, body=body), out

    def _check_loop(self, loop: For, body: Stmt) -> None:
        if self.divergent(stmt_exprs(loop)) and self.summary(body)[1]:
            raise LoweringError(f"loop '{loop.var.name}' needs a barrier inside, but its bounds depend on a thread "
                                f"index, so not every thread would reach it")


def _conflict(pending: set, acc: set) -> bool:
    for buf, kind in acc:
        if (kind == "r" and (buf, "w") in pending) or (kind == "w" and (buf, "r") in pending):
            return True
    return False


def _sink(node: IfThenElse, planner: _Planner) -> Stmt:
    """A branch on a thread index with barriers inside, rewritten so that every
    barrier is outside it: the branch is pushed into the pieces around them."""
    def push(cond, s: Stmt) -> Stmt:
        if not planner.summary(s)[1]:
            return IfThenElse(cond, s)
        if isinstance(s, Barrier):
            return s
        if isinstance(s, Seq):
            return seq(*[push(cond, c) for c in s.stmts])
        if isinstance(s, IfThenElse):
            then = push(arith.binary(BinOp.AND, cond, s.cond), s.then)
            if s.orelse is None:
                return then
            return seq(then, push(arith.binary(BinOp.AND, cond, arith.unary(UnOp.NOT, s.cond)), s.orelse))
        if isinstance(s, For) and planner.divergent(stmt_exprs(s)):
            raise LoweringError(f"loop '{s.var.name}' needs a barrier inside, but its bounds depend on a thread "
                                f"index, so not every thread would reach it")
        if isinstance(s, (For, Allocate, LetStmt)):
            return replace(s, body=push(cond, s.body))
        return IfThenElse(cond, s)

    out = push(node.cond, node.then)
    if node.orelse is not None:
        out = seq(out, push(arith.unary(UnOp.NOT, node.cond), node.orelse))
    return out


def insert_barriers(stmt: Stmt) -> Stmt:
    if not any(isinstance(s, Allocate) and s.buffer.scope is Scope.SHARED for s in walk_stmt(stmt)):
        return stmt
    tvars = {id(s.var) for s in walk_stmt(stmt) if is_bound(s) and s.thread_tag.startswith("threadIdx")}
    planner = _Planner(tvars)
    return map_top_level(stmt, lambda kernel: planner.visit(kernel, set())[0])

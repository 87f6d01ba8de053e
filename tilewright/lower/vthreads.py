"""Virtual threads, injected as in TVM (section 3.5, InjectVirtualThread).

After `lower_vthreads`, no loop is bound to "vthread". Loops bound to
blocks/threads directly inside a chain of vthread loops first move outside it
(all of them are parallel loops, so they commute), so a kernel's thread loops
are not copied. Then the body of each vthread loop runs once, the virtual
thread pushed down into it:
- a statement that does not depend on the vthread variable runs once (the
  cooperative fetch of a shared tile, whose region bound inference relaxed
  over the vthread loops, and later its barriers);
- one that depends on it (through its indices, a let, a loop bound or branch
  around it, or a buffer written by such a statement) runs once per vthread
  value, as deep as possible: a store, or a branch or let on the variable, is
  copied in place (so the copies of different vthreads interleave in the
  innermost loops: TVM's latency hiding); a statement holding loops is
  wrapped in an unrolled loop over the vthread values;
- a buffer allocated inside the vthread loop and written depending on it gets
  a leading dimension of the vthread extent: one slice per virtual thread
  (the register tile of a thread is vthreads x the tile of one); a tensorized
  call writes its output operand's buffer.
With `coprocessor` (an accelerator, whose instructions are whole loop nests:
a DMA, a GEMM's micro-op loops; TVM's "cthread"), a perfect loop nest around
one store or call is copied as a unit, so the threads interleave nest by nest
(consecutive copy nests as one group: a thread's tiles arrive together, so its
compute can start while the next thread's tiles load), and nothing allocated
inside the virtual-thread loop is shared: each thread loads its own tiles, so
one thread's loads can overlap another's compute instead of waiting for every
thread to finish with a shared tile.
Without vthread loops it returns its input."""

from __future__ import annotations

from dataclasses import replace

from ..ir import arith
from ..ir.expr import Cast, Const, Expr, Load, Select, Var
from ..ir.stmt import Allocate, Buffer, For, ForKind, IfThenElse, IntrinCall, LetStmt, Seq, Stmt, Store, seq
from ..ir.stmt_functor import map_stmt, stmt_exprs, walk_stmt
from ..ir.traverse import substitute, transform, walk

MAX_COPIES = 16  # more vthread values than this: a loop over them instead of copies (as TVM)


def _is_vthread(s: Stmt) -> bool:
    return isinstance(s, For) and s.kind is ForKind.THREAD_BINDING and s.thread_tag == "vthread"


def _hoist_threads(s: Stmt):
    """A vthread loop whose perfectly nested chain holds real thread loops: the
    chain with the real ones first (each group in its order); None otherwise."""
    if not _is_vthread(s):
        return None
    chain, body = [], s
    while isinstance(body, For) and body.kind is ForKind.THREAD_BINDING:
        chain.append(body)
        body = body.body
    real = [f for f in chain if not _is_vthread(f)]
    if not real:
        return None
    for f in reversed(real + [f for f in chain if _is_vthread(f)]):
        body = replace(f, body=body)
    return body


def _deps(exprs) -> set[int]:
    """ids of the variables and buffers that `exprs` read."""
    out: set[int] = set()
    for e in exprs:
        for n in walk(e):
            if isinstance(n, Var):
                out.add(id(n))
            elif isinstance(n, Load):
                out.add(id(n.tensor))
    return out


def _touched(body: Stmt, var: Var, share: bool = True) -> set[int]:
    """ids of `var` and of the let variables and buffers whose values depend on it
    (a fixed point: a store that reads a touched buffer touches the one it writes);
    without `share`, every buffer allocated in `body` too."""
    writes: list[tuple[set[int], int]] = []

    def collect(s: Stmt, around: list[Expr]) -> None:
        if isinstance(s, Store):
            writes.append((_deps([*around, *s.indices, s.value]), id(s.buffer)))
        elif isinstance(s, IntrinCall):  # the last operand is the output
            writes.append((_deps([*around, *s.operands]), id(s.operands[-1].tensor)))
        elif isinstance(s, LetStmt):
            writes.append((_deps([*around, s.value]), id(s.var)))
            collect(s.body, around)
        elif isinstance(s, Seq):
            for c in s.stmts:
                collect(c, around)
        elif isinstance(s, (For, IfThenElse)):
            inner = around + stmt_exprs(s)
            for c in (s.body,) if isinstance(s, For) else (s.then, s.orelse):
                if c is not None:
                    collect(c, inner)
        elif isinstance(s, Allocate):
            collect(s.body, around)

    collect(body, [])
    touched = {id(var)}
    if not share:
        touched |= {id(s.buffer) for s in walk_stmt(body) if isinstance(s, Allocate)}
    grown = True
    while grown:
        grown = False
        for deps, target in writes:
            if target not in touched and deps & touched:
                touched.add(target)
                grown = True
    return touched


def _expand(body: Stmt, var: Var, extent: int, touched: set[int]) -> Stmt:
    """Touched buffers allocated in `body` get a leading dimension indexed by `var`."""
    new: dict[int, Buffer] = {}
    for s in walk_stmt(body):
        if isinstance(s, Allocate) and id(s.buffer) in touched:
            b = s.buffer
            perm = None if b.perm is None else (0, *(p + 1 for p in b.perm))
            new[id(b)] = replace(b, shape=(extent, *b.shape), perm=perm)
    if not new:
        return body

    def fe(e: Expr) -> Expr:
        return transform(e, lambda n: Load(new[id(n.tensor)], (var, *n.indices), n.dtype)
                         if isinstance(n, Load) and id(n.tensor) in new else None)

    def fs(s: Stmt):
        if isinstance(s, Store) and id(s.buffer) in new:
            return replace(s, buffer=new[id(s.buffer)], indices=(var, *s.indices))
        if isinstance(s, Allocate) and id(s.buffer) in new:
            return replace(s, buffer=new[id(s.buffer)])
        return None

    return map_stmt(body, fs, fe)


def _leaf(s: Stmt) -> Stmt:
    while isinstance(s, For):
        s = s.body
    return s


def _is_nest(s: Stmt) -> bool:
    """A perfect loop nest around one store or intrinsic call."""
    return isinstance(s, For) and isinstance(_leaf(s), (Store, IntrinCall))


def _is_copy_nest(s: Stmt) -> bool:
    """A nest that moves data: its store's value is a load (or a guarded load: padding)."""
    if not _is_nest(s) or not isinstance(_leaf(s), Store):
        return False
    v = _leaf(s).value
    v = v.t if isinstance(v, Select) else v
    v = v.value if isinstance(v, Cast) else v
    return isinstance(v, Load)


class _Injector:
    def __init__(self, loop: For, touched: set[int], whole_nests: bool = False):
        self.loop, self.touched, self.whole_nests = loop, touched, whole_nests  # whole_nests: a coprocessor
        self.memo: dict[int, bool] = {}

    def own(self, s: Stmt) -> bool:
        deps = _deps(stmt_exprs(s))
        if isinstance(s, Store):
            deps.add(id(s.buffer))
        if isinstance(s, LetStmt):
            deps.add(id(s.var))
        return bool(deps & self.touched)

    def depends(self, s: Stmt) -> bool:
        if id(s) not in self.memo:
            self.memo[id(s)] = any(self.own(n) for n in walk_stmt(s))
        return self.memo[id(s)]

    def visit(self, s: Stmt) -> Stmt:
        if not self.depends(s):
            return s
        if isinstance(s, Seq):
            if self.whole_nests:
                return seq(*self.grouped(s.stmts))
            return seq(*[self.visit(c) for c in s.stmts])
        if isinstance(s, Allocate):
            return replace(s, body=self.visit(s.body))
        if self.whole_nests and _is_nest(s):
            return self.per_vthread(s)
        if not self.own(s):  # a loop or branch that does not itself depend on the vthread: push inside
            if isinstance(s, For):
                return replace(s, body=self.visit(s.body))
            if isinstance(s, IfThenElse):
                return replace(s, then=self.visit(s.then), orelse=self.visit(s.orelse) if s.orelse else None)
        return self.per_vthread(s)

    def grouped(self, stmts) -> list[Stmt]:
        """Each run of consecutive thread-dependent copy nests as one per-thread group."""
        out: list[Stmt] = []
        run: list[Stmt] = []
        for c in (*stmts, None):
            if c is not None and _is_copy_nest(c) and self.depends(c):
                run.append(c)
                continue
            if run:
                out.append(self.per_vthread(seq(*run)))
                run = []
            if c is not None:
                out.append(self.visit(c))
        return out

    def per_vthread(self, s: Stmt) -> Stmt:
        var, n = self.loop.var, int(self.loop.extent.value)
        if n <= MAX_COPIES and not any(isinstance(x, For) for x in walk_stmt(s)):
            return seq(*[map_stmt(s, None, lambda e, k=k: substitute(e, {var: arith.const(k, var.dtype)}))
                         for k in range(n)])
        return For(var, arith.const(0), self.loop.extent, ForKind.UNROLLED, s)


def _inject(s: Stmt, coprocessor: bool = False):
    if not _is_vthread(s):
        return None
    if not isinstance(s.extent, Const):
        return replace(s, kind=ForKind.UNROLLED, thread_tag=None)
    touched = _touched(s.body, s.var, share=not coprocessor)
    body = _expand(s.body, s.var, int(s.extent.value), touched)
    return _Injector(s, touched, coprocessor).visit(body)


def lower_vthreads(stmt: Stmt, coprocessor: bool = False) -> Stmt:
    if not any(_is_vthread(s) for s in walk_stmt(stmt)):
        return stmt
    return map_stmt(map_stmt(stmt, _hoist_threads), lambda s: _inject(s, coprocessor))

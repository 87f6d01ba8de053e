"""Instruction selection for the VTA-like accelerator: a lowered te schedule
(stages placed in `vta.inp`, `vta.wgt`, `vta.acc` with `cache_read` /
`set_scope`, the block multiply tensorized with `tw.intrin.vta_gemm`) becomes
an instruction stream.

The host runs the loops that stay outside the accelerator's patterns at
compile time; every perfect loop nest around one statement becomes
instructions by what it does:
- a copy from an argument into `vta.inp` / `vta.wgt` (`vta.acc` for an int32
  bias): 2-D strided DMA loads, whose `if_then_else(inside, x, 0)` becomes the
  load's zero padding (the valid points must form one rectangle per load);
- a store of 0 into `vta.acc` (a reduction's init): a GEMM reset;
- a tensorized block multiply: a GEMM whose two longest loops are its
  iter_out / iter_in, the rest micro-ops;
- a store into an argument of an expression of one accumulator (>> c, << c,
  + c, - c, min / max with c, + or min / max of another accumulator):
  ALU instructions applied in place, then stores keeping each lane's low 8
  bits (the int8 cast);
- the same expression stored into `vta.acc` in place: ALU instructions only.
Buffers take stack-allocated regions of their scratchpad (an overflow is a
ScheduleError naming the buffer and the bytes over). Virtual threads are
interleaved by `lower/vthreads.py` before selection (its per-thread copies
become per-thread instructions, round-robin), and `insert_tokens` adds the
dependence tokens."""

from __future__ import annotations

import numpy as np

from ..errors import LoweringError, ScheduleError
from ..ir.expr import Binary, BinOp, Cast, Const, Expr, Load, Select
from ..ir.stmt import Allocate, For, ForKind, IfThenElse, IntrinCall, LetStmt, Scope, Seq, Stmt, Store
from ..ir.traverse import walk
from ..ir.vta_insn import AluInsn, AluOp, GemmInsn, MemInsn, MemType, Opcode, Uop
from ..targets.vta import VTAConfig
from .vta_affine import Loop, affine, element_coefs, evaluate, rows, span, split_lanes
from .vta_conv import compress_uops
from .vta_sync import Access, Step

_SCOPE = {Scope.VTA_INP: ("inp", MemType.INP), Scope.VTA_WGT: ("wgt", MemType.WGT), Scope.VTA_ACC: ("acc", MemType.ACC)}


def _nest(s: Stmt) -> tuple[list[Loop], Stmt, bool]:
    """The perfect nest of loops around one statement, and whether it starts at `s`. An unrolled
    loop around serial ones (a virtual thread's copies, lower/vthreads.py) is not part of it: the
    host runs it, so each thread gets its own instructions, interleaved."""
    chain = []
    while isinstance(s, For) and s.kind in (ForKind.SERIAL, ForKind.ROLLED, ForKind.UNROLLED):
        chain.append(s)
        s = s.body
    cut = max((k + 1 for k, f in enumerate(chain) if f.kind is ForKind.UNROLLED
               and any(g.kind is not ForKind.UNROLLED for g in chain[k + 1:])), default=0)
    loops = []
    for f in chain[cut:]:
        if evaluate(f.begin, {}) != 0:
            raise LoweringError(f"VTA lowering: loop '{f.var.name}' does not start at 0")
        loops.append(Loop(f.var, evaluate(f.extent, {})))
    return loops, s, cut == 0


class Selector:
    def __init__(self, cfg: VTAConfig, dram: dict):
        self.cfg, self.dram = cfg, dram  # dram: id(arg buffer) -> byte offset in device memory
        self.lanes = {"inp": cfg.batch * cfg.block_in, "wgt": cfg.block_out * cfg.block_in,
                      "acc": cfg.batch * cfg.block_out}
        self.depth = {"inp": cfg.inp_depth, "wgt": cfg.wgt_depth, "acc": cfg.acc_depth}
        self.ebytes = {"inp": cfg.inp_elem_bytes, "wgt": cfg.wgt_elem_bytes, "acc": cfg.acc_elem_bytes}
        self.top = {"inp": 0, "wgt": 0, "acc": 0}
        self.base: dict[int, tuple[str, int]] = {}  # id(buffer) -> (scratchpad, first element)
        self.steps: list[Step] = []
        self.uops: list[Uop] = []
        self.uop_at: dict[tuple, int] = {}
        self.stored: set[int] = set()  # arguments the program writes
        # accumulator elements an epilogue changed in place on the way to a store: reading them again
        # (a second consumer of the same accumulator) would see the changed values
        self.clobbered = np.zeros(cfg.acc_depth, bool)

    # -- structure --------------------------------------------------------------------------------
    def visit(self, s: Stmt, env: dict) -> None:
        if isinstance(s, Seq):
            for c in s.stmts:
                self.visit(c, env)
        elif isinstance(s, Allocate):
            self.allocate(s, env)
        elif isinstance(s, IfThenElse):
            branch = s.then if evaluate(s.cond, env) else s.orelse
            if branch is not None:
                self.visit(branch, env)
        elif isinstance(s, LetStmt):
            self.visit(s.body, {**env, s.var: evaluate(s.value, env)})
        elif isinstance(s, For):
            loops, leaf, here = _nest(s)
            if here and loops and isinstance(leaf, (Store, IntrinCall)):
                self.pattern(loops, leaf, env)
                return
            for i in range(evaluate(s.begin, env), evaluate(s.begin, env) + evaluate(s.extent, env)):
                self.visit(s.body, {**env, s.var: i})
        elif isinstance(s, (Store, IntrinCall)):
            self.pattern([], s, env)
        else:
            raise LoweringError(f"VTA lowering: cannot run a {type(s).__name__} on the accelerator")

    def allocate(self, s: Allocate, env: dict) -> None:
        b = s.buffer
        if b.scope not in _SCOPE:
            raise LoweringError(f"VTA lowering: buffer '{b.name}' is in scope '{b.scope.value}'; on the accelerator "
                                f"every intermediate lives in vta.inp, vta.wgt or vta.acc (set_scope / cache_read)")
        pad, _ = _SCOPE[b.scope]
        n = 1
        for d in b.shape:
            n *= d
        if n % self.lanes[pad]:
            raise LoweringError(f"VTA lowering: buffer '{b.name}' ({n} values) is not whole elements of "
                                f"{self.lanes[pad]} values of vta.{pad}")
        first, elems = self.top[pad], n // self.lanes[pad]
        if first + elems > self.depth[pad]:
            eb = self.ebytes[pad]
            raise ScheduleError(f"VTA buffer 'vta.{pad}' overflows at '{b.name}': {(first + elems) * eb} bytes needed "
                                f"({elems * eb} for it), {self.depth[pad] * eb} available "
                                f"({(first + elems - self.depth[pad]) * eb} bytes over); use smaller tiles")
        self.base[id(b)] = (pad, first)
        self.top[pad] += elems
        self.visit(s.body, env)
        self.top[pad] -= elems

    # -- patterns ---------------------------------------------------------------------------------
    def pattern(self, loops: list[Loop], leaf, env: dict) -> None:
        if isinstance(leaf, IntrinCall):
            return self.gemm(loops, leaf, env)
        dst = leaf.buffer
        if dst.scope in _SCOPE:
            value = leaf.value
            if isinstance(value, Const) and value.value == 0 and dst.scope is Scope.VTA_ACC:
                return self.reset(loops, leaf, env)
            if _is_copy(value):
                return self.load(loops, leaf, env)
            if dst.scope is Scope.VTA_ACC:
                return self.alu(loops, leaf, env, store=False)
            raise LoweringError(f"VTA lowering: '{dst.name}' ({dst.scope.value}) can only be filled by a copy")
        if dst.scope is Scope.GLOBAL:
            return self.alu(loops, leaf, env, store=True)
        raise LoweringError(f"VTA lowering: cannot store into '{dst.name}' ({dst.scope.value})")

    def _add(self, step: Step) -> None:
        for a in step.reads:
            if a.buffer == "acc" and self.clobbered[a.lo:a.hi].any():
                raise LoweringError(f"VTA lowering: {type(step.insn).__name__} reads accumulator elements "
                                    f"{a.lo}..{a.hi - 1} after an epilogue changed them in place for a store; an "
                                    f"accumulator can feed one epilogue only (compute the other consumer from "
                                    f"its own copy)")
        for a in step.writes:
            if a.buffer == "acc":
                self.clobbered[a.lo:a.hi] = False
        self.steps.append(step)

    def _lane_split(self, loops, addr, env, pad, what):
        base, coefs = affine(addr, loops, env, what)
        k = split_lanes(loops, coefs, self.lanes[pad], what)
        outer, oc = loops[:len(loops) - k], coefs[:len(coefs) - k]
        return outer, element_coefs(base, oc, self.lanes[pad], what), k

    def _sram(self, buffer, elem: int) -> int:
        pad, first = self.base[id(buffer)]
        return first + elem

    def _uops(self, uops: list[Uop]) -> tuple[int, int]:
        key = tuple((u.dst, u.src, u.wgt) for u in uops)
        if key not in self.uop_at:
            self.uop_at[key] = len(self.uops)
            self.uops += uops
        start = self.uop_at[key]
        return start, start + len(uops)

    def _loop_insn(self, make, outer, dst, src, wgt, widths):
        """One GEMM / ALU instruction over element loops `outer` with (base, coefs) triples."""
        loops = [(lp.var.name, lp.extent, (dst[1][k], src[1][k], wgt[1][k])) for k, lp in enumerate(outer)]
        uops, fields = compress_uops(loops, widths)
        start, end = self._uops([Uop(u.dst + dst[0], u.src + src[0], u.wgt + wgt[0]) for u in uops])
        return make(start, end, fields)

    def reset(self, loops, leaf: Store, env) -> None:
        outer, (e0, ec), _ = self._lane_split(loops, leaf.indices[0], env, "acc", f"init of '{leaf.buffer.name}'")
        d = self._sram(leaf.buffer, e0)
        zero = (0, [0] * len(outer))
        insn = self._loop_insn(lambda b, e, f: GemmInsn(b, e, reset=True, **f), outer, (d, ec), zero, zero,
                               self._widths())
        lo, hi = span(d, ec, outer)
        self._add(Step(insn, writes=(Access("acc", lo, hi),)))

    def _widths(self):
        c = self.cfg
        return (c.log_acc_depth, c.log_inp_depth, c.log_wgt_depth)

    def gemm(self, loops, call: IntrinCall, env) -> None:
        name = getattr(call.intrin, "name", "")
        if not name.startswith("vta.gemm"):
            raise LoweringError(f"VTA lowering: intrinsic '{name}' is not the accelerator's GEMM")
        parts = []
        for op, pad, role in zip(call.operands, ("inp", "wgt", "acc"), ("input", "weight", "accumulator")):
            want = {"inp": Scope.VTA_INP, "wgt": Scope.VTA_WGT, "acc": Scope.VTA_ACC}[pad]
            if op.tensor.scope is not want:
                raise LoweringError(f"VTA lowering: the GEMM's {role} '{op.tensor.name}' is in "
                                    f"{op.tensor.scope.value}; it must be in {want.value} (cache_read / set_scope)")
            base, coefs = affine(op.indices[0], loops, env, f"GEMM {role} '{op.tensor.name}'")
            e0, ec = element_coefs(base, coefs, self.lanes[pad], f"GEMM {role} '{op.tensor.name}'")
            parts.append((self._sram(op.tensor, e0), ec))
        inp, wgt, acc = parts
        insn = self._loop_insn(lambda b, e, f: GemmInsn(b, e, **f), loops, acc, inp, wgt, self._widths())
        reads = tuple(Access(p, *span(b, c, loops)) for p, (b, c) in (("inp", inp), ("wgt", wgt), ("acc", acc)))
        self._add(Step(insn, reads=reads + (Access("uop", insn.uop_bgn, insn.uop_end),),
                               writes=(Access("acc", *span(acc[0], acc[1], loops)),)))

    def load(self, loops, leaf: Store, env) -> None:
        pad, mem = _SCOPE[leaf.buffer.scope]
        value, cond = leaf.value, None
        if isinstance(value, Select):
            if not (isinstance(value.f, Const) and value.f.value == 0):
                raise LoweringError(f"VTA lowering: the copy into '{leaf.buffer.name}' pads with "
                                    f"{value.f!r:.40}; the DMA pads with zeros only")
            cond, value = value.cond, value.t
        value = value.value if isinstance(value, Cast) and value.dtype == value.value.dtype else value
        src = value.tensor
        if src.scope is not Scope.GLOBAL or id(src) not in self.dram:
            raise LoweringError(f"VTA lowering: '{leaf.buffer.name}' copies from '{src.name}', which is not a "
                                f"kernel argument in device memory")
        if src.dtype.bits != leaf.buffer.dtype.bits:
            raise LoweringError(f"VTA lowering: the copy into '{leaf.buffer.name}' converts {src.dtype} to "
                                f"{leaf.buffer.dtype}; the DMA moves values unchanged")
        what = f"copy into '{leaf.buffer.name}'"
        outer, _, _ = self._lane_split(loops, leaf.indices[0], env, pad, what)
        lanes, eb = self.lanes[pad], self.ebytes[pad]
        if cond is None:
            inner = {lp.var: 0 for lp in loops[len(outer):]}
            (d0, dc), (s0, sc) = (element_coefs(*affine(a, outer, {**env, **inner}, what), lanes, what)
                                  for a in (leaf.indices[0], value.indices[0]))
            byte0 = self.dram[id(src)]
            if byte0 % eb:
                raise LoweringError(f"VTA lowering: argument '{src.name}' is not aligned to {eb}-byte elements")

            def make(bases, ys, xs, y, x):
                (d, s_), (dy, sy), (dx, sx) = bases, y, x
                if (xs > 1 and (dx, sx) != (1, 1)) or (ys > 1 and dy != xs):
                    raise LoweringError(f"VTA lowering: the {what} is not rows of contiguous elements")
                sram = self._sram(leaf.buffer, d)
                insn = MemInsn(Opcode.LOAD, mem, sram, byte0 // eb + s_, ys, xs, sy if ys > 1 else xs)
                self._add(Step(insn, writes=(Access(pad, sram, sram + ys * xs),)))
            rows(outer, [d0, s0], [dc, sc], make)
            return
        self._padded(outer, loops, leaf, value, cond, env, pad, mem, what)

    def _padded(self, outer, loops, leaf, value, cond, env, pad, mem, what) -> None:
        """2-D loads over the last two element loops (the others run on the host), the rows and
        columns the condition excludes written as zero padding."""
        if len(outer) > 2:
            lp = outer[0]
            for i in range(lp.extent):
                self._padded(outer[1:], loops[1:], leaf, value, cond, {**env, lp.var: i}, pad, mem, what)
            return
        inner = loops[len(outer):]
        dims = ([Loop(None, 1)] * (2 - len(outer))) + list(outer)
        ys, xs = dims[0].extent, dims[1].extent
        env0 = {**env, **{lp.var: 0 for lp in inner}}
        vals = lambda y, x: {**env0, **{lp.var: v for lp, v in zip(dims, (y, x)) if lp.var is not None}}  # noqa: E731
        valid = [[bool(evaluate(cond, vals(y, x))) for x in range(xs)] for y in range(ys)]
        rows = [y for y in range(ys) if any(valid[y])]
        cols = [x for x in range(xs) if any(valid[y][x] for y in range(ys))]
        if not rows:
            raise LoweringError(f"VTA lowering: the {what} reads nothing")
        y0, y1, x0, x1 = rows[0], rows[-1] + 1, cols[0], cols[-1] + 1
        if any(valid[y][x] != (y0 <= y < y1 and x0 <= x < x1) for y in range(ys) for x in range(xs)):
            raise LoweringError(f"VTA lowering: the valid part of the {what} is not one rectangle per load")
        if max(y0, ys - y1, x0, xs - x1) > 15:
            raise LoweringError(f"VTA lowering: the {what} pads more than 15 elements on a side")
        lanes, eb = self.lanes[pad], self.ebytes[pad]
        at = lambda a, y, x: evaluate(a, vals(y, x))  # noqa: E731
        d0 = at(leaf.indices[0], 0, 0)
        dy = at(leaf.indices[0], 1, 0) - d0 if ys > 1 else xs * lanes
        dx = at(leaf.indices[0], 0, 1) - d0 if xs > 1 else lanes
        s0 = at(value.indices[0], y0, x0)
        sy = at(value.indices[0], y0 + 1, x0) - s0 if y1 - y0 > 1 else 0
        sx = at(value.indices[0], y0, x0 + 1) - s0 if x1 - x0 > 1 else lanes
        if dx != lanes or dy != xs * lanes or sx != lanes or d0 % lanes or sy % lanes:
            raise LoweringError(f"VTA lowering: the {what} is not a dense 2-D block of whole elements (the DMA "
                                f"writes rows of contiguous elements; keep the copy's innermost loops in order)")
        byte = self.dram[id(value.tensor)] + s0 * value.tensor.dtype.bytes
        if byte % eb:
            raise LoweringError(f"VTA lowering: the {what} starts mid-element in device memory")
        sram = self._sram(leaf.buffer, d0 // lanes)
        insn = MemInsn(Opcode.LOAD, mem, sram, byte // eb, y1 - y0, x1 - x0, max(sy // lanes, x1 - x0), y0, ys - y1,
                       x0, xs - x1)
        self._add(Step(insn, writes=(Access(pad, sram, sram + ys * xs),)))

    # -- ALU and stores ---------------------------------------------------------------------------
    def alu(self, loops, leaf: Store, env, store: bool) -> None:
        value, name = leaf.value, leaf.buffer.name
        if store:
            if leaf.buffer.dtype.name != "int8":
                raise LoweringError(f"VTA lowering: '{name}' is {leaf.buffer.dtype}; the accelerator stores int8 "
                                    f"(cast the result: a store keeps each lane's low 8 bits)")
            if isinstance(value, Cast):
                value = value.value
        if any(isinstance(n, Load) and n.tensor.scope in (Scope.VTA_INP, Scope.VTA_WGT) for n in walk(value)):
            raise LoweringError(f"VTA lowering: '{name}' multiplies vta.inp / vta.wgt values one by one; the "
                                f"accelerator multiplies whole blocks: tensorize the block axis with "
                                f"tw.intrin.vta_gemm(cfg)")
        primary, ops = alu_ops(value)
        if primary.tensor.scope is not Scope.VTA_ACC:
            raise LoweringError(f"VTA lowering: '{name}' is computed from '{primary.tensor.name}' "
                                f"({primary.tensor.scope.value}); the ALU and the stores read vta.acc")
        what = f"computation of '{name}'"
        outer, (p0, pc), _ = self._lane_split(loops, primary.indices[0], env, "acc", what)
        if not store:
            _, (d0, dc), _ = self._lane_split(loops, leaf.indices[0], env, "acc", what)
            if leaf.buffer is not primary.tensor or (d0, dc) != (p0, pc):
                raise LoweringError(f"VTA lowering: '{name}' reads '{primary.tensor.name}' into another buffer; the "
                                    f"ALU works in place (compute_inline the elementwise stages into the one "
                                    f"that stores)")
        dst = (self._sram(primary.tensor, p0), pc)
        zero = (0, [0] * len(outer))
        c = self.cfg
        for op, operand in ops:
            if isinstance(operand, int):
                src, kw = zero, {"use_imm": True, "imm": operand}
            else:
                _, (s0, sc), _ = self._lane_split(loops, operand.indices[0], env, "acc", what)
                src, kw = (self._sram(operand.tensor, s0), sc), {}
            insn = self._loop_insn(
                lambda b, e, f, op=op, kw=kw: AluInsn(op, b, e, **{k: v for k, v in f.items() if k[:3] != "wgt"}, **kw),
                outer, dst, src, zero, (c.log_acc_depth, c.log_acc_depth, c.log_wgt_depth))
            reads = [Access("acc", *span(*dst, outer))] + ([] if src is zero else [Access("acc", *span(*src, outer))])
            self._add(Step(insn, reads=tuple(reads), writes=(Access("acc", *span(*dst, outer)),)))
        if store:
            self.store(loops, leaf, primary, env)
            if ops:
                self.clobbered[slice(*span(*dst, outer))] = True

    def store(self, loops, leaf: Store, primary: Load, env) -> None:
        what = f"store into '{leaf.buffer.name}'"
        outer, _, _ = self._lane_split(loops, primary.indices[0], env, "acc", what)
        lanes, ob = self.lanes["acc"], self.cfg.out_elem_bytes
        inner = {lp.var: 0 for lp in loops[len(outer):]}
        (d0, dc), (a0, ac) = (element_coefs(*affine(x, outer, {**env, **inner}, what), lanes, what)
                              for x in (leaf.indices[0], primary.indices[0]))
        byte0 = self.dram[id(leaf.buffer)]
        self.stored.add(id(leaf.buffer))

        def make(bases, ys, xs, y, x):
            (d, a), (dy, ay), (dx, ax) = bases, y, x
            if (xs > 1 and (dx, ax) != (1, 1)) or (ys > 1 and ay != xs):
                raise LoweringError(f"VTA lowering: the {what} is not rows of contiguous elements")
            sram = self._sram(primary.tensor, a)
            insn = MemInsn(Opcode.STORE, MemType.ACC, sram, byte0 // ob + d, ys, xs, dy if ys > 1 else xs)
            self._add(Step(insn, reads=(Access("acc", sram, sram + ys * xs),)))
        rows(outer, [d0, a0], [dc, ac], make)


def _is_copy(value: Expr) -> bool:
    if isinstance(value, Select):
        value = value.t
    if isinstance(value, Cast):
        value = value.value
    return isinstance(value, Load) and value.tensor.scope is Scope.GLOBAL


def alu_ops(e: Expr):
    """(the accumulator the expression starts from, [(ALU op, immediate or accumulator Load)])."""
    if isinstance(e, Cast) and e.value.dtype.is_int and e.dtype.bits >= e.value.dtype.bits:
        return alu_ops(e.value)
    if isinstance(e, Load):
        return e, []
    leaf = lambda x: isinstance(x, (Const, Load))  # noqa: E731
    if isinstance(e, Binary):
        if e.op in (BinOp.SHR, BinOp.SHL) and isinstance(e.b, Const):
            p, ops = alu_ops(e.a)
            return p, ops + [(AluOp.SHR, int(e.b.value) if e.op is BinOp.SHR else -int(e.b.value))]
        if e.op is BinOp.SUB and isinstance(e.b, Const):
            p, ops = alu_ops(e.a)
            return p, ops + [(AluOp.ADD, -int(e.b.value))]
        if e.op in (BinOp.ADD, BinOp.MIN, BinOp.MAX):
            a, b = (e.a, e.b) if leaf(e.b) else (e.b, e.a)
            if leaf(b):
                p, ops = alu_ops(a)
                op = {BinOp.ADD: AluOp.ADD, BinOp.MIN: AluOp.MIN, BinOp.MAX: AluOp.MAX}[e.op]
                return p, ops + [(op, int(b.value) if isinstance(b, Const) else b)]
    raise LoweringError(f"VTA lowering: the ALU computes >>, <<, +, - by a constant, and +, min, max with a constant "
                        f"or another accumulator, on one accumulator; it cannot compute {e!r:.100}")


__all__ = ["Selector", "alu_ops"]

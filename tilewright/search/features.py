"""Features of a lowered loop nest for the learned cost model (issue 14).

`loop_nest_features(func, target)` reads the loop IR that lowering produced
(the same function the compiler will see) and returns a fixed-length vector,
log2-scaled, that does not depend on the space's knobs: the same features
describe a GEMM, a convolution or a GEMV, so a model trained on some
workloads ranks the schedules of another (transfer). No compilation.

What it measures, mostly on the *main group*: the statements of the
innermost loop body carrying the most arithmetic (a register tile of
unrolled updates, typically):
- work: flops, the share of them in the main group, vector lanes, the share
  of vector arithmetic, statements per body (unroll), code size, guards;
- the loop nest around the main group, innermost first: trip counts, which
  loops are reductions (the output does not move) and parallel;
- parallelism: parallel extent against the cores, load balance;
- registers: accumulator vectors against the architectural registers;
- per buffer (the most touched few): innermost stride, contiguous or
  broadcast vectors, footprint and reuse (accesses / distinct elements)
  at several loop depths;
- arithmetic intensity against each cache level: flops per byte brought in,
  where a level's traffic is the footprint of the deepest loop level that
  fits, times the trips of the loops around it;
- packing: elements copied by other statements (padding, packed weights)
  against the main flops.

Index expressions are evaluated numerically (loop variables at the middle
of their ranges), so strides come from finite differences and any index
form, affine or not, gives a number."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..ir.expr import (
    Binary,
    BinOp,
    Broadcast,
    Call,
    Cast,
    CmpOp,
    Compare,
    Const,
    Expr,
    Load,
    Ramp,
    Select,
    Unary,
    UnOp,
    Var,
)
from ..ir.stmt import Allocate, Barrier, For, ForKind, IfThenElse, LetStmt, Scope, Seq, Stmt, Store

FEATURE_VERSION = 1
NEST_DEPTH = 6  # loops described around the main group, innermost first
TOP_BUFFERS = 3  # buffers described one by one, most touched first
REUSE_DEPTHS = (0, 1, 2, 3, 5)  # loop levels (0 = the body itself) at which footprints and reuse are taken
CACHE_LINE = 64
_ARITH = {BinOp.ADD, BinOp.SUB, BinOp.MUL, BinOp.DIV, BinOp.MIN, BinOp.MAX}


def _log2(x: float) -> float:
    return math.log2(x) if x > 0 and math.isfinite(x) else 0.0


def _l1p(x: float) -> float:
    return math.log2(1.0 + abs(x)) if math.isfinite(x) else 0.0


# ---- numeric evaluation of index expressions ------------------------------------------------------
def _ev(e: Expr, env: dict) -> int:
    """The integer value of `e` with variables from `env` (absent ones 0); data (loads) read as 0."""
    if isinstance(e, Const):
        v = e.value
        return int(v) if isinstance(v, (int, bool)) or float(v).is_integer() else 0
    if isinstance(e, Var):
        return env.get(e, 0)
    if isinstance(e, Binary):
        a, b = _ev(e.a, env), _ev(e.b, env)
        op = e.op
        if op is BinOp.ADD:
            return a + b
        if op is BinOp.SUB:
            return a - b
        if op is BinOp.MUL:
            return a * b
        if op in (BinOp.FLOORDIV, BinOp.DIV):
            return a // b if b else 0
        if op is BinOp.FLOORMOD:
            return a % b if b else 0
        if op is BinOp.TRUNCDIV:
            return int(a / b) if b else 0
        if op is BinOp.TRUNCMOD:
            return a - b * int(a / b) if b else 0
        if op is BinOp.MIN:
            return min(a, b)
        if op is BinOp.MAX:
            return max(a, b)
        if op is BinOp.AND:
            return a & b
        if op is BinOp.OR:
            return a | b
        return 0
    if isinstance(e, Compare):
        a, b = _ev(e.a, env), _ev(e.b, env)
        return int({CmpOp.LT: a < b, CmpOp.LE: a <= b, CmpOp.GT: a > b, CmpOp.GE: a >= b, CmpOp.EQ: a == b,
                    CmpOp.NE: a != b}[e.op])
    if isinstance(e, Select):
        return _ev(e.t, env) if _ev(e.cond, env) else _ev(e.f, env)
    if isinstance(e, Unary):
        a = _ev(e.a, env)
        return -a if e.op is UnOp.NEG else int(not a)
    if isinstance(e, (Cast, Broadcast)):
        return _ev(e.value, env)
    if isinstance(e, Ramp):
        return _ev(e.base, env)
    return 0


def _coef(index: Expr, env: dict, var: Var) -> int:
    return _ev(index, {**env, var: env.get(var, 0) + 1}) - _ev(index, env)


# ---- one walk over the function -------------------------------------------------------------------
@dataclass
class _Loop:
    var: Var
    extent: int
    kind: ForKind
    mid: int


@dataclass
class _Access:
    buffer: object
    index: Expr
    lanes: int
    ramp_stride: int | None  # None: a scalar access (broadcast when it feeds a vector)
    write: bool


@dataclass
class _Site:
    loops: tuple[_Loop, ...]
    env: dict
    guarded: bool
    execs: float
    flops: float  # per execution
    lanes: int
    accesses: list[_Access] = field(default_factory=list)


def _accesses(store: Store, env: dict, vec: tuple | None) -> list[_Access]:
    """The store and the loads of its value; inside a vectorized loop `vec` = (variable, extent), a
    scalar index that moves with the variable is a vector access of that stride, one that does not
    is a broadcast."""
    out = []

    def add(buffer, index, write):
        if isinstance(index, Ramp):
            out.append(_Access(buffer, index, index.lanes, index.stride, write))
            return
        stride = _coef(index, env, vec[0]) if vec else 0
        if stride:
            out.append(_Access(buffer, index, vec[1], stride, write))
        else:
            out.append(_Access(buffer, index, 1, None, write))

    add(store.buffer, store.indices[0] if store.indices else Const(0, store.value.dtype), True)
    stack = [store.value]
    while stack:
        e = stack.pop()
        if isinstance(e, Load):
            if hasattr(e.tensor, "shape") and e.indices:
                add(e.tensor, e.indices[0], False)
            continue  # indices are address arithmetic, not work
        if isinstance(e, (Binary, Compare)):
            stack += [e.a, e.b]
        elif isinstance(e, Unary):
            stack.append(e.a)
        elif isinstance(e, (Cast, Broadcast)):
            stack.append(e.value)
        elif isinstance(e, Select):
            stack += [e.t, e.f]
        elif isinstance(e, Call):
            stack += list(e.args)
    return out


def _flops(value: Expr) -> float:
    """Arithmetic operations of a stored value, lanes counted; conditions and addresses are not work."""
    n, stack = 0.0, [value]
    while stack:
        e = stack.pop()
        if isinstance(e, Binary):
            if e.op in _ARITH:
                n += e.dtype.lanes
            stack += [e.a, e.b]
        elif isinstance(e, Call):
            n += e.dtype.lanes
            stack += list(e.args)
        elif isinstance(e, Unary):
            stack.append(e.a)
        elif isinstance(e, (Cast, Broadcast)):
            stack.append(e.value)
        elif isinstance(e, Select):
            stack += [e.t, e.f]
    return n


@dataclass
class _Walk:
    sites: list = field(default_factory=list)
    statements: int = 0
    parallel_regions: int = 0
    allocs: list = field(default_factory=list)  # (Allocate, execs)
    innermost: dict = field(default_factory=dict)  # id(site) -> its group: the loop nest around it


def _walk(body: Stmt) -> _Walk:
    """Every store with its loops (a vectorized loop is lanes, not a loop), executions and accesses.
    Statements are grouped by their loop nest (the same loop variables and extents): the copies an
    unrolled register tile makes of a reduction fall in one group."""
    w = _Walk()

    def visit(s: Stmt, loops: tuple, env: dict, execs: float, guarded: bool, vec):
        w.statements += 1
        if isinstance(s, For):
            begin = _ev(s.begin, env)
            extent = max(1, _ev(s.extent, env))
            if s.kind is ForKind.VECTORIZED:
                visit(s.body, loops, {**env, s.var: begin}, execs, guarded, (s.var, extent))
                return
            if s.kind is ForKind.PARALLEL:
                w.parallel_regions += 1
            loop = _Loop(s.var, extent, s.kind, begin + extent // 2)
            visit(s.body, loops + (loop,), {**env, s.var: loop.mid}, execs * extent, guarded, vec)
        elif isinstance(s, Seq):
            for c in s.stmts:
                visit(c, loops, env, execs, guarded, vec)
        elif isinstance(s, IfThenElse):
            visit(s.then, loops, env, execs, True, vec)
            if s.orelse is not None:
                visit(s.orelse, loops, env, execs, True, vec)
        elif isinstance(s, LetStmt):
            visit(s.body, loops, {**env, s.var: _ev(s.value, env)}, execs, guarded, vec)
        elif isinstance(s, Allocate):
            w.allocs.append((s, execs))
            visit(s.body, loops, env, execs, guarded, vec)
        elif isinstance(s, Store):
            widen = vec[1] if vec else 1
            site = _Site(loops, env, guarded, execs, _flops(s.value) * widen, s.value.dtype.lanes * widen,
                         _accesses(s, env, vec))
            w.sites.append(site)
            w.innermost[id(site)] = tuple((id(lp.var), lp.extent) for lp in loops)
        elif isinstance(s, Barrier):
            pass

    visit(body, (), {}, 1.0, False, None)
    return w


# ---- footprints -----------------------------------------------------------------------------------
@dataclass
class _BufferUse:
    buffer: object
    accesses: list  # (_Access, _Site)
    touches: float = 0.0
    register: bool = False

    @property
    def dtype_bytes(self) -> int:
        return self.buffer.dtype.bytes


def _body_elements(use: _BufferUse) -> tuple[int, int, int]:
    """Distinct elements one execution of the main body touches, their span, and the smallest unit stride."""
    elems: set[int] = set()
    for a, site in use.accesses:
        base = _ev(a.index, site.env)
        if a.ramp_stride is None:
            elems.add(base)
        else:
            elems.update(base + k * a.ramp_stride for k in range(a.lanes))
    lo, hi = min(elems), max(elems)
    ordered = sorted(elems)
    gaps = [b - a for a, b in zip(ordered, ordered[1:])]
    return len(elems), hi - lo + 1, min(gaps) if gaps else 0


def _footprints(use: _BufferUse, loops: list[_Loop], env: dict, buffer_size: int):
    """Per depth d (0 = body, d = the innermost d loops too): (accesses, distinct elements, cache lines)."""
    count0, span0, gap0 = _body_elements(use)
    per_exec = sum(a.lanes for a, _ in use.accesses)
    index = use.accesses[0][0].index
    coefs = [abs(_coef(index, env, lp.var)) for lp in loops]  # innermost first
    line_elems = max(1, CACHE_LINE // use.dtype_bytes)
    out = []
    for d in range(len(loops) + 1):
        inner = sorted((c, lp.extent) for c, lp in zip(coefs[:d], loops[:d]) if c and lp.extent > 1)
        distinct, span = float(count0), float(span0)
        for c, e in inner:
            if c >= span:
                distinct *= e
                span = c * (e - 1) + span
            else:
                new = c * (e - 1) + span
                distinct *= new / span
                span = new
        distinct = min(distinct, float(buffer_size))
        units = [u for u in [gap0] + [c for c, _ in inner] if u > 0]
        unit = min(units) if units else line_elems
        run = line_elems if unit <= 1 else max(1.0, line_elems / unit)
        lines = max(1.0, distinct / run)
        accesses = per_exec * math.prod(lp.extent for lp in loops[:d])
        out.append((accesses, distinct, lines))
    return out, coefs


# ---- the vector -----------------------------------------------------------------------------------
def _names() -> list[str]:
    names = ["log_flops", "main_share", "log_statements", "log_main_statements", "log_lanes", "vector_share",
             "guarded_share", "log_main_depth"]
    for d in range(NEST_DEPTH):
        names += [f"loop{d}_log_extent", f"loop{d}_reduce", f"loop{d}_parallel", f"loop{d}_unrolled"]
    names += ["log_parallel_extent", "parallel_balance", "log_parallel_per_core", "log_parallel_regions",
              "log_accumulators", "accumulators_per_register", "log_loads_per_body"]
    for b in range(TOP_BUFFERS):
        names += [f"buf{b}_touch_share", f"buf{b}_write", f"buf{b}_log_inner_stride", f"buf{b}_contiguous",
                  f"buf{b}_broadcast"]
        names += [f"buf{b}_log_bytes_d{d}" for d in REUSE_DEPTHS]
        names += [f"buf{b}_log_reuse_d{d}" for d in REUSE_DEPTHS]
    names += ["log_intensity_L1", "log_intensity_L2", "log_intensity_L3", "log_intensity_memory",
              "fit_depth_L1", "fit_depth_L2", "log_copy_share", "log_copy_bytes"]
    return names


FEATURE_NAMES = tuple(_names())
N_FEATURES = len(FEATURE_NAMES)


def loop_nest_features(func, target) -> np.ndarray:
    """The feature vector (length N_FEATURES, finite floats) of a lowered function on `target`."""
    w = _walk(func.body)
    f = dict.fromkeys(FEATURE_NAMES, 0.0)
    sites = [s for s in w.sites if s.flops > 0] or w.sites
    if not sites:
        return np.zeros(N_FEATURES)
    groups: dict = {}
    for s in sites:
        groups.setdefault(w.innermost[id(s)], []).append(s)
    main = max(groups.values(), key=lambda g: sum(s.flops * s.execs for s in g))
    total_flops = sum(s.flops * s.execs for s in w.sites)
    main_flops = sum(s.flops * s.execs for s in main)
    lead = max(main, key=lambda s: s.flops * s.execs)
    loops = list(reversed(lead.loops))  # innermost first
    env = lead.env
    f["log_flops"] = _log2(total_flops)
    f["main_share"] = main_flops / total_flops if total_flops else 0.0
    f["log_statements"] = _log2(w.statements)
    f["log_main_statements"] = _log2(len(main))
    f["log_lanes"] = _log2(lead.lanes)
    f["vector_share"] = sum(s.flops * s.execs for s in w.sites if s.lanes > 1) / total_flops if total_flops else 0.0
    f["guarded_share"] = sum(s.execs for s in main if s.guarded) / max(1.0, sum(s.execs for s in main))
    f["log_main_depth"] = _log2(1 + len(loops))

    out_access = next(a for a in lead.accesses if a.write)
    for d, lp in enumerate(loops[:NEST_DEPTH]):
        f[f"loop{d}_log_extent"] = _log2(lp.extent)
        f[f"loop{d}_reduce"] = float(_coef(out_access.index, env, lp.var) == 0)
        f[f"loop{d}_parallel"] = float(lp.kind is ForKind.PARALLEL)
        f[f"loop{d}_unrolled"] = float(lp.kind is ForKind.UNROLLED)

    cores = max(1, getattr(target, "cores", 1))
    par = math.prod(lp.extent for lp in loops if lp.kind in (ForKind.PARALLEL, ForKind.THREAD_BINDING))
    f["log_parallel_extent"] = _log2(par)
    f["parallel_balance"] = par / (math.ceil(par / cores) * cores) if par > 1 else 1.0 / cores
    f["log_parallel_per_core"] = _log2(par / cores) if par > 1 else -_log2(cores)
    f["log_parallel_regions"] = _l1p(w.parallel_regions)

    registers = {id(a.buffer): a for a, _ in w.allocs if a.register_lanes > 0}
    acc = [a for a in registers.values() if any(x.buffer is a.buffer for s in main for x in s.accesses)]
    acc_vectors = sum(a.buffer.size / max(1, a.register_lanes) for a in acc)
    f["log_accumulators"] = _l1p(acc_vectors)
    f["accumulators_per_register"] = acc_vectors / max(1, getattr(target, "vector_registers", 16))
    f["log_loads_per_body"] = _l1p(sum(1 for s in main for a in s.accesses if not a.write))

    uses: dict[int, _BufferUse] = {}
    for s in main:
        for a in s.accesses:
            u = uses.setdefault(id(a.buffer), _BufferUse(a.buffer, [], register=id(a.buffer) in registers))
            u.accesses.append((a, s))
            u.touches += a.lanes * s.execs
    mem = sorted((u for u in uses.values() if not u.register), key=lambda u: -u.touches)  # in memory
    all_touch = sum(u.touches for u in mem) or 1.0
    depth_lines = [0.0] * (len(loops) + 1)
    depth_bytes = [0.0] * (len(loops) + 1)
    for rank, u in enumerate(mem):
        fp, coefs = _footprints(u, loops, env, u.buffer.size)
        for d, (_, distinct, lines) in enumerate(fp):
            depth_lines[d] += lines
            depth_bytes[d] += distinct * u.dtype_bytes
        if rank >= TOP_BUFFERS:
            continue
        a0 = u.accesses[0][0]
        p = f"buf{rank}_"
        f[p + "touch_share"] = u.touches / all_touch
        f[p + "write"] = float(any(a.write for a, _ in u.accesses))
        f[p + "log_inner_stride"] = _l1p(coefs[0]) if coefs else 0.0
        f[p + "contiguous"] = float(a0.ramp_stride == 1)
        f[p + "broadcast"] = float(a0.ramp_stride is None and lead.lanes > 1)
        for d in REUSE_DEPTHS:
            accesses, distinct, _ = fp[min(d, len(fp) - 1)]
            f[p + f"log_bytes_d{d}"] = _log2(distinct * u.dtype_bytes)
            f[p + f"log_reuse_d{d}"] = _log2(accesses / max(1.0, distinct))

    for n, level in enumerate((1, 2, 3)):
        size = target.cache_bytes(level) if hasattr(target, "cache_bytes") else 0
        size = size or (32 << 10) * 8 ** n
        fit = 0
        for d in range(len(loops) + 1):
            if depth_lines[d] * CACHE_LINE <= size:
                fit = d
        traffic = depth_lines[fit] * CACHE_LINE * math.prod(lp.extent for lp in loops[fit:])
        f[f"log_intensity_L{level}"] = _log2(main_flops / max(traffic, 1.0))
        if level < 3:
            f[f"fit_depth_L{level}"] = fit / max(1, len(loops))
    f["log_intensity_memory"] = _log2(main_flops / max(depth_bytes[-1], 1.0))

    packed = {id(a.buffer) for a, _ in w.allocs if a.buffer.scope is Scope.GLOBAL}  # padded / packed copies
    copied = sum(s.lanes * s.execs for s in w.sites if id(s.accesses[0].buffer) in packed)
    f["log_copy_share"] = _log2(1.0 + copied / max(1.0, main_flops) * 64)
    f["log_copy_bytes"] = _l1p(sum(a.buffer.size * a.buffer.dtype.bytes for a, _ in w.allocs
                                   if a.buffer.scope is Scope.GLOBAL))
    vec = np.array([f[n] for n in FEATURE_NAMES], dtype=float)
    return np.nan_to_num(np.clip(vec, -64.0, 64.0), nan=0.0, posinf=64.0, neginf=-64.0)


__all__ = ["FEATURE_NAMES", "FEATURE_VERSION", "N_FEATURES", "loop_nest_features"]

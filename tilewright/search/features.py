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
  of vector arithmetic, statements per body (unroll), code size, guards,
  memory accesses per arithmetic instruction, guarded (select) reads;
- the loop nest around the main group, innermost first: trip counts, which
  loops are reductions (the output does not move), parallel, unrolled or
  kept rolled for the compiler;
- parallelism: parallel extent against the cores, load balance;
- registers: accumulator vectors against the architectural registers;
- per buffer (what the main statement writes, then the most touched reads):
  in registers or not, innermost stride, contiguous or broadcast vectors,
  footprint and reuse (accesses / distinct elements) at several loop depths;
- arithmetic intensity against each cache level: flops per byte brought in,
  where a level's traffic is the footprint of the deepest loop level that
  fits, times the trips of the loops around it;
- packing: elements copied by other statements (padding, packed weights)
  against the main flops;
- the compiler hint (Schedule.compiler_hint), which the loops do not show.

The walk over the function is search/loop_walk.py."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..ir.stmt import ForKind, Scope
from .loop_walk import Loop, coefficient, index_value, walk_function

FEATURE_VERSION = 4
NEST_DEPTH = 6  # loops described around the main group, innermost first
TOP_BUFFERS = 3  # buffers described one by one, most touched first
REUSE_DEPTHS = (0, 1, 2, 3, 5)  # loop levels (0 = the body itself) at which footprints and reuse are taken
CACHE_LINE = 64


def _log2(x: float) -> float:
    return math.log2(x) if x > 0 and math.isfinite(x) else 0.0


def _l1p(x: float) -> float:
    return math.log2(1.0 + abs(x)) if math.isfinite(x) else 0.0


# ---- footprints -----------------------------------------------------------------------------------
@dataclass
class _BufferUse:
    buffer: object
    accesses: list  # (Access, Site)
    touches: float = 0.0
    register: bool = False

    @property
    def dtype_bytes(self) -> int:
        return self.buffer.dtype.bytes


def _body_elements(use: _BufferUse) -> tuple[int, int, int]:
    """Distinct elements one execution of the main body touches, their span, and the smallest unit stride."""
    elems: set[int] = set()
    for a, site in use.accesses:
        base = index_value(a.index, site.env)
        if a.ramp_stride is None:
            elems.add(base)
        else:
            elems.update(base + k * a.ramp_stride for k in range(a.lanes))
    lo, hi = min(elems), max(elems)
    ordered = sorted(elems)
    gaps = [b - a for a, b in zip(ordered, ordered[1:])]
    return len(elems), hi - lo + 1, min(gaps) if gaps else 0


def _footprints(use: _BufferUse, loops: list[Loop], env: dict, buffer_size: int):
    """Per depth d (0 = body, d = the innermost d loops too): (accesses, distinct elements, cache lines)."""
    count0, span0, gap0 = _body_elements(use)
    per_exec = sum(a.lanes for a, _ in use.accesses)
    index = use.accesses[0][0].index
    coefs = [abs(coefficient(index, env, lp.var)) for lp in loops]  # innermost first
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
        names += [f"loop{d}_log_extent", f"loop{d}_reduce", f"loop{d}_parallel", f"loop{d}_unroll"]
    names += ["log_parallel_extent", "parallel_balance", "log_parallel_per_core", "log_parallel_regions",
              "log_accumulators", "accumulators_per_register", "log_loads_per_body", "log_memory_per_op",
              "selects_per_statement"]
    for b in range(TOP_BUFFERS):  # 0: what the main statement writes; then what it reads, most touched first
        names += [f"buf{b}_touch_share", f"buf{b}_register", f"buf{b}_log_inner_stride", f"buf{b}_contiguous",
                  f"buf{b}_broadcast"]
        names += [f"buf{b}_log_bytes_d{d}" for d in REUSE_DEPTHS]
        names += [f"buf{b}_log_reuse_d{d}" for d in REUSE_DEPTHS]
    names += ["log_intensity_L1", "log_intensity_L2", "log_intensity_L3", "log_intensity_memory",
              "fit_depth_L1", "fit_depth_L2", "log_copy_share", "log_copy_bytes", "pressure_scheduling"]
    return names


FEATURE_NAMES = tuple(_names())
N_FEATURES = len(FEATURE_NAMES)


def loop_nest_features(func, target) -> np.ndarray:
    """The feature vector (length N_FEATURES, finite floats) of a lowered function on `target`."""
    w = walk_function(func.body)
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
    f["pressure_scheduling"] = float("pressure_scheduling" in func.compiler_hints)
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
        f[f"loop{d}_reduce"] = float(coefficient(out_access.index, env, lp.var) == 0)
        f[f"loop{d}_parallel"] = float(lp.kind is ForKind.PARALLEL)
        f[f"loop{d}_unroll"] = {ForKind.UNROLLED: 1.0, ForKind.ROLLED: -1.0}.get(lp.kind, 0.0)  # compiler's

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
    memory_ops = sum(1 for s in main for a in s.accesses if id(a.buffer) not in registers)
    f["log_memory_per_op"] = _log2(max(1, memory_ops) / max(1, sum(s.ops for s in main)))
    f["selects_per_statement"] = sum(s.selects for s in main) / len(main)

    uses: dict[int, _BufferUse] = {}
    for s in main:
        for a in s.accesses:
            u = uses.setdefault(id(a.buffer), _BufferUse(a.buffer, [], register=id(a.buffer) in registers))
            u.accesses.append((a, s))
            u.touches += a.lanes * s.execs
    written = uses[id(out_access.buffer)]
    ordered = [written] + sorted((u for u in uses.values() if u is not written), key=lambda u: -u.touches)
    all_touch = sum(u.touches for u in ordered) or 1.0
    depth_lines = [0.0] * (len(loops) + 1)
    depth_bytes = [0.0] * (len(loops) + 1)
    for rank, u in enumerate(ordered):
        fp, coefs = _footprints(u, loops, env, u.buffer.size)
        if not u.register:  # registers cost no cache traffic
            for d, (_, distinct, lines) in enumerate(fp):
                depth_lines[d] += lines
                depth_bytes[d] += distinct * u.dtype_bytes
        if rank >= TOP_BUFFERS:
            continue
        a0 = u.accesses[0][0]
        p = f"buf{rank}_"
        f[p + "touch_share"] = u.touches / all_touch
        f[p + "register"] = float(u.register)
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

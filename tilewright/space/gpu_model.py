"""The GPU default model: an estimate of a point's time from the device's
facts, used to pick the untuned default (its best point) and the first points
the tuner measures (its next ones), as the CPU's model does.

The estimate is the larger of compute time and memory time, plus the cost of
the fetch steps' barriers:
- compute: the useful work (round-up waste included) at the device's FP32
  rate, scaled down by the tail of the last wave of blocks, by latency hiding
  (resident warps x independent accumulators per thread, from occupancy:
  threads, registers and shared memory per SM), and by operand bandwidth
  (loads per FMA from shared memory or, worse, global memory per inner
  reduce step, against the 1 load per 4 FMA lanes an SM sustains);
- memory: global traffic through L2 (every block's staged regions, rounded
  to 32-byte sectors by their contiguous runs; unstaged operands by the
  stride between neighbouring threads), the compulsory bytes from DRAM, and
  the output stores, by their coalescing;
- sync: each fetch step costs two barriers and a load latency per wave,
  hidden by the other resident blocks of an SM.
Absolute values are rough; the ranking is what matters, and the tuner
measures the next-ranked points first."""

from __future__ import annotations

import math
import random

from ..ir.traverse import free_vars
from .cpu_access import coefficient
from .gpu import estimated_registers, structured_sample, warp_fill
from .gpu_knobs import cross_threads
from .gpu_plan import (
    INNER,
    THREAD,
    GpuPlan,
    blocks,
    fetch_region,
    main_loads,
    outputs_per_thread,
    reduce_steps,
    shared_bytes,
    shared_level,
    spatial_parts,
    thread_fragment,
    threads,
)
from .space import Point, Space

SECTOR = 32  # bytes per DRAM/L2 transaction
LOADS_PER_FMA = 0.25  # an SM's shared-memory loads per FP32 FMA lane and cycle (32 banks, 128 lanes)
GLOBAL_LOAD_COST = 4.0  # an unstaged operand load weighs this many shared loads (L1 bandwidth, latency)
HIDE_WARPS_ILP = 64  # resident warps x independent accumulators that hide FMA and load latency on an SM
FETCH_CYCLES = 800  # one fetch step: global load latency + two barriers
TREE_STEP_CYCLES = 100  # one step of a shared-memory reduction tree: a barrier and a shared load
LAUNCH_S = 3e-6
FETCH_WEIGHT = 2.0  # issue slots of one element of a cooperative fetch (global load, shared store, index math) per FMA
L2_OVER_DRAM = 2.5  # L2 bandwidth relative to DRAM's
SAMPLES, CLIMBERS, CLIMB_STEPS = 1500, 4, 25


def _fp32_lanes_per_sm(plan: GpuPlan) -> int:
    return 128 if plan.facts.api == "cuda" else 8  # NVIDIA sm_70+; an OpenCL CPU core's AVX2 lanes


def _dram(plan: GpuPlan, n_blocks: int) -> float:
    """DRAM bandwidth the blocks can draw: one SM cannot pull its share of it alone; about half the SMs
    saturate it (a 32-block GEMV on 132 SMs gets half)."""
    busy = min(1.0, n_blocks / max(1, plan.facts.sm_count))
    return (plan.facts.dram_bytes_per_s or 1e11) * min(1.0, 2 * busy)


def estimate(plan: GpuPlan, point: Point) -> float:
    """Seconds, roughly, that `point` takes on the plan's device."""
    key = ("estimate", point)
    if key not in plan.memo:
        plan.memo[key] = _estimate(plan, point)
    return plan.memo[key]


def _occupancy(plan: GpuPlan, point: Point, n_threads: int, n_blocks: int) -> tuple[int, int, float, int]:
    """(blocks resident per SM at once, waves, share of SMs busy over the waves, resident warps per SM)."""
    g = plan.facts
    sms = max(g.sm_count, 1)
    per_sm = min(32, max(1, (g.max_threads_per_sm or 2048) // n_threads))
    if g.regs_per_sm:
        per_sm = min(per_sm, max(1, g.regs_per_sm // (estimated_registers(plan, point) * n_threads)))
    smem = shared_bytes(plan, point)
    if smem:
        per_sm = min(per_sm, max(1, g.shared_mem_per_block_optin // smem))
    resident = min(per_sm, math.ceil(n_blocks / sms))  # blocks an SM holds at once
    waves = math.ceil(n_blocks / (sms * resident))
    tail = n_blocks / (waves * sms * resident)  # SMs busy over the waves (occupancy is in the warps)
    return resident, waves, tail, resident * math.ceil(n_threads / max(1, g.warp_size))


def _estimate_cross(plan: GpuPlan, point: Point) -> float:
    """Reductions shared by `cross` threads: streaming loads (coalesced along the bound reduce loop),
    one accumulator per thread, a tree of log2(cross) barrier steps per block."""
    g = plan.facts
    clock = max(g.clock_khz, 1) * 1e3
    cross = cross_threads(point)
    n_threads, n_blocks = threads(plan, point), blocks(plan, point)
    rows = n_threads // cross
    resident, waves, tail, warps = _occupancy(plan, point, n_threads, n_blocks)
    hide = min(1.0, warps / 16)  # one accumulator per thread: warps alone keep loads in flight
    peak = max(g.sm_count, 1) * _fp32_lanes_per_sm(plan) * 2 * clock
    operand = max(1.0, len(plan.reads) / LOADS_PER_FMA / 2)  # loads through L1, not staged
    waste = math.prod(math.prod(p) for p in spatial_parts(plan, point)) / max(
        1, math.prod(lp.extent for lp in plan.main.spatial))
    t_compute = max(plan.main.flops, 1) * waste / (peak * tail * hide * warp_fill(plan, n_threads)) * operand
    lane = plan.main.tensor.op.reduce_axis[-1]
    spatial = {id(a) for a in plan.main.tensor.op.axis}
    accesses = plan.main.flops / max(1, plan.main.flops_per_point)
    traffic = 0.0
    for t in plan.reads:
        loads = main_loads(plan, t)
        strides = [math.prod(int(d) for d in t.shape[k + 1:]) for k in range(len(t.shape))]
        coef = [coefficient(i, lane) for i in loads[0].indices] if loads else []
        stride = abs(sum(c * s for c, s in zip(coef, strides))) if coef and None not in coef else SECTOR
        spread = max(1.0, min(SECTOR, stride * t.dtype.bytes) / t.dtype.bytes) if stride else 1.0
        reused = not any(id(v) in spatial for n in loads for i in n.indices for v in free_vars(i))
        traffic += accesses * t.dtype.bytes * spread / (rows if reused else 1)
    compulsory = sum(math.prod(int(d) for d in t.shape) * t.dtype.bytes for t in plan.reads)
    t_memory = traffic / (_dram(plan, n_blocks) * L2_OVER_DRAM) + compulsory / _dram(plan, n_blocks)
    t_tree = waves * (math.log2(cross) + 1) * TREE_STEP_CYCLES / clock
    return max(t_compute, t_memory) + t_tree + LAUNCH_S


def _estimate(plan: GpuPlan, point: Point) -> float:
    if cross_threads(point) > 1:
        return _estimate_cross(plan, point)
    g = plan.facts
    clock = max(g.clock_khz, 1) * 1e3
    sms = max(g.sm_count, 1)
    parts = spatial_parts(plan, point)
    n_threads, n_blocks, acc = threads(plan, point), blocks(plan, point), outputs_per_thread(plan, point)
    useful = max(plan.main.flops, 1)
    waste = math.prod(math.prod(p) for p in parts) / max(1, math.prod(lp.extent for lp in plan.main.spatial))

    resident, waves, tail, warps = _occupancy(plan, point, n_threads, n_blocks)
    hide = min(1.0, warps * min(acc, 8) / HIDE_WARPS_ILP)

    loads = 0.0
    for t in plan.reads:
        frag = thread_fragment(plan, point, t)
        loads += frag if shared_level(point, t) != "none" else frag * GLOBAL_LOAD_COST
    operand = max(1.0, loads / acc / LOADS_PER_FMA) if plan.main.reduce else 1.0
    operand *= 1.0 + FETCH_WEIGHT * _fetch_per_fma(plan, point, n_threads, acc)
    peak = sms * _fp32_lanes_per_sm(plan) * 2 * clock
    t_compute = useful * waste / (peak * tail * hide * warp_fill(plan, n_threads)) * operand

    traffic = _traffic(plan, point, n_blocks, n_threads)
    compulsory = sum(math.prod(int(d) for d in t.shape) * t.dtype.bytes for t in plan.reads)
    t_memory = traffic / (_dram(plan, n_blocks) * L2_OVER_DRAM) + compulsory / _dram(plan, n_blocks)

    steps = max((reduce_steps(plan, point, shared_level(point, t)) for t in plan.reads
                 if shared_level(point, t) != "none"), default=0)
    t_sync = waves * steps * FETCH_CYCLES / clock / resident
    return max(t_compute, t_memory) + t_sync + LAUNCH_S


def _fetch_per_fma(plan: GpuPlan, point: Point, n_threads: int, acc: int) -> float:
    """Elements each thread copies into shared memory per FMA it does: a small block (few threads, so
    few outputs) copies nearly as large a region as a big one, over fewer threads."""
    total = 0.0
    for t in plan.reads:
        level = shared_level(point, t)
        if level != "none":
            total += math.prod(fetch_region(plan, point, t, level)) * reduce_steps(plan, point, level)
    if not total:
        return 0.0
    fmas = acc * math.prod(lp.extent for lp in plan.main.reduce)  # per thread over the whole reduction
    return total / n_threads / fmas


def _traffic(plan: GpuPlan, point: Point, n_blocks: int, n_threads: int) -> float:
    """Bytes the blocks move through L2: staged regions per fetch step (sector-rounded by their
    contiguous runs), unstaged operands per thread access (by the stride between neighbouring
    threads), and the output's stores."""
    total = 0.0
    for t in plan.reads:
        level = shared_level(point, t)
        if level != "none":
            region = fetch_region(plan, point, t, level)
            run = region[-1] * t.dtype.bytes
            total += n_blocks * reduce_steps(plan, point, level) * math.prod(region) * t.dtype.bytes \
                * (math.ceil(run / SECTOR) * SECTOR / run)
        else:
            accesses = plan.main.flops / max(1, plan.main.flops_per_point)  # one load per iteration of the nest
            total += accesses * t.dtype.bytes * _spread(plan, point, t)
    out = plan.anchor.tensor
    total += math.prod(int(d) for d in out.shape) * out.dtype.bytes * _spread(plan, point, out, own=True)
    return total


def _spread(plan: GpuPlan, point: Point, tensor, own: bool = False) -> float:
    """Sector over-fetch of a warp's access to `tensor` (1: neighbouring threads read
    neighbouring elements or the same one; up to 32 / element bytes)."""
    parts = spatial_parts(plan, point)
    fast = next((n for n in range(len(parts) - 1, -1, -1) if parts[n][THREAD] > 1), None)
    if fast is None:
        return 1.0
    if own:
        stride = math.prod(int(d) for d in tensor.shape[fast + 1:])
    else:
        var = plan.main.tensor.op.axis[fast]
        loads = main_loads(plan, tensor)
        strides = [math.prod(int(d) for d in tensor.shape[k + 1:]) for k in range(len(tensor.shape))]
        stride = 0
        for load in loads:
            c = [coefficient(i, var) for i in load.indices]
            if None in c:
                return SECTOR / tensor.dtype.bytes
            stride = max(stride, abs(sum(ci * s for ci, s in zip(c, strides))))
    step = stride * parts[fast][INNER] * tensor.dtype.bytes
    return max(1.0, min(SECTOR, step) / tensor.dtype.bytes) if step else 1.0


def ranked_points(space: Space, plan: GpuPlan) -> list[Point]:
    """Valid points, best estimate first: structured samples, then the best few improved by
    steepest descent over the space's neighbourhoods (deterministic)."""
    if "ranked" in plan.memo:
        return plan.memo["ranked"]
    rng = random.Random(0)
    seen: dict[Point, float] = {}
    for _ in range(SAMPLES):
        p = structured_sample(space, plan, rng)
        if p is not None and p not in seen and space.constraint(p):
            seen[p] = estimate(plan, p)
    if not seen:  # nothing shaped like a GPU schedule fits: whatever the space's sampler finds
        p = space.sample(rng)
        seen[p] = estimate(plan, p)
    for start in sorted(seen, key=seen.get)[:CLIMBERS]:
        p = start
        for _ in range(CLIMB_STEPS):
            near = space.neighbours(p)
            for q in near:
                seen.setdefault(q, estimate(plan, q))
            best = min(near, key=seen.get, default=p)
            if seen[best] >= seen[p]:
                break
            p = best
    plan.memo["ranked"] = sorted(seen, key=lambda q: (seen[q], q.to_json()))
    return plan.memo["ranked"]


def default_point(space: Space, plan: GpuPlan) -> Point:
    return ranked_points(space, plan)[0]


def heuristic_points(space: Space, plan: GpuPlan, k: int = 4) -> list[Point]:
    """The default and the model's next best points, to be measured first."""
    return ranked_points(space, plan)[:k]


def describe(plan: GpuPlan, point: Point) -> str:
    """One line of what the model sees in `point` (for logs and tests)."""
    staged = [t.name for t in plan.reads if shared_level(point, t) != "none"]
    return (f"{blocks(plan, point)} blocks x {threads(plan, point)} threads, {outputs_per_thread(plan, point)} "
            f"outputs/thread{f', reductions over {cross_threads(point)} threads' if cross_threads(point) > 1 else ''}, "
            f"{shared_bytes(plan, point)} B shared ({', '.join(staged) or 'none'}), "
            f"estimate {estimate(plan, point) * 1e6:.1f} us")


__all__ = ["default_point", "describe", "estimate", "heuristic_points", "ranked_points"]

"""The GPU schedule space and its implementation (FlexTensor 4.2, 5.1),
derived from the analysis of any te program, no per-operator template.

Structure: the main node accumulates in registers (a `local` stage) inside
its anchor (the elementwise chain ending at an output, inlined, as on the
CPU). The anchor's spatial loops are split in four parts: the outer parts are
fused into blockIdx.x, the virtual-thread parts bound to virtual threads
(strided sub-tiles: neighbouring threads touch neighbouring elements), the
thread parts fused into threadIdx.x, the inner parts are each thread's
register tile. The main node's reduce loops are split in three. Each input of
the main node may be staged in shared memory per outer (or middle) reduce
step by a cooperative fetch: every thread of the block copies its share with
loads of `fetch_vector` elements, barriers around it; elementwise producers
(padding) are inlined into that fetch or into the main node.

Pruned by the target's facts (`GpuFacts`): threads per block within the
limit and filling their warps, shared memory per block, registers per thread
(estimated from the register tile and its operand fragments), enough blocks
for the SMs (`min_blocks`), the unrolled code size. Non-divisible extents use guarded round-ups as on the
CPU (`knobs.split_totals`)."""

from __future__ import annotations

import math

from ..schedule import Schedule, create_schedule, thread_axis
from ..targets import Target
from .gpu_knobs import (
    CROSS,
    FETCH_VECTOR,
    REDUCE_PARTS,
    SHARED,
    SPATIAL_PARTS,
    UNROLL,
    cross_threads,
    fetch_vector,
    option,
    shared_key,
    split_of,
    unroll_choice,
)
from .gpu_plan import (
    BLOCK,
    INNER,
    THREAD,
    VTHREAD,
    GpuPlan,
    blocks,
    fetch_region,
    main_loads,
    make_gpu_plan,
    outputs_per_thread,
    reduce_parts,
    rounded_axes,
    shared_bytes,
    shared_level,
    spatial_parts,
    thread_fragment,
    threads,
)
from .knobs import OrdinalKnob, SplitKnob, loop_knobs, reduce_orders
from .space import Point, Space

GPU_ROUND_UP = 16  # round extents up to multiples of up to 32 (split_totals' "lanes"): 7 -> 8, 28 -> 32
MAX_UNROLLED = 1024  # statements of a fully unrolled register tile x inner reduce loops (code size)
MAX_ACCUMULATORS = 64  # per thread where the device does not say how many registers a thread has
REGISTER_OVERHEAD = 16  # registers for indices, pointers and loop counters
MIN_WARP_FILL = 0.75  # threads per block fill their warps at least this much (a multiple of the warp: 1.0)


def gpu_space(outputs, target: Target, constants=()) -> tuple[Space, GpuPlan]:
    """`constants` is accepted for the CPU space's signature: GPU kernels pack nothing once."""
    plan = make_gpu_plan(outputs, target)
    main = plan.main
    knobs = loop_knobs(main, SPATIAL_PARTS, REDUCE_PARTS, GPU_ROUND_UP)
    if main.reduce:
        for t in plan.reads:
            knobs.append(OrdinalKnob(shared_key(t), SHARED))
        knobs.append(OrdinalKnob("fetch_vector", FETCH_VECTOR))
    knobs.append(OrdinalKnob("unroll", UNROLL))
    if main.reduce and plan.anchor is main:
        knobs.append(OrdinalKnob("cross", tuple(c for c in CROSS if c <= max(1, main.reduce[-1].extent))))
    space = Space(knobs, lambda p: fits(plan, p))
    space.sampler = lambda rng: structured_sample(space, plan, rng)
    return space, plan


def _divisors(n: int, limit: int) -> list[int]:
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


def structured_sample(space: Space, plan: GpuPlan, rng) -> Point | None:
    """A random point shaped like a GPU schedule: threads first (half the draws a warp multiple spread
    over the loops, half whatever divisors the loops offer, for odd extents), then per spatial loop a
    small register tile and a few virtual threads; a short inner reduction; inputs mostly staged once
    per outer reduce step. The caller checks the constraints and draws again."""
    gpu = plan.facts
    warp = max(1, gpu.warp_size)
    spatial = [(n, k) for n, k in space.knobs.items() if isinstance(k, SplitKnob) and k.parts == SPATIAL_PARTS]
    rest = {name: (rng.choice(k.totals) if rng.random() < 0.4 else k.extent) for name, k in spatial}
    order = [n for n, _ in spatial]
    rng.shuffle(order)
    thread = {}
    if rng.random() < 0.5:  # a warp multiple, its factors spread over the loops (what none holds is dropped)
        counts = [warp * m for m in (1, 2, 4, 8, 16) if warp * m <= gpu.max_threads_per_block] or [1]
        left = rng.choice(counts)
        for n, name in enumerate(order):
            fitting = [d for d in _divisors(rest[name], left) if left % d == 0]
            thread[name] = max(fitting) if n == len(order) - 1 else rng.choice(fitting)
            left //= thread[name]
    else:  # what each loop holds (odd extents: 3 x 9 x 9 = 243 threads fill 31 of 32 lanes of 8 warps)
        room = gpu.max_threads_per_block
        for name in order:
            thread[name] = rng.choice(_divisors(rest[name], min(64, room)))
            room //= thread[name]
    drawn = {}
    for name, _ in spatial:
        total, t = rest[name], thread[name]
        inner = rng.choice(_divisors(total // t, 8))
        vthread = rng.choice(_divisors(total // t // inner, 4))
        drawn[name] = (total // t // inner // vthread, vthread, t, inner)
    values = []
    for name, k in space.knobs.items():
        if name in drawn:
            values.append((name, drawn[name]))
        elif isinstance(k, SplitKnob):
            inner = rng.choice(_divisors(k.extent, 8))
            middle = rng.choice(_divisors(k.extent // inner, 8))
            values.append((name, (k.extent // inner // middle, middle, inner)))
        elif name.startswith("shared."):
            values.append((name, SHARED.index("outer") if rng.random() < 0.7 else rng.randrange(len(SHARED))))
        else:
            values.append((name, k.sample(rng)))
    point = Point(tuple(values))
    cross = space.knobs.get("cross")
    if cross is not None and len(cross.options) > 1 and rng.random() < 0.3:  # reductions shared by threads
        pick = rng.randrange(1, len(cross.options))
        point = point.replace("cross", pick)
        room = max(1, gpu.max_threads_per_block // cross.options[pick])
        for name in order:
            r = rng.choice(_divisors(rest[name], room))
            room //= r
            point = point.replace(name, (rest[name] // r, 1, r, 1))
    return point


def min_blocks(plan: GpuPlan) -> int:
    """Blocks a point must have: one per SM, where the outputs allow a block of at least four warps
    each (a 1024^2 GEMM in 64 blocks of 128 x 128 would leave half of an H100's 132 SMs idle)."""
    outputs = math.prod(lp.extent for lp in plan.main.spatial)
    return max(1, min(plan.facts.sm_count, outputs // (4 * max(1, plan.facts.warp_size))))


def warp_fill(plan: GpuPlan, n_threads: int) -> float:
    """The share of the lanes of a block's warps that its threads use (370 threads: 12 warps, 96%)."""
    warp = max(1, plan.facts.warp_size)
    return n_threads / (-(-n_threads // warp) * warp)


def estimated_registers(plan: GpuPlan, point) -> int:
    """Accumulators, one fragment of every operand per inner reduce step, and overhead. Without a reduction
    no operand is held across steps (a gather's region would otherwise count its whole source)."""
    frags = sum(thread_fragment(plan, point, t) for t in plan.reads) if plan.main.reduce else 0
    return outputs_per_thread(plan, point) + frags + REGISTER_OVERHEAD


def block_registers(plan: GpuPlan, point) -> int:
    """Registers a block of `point` takes from the SM's file: each warp's share is allocated whole, a
    thread's count rounded up to 8 (NVIDIA's allocation unit on sm_70 to sm_90). A block over the
    per-block budget would spill everything past 65536 / threads (the kernel's __launch_bounds__)."""
    warp = max(1, plan.facts.warp_size)
    regs = -(-estimated_registers(plan, point) // 8) * 8
    return -(-threads(plan, point) // warp) * warp * regs


def fits(plan: GpuPlan, point) -> bool:
    """`point` within the device's limits and the space's size rules."""
    gpu = plan.facts
    t = threads(plan, point)
    total = math.prod(math.prod(p) for p in spatial_parts(plan, point))
    if t > gpu.max_threads_per_block or (warp_fill(plan, t) < MIN_WARP_FILL and total >= gpu.warp_size):
        return False
    if blocks(plan, point) < min_blocks(plan):
        return False
    acc = outputs_per_thread(plan, point)
    if gpu.regs_per_thread:
        if estimated_registers(plan, point) > gpu.regs_per_thread:
            return False
        if gpu.regs_per_block and block_registers(plan, point) > gpu.regs_per_block:
            return False
    elif acc > MAX_ACCUMULATORS:
        return False
    if unroll_choice(point) == "all":
        if acc * math.prod(p[-1] for p in reduce_parts(plan, point)) > MAX_UNROLLED:
            return False
    if plan.main.reduce:
        if shared_bytes(plan, point) > gpu.shared_mem_per_block or _guarded_fetch(plan, point):
            return False
        width = fetch_vector(point)
        if width > 1 and cross_threads(point) == 1 and not _vector_fetch_ok(plan, point, width):
            return False
    return True


def _staged(plan: GpuPlan, point) -> list:
    return [t for t in plan.reads if shared_level(point, t) != "none"]


def _guarded_fetch(plan: GpuPlan, point) -> bool:
    """A rounded-up axis that indexes a staged input: the fetch would read past the input's end
    (the main node's guard does not cover the cooperative copy)."""
    from ..ir.traverse import free_vars

    rounded = {id(a) for a in rounded_axes(plan, point)}
    if not rounded:
        return False
    for t in _staged(plan, point):
        for load in main_loads(plan, t):
            if any(id(v) in rounded for i in load.indices for v in free_vars(i)):
                return True
    return False


def _vector_fetch_ok(plan: GpuPlan, point, width: int) -> bool:
    """Vector loads need a staged input (placeholders only: a padded read has per-lane conditions)
    whose rows, in the tensor and in the staged region, are whole vectors (aligned addresses)."""
    staged = _staged(plan, point)
    producers = {id(p.tensor) for p in plan.producers}
    if not staged:
        return False
    for t in staged:
        if id(t) in producers or not t.shape:
            return False
        inner = fetch_region(plan, point, t, shared_level(point, t))[-1]
        if int(t.shape[-1]) % width or inner % width:
            return False
    return True


def apply_gpu(outputs, plan: GpuPlan, point: Point) -> Schedule:
    """The schedule of `point` for the plan's program."""
    main = plan.main
    if not any(split_of(point, lp) for lp in main.spatial):  # nothing to spread over threads (a 1-element output)
        from .gpu_default import naive_gpu_schedule

        return naive_gpu_schedule(list(plan.outputs), plan.target)
    if cross_threads(point) > 1:
        return _apply_cross(plan, point)
    s = create_schedule(list(plan.outputs))
    reduce = bool(main.reduce)
    if plan.anchor is main:
        anchor_t = main.tensor
        main_t = s.cache_write(main.tensor, "local") if reduce else None
    else:
        anchor_t, main_t = plan.anchor.tensor, main.tensor
        for n in plan.inlined:
            s[n.tensor].compute_inline()
        s[main_t].set_scope("local")
    A = s[anchor_t]
    tx = thread_axis("threadIdx.x")
    levels: list[list] = [[], [], [], []]
    for lp, axis, parts in zip(main.spatial, A.op.axis, spatial_parts(plan, point)):
        if split_of(point, lp) is None:
            levels[BLOCK].append(axis)
            continue
        rest, inner = A.split(axis, factor=parts[INNER])
        rest, thread = A.split(rest, factor=parts[THREAD])
        block, vthread = A.split(rest, factor=parts[VTHREAD])
        for level, ax in zip(levels, (block, vthread, thread, inner)):
            level.append(ax)
    A.reorder(*levels[BLOCK], *levels[VTHREAD], *levels[THREAD], *levels[INNER])
    A.bind(A.fuse(*levels[BLOCK]) if len(levels[BLOCK]) > 1 else levels[BLOCK][0], thread_axis("blockIdx.x"))
    for n, (ax, parts) in enumerate(zip(levels[VTHREAD], [p for lp, p in zip(main.spatial, spatial_parts(
            plan, point)) if split_of(point, lp)])):
        if parts[VTHREAD] > 1:
            A.bind(ax, thread_axis("vthread", name=f"vthread{n}"))
    thread = A.fuse(*levels[THREAD]) if len(levels[THREAD]) > 1 else levels[THREAD][0]
    A.bind(thread, tx)
    unroll = unroll_choice(point)
    if unroll != "none":
        for ax in levels[INNER]:
            A.unroll(ax)
    if main_t is not None:
        _schedule_main(s, plan, point, s[main_t], A, thread, tx, unroll)
    for p in plan.producers:
        s[p.tensor].compute_inline()
    _naive_others(s, plan)
    return s


def _schedule_main(s, plan: GpuPlan, point, M, A, thread, tx, unroll: str) -> None:
    """The accumulating stage at the thread loop, its reduce loops split and ordered, the inputs
    staged in shared memory by cooperative fetches."""
    M.compute_at(A, thread)
    levels: list[list] = [[], [], []]
    for axis, parts in zip(M.op.reduce_axis, reduce_parts(plan, point)):
        rest, inner = M.split(axis, factor=parts[2])
        outer, middle = M.split(rest, factor=parts[1])
        for level, ax in zip(levels, (outer, middle, inner)):
            level.append(ax)
    if len(plan.main.reduce) > 1:
        perm = reduce_orders(len(plan.main.reduce))[option(point, "reduce_order", 0)]
        levels = [[lv[i] for i in perm] for lv in levels]
    M.reorder(*levels[0], *levels[1], *levels[2], *M.op.axis)
    if unroll != "none":
        for ax in M.op.axis:
            M.unroll(ax)
    if unroll == "all":
        for ax in levels[2]:
            M.unroll(ax)
    n_threads = threads(plan, point)
    width = fetch_vector(point)
    for t in plan.reads:
        level = shared_level(point, t)
        if level == "none":
            continue
        staged = s[s.cache_read(t, "shared", [M])]
        staged.compute_at(M, levels[0][-1] if level == "outer" else levels[1][-1])
        axes = list(staged.op.axis)
        flat = staged.fuse(*axes) if len(axes) > 1 else axes[0]
        if width > 1:
            flat, lanes = staged.split(flat, factor=width)
        _, mine = staged.split(flat, factor=n_threads)
        staged.bind(mine, tx)
        if width > 1:
            staged.vectorize(lanes)


def _apply_cross(plan: GpuPlan, point: Point) -> Schedule:
    """Reductions shared across threads: blocks of rows (threadIdx.y) of `cross` threads (threadIdx.x)
    that each sum a strided share of the innermost reduce loop, combined by a tree in shared memory."""
    main = plan.main
    s = create_schedule(list(plan.outputs))
    M = s[main.tensor]
    blocks, rows = [], []
    for lp, axis, parts in zip(main.spatial, M.op.axis, spatial_parts(plan, point)):
        if split_of(point, lp) is None:
            blocks.append(axis)
            continue
        block, row = M.split(axis, factor=parts[VTHREAD] * parts[THREAD] * parts[INNER])
        blocks.append(block)
        rows.append(row)
    *serial, last = M.op.reduce_axis
    outer, lane = M.split(last, factor=cross_threads(point))
    M.reorder(*blocks, *rows, *serial, outer, lane)
    M.bind(M.fuse(*blocks) if len(blocks) > 1 else blocks[0], thread_axis("blockIdx.x"))
    M.bind(M.fuse(*rows) if len(rows) > 1 else rows[0], thread_axis("threadIdx.y"))
    M.bind(lane, thread_axis("threadIdx.x"))
    for p in plan.producers:
        s[p.tensor].compute_inline()
    _naive_others(s, plan)
    return s


def _naive_others(s: Schedule, plan: GpuPlan) -> None:
    """Stages the plan does not schedule (a separate producer of another input): one thread per
    element, as the untuned fallback does."""
    from ..schedule.stage import AttachKind
    from .gpu_default import bind_one_thread_per_element

    handled = {id(plan.main.tensor), id(plan.anchor.tensor)} | {id(n.tensor) for n in plan.inlined} \
        | {id(n.tensor) for n in plan.producers}
    for node in plan.graph.nodes:
        st = s[node.tensor]
        if id(node.tensor) not in handled and st.attach is AttachKind.ROOT:
            bind_one_thread_per_element(st, plan.target)

__all__ = ["apply_gpu", "estimated_registers", "fits", "gpu_space", "min_blocks", "structured_sample", "warp_fill"]

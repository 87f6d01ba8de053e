"""Reduction blocking for the CPU space's default points: which operand a
register tile streams the most of over the reduction (its panel), whether that
panel outgrows L1, and the blocked point (one reduce loop split so a block of the
panel stays in cache while the loops that do not index it sweep middle tiles)."""

from __future__ import annotations

import math

from .cpu import BLOCK_ACC_BYTES
from .cpu_knobs import PACK, fused_count, option, pack_choice, pack_key, split_key, tile_factor
from .cpu_plan import CpuPlan, main_loads, outer_orders, spatial_positions, vector_axes
from .space import Point, Space


def wants_blocking(space: Space, plan: CpuPlan, tiles: dict) -> bool:
    """Block the reduction when the operand panel one register tile streams
    outgrows three times L1 (every tile would stream it from L2). Measured, same-run
    A/B against the unblocked default: weight panels of 110-295 KB (c3d_2, YOLO conv6,
    conv16) ran 1.13-1.2x faster blocked; 73 KB (conv4) was within noise either way
    and 37 KB (conv2) slower."""
    if "reduce_block" not in space.knobs or not vector_axes(plan):
        return False
    panel = _panel(plan, tiles)
    return panel is not None and _footprint(plan, panel, tiles) * panel.dtype.bytes > 3 * plan.l1_bytes


def _footprint(plan: CpuPlan, tensor, tiles: dict, fixed=None) -> int:
    """Elements of `tensor` one register tile (spatial loops over `tiles`) reads
    over the whole reduction, with reduce loop `fixed` held at one iteration: per
    dimension, the span of its index (a conv input's h + rh spans tile + taps - 1);
    a dimension whose index is not affine counts whole."""
    from ..lower.bound import interval

    op = plan.main.tensor.op
    ranged = {id(a): (0, tiles.get(lp.name, 1) - 1) for a, lp in zip(op.axis, plan.main.spatial)}
    ranged.update({id(a): (0, 0 if lp is fixed else lp.extent - 1) for a, lp in zip(op.reduce_axis, plan.main.reduce)})
    best = 0
    for n in main_loads(plan, tensor):
        spans = [interval(i, ranged) for i in n.indices]
        best = max(best, math.prod(s.width + 1 if s is not None else d for s, d in zip(spans, tensor.shape)))
    return best


def _panel(plan: CpuPlan, tiles: dict):
    """The operand a register tile streams the most of over the reduction (a conv's
    weights for its output channels, GEMM's column panel of B, a bilinear form's
    w[m, k1, k2] for its rows of m): the one reduction blocking keeps in cache
    while the loops that do not index it sweep the tiles; None when no operand varies
    along the reduction (no reduce loop, or only extent-1 taps the axis merge fixed)."""
    from ..ir.traverse import free_vars

    reduce_vars = {id(a) for a in plan.main.tensor.op.reduce_axis}
    streamed = [t for t in plan.main.inputs if any(id(v) in reduce_vars for n in main_loads(plan, t)
                                                   for i in n.indices for v in free_vars(i))]
    return max(streamed, key=lambda t: _footprint(plan, t, tiles), default=None)


def _slab_loop(plan: CpuPlan, panel):
    """The reduce loop to block: the one indexing the panel's outermost dimension, so a
    block is one contiguous slab of it (a bilinear form's w[m, k1, k2]: k1, not the
    longer k2, whose blocks would be short strided pieces)."""
    from ..ir.traverse import free_vars

    loops = list(zip(plan.main.reduce, plan.main.tensor.op.reduce_axis))
    best = None
    for n in main_loads(plan, panel):
        for d, index in enumerate(n.indices):
            hits = [lp for lp, axis in loops if axis in free_vars(index) and lp.extent > 1]
            if hits and (best is None or d < best[0]):
                best = (d, max(hits, key=lambda lp: lp.extent))
    return best[1] if best else max(plan.main.reduce, key=lambda lp: lp.extent)  # only extent-1 reads


def reduction_blocked(space: Space, plan: CpuPlan, p: Point, tiles: dict, by_operands: bool = False) -> Point:
    """`p` with one reduce loop (`_slab_loop`) blocked, the other reduce loops inside,
    and middle tiles, along the loops that do not index the panel, as large as a
    budget for their accumulators allows while every core keeps two outer blocks.
    A block of the panel fills a third of L1 where one slab of it fits (a conv: 16
    channels x 3 x 3 x 16 outputs), the whole panel packed once per outer block while
    it fits in L2; otherwise a block fills a quarter of L2, and the operands the
    blocked loop indexes are packed per block (the rest still once per outer block:
    a bilinear form's x2[n, k2] is the same for every block of k1).

    `by_operands`: in L1, the block of every operand the blocked loop indexes, over the
    whole middle block, also stays within half of it. The tuner's first points use it for
    a tile whose panel alone does not call for blocking: what blocking can win there is
    the other operands' reuse across middle tiles (the rows of a 1x1 conv's input channel
    share cache lines; R50 l4_down, AVX2 on Zen 4: blocks of 64 channels 1.29 ms, of 256
    sized by the weights alone 1.76, unblocked 1.77). The defaults keep the panel's rule:
    applied to them it changed 36 suite defaults, 0.92-1.10x."""
    panel = _panel(plan, tiles)
    if panel is None:  # no operand varies along the reduction (extent-1 taps merged away): nothing to block
        return p
    blocked_loop = _slab_loop(plan, panel)
    blocked_axis = plan.main.tensor.op.reduce_axis[plan.main.reduce.index(blocked_loop)]
    per_slab = _footprint(plan, panel, tiles, fixed=blocked_loop) * panel.dtype.bytes
    in_l1 = per_slab <= plan.l1_bytes // 3
    acc = (plan.l1_bytes // 4 if in_l1 else BLOCK_ACC_BYTES // 2) // plan.main.tensor.dtype.bytes
    for lp in plan.main.spatial:
        acc //= max(1, tile_factor(p, lp))
    p = p.replace("reduce_block", 1)
    for lp in plan.main.reduce:
        if lp is not blocked_loop and split_key(lp) in space.knobs:
            p = p.replace(split_key(lp), (1, lp.extent))
    panel_loops = set(spatial_positions(plan, panel, exact=True))
    block = dict(tiles)  # the middle block's extent per spatial loop
    for n in reversed(range(len(plan.main.spatial))):  # middle tiles, innermost loops first
        lp = plan.main.spatial[n]
        key = split_key(lp)
        if n in panel_loops or key not in space.knobs or acc < 2:
            continue
        o, _, t = p[key]
        m = max(d for d in range(1, o + 1) if o % d == 0 and d <= acc
                and (d == 1 or _parallel_work(space, plan, p, n, d) >= 2 * plan.cores))
        p = p.replace(key, (o // m, m, t))
        block[lp.name] = block.get(lp.name, 1) * m
        acc //= m
    budget = plan.l1_bytes // 3 if in_l1 else max(32 * 1024, plan.l2_bytes // 4)
    per_step, whole_budget = 0, math.inf
    if by_operands and in_l1:
        per_step = sum(_footprint(plan, t, block, fixed=blocked_loop) * t.dtype.bytes
                       for t in plan.main.inputs if _indexed_by(plan, t, blocked_axis))
        whole_budget = plan.l1_bytes // 2
    extent = blocked_loop.extent
    inner = max((d for d in range(1, extent + 1)
                 if extent % d == 0 and d * per_slab <= budget and d * per_step <= whole_budget), default=1)
    p = p.replace(split_key(blocked_loop), (extent // inner, inner))
    whole = _footprint(plan, panel, tiles) * panel.dtype.bytes
    if not in_l1 or whole > plan.l2_bytes:
        for t in plan.packable:
            if _indexed_by(plan, t, blocked_axis) and pack_key(t) in space.knobs and \
                    pack_choice(p, t) in ("outer", "root"):
                p = p.replace(pack_key(t), PACK.index("tile"))
    return p


def _indexed_by(plan: CpuPlan, tensor, axis) -> bool:
    """Whether the main stage's reads of `tensor` index it with reduce `axis`."""
    from ..ir.traverse import free_vars

    return any(axis in free_vars(i) for n in main_loads(plan, tensor) for i in n.indices)


def _parallel_work(space: Space, plan: CpuPlan, p: Point, n: int, m: int) -> float:
    """Iterations of `p`'s parallel (fused outer) loops if loop n's outer extent were
    divided by m; unbounded for a loop outside them."""
    sp = plan.main.spatial
    orders = outer_orders(plan)
    order = orders[option(p, "outer_order", 0)]
    fused = order[:fused_count(p)]
    if n not in fused:
        return math.inf
    total = 1
    for q in fused:
        key = split_key(sp[q])
        outer = p[key][0] if key in space.knobs else sp[q].extent
        total *= outer // m if q == n else outer
    return total

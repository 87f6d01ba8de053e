"""The untuned default point of the CPU space and the first points a tuning
run measures, from the register-tile model (`cpu_tiles`: FMAs, loads and
permutes of one reduction step on the target's execution units, registers
counted) and of the operand panel a long reduction streams through L2
(reduction blocking, `cpu_blocking`)."""

from __future__ import annotations

import math
import random

from .cpu import pack_repeats
from .cpu_access import column_panel
from .cpu_blocking import reduction_blocked, wants_blocking
from .cpu_knobs import PACK, PLACE, fused_count, pack_key, place_key, split_key
from .cpu_plan import CpuPlan, indexing_dims, lane_reduce_loop, main_loads, outer_orders, spatial_positions
from .cpu_tensorize import TensorizedPlan, tensorized_default
from .cpu_tiles import Tile, register_tiles
from .knobs import SplitKnob
from .space import Point, Space


def heuristic_points(space: Space, plan: CpuPlan, k: int = 4) -> list[Point]:
    """The default point and the next best-modelled register-tile shapes, up to
    `k` distinct points: what a tuning run measures first (the model ranks
    shapes well but not exactly, and a handful of measurements settle it)."""
    if isinstance(plan, TensorizedPlan):
        return [tensorized_default(space, plan)]
    out: list[Point] = [default_point(space, plan)]
    if not plan.main.spatial:
        return out
    for close_call in ("rolled", "pressure_sched"):  # whether the compiler should unroll the reduce loops,
        if close_call in space.knobs:                # or schedule for register pressure
            flipped = out[0].replace(close_call, 1 - out[0][close_call])
            if space.valid(flipped):
                out.append(flipped)
    for tile in register_tiles(space, plan):
        wanted = wants_blocking(space, plan, tile.tiles)
        for blocked in (wanted, not wanted):  # the twin the panel does not ask for: blocked by every operand
            p = _point_for_tile(space, plan, tile, blocked=blocked and "reduce_block" in space.knobs,
                                by_operands=blocked and not wanted)
            if p is not None and p not in out:
                out.append(p)
        if len(out) >= k:
            break
    return out[:k]


def default_point(space: Space, plan: CpuPlan) -> Point:
    """The untuned heuristic, from the target, the loop extents and which loops
    index which operand: the register tile of best modelled throughput (see
    `cpu_tiles`), operands the vector axis indexes packed once per outer block,
    enough outer loops fused for every core, but no pack repeated under fused
    loops that do not index it (`_packed_once`); lane sums along the
    reduction instead when an operand it reads contiguously is used too few
    times to repay any packing (a GEMV's matrix)."""
    if isinstance(plan, TensorizedPlan):
        return tensorized_default(space, plan)
    if not plan.main.spatial:
        return Point((("scalar", 0),))
    lane = _lane_sum_point(space, plan)
    if lane is not None:
        return lane
    for tile in register_tiles(space, plan):  # the best-ranked tile that the space admits
        p = _point_for_tile(space, plan, tile, blocked=wants_blocking(space, plan, tile.tiles))
        if p is not None:
            return p
    return _smallest_point(space)


def _lane_sum_point(space: Space, plan: CpuPlan) -> Point | None:
    """Vector along the reduction (`vec_reduce`), the whole reduce loop inside,
    rows of one vector each along the innermost spatial loop, nothing packed;
    None unless an operand the lane loop reads contiguously is used at most
    twice per element (packing it for a spatial vector would cost as much as
    the whole computation, which reads it once anyway)."""
    r = lane_reduce_loop(plan)
    if "vec_reduce" not in space.knobs or r is None:
        return None
    flops = plan.main.flops  # the main node's own use of its operands, not its epilogue's or other stages'
    reuse = min(flops / 2 / math.prod(t.shape) for t in plan.main.inputs
                if any(n.indices[-1] is plan.main.tensor.op.reduce_axis[-1] for n in main_loads(plan, t)))
    if reuse > 2:
        return None
    sp = plan.main.spatial
    tiles = {lp.name: 1 for lp in sp}
    row = next((lp for lp in reversed(sp) if lp.extent > 1), None)
    if row is not None:
        tiles[row.name] = max(f for f in range(1, min(8, plan.registers - 4) + 1) if row.extent % f == 0)
    rows = math.prod(tiles.values())
    tile = Tile(0, len(sp) - 1, plan.lanes, tiles, {lp.name: lp.extent for lp in sp}, 0.0, rows,
                len(plan.main.inputs), 0.0)
    return _point_for_tile(space, plan, tile, lane=True)


def _point_for_tile(space: Space, plan: CpuPlan, tile: Tile, blocked: bool = False, by_operands: bool = False,
                    lane: bool = False) -> Point | None:
    """The default-style point for one register tile; None when the space rejects it."""
    sp = plan.main.spatial
    vpos, tiles, totals = tile.vpos, tile.tiles, tile.totals
    outer_extents = [totals[lp.name] // tiles[lp.name] for lp in sp]
    panel = [t for t in plan.packable if column_panel(plan, t, vpos)]
    order = tuple(range(len(sp)))
    if panel and vpos != 0 and outer_extents[vpos] > 1 and "outer_order" in space.knobs:  # vector-axis
        # blocks outermost: each packed panel serves every row block
        order = next((o for o in outer_orders(plan) if o[0] == vpos), order)
    elif "outer_order" in space.knobs:
        order = _least_traffic_order(plan, outer_extents)
    nfuse, work = 1, outer_extents[order[0]] if outer_extents else 1
    while nfuse < len(order) and work < 4 * plan.cores:
        work *= outer_extents[order[nfuse]]
        nfuse += 1
    values, hoist = [], []
    for name, k in space.knobs.items():
        if lane and name == split_key(plan.main.reduce[-1]):
            value = (1, k.extent)
        elif isinstance(k, SplitKnob):
            inner = tiles.get(k.axis, 1) if k.parts == 3 else 1
            value = (totals.get(k.axis, k.extent) // inner, 1, inner) if k.parts == 3 else (k.extent, 1)
        elif name == "vec_axis":
            value = tile.vec_choice
        elif name == "fuse":
            value = nfuse - 1
        elif name == "unroll":
            value = 1
        elif name == "rolled":
            value = int(tile.live_unrolled > plan.registers)
        elif name == "pressure_sched":
            value = int(pressure_scheduled(tile, plan.registers))
        elif name == "outer_order":
            value = outer_orders(plan).index(order)
        elif lane and name == "vec_reduce":
            value = 1
        elif lane and name.startswith("pack."):
            value = PACK.index("none")
        elif name.startswith("pack."):
            t = next(t for t in plan.packable if pack_key(t) == name)
            dims = indexing_dims(plan, t, vpos)
            if not ((dims and dims != {len(t.shape) - 1}) or t in panel):
                value = PACK.index("none")
            else:
                value = PACK.index("outer")
                hoist.append(name)
        elif name.startswith("place."):
            value = _placement(plan, next(q for q in plan.producers if place_key(q) == name),
                               None if lane else vpos)
        else:
            value = 0
        values.append((name, value))
    p = _packed_once(plan, Point(tuple(values)), [t for t in plan.packable if pack_key(t) in hoist],
                     [outer_extents[q] for q in order])
    if blocked:
        p = reduction_blocked(space, plan, p, tiles, by_operands)
    return p if space.valid(p) else None


SPLIT_GAIN = 0.75  # another parallel loop than the written one must cut each core's reads by a quarter


def _least_traffic_order(plan: CpuPlan, outer_extents: list[int]) -> tuple[int, ...]:
    """The outer order whose first (parallel) loop of several blocks splits the larger operands
    between the cores: each core reads every element of an operand that loop does not index,
    from its own L2 when those fit a quarter of it. The written order stays unless another cuts
    each core's reads by SPLIT_GAIN (a Winograd transform's few bytes of constants are no
    reason); only loops with two blocks per core qualify. Measured in place in MobileNet-v2 on
    the Zen 1 host (2 cores), untuned: its 1x1 projections with the pixels split instead of the
    output channels, 28x28 (602 KB of activations, 25 KB of weights) 177-184 -> 136-137 us,
    14x14 170-175 -> 138-142 us. Without the L2 bound, ResNet-50's stride-2 layers, whose
    weights (0.5-8 MB) exceed L2, ran 0.71-0.84x."""
    orders = outer_orders(plan)
    size = {id(t): math.prod(t.shape) * t.dtype.bytes for t in plan.main.inputs}

    def unsplit(order) -> int:  # bytes of the operands the first loop of several blocks does not index
        first = next((p for p in order if outer_extents[p] > 1), order[0])
        return sum(size[id(t)] for t in plan.main.inputs if first not in spatial_positions(plan, t, exact=True))

    def traffic(order) -> float:  # bytes each core reads
        return unsplit(order) + (sum(size.values()) - unsplit(order)) / plan.cores

    fit = [o for o in orders[1:] if outer_extents[o[0]] >= 2 * plan.cores and unsplit(o) <= plan.l2_bytes // 4]
    best = min(fit, key=traffic, default=orders[0])
    return best if traffic(best) <= SPLIT_GAIN * traffic(orders[0]) else orders[0]


# A producer (padding) that the main node reads at most this often per element is inlined: a
# guarded load per read costs less than writing a padded copy and reading it back. Measured on the
# Zen 1 host (3x3 windows, stride 2: 2.25 reads): ResNet's stem max pool 296 -> 196 us without its
# 3.1 MiB copy, MobileNet-v2's stride-2 depthwise convs 734 -> 193 and 35 -> 14 us; its stride-1
# depthwise convs (9 reads) 232 -> 197 and 281 -> 222 us. A dense conv reads its padding at least
# 9 x (output channels) / stride^2 times per element; inlined, ResNet-18's ran 1.3-3x slower.
INLINE_READS = 9


def _placement(plan: CpuPlan, producer, vpos: int | None = None) -> int:
    """The `place` option of an elementwise producer: once per call in its own parallel stage
    (padding or packing a conv's input, read many times per element), or inlined where the
    main node reads each element at most INLINE_READS times and its guard is the same for
    every lane of the vector loop `vpos`. A guard that varies along the lanes (an NCHW
    depthwise conv vectorized along w) splits each vector row into peeled lanes and a
    scalar middle: FlexTensor's mbv2_dw_0 (32 x 112 x 112, 3x3) ran 0.67 ms inlined against
    0.10 ms with the padded copy on Zen 4 (0.57 / 0.10 with AVX2 code)."""
    main = plan.main
    reads = math.prod(lp.extent for lp in (*main.spatial, *main.reduce)) * len(main_loads(plan, producer.tensor))
    inline = reads <= INLINE_READS * math.prod(producer.tensor.shape)
    if inline and vpos is not None and _guard_along(plan, producer, vpos):
        inline = False
    return PLACE.index("inline" if inline else "root")


def _guard_along(plan: CpuPlan, producer, vpos: int) -> bool:
    """Whether the main node reads a guarded (padded) dimension of `producer` through its
    spatial loop `vpos`: a padded dimension is one whose extent differs from the producer's
    input's (every dimension where that cannot be told)."""
    from ..ir.traverse import free_vars

    if not producer.guarded:
        return False
    shape = producer.tensor.shape
    src = producer.inputs[0].shape if len(producer.inputs) == 1 else None
    padded = [d for d in range(len(shape)) if src is None or len(src) != len(shape) or src[d] != shape[d]]
    axis = plan.main.tensor.op.axis[vpos]
    return any(any(v is axis for v in free_vars(n.indices[d]))
               for n in main_loads(plan, producer.tensor) for d in padded)


def pressure_scheduled(tile: Tile, registers: int) -> bool:
    """Whether GCC should schedule the kernel for register pressure (`pressure_sched`): where
    the tile's accumulators and every operand one reduction step reads fit the register file
    together. Then it keeps an operand vector shared by several rows in one register, which
    GCC's default folds into a memory operand of each FMA (a reload per row); where they do not
    fit, the pressure scheduler hoists the step's loads and spills accumulators. Measured on
    Zen 3 (AVX2, 16 registers), default points with and without it, 29 FlexTensor and ResNet-50
    cases: tiles of 11-16 registers so counted ran 1.04-1.17x faster with it (NCHW8c 3x3 convs
    1.4x), tiles of 20-24 0.39-1.0x (12 accumulators and 8 reads: spills)."""
    reads = tile.reads_per_fma * tile.accumulators * max(tile.width, 1)
    return tile.accumulators > 0 and tile.accumulators + reads <= registers


def _packed_once(plan: CpuPlan, p: Point, packed: list, extents: list[int]) -> Point:
    """`p` with each operand it packs once per outer block packed once per call: where the
    parallel loop fuses loops that do not index a packed operand (a conv's weights under
    a fused o x h loop, repacked for every output row), fewer loops fused while every core
    keeps two blocks (the diagnosis measured conv1, l1_3x3, l2_3x3_s2 and l2_reduce2 1.2-1.7x
    faster fusing n x o instead of n x o x h on 2 cores); else the pack in its own parallel
    stage, once per call. `extents`: the outer loops' trip counts in the outer order."""
    def repeats(q):
        return max((pack_repeats(plan, q, t) for t in packed), default=1)

    if repeats(p) > 1:
        for n in range(fused_count(p) - 1, 0, -1):
            if math.prod(extents[:n]) < 2 * plan.cores:
                break
            if repeats(fewer := p.replace("fuse", n - 1)) == 1:
                return fewer
    for t in packed:
        if pack_repeats(plan, p, t) > 1:
            p = p.replace(pack_key(t), PACK.index("root"))
    return p


def _smallest_point(space: Space) -> Point:
    """Every tile 1, every other knob its first option; where the space's constraint rejects that (a
    dispatch loop's tile must hold a whole period, unrolled), a point drawn from the space with a
    fixed seed, so that a program always gets a default."""
    p = Point(tuple((n, (k.extent, 1, 1) if isinstance(k, SplitKnob) and k.parts == 3 else
                     (k.extent, 1) if isinstance(k, SplitKnob) else 0) for n, k in space.knobs.items()))
    return p if space.valid(p) else space.sample(random.Random(0))

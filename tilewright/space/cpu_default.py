"""The untuned default point of the CPU space and the first points a tuning
run measures, from a small model of register tiles (FMAs against operand
loads per reduction step, with register reuse, packing copies and L1 set
conflicts) and of the operand panel a long reduction streams through L2
(reduction blocking, `cpu_blocking`)."""

from __future__ import annotations

import math

from ..analysis.graph import is_placeholder
from .cpu_blocking import reduction_blocked, wants_blocking
from .cpu_plan import (
    CpuPlan,
    indexing_dims,
    lane_reduce_loop,
    loads_of,
    spatial_positions,
    vector_axes,
    vector_width,
)
from .knobs import SplitKnob
from .space import Point, Space


def heuristic_points(space: Space, plan: CpuPlan, k: int = 4) -> list[Point]:
    """The default point and the next best-modelled register-tile shapes, up to
    `k` distinct points: what a tuning run measures first (the model ranks
    shapes well but not exactly, and a handful of measurements settle it)."""
    out: list[Point] = [default_point(space, plan)]
    if "rolled" in space.knobs:  # whether the compiler should unroll the reduce loops is a close call
        flipped = out[0].replace("rolled", 1 - out[0]["rolled"])
        if space.valid(flipped):
            out.append(flipped)
    for tile in _register_tiles(space, plan):
        wanted = wants_blocking(space, plan, tile)
        for blocked in (wanted, not wanted):
            p = _point_for_tile(space, plan, tile, blocked=blocked and "reduce_block" in space.knobs)
            if p is not None and p not in out:
                out.append(p)
        if len(out) >= k:
            break
    return out[:k]


def default_point(space: Space, plan: CpuPlan) -> Point:
    """The untuned heuristic, from the target, the loop extents and which loops
    index which operand: the register tile of best modelled throughput (see
    `_register_tiles`), operands the vector axis indexes packed once per outer
    block, enough outer loops fused for every core; lane sums along the
    reduction instead when an operand it reads contiguously is used too few
    times to repay any packing (a GEMV's matrix)."""
    lane = _lane_sum_point(space, plan)
    if lane is not None:
        return lane
    for tile in _register_tiles(space, plan):  # the best-ranked tile that the space admits
        p = _point_for_tile(space, plan, tile, blocked=wants_blocking(space, plan, tile))
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
    flops = plan.graph.flops
    reuse = min(flops / 2 / math.prod(t.shape) for t in plan.main.inputs
                if any(n.indices[-1] is plan.main.tensor.op.reduce_axis[-1] for n in loads_of(plan.main, t)))
    if reuse > 2:
        return None
    sp = plan.main.spatial
    tiles = {lp.name: 1 for lp in sp}
    row = next((lp for lp in reversed(sp) if lp.extent > 1), None)
    if row is not None:
        tiles[row.name] = max(f for f in range(1, min(8, plan.registers - 4) + 1) if row.extent % f == 0)
    return _point_for_tile(space, plan, (0, tiles, {lp.name: lp.extent for lp in sp}), lane=True)


# Registers a compiler needs free to share operands across the copies of an unrolled reduce loop (a
# 3-tap window's overlapping input broadcasts); with fewer the tile stays rolled (Stage.no_unroll).
# Measured: 8-accumulator conv tiles ran 1.3x faster unrolled, 12-accumulator ones 1.1-1.3x rolled.
ROLL_FREE_REGISTERS = 6


def _accumulators(plan: CpuPlan, tiles: dict, vpos: int) -> int:
    """Vector registers a register tile's accumulators take."""
    sp = plan.main.spatial
    if not sp:
        return 1
    return math.prod(tiles[lp.name] for lp in sp) // vector_width(tiles[sp[vpos].name], plan.lanes)


def _point_for_tile(space: Space, plan: CpuPlan, tile: tuple[int, dict, dict],
                    blocked: bool = False, lane: bool = False) -> Point | None:
    """The default-style point for one register tile; None when the space rejects it."""
    sp = plan.main.spatial
    options = vector_axes(plan)
    vec_choice, tiles, totals = tile
    vpos = options[vec_choice] if options else len(sp) - 1
    outer_extents = [totals[lp.name] // tiles[lp.name] for lp in sp]
    nfuse, work = 1, outer_extents[0] if outer_extents else 1
    while nfuse < len(outer_extents) and work < 4 * plan.cores:
        work *= outer_extents[nfuse]
        nfuse += 1
    # operands read along the vector axis and a reduction (GEMM's B): a column panel, strided by whole
    # rows unless packed
    reduce_vars = {id(lp_axis) for lp_axis in plan.main.tensor.op.reduce_axis}
    panel = [t for t in plan.packable if vpos == len(sp) - 1 and indexing_dims(plan, t, vpos) and any(
        id(i) in reduce_vars for n in loads_of(plan.main, t) for i in n.indices)]
    values = []
    for name, k in space.knobs.items():
        if lane and name == f"split.{plan.main.reduce[-1].name}":
            value = (1, k.extent)
        elif isinstance(k, SplitKnob):
            inner = tiles.get(k.axis, 1) if k.parts == 3 else 1
            value = (totals.get(k.axis, k.extent) // inner, 1, inner) if k.parts == 3 else (k.extent, 1)
        elif name == "vec_axis":
            value = vec_choice
        elif name == "fuse":
            value = nfuse - 1
        elif name == "unroll":
            value = 1
        elif name == "rolled":
            value = int(_accumulators(plan, tiles, vpos) > plan.registers - ROLL_FREE_REGISTERS)
        elif name == "outer_order":
            value = 0
            if panel and vpos != 0:  # vector-axis blocks outermost: each packed panel serves every row block
                value = next((n for n, o in enumerate(k.options) if o[0] == vpos), 0)
        elif lane and name == "vec_reduce":
            value = 1
        elif lane and name.startswith("pack."):
            value = 0
        elif name.startswith("pack."):
            t = next(t for t in plan.packable if f"pack.{t.name}" == name)
            dims = indexing_dims(plan, t, vpos)
            value = 1 if (dims and dims != {len(t.shape) - 1}) or t in panel else 0
        elif name.startswith("place."):
            value = 2  # padding/packing once at root: cheap next to the main node, never recomputed per tile
        else:
            value = 0
        values.append((name, value))
    p = Point(tuple(values))
    if blocked:
        p = reduction_blocked(space, plan, p, tiles)
    return p if space.valid(p) else None


def _smallest_point(space: Space) -> Point:
    """Every tile 1, every other knob its first option: always in the space."""
    return space.check(Point(tuple((n, (k.extent, 1, 1) if isinstance(k, SplitKnob) and k.parts == 3 else
                                        (k.extent, 1) if isinstance(k, SplitKnob) else 0)
                                   for n, k in space.knobs.items())))


# per core and cycle; the latency has slack (measured: 12 accumulators beat 8 to 10)
FMA_PORTS, LOAD_PORTS, FMA_LATENCY = 2, 2, 6


def _register_tiles(space: Space, plan: CpuPlan) -> list[tuple[int, dict, dict]]:
    """(vector-axis choice, tile per loop name, split total per loop name) of
    register tiles, best modelled throughput first, one per shape (vector
    axis, vectors, row loops): for each vector axis,
    one or two vectors, and rows spread over up to two other axes, count the
    FMAs and loads of one reduction step (an operand costs one load per tile
    point of the loops that index it, a vector counting once) and take
    useful FMAs / max(FMAs / ports, loads / ports, FMA latency). Rows along a
    loop that does not index the vector operand reuse its registers (GEMM's
    rows, a conv's output channels); rows that do are loads (a conv's h)."""
    sp = plan.main.spatial
    tiles = {lp.name: 1 for lp in sp}
    totals = {lp.name: lp.extent for lp in sp}
    options = vector_axes(plan)
    if not sp or not options:
        return [(0, tiles, totals)]
    best: dict = {}  # shape -> (key, vec_choice, vpos, width, rows)
    aliased = [_set_aliased_loops(plan, t) for t in plan.main.inputs]
    for vec_choice, vpos in enumerate(options):
        vec = sp[vpos]
        for vectors in (2, 1):
            # what _vectorize_tile will emit: 1 lane (scalar code) when no vector of >= 4 lanes divides
            width = vectors * plan.lanes if vec.extent % (vectors * plan.lanes) == 0 else (
                vector_width(vec.extent, plan.lanes) if vectors == 1 else 0)
            if width == 0:
                continue
            nvec = max(1, width // plan.lanes)
            budget = max(1, (plan.registers - 4) // nvec)
            others = [n for n, lp in enumerate(sp) if n != vpos and lp.extent > 1]
            # an operand the vector loop reaches only through a division by a multiple of the width is
            # the same across the vector: one broadcast (a group conv's input channel o // 64 * C + c)
            indexing = [(t, spatial_positions(plan, t, width=min(width, plan.lanes))) for t in plan.main.inputs]
            contiguity = [spatial_positions(plan, t, exact=True, last_dim=True) for t, _ in indexing]
            groups = _group_sizes(plan, min(width, plan.lanes))
            for rows in _row_splits(space, sp, others, budget):
                tile = {n: f for n, (f, _) in rows.items()}
                if any(math.prod(tile.get(n, 1) for n in loops) > plan.l1_ways for loops in aliased):
                    continue  # its rows would evict each other from L1 every step
                # rows straddling a group would not share its operand registers; a rounded-up split
                # total shifts the tiles off the group boundaries, so it must be the extent itself
                if any(d % rows[n][0] or sp[n].extent % rows[n][1] for n, d in groups.items() if n in rows):
                    continue
                fmas = nvec * math.prod(tile.values())
                loads = sum((_vector_loads(plan, t, vpos, nvec) if vpos in pos else 1)
                            * math.prod(tile.get(n, 1) for n in pos if n != vpos) for t, pos in indexing)
                useful = math.prod(sp[n].extent / t for n, (_, t) in rows.items())
                cycles = max(fmas / FMA_PORTS, loads / LOAD_PORTS, FMA_LATENCY) + sum(
                    _pack_cycles(plan, t, tile, vpos, width) for t, pos in indexing if vpos in pos)
                score = fmas * useful * (width / (nvec * plan.lanes)) / cycles
                # ties: rows along an operand's contiguous dimension share its cache lines (a 1x1x1
                # conv3d's rows along w, not along d, whose rows are 784 floats apart)
                lines = sum(math.prod(tile.get(n, 1) for n in pos if n != vpos and n not in contiguous)
                            for (t, pos), contiguous in zip(indexing, contiguity))
                key = (round(score, 6), -vec_choice, -lines, vectors)
                shape = (vec_choice, vectors, tuple(sorted(rows)))
                if shape not in best or key > best[shape][0]:
                    best[shape] = (key, vec_choice, vpos, width, rows)
    out = []
    for _, vec_choice, vpos, width, rows in sorted(best.values(), key=lambda b: b[0], reverse=True):
        t_tiles, t_totals = dict(tiles), dict(totals)
        t_tiles[sp[vpos].name] = width
        for n, (f, t) in rows.items():
            t_tiles[sp[n].name], t_totals[sp[n].name] = f, t
        out.append((vec_choice, t_tiles, t_totals))
    return out


# per element a packing copy reorders (a strided gather and a store), next to the tile's FMA cycles;
# measured, same-run A/B of the defaults 1.0 and 2.0 pick: bil_1 29.0 -> 15.8 ms, yolo_conv5 2.60 -> 2.31
PACK_CYCLES = 2.0


def _pack_cycles(plan: CpuPlan, tensor, tile: dict, vpos: int, width: int) -> float:
    """Cycles per reduction step of packing `tensor` into vector rows, where the vector
    loop indexes a dimension of it other than the last (the packed copy is a transpose):
    each element packed once, spread over every step of every tile. A bilinear form's
    w[m, k1, k2] vectorized along m serves only batch / rows tiles per element, a conv's
    weights every h x w tile."""
    dims = indexing_dims(plan, tensor, vpos)
    if not is_placeholder(tensor) or len(dims) != 1 or math.prod(tensor.shape[min(dims) + 1:]) == 1:
        return 0.0  # already contiguous along the vector (a transposed conv's w[c, o, 1, 1])
    steps = math.prod(lp.extent / (width if n == vpos else tile.get(n, 1)) for n, lp in enumerate(plan.main.spatial))
    steps *= math.prod(lp.extent for lp in plan.main.reduce)
    return math.prod(tensor.shape) * PACK_CYCLES / steps


def _group_sizes(plan: CpuPlan, width: int) -> dict[int, int]:
    """{spatial loop position: D} for loops some operand sees only through a division
    by D (a group conv's input channel o // 64 * C + c): rows along them share that
    operand's registers only when no tile straddles a group."""
    from ..ir.expr import Binary, BinOp, Const
    from ..ir.traverse import free_vars, walk

    out: dict[int, int] = {}
    for t in plan.main.inputs:
        exact = set(spatial_positions(plan, t, exact=True))
        hidden = exact - set(spatial_positions(plan, t, width=width))
        for n in loads_of(plan.main, t):
            for e in (x for i in n.indices for x in walk(i)):
                if isinstance(e, Binary) and e.op is BinOp.FLOORDIV and isinstance(e.b, Const):
                    for p in hidden:
                        if plan.main.tensor.op.axis[p] in free_vars(e.a):
                            out[p] = math.gcd(out.get(p, 0), int(e.b.value))
    return out


def _set_aliased_loops(plan: CpuPlan, tensor) -> set[int]:
    """Spatial loops along which `tensor`'s elements, in the caller's layout, are a
    multiple of L1's set span apart (L1 bytes / ways: 4 KB on an 8-way 32 KB cache),
    so every row of a register tile along them maps to one L1 set: a bilinear form's
    w[m, k1, k2] rows of m, 4 MB apart (a packed copy would not alias, but rows read
    from the caller's array do). Measured on bil_0: 11 such rows ran 1.6x slower than
    8 or 4 (39 vs 24-25 ms), with identical inner loops."""
    from ..lower.bound import interval

    span = plan.l1_bytes // max(1, plan.l1_ways)
    if not is_placeholder(tensor) or span <= 0:
        return set()
    strides = [math.prod(tensor.shape[d + 1:]) for d in range(len(tensor.shape))]
    out = set()
    for n_pos, axis in enumerate(plan.main.tensor.op.axis):
        for n in loads_of(plan.main, tensor):
            spans = [interval(i, {id(axis): (0, 1)}) for i in n.indices]
            if any(s is None for s in spans):
                continue
            step = sum(s.width * st for s, st in zip(spans, strides)) * tensor.dtype.bytes
            if step and step % span == 0:
                out.add(n_pos)
    return out


def _row_splits(space: Space, sp, others: list[int], budget: int):
    """Row tiles {position: (factor, split total)} over at most two of `others`
    whose product fits `budget` (the whole budget on one axis, or shared)."""
    def tiles_of(n):
        knob = space.knobs.get(f"split.{sp[n].name}")
        totals = knob.totals if knob else (sp[n].extent,)
        return [(f, t) for t in totals for f in range(2, min(budget, sp[n].extent) + 1) if t % f == 0]

    yield {}
    for a in others:
        for fa in tiles_of(a):
            yield {a: fa}
            for b in others:
                if b > a:
                    for fb in tiles_of(b):
                        if fa[0] * fb[0] <= budget:
                            yield {a: fa, b: fb}


def _vector_loads(plan: CpuPlan, tensor, vpos: int, nvec: int) -> int:
    """Loads per step for `nvec` vectors of an operand the vector loop indexes:
    one per vector when the loop alone indexes its last dimension, or another
    dimension of a placeholder (packed contiguous); a lane at a time when it
    indexes it through arithmetic (a conv input's w + rw counts so too: a
    stand-in for what the model lacks, the cache lines rows along an image
    axis touch; measured, 1x1 convs run twice as fast vectorized along o)."""
    dims = indexing_dims(plan, tensor, vpos)
    if dims == {len(tensor.shape) - 1} or (len(dims) == 1 and is_placeholder(tensor)):
        return nvec
    return nvec * plan.lanes

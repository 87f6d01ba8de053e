"""The register-tile model behind the CPU default point: for each vector axis,
one or two vectors and rows over up to two other loops, the cost of one
reduction step on the target's execution units.

A step issues the tile's FMAs, its operands' loads (a vector per stride-1
read, |s| loads and |s| - 1 two-source permutes per stride-s read, a narrow
load per broadcast, only distinct reads counted: rows that do not index an
operand share its registers, and so do the copies of an innermost reduce loop
the compiler unrolls, a 3-tap window's overlapping inputs), and its share of
transposing packs and of a transposing copy-out. It takes the longest of: FMA
pipe cycles (a 512-bit FMA on 256-bit units takes two), load port cycles, and
the FMA latency each accumulator chain waits out. A window read along the
vector (a conv input's x[w + rw]) counts a lane at a time, a measured stand-in
for the cache lines such rows touch. A tile the vectorizer cannot express (a
gather along the vector: a depthwise conv's o // 6) is scalar code whose
accumulators live on the stack. Its registers are counted: accumulators,
operand vectors kept across rows, broadcasts; a tile that would not fit its
register file unspilled is never proposed. Tiles of equal modelled time rank
by fewest operand reads per FMA (on Zen 4 the measured best conv tile, 2 zmm x
7, was the fewest-reads one among equals; 2x14 and 1x28 ran 5-9% slower)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..analysis.graph import is_placeholder
from ..codegen.transpose import block_edge
from ..ir.traverse import free_vars
from .cpu_access import (
    GATHER,
    crowds_l1_set,
    distinct_reads,
    group_sizes,
    lane_stride,
    packed_along,
    padded_reads,
    row_varies,
)
from .cpu_plan import CpuPlan, dispatch_periods, indexing_dims, main_loads, spatial_positions, vector_axes, vector_width
from .space import Space

# Cycles an accumulator chain waits beyond the FMA's datasheet latency (its operand loads, the
# loop around it); fitted on Zen 3 (latency 4, 2 FMAs per cycle): 12 accumulators beat 8 to 10.
FMA_LATENCY_SLACK = 2
# ... and per extra half where a vector FMA runs as halves on narrower units. Measured on Zen 1
# (256-bit FMAs on two 128-bit units, latency 5), MobileNet-v2's 320 -> 1280 1x1 conv at 7x7 in
# NCHW8c: 7 pixels x 1 vector (7 accumulators, modelled as balanced at slack 2) ran 1.25-1.36x slower
# than 5 x 2, 3 x 4 or 6 x 2 (10-12 accumulators).
SPLIT_FMA_SLACK = 1
# Registers a compiler needs free to share operands across the copies of an unrolled reduce loop (a
# 3-tap window's overlapping input broadcasts); with fewer the tile stays rolled (Stage.no_unroll).
# Measured: 8-accumulator conv tiles ran 1.3x faster unrolled, 12-accumulator ones 1.1-1.3x rolled.
ROLL_FREE_REGISTERS = 6
# Instructions of an inner loop's copies GCC unrolls completely (its max-completely-peeled-insns).
PEELED_INSNS = 200
# per output element a transposing copy-out writes (a lane extracted and stored)
EPILOGUE_CYCLES = 1.0
# A tile vectorized along another axis than the output's contiguous one ranks as if this much slower:
# its lanes are stored a plane apart and its rows broadcast activations, which the step model leaves
# out. Measured (Zen 3, weights packed once): 1024->256 1x1 at 14x14, modelled 4% ahead along o,
# ran 8% behind the h*w tile; at 7x7 (2048->512) modelled and measured 40% ahead.
STRIDED_OUTPUT_MARGIN = 0.06
# per element a packing copy reorders (a strided gather and a store), next to the tile's FMA cycles;
# measured, same-run A/B of the defaults 1.0 and 2.0 pick: bil_1 29.0 -> 15.8 ms, yolo_conv5 2.60 -> 2.31
PACK_CYCLES = 2.0
# ... and where the C backend renders the copy as L x L block transposes (codegen/transpose.py: fp32,
# the tile's vector extent and the source's contiguous run both multiples of some L >= 4), which came
# after the constant above was fitted, for a tensor that stays in cache (it and its copy in half the
# last level): measured on Zen 4, ResNet-50 l4_expand's 4 MB of weights packed in every call, 0.34 ms
# as scalar copies, about 0.06 ms as blocks. A larger one streams from memory, as slow as the scalar
# copies (the bilinear forms' 16-64 MB weights: their defaults ran 1.3-3x slower counted at this rate).
BLOCK_PACK_CYCLES = 0.4


@dataclass(frozen=True)
class Tile:
    """One register tile and its modelled cost."""

    vec_choice: int  # index into vector_axes(plan)
    vpos: int  # the spatial loop carrying the vector
    width: int  # lanes of one vector (1: scalar code)
    tiles: dict  # loop name -> register-tile factor
    totals: dict  # loop name -> split total
    score: float  # useful lane FMAs per cycle (over the target's lanes)
    accumulators: int  # vector (or scalar) registers of accumulators
    operand_registers: int  # registers operands take beside them, reduce loops rolled
    reads_per_fma: float  # distinct operand reads per lane FMA

    @property
    def live_unrolled(self) -> int:
        """Vector registers live with the compiler free to unroll the reduce loops (sharing
        operands across copies): more than the register file keeps them rolled."""
        return self.accumulators + max(self.operand_registers, ROLL_FREE_REGISTERS)


def _taps(plan: CpuPlan):
    """The innermost reduce loop (the default's reduce order) and its te axis, or (None, None)."""
    loops = [(lp, a) for lp, a in zip(plan.main.reduce, plan.main.tensor.op.reduce_axis) if lp.extent > 1]
    return loops[-1] if loops else (None, None)


def step_cost(plan: CpuPlan, vpos: int, width: int, nvec: int, tile: dict[int, int], unrolled: bool = False):
    """(useful lane FMAs, cycles, accumulator registers, operand registers, distinct reads) of one
    step of the innermost reduce loop for a register tile of `tile` ({position: factor}), `nvec`
    vectors of `width` lanes along `vpos` (width 1: scalar code); `unrolled`: the compiler may
    unroll the innermost reduce loop (shared operands counted once across its copies)."""
    target = plan.target
    bits = plan.main.tensor.dtype.bits
    strides = {id(t): lane_stride(plan, t, vpos, width, packed=True) for t in plan.main.inputs} if width > 1 else {}
    spilled = GATHER in strides.values()  # the vectorizer leaves an `omp simd` loop: scalar code on the stack
    vector = width > 1 and not spilled
    rows = {n: f for n, f in tile.items() if f > 1 and (n != vpos or not vector)}
    points = nvec * math.prod(rows.values()) if vector else math.prod(tile.values())
    lane_fmas = points * (width if vector else 1)
    vec_bits = width * bits if vector else bits
    fma_cycles = points / target.fmas_per_cycle(vec_bits)
    tap_loop, tap_axis = _taps(plan)
    taps = tap_loop.extent if unrolled and tap_loop is not None else 1
    load_cycles = permutes = reads_total = 0.0
    operand_regs = 0
    for t in plan.main.inputs:
        s = strides.get(id(t), 0) if vector else 0
        # an operand the innermost reduce loop does not index is an FMA's memory operand there (a
        # bilinear form's x1[n, k1] under its k2 loop): it needs no register of its own
        regs = 1 if tap_axis is None or _indexed_by(plan, t, tap_axis) else 0
        varying = {n: f for n, f in rows.items() if row_varies(plan, t, n, f)}
        spans = {n: range(f) for n, f in varying.items()}
        if s:
            spans[vpos] = range(0, nvec * width, width)
        n_taps = taps if taps > 1 and PEELED_INSNS >= taps * 2 * points else 1
        reads = distinct_reads(plan, t, spans, tap_axis, n_taps) / n_taps
        reads_total += reads
        if s:
            if _window(plan, t, vpos):  # a lane at a time
                load_cycles += reads * width / target.loads_per_cycle(bits)
            else:
                load_cycles += reads * s / target.loads_per_cycle(vec_bits)
            permutes += reads * (s - 1)
            operand_regs += regs * (s if varying else nvec)  # a vector kept across the rows, or one streamed
        else:
            load_cycles += reads / target.loads_per_cycle(bits)
            operand_regs += regs
    if spilled:  # each FMA reads and writes its accumulator on the stack
        load_cycles += 2 * lane_fmas / target.loads_per_cycle(bits)
    permute_ops = 1 if target.has("avx512f") else 2  # vpermt2ps, or two permutes and a blend on AVX2
    fp_cycles = fma_cycles + permutes * permute_ops / target.fmas_per_cycle(vec_bits)
    halves = math.ceil(vec_bits / target.fma_bits) if vector else 1
    latency = target.fma_latency + FMA_LATENCY_SLACK + SPLIT_FMA_SLACK * (halves - 1)
    cycles = max(fp_cycles, load_cycles, latency)
    accumulators = 0 if spilled else points
    return lane_fmas, cycles, accumulators, operand_regs, reads_total


def _indexed_by(plan: CpuPlan, tensor, axis) -> bool:
    key = ("indexed", id(tensor), id(axis))
    if key not in plan.memo:
        plan.memo[key] = any(axis in free_vars(i) for n in main_loads(plan, tensor) for i in n.indices)
    return plan.memo[key]


def _window(plan: CpuPlan, tensor, vpos: int) -> bool:
    """A vector read of `tensor` along `vpos` through index arithmetic (a conv input's
    w + rw or 2 * w + rw), not the loop itself in its last dimension nor a packed copy.
    The model counts such a read a lane at a time (its loads as they are, |s| vectors and
    a permute, plus a stand-in for what the model lacks: the cache lines that rows
    along an image axis touch across the reduction). Measured on the 2-core Zen 3 host,
    ResNet-50 l1_3x3: vectorized along w with rows along o and h, 1.37x slower than
    along o with the weights packed (rows along o only: 1.05x)."""
    dims = indexing_dims(plan, tensor, vpos)
    return not (dims == {len(tensor.shape) - 1} or packed_along(plan, tensor, vpos))


def register_tiles(space: Space, plan: CpuPlan) -> list[Tile]:
    """Register tiles, best modelled throughput first, one per shape (vector axis,
    vectors, row loops): for each vector axis, one or two vectors, and rows spread over
    up to two other axes, useful lane FMAs per modelled cycle of one reduction step."""
    sp = plan.main.spatial
    tiles = {lp.name: 1 for lp in sp}
    totals = {lp.name: lp.extent for lp in sp}
    options = vector_axes(plan)
    fixed = _dispatch_tiles(space, plan)
    tiles.update({sp[n].name: f for n, (f, _) in fixed.items()})
    totals.update({sp[n].name: t for n, (_, t) in fixed.items()})
    if not sp or not options:
        return [Tile(0, len(sp) - 1 if sp else 0, 1, tiles, totals, 0.0, 1, 0, 0.0)]
    found: list = []  # (shape, ties, Tile)
    for vec_choice, vpos in enumerate(options):
        vec = sp[vpos]
        for vectors, width, vec_total in _vector_splits(space, plan, vpos):
            nvec = max(1, width // plan.lanes)
            lanes = min(width, plan.lanes)
            budget = max(1, (plan.registers - 4) // nvec)
            others = [n for n, lp in enumerate(sp) if n != vpos and lp.extent > 1 and n not in fixed]
            contiguity = [spatial_positions(plan, t, exact=True, last_dim=True) for t in plan.main.inputs]
            indexing = [spatial_positions(plan, t, width=lanes) for t in plan.main.inputs]
            groups = group_sizes(plan, lanes)
            # a dispatch tile's branches already give the compiler independent work: no rows beside them
            for rows in ([{}] if fixed else _row_splits(space, sp, others, budget)):
                # rows straddling a group would not share its operand registers; a rounded-up split
                # total shifts the tiles off the group boundaries, so it must be the extent itself
                if any(d % rows[n][0] or sp[n].extent % rows[n][1] for n, d in groups.items() if n in rows):
                    continue
                factors = {n: f for n, (f, _) in rows.items()}
                if any(crowds_l1_set(plan, t, factors) for t in plan.main.inputs
                       if not (packed_along(plan, t, vpos) and width > 1)):
                    continue  # its rows would evict each other from L1 every step
                tile = {**factors, vpos: width}
                cost = _tile_cost(plan, vpos, lanes if width > 1 else 1, nvec, tile,
                                  {**rows, vpos: (width, vec_total)})
                if cost is None:
                    continue  # its registers would spill
                score, accumulators, operand_regs, reads_per_fma = cost
                # ties: rows along an operand's contiguous dimension share its cache lines (a 1x1x1
                # conv3d's rows along w, not along d, whose rows are 784 floats apart)
                lines = sum(math.prod(factors.get(n, 1) for n in pos if n != vpos and n not in contiguous)
                            for pos, contiguous in zip(indexing, contiguity))
                shape = (vec_choice, vectors, tuple(sorted(rows)))
                t_tiles, t_totals = dict(tiles), dict(totals)
                t_tiles[vec.name], t_totals[vec.name] = width, vec_total
                for n, (f, t) in rows.items():
                    t_tiles[sp[n].name], t_totals[sp[n].name] = f, t
                candidate = Tile(vec_choice, vpos, lanes if width > 1 else 1, t_tiles, t_totals, score, accumulators,
                                 operand_regs, reads_per_fma)
                found.append((shape, (-vec_choice, -lines, vectors), candidate))
    return _ranked(found)


def _dispatch_tiles(space: Space, plan: CpuPlan) -> dict[int, tuple[int, int]]:
    """{position: (tile factor, split total)} of the dispatch loops (cpu_plan.dispatch_periods):
    one period, over the smallest split total it divides (a 14-row output's h % 4: 16, guarded).
    Their unrolled copies are branches written one after another, so the tile's cost is counted
    without them."""
    out = {}
    for n, period in dispatch_periods(plan).items():
        lp = plan.main.spatial[n]
        knob = space.knobs.get(f"split.{lp.name}")
        total = next((t for t in (knob.totals if knob else (lp.extent,)) if t % period == 0), None)
        if total is not None:
            out[n] = (period, total)
    return out


def _vector_splits(space: Space, plan: CpuPlan, vpos: int):
    """(vectors, tile width, split total) of the register tile along vector loop `vpos`:
    one or two whole vectors of the extent or, where its operands are read from padded
    copies, of a rounded-up split total (196 -> 208 for 16 lanes: its last tile computes
    padding lanes and stores the rest), else what _vectorize_tile will emit: the widest
    vector of >= 4 lanes dividing the extent, or 1 lane (scalar code)."""
    vec = plan.main.spatial[vpos]
    knob = space.knobs.get(f"split.{vec.name}")
    totals = knob.totals if knob else (vec.extent,)
    for vectors in (2, 1):
        width = vectors * plan.lanes
        whole = [t for t in totals if t % width == 0]
        if vec.extent in whole:
            yield vectors, width, vec.extent
            continue
        if padded_reads(plan, vpos):
            yield from ((vectors, width, t) for t in whole)
        if vectors == 1:
            yield 1, vector_width(vec.extent, plan.lanes), vec.extent


def _ranked(found: list) -> list[Tile]:
    """Best first, one tile per shape (the first best of each, shapes in the order they first
    appear): by score; ties by vector axis (the innermost first), fewest operand reads per FMA,
    the cache lines rows touch, vectors."""
    def rank(entry):
        _, ties, c = entry
        score = c.score * (1 - STRIDED_OUTPUT_MARGIN if c.vec_choice else 1)
        return (round(score, 6), ties[0], -round(c.reads_per_fma, 6), *ties[1:])

    best: dict = {}  # shape -> (rank, Tile), in the order shapes first appear
    for entry in found:
        r = rank(entry)
        if entry[0] not in best or r > best[entry[0]][0]:
            best[entry[0]] = (r, entry[2])
    return [c for _, c in sorted(best.values(), key=lambda b: b[0], reverse=True)]


def _tile_cost(plan: CpuPlan, vpos: int, lanes: int, nvec: int, tile: dict, rows: dict):
    """(score, accumulators, operand registers, reads per lane FMA) of a register tile
    ({position: factor}; `lanes` per vector, 1 for scalar code), None when its registers
    would spill with the reduce loops rolled. With registers to spare for the compiler to
    unroll the innermost reduce loop, its copies' shared operands count once."""
    _, _, accumulators, operand_regs, _ = step_cost(plan, vpos, lanes, nvec, tile)
    if accumulators + operand_regs > plan.registers:
        return None
    unrolled = accumulators + max(operand_regs, ROLL_FREE_REGISTERS) <= plan.registers
    lane_fmas, cycles, accumulators, operand_regs, reads = step_cost(plan, vpos, lanes, nvec, tile, unrolled)
    useful = math.prod(plan.main.spatial[n].extent / t for n, (_, t) in rows.items())
    if lanes > 1:
        cycles += sum(pack_cycles(plan, t, tile, vpos, tile[vpos]) for t in plan.main.inputs)
        cycles += epilogue_cycles(plan, tile, vpos)
    return lane_fmas * useful / cycles / plan.lanes, accumulators, operand_regs, reads / max(lane_fmas, 1)


def pack_cycles(plan: CpuPlan, tensor, tile: dict, vpos: int, width: int) -> float:
    """Cycles per reduction step of packing `tensor` into vector rows, where the vector
    loop indexes a dimension of it other than the last (the packed copy is a transpose):
    each element packed once (the default never packs an operand under loops that do not
    index it: cpu_default._packed_once), spread over every step of every tile. A
    bilinear form's w[m, k1, k2] vectorized along m serves only batch / rows tiles per
    element, a conv's weights every h x w tile. `tile`: {position: factor}."""
    dims = indexing_dims(plan, tensor, vpos)
    if id(tensor) in plan.constants:
        return 0.0  # a model's weights: packed once when the model is built
    if not is_placeholder(tensor) or len(dims) != 1 or math.prod(tensor.shape[min(dims) + 1:]) == 1:
        return 0.0  # already contiguous along the vector (a transposed conv's w[c, o, 1, 1])
    steps = math.prod(lp.extent / (width if n == vpos else tile.get(n, 1)) for n, lp in enumerate(plan.main.spatial))
    steps *= math.prod(lp.extent for lp in plan.main.reduce)
    per_element = BLOCK_PACK_CYCLES if _block_transposed(plan, tensor, min(dims), width) else PACK_CYCLES
    return math.prod(tensor.shape) * per_element / steps


def _block_transposed(plan: CpuPlan, tensor, dim: int, width: int) -> bool:
    """Whether packing `tensor` into rows of `width` along its dimension `dim` is rendered as
    block transposes (codegen/transpose.py: fp32, a block edge dividing `width` and the
    contiguous run after `dim`) from cache: the tensor and its packed copy fit in half the
    last-level cache together."""
    run = math.prod(tensor.shape[dim + 1:])
    cached = 2 * math.prod(tensor.shape) * tensor.dtype.bytes <= plan.target.last_level_cache_bytes // 2
    return (cached and tensor.dtype.bits == 32 and tensor.dtype.lanes == 1
            and block_edge(plan.lanes, width, run) > 0)


def epilogue_cycles(plan: CpuPlan, tile: dict, vpos: int) -> float:
    """Cycles per reduction step of writing a tile's results out where its vector runs
    along a loop other than the output's contiguous one (a conv's o): the copy-out reads
    the accumulators transposed, a lane at a time, spread over the steps of the
    reduction. Measured on the Zen 3 host, 1 thread: ResNet-50 l1_reduce (64 channels, so
    each output costs only 64 FMAs) ran 1.7x faster vectorized along h*w than along o."""
    last = len(plan.main.spatial) - 1
    if vpos == last:
        return 0.0
    steps = math.prod(lp.extent for lp in plan.main.reduce)
    k = tile.get(last, 1)
    rows = math.prod(f for n, f in tile.items() if n not in (vpos, last))
    size = k * tile.get(vpos, 1) * plan.main.tensor.dtype.bytes
    small, wide = k in (2, 4) and size <= 128, k in (4, 8, 16) and size > 128 and tile.get(vpos, 1) % k == 0
    if k == plan.main.spatial[last].extent and rows == 1 and (small or wide):
        # the k stores a contiguous run apart interleave into one (codegen/strided.py; wider ones as k x k
        # transposes, codegen/interleaved_stores.py): a relayout into 4-channel blocks, 0.34 -> 0.19 ms for
        # 256 x 56 x 56 bytes on Zen 3; other rows (3 channel blocks) split the runs and ran at 0.30-0.35 ms
        return math.prod(tile.values()) * EPILOGUE_CYCLES / tile[vpos] / max(steps, 1)
    return math.prod(tile.values()) * EPILOGUE_CYCLES / max(steps, 1)


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


def live_vectors(plan: CpuPlan, point) -> int:
    """Vector registers the inner loop of `point` keeps live: its accumulators, the
    operand vectors kept across rows and the broadcasts, plus, where its reduce loops
    are left to the compiler to unroll, the registers the copies share operands in
    (ROLL_FREE_REGISTERS). More than the register file means the inner loop spills."""
    from .cpu_knobs import option, tile_factor
    from .cpu_plan import vector_position

    sp = plan.main.spatial
    if not sp:
        return 1
    tile = {n: tile_factor(point, lp) for n, lp in enumerate(sp)}
    if option(point, "vec_reduce", 0):  # one vector of lane sums per row, its operand vectors
        return math.prod(tile.values()) + len(plan.main.inputs)
    vpos = vector_position(point, plan)
    width = vector_width(tile[vpos], plan.lanes)
    nvec = tile[vpos] // width if width > 1 else 1
    unrolled = not option(point, "rolled", 1)
    _, _, accumulators, operands, _ = step_cost(plan, vpos, width, nvec, tile, unrolled)
    return accumulators + (max(operands, ROLL_FREE_REGISTERS) if unrolled and plan.main.reduce else operands)

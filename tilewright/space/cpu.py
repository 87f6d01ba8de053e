"""The CPU schedule space and its implementation (FlexTensor 4.2 and 5.3),
derived from the analysis of any te program, never from per-operator
templates.

Structure decided by the analysis: the main node (most arithmetic) is
computed in register tiles inside an "anchor": the chain of elementwise
consumers that ends at an output (bias, activation; inlined into it), or a
copy-out stage made by cache_write when the main node is the output. The
anchor's spatial loops are split in three levels (parallel outer, cache
tile, register tile); the main node's reduce loops in two.

Knobs (values chosen by search): every split; the order of reduce loops and
whether the inner ones run outside or inside the register-row loops; how many
outer loops are fused into the parallel loop; unrolling; for each input of
the main node, packing it into a contiguous buffer at the outer or tile loop;
for each elementwise producer (padding, packing), inline / per outer tile /
at root. Target-fixed: vector width, register budget."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from ..analysis.axis_merge import MergedProgram, merge_contiguous_axes
from ..analysis.graph import MiniGraph, Node, analyze, is_placeholder
from ..ir.expr import Load
from ..schedule import Schedule, create_schedule
from ..targets import Target
from ..te.program import as_tensor_list
from .knobs import OrdinalKnob, SplitKnob, split_totals
from .space import Point, Space

MAX_TILE_POINTS = 512  # unrolled register tile size bound (code size)
BLOCK_ACC_BYTES = 32 * 1024  # accumulators of a reduction-blocked middle block: within L1


@dataclass(frozen=True, eq=False)
class CpuPlan:
    graph: MiniGraph
    main: Node
    anchor: Node
    inlined: tuple[Node, ...]  # elementwise nodes between main and anchor
    producers: tuple[Node, ...]  # elementwise producers of main (padding, packing)
    packable: tuple  # placeholder inputs of main
    lanes: int
    registers: int
    cores: int = 1
    l2_bytes: int = 512 * 1024
    l1_bytes: int = 32 * 1024
    outputs: tuple = ()  # the program scheduled: the caller's, or it with contiguous axes merged
    merged: MergedProgram | None = None  # the merge's views of the caller's tensors
    l1_ways: int = 8


def _elementwise_reader(node: Node, consumer: Node) -> bool:
    """`consumer` reads `node` at exactly its own indices (a pointwise epilogue)."""
    if [lp.extent for lp in consumer.spatial] != [lp.extent for lp in node.spatial] or consumer.reduce:
        return False
    axes = consumer.tensor.op.axis
    for n in _loads(consumer, node.tensor):
        if len(n.indices) != len(axes) or any(i is not a for i, a in zip(n.indices, axes)):
            return False
    return True


def _loads(consumer: Node, tensor) -> list[Load]:
    from ..ir.traverse import walk

    return [n for n in walk(consumer.tensor.op.body) if isinstance(n, Load) and n.tensor is tensor]


def make_plan(outputs, target: Target) -> CpuPlan:
    outputs = as_tensor_list(outputs, "outputs")
    merged = merge_contiguous_axes(outputs)
    if merged is not None:
        outputs = merged.outputs
    g = analyze(outputs)
    main = g.main
    anchor, inlined = main, []
    while not anchor.is_output and len(anchor.consumers) == 1:
        nxt = g.node(anchor.consumers[0])
        if not nxt.injective or not _elementwise_reader(anchor, nxt):
            break
        if anchor is not main:
            inlined.append(anchor)
        anchor = nxt
    producers = tuple(g.node(t) for t in main.inputs
                      if not is_placeholder(t) and g.node(t).injective and len(g.node(t).consumers) == 1)
    packable = tuple(t for t in main.inputs if is_placeholder(t))
    lanes = target.vector_lanes(main.tensor.dtype.bytes) if main.tensor.dtype.name in (
        "float32", "float64", "int32", "int64", "int16", "int8", "uint8") else 1
    registers = target.vector_registers
    return CpuPlan(g, main, anchor, tuple(inlined), producers, packable, lanes, registers, target.cores,
                   target.cache_bytes(2) or 512 * 1024, target.cache_bytes(1) or 32 * 1024, tuple(outputs), merged,
                   target.l1_ways)


def _reduce_orders(n: int) -> tuple:
    if n <= 3:
        return tuple(itertools.permutations(range(n)))
    return tuple(tuple((k + s) % n for k in range(n)) for s in range(n))


def cpu_space(outputs, target: Target) -> tuple[Space, CpuPlan]:
    plan = make_plan(outputs, target)
    main = plan.main
    knobs: list = []
    for lp in main.spatial:
        if lp.extent > 1:
            knobs.append(SplitKnob(f"split.{lp.name}", lp.name, lp.extent, 3, split_totals(lp.extent)))
    for lp in main.reduce:
        if lp.extent > 1:
            knobs.append(SplitKnob(f"split.{lp.name}", lp.name, lp.extent, 2, (lp.extent,)))
    if len(main.reduce) > 1:
        knobs.append(OrdinalKnob("reduce_order", _reduce_orders(len(main.reduce))))
    if main.reduce:
        knobs.append(OrdinalKnob("reduce_inner", ("outside_rows", "inside_rows")))
        knobs.append(OrdinalKnob("reduce_block", (False, True)))
        knobs.append(OrdinalKnob("rolled", (False, True)))
    if lane_reduce_loop(plan) is not None:
        knobs.append(OrdinalKnob("vec_reduce", (False, True)))
    vec_axes = vector_axes(plan)
    if len(vec_axes) > 1:
        knobs.append(OrdinalKnob("vec_axis", vec_axes))
    if len(outer_orders(plan)) > 1:
        knobs.append(OrdinalKnob("outer_order", outer_orders(plan)))
    knobs.append(OrdinalKnob("fuse", tuple(range(1, len(main.spatial) + 1))))
    knobs.append(OrdinalKnob("unroll", (False, True)))
    for t in plan.packable:
        knobs.append(OrdinalKnob(f"pack.{t.name}", ("none", "outer", "tile")))
    for p in plan.producers:
        knobs.append(OrdinalKnob(f"place.{p.name}", ("outer", "inline", "root")))

    def constraint(point: Point) -> bool:
        tile = [_tile_factor(point, lp) for lp in main.spatial]
        points = math.prod(tile)
        if space_option(point, "vec_reduce", 0):  # one vector of lane sums per register row
            r = lane_reduce_loop(plan)
            if point[f"split.{r.name}"][1] % plan.lanes:
                return False
            regs = points
        else:
            regs = points // vector_width(tile[_vec_pos(point, plan)] if tile else 1, plan.lanes)
        if space_option(point, "reduce_block", 0):  # accumulators of a whole middle block stay in L1
            block = math.prod(point[f"split.{lp.name}"][1] * point[f"split.{lp.name}"][2] for lp in main.spatial
                              if f"split.{lp.name}" in space.knobs)
            if block * main.tensor.dtype.bytes > BLOCK_ACC_BYTES:
                return False
        return regs <= plan.registers - 4 and points <= MAX_TILE_POINTS

    space = Space(knobs, constraint)
    return space, plan


def vector_axes(plan: CpuPlan) -> tuple[int, ...]:
    """Positions of the main node's spatial loops its register tile may be
    vectorized along: the innermost one (contiguous in the output), then any
    other whose extent holds a whole vector (e.g. output channels of a conv
    whose rows are too short for a vector); last listed first."""
    sp = plan.main.spatial
    if not sp:
        return ()
    last = len(sp) - 1
    others = tuple(n for n, lp in enumerate(sp[:-1]) if plan.lanes > 1 and lp.extent % 4 == 0)
    return (last, *others)


def lane_reduce_loop(plan: CpuPlan):
    """The main node's innermost reduce loop when it can carry the vector
    instead of a spatial loop (a GEMV's k): a sum whose every operand that the
    loop indexes has it alone, at unit stride, in its last dimension, so each
    lane keeps a partial sum of contiguous elements; None otherwise."""
    from ..ir.expr import Reduce
    from ..ir.traverse import free_vars

    body = plan.main.tensor.op.body
    if (plan.lanes < 4 or not plan.main.reduce or not isinstance(body, Reduce) or body.condition is not None
            or not body.combiner.is_sum):
        return None
    loop = plan.main.reduce[-1]
    axis = plan.main.tensor.op.reduce_axis[-1]
    if loop.extent % plan.lanes:
        return None
    hits = 0
    for t in plan.main.inputs:
        for n in _loads(plan.main, t):
            *head, last = n.indices
            if any(axis in free_vars(i) for i in head):
                return None
            if last is axis:
                hits += 1
            elif axis in free_vars(last):
                return None
    return loop if hits else None


def _vec_pos(point: Point, plan: CpuPlan) -> int:
    options = vector_axes(plan)
    if not options:
        return 0
    return options[space_option(point, "vec_axis", 0)]


def _indexing_dims(plan: CpuPlan, tensor, pos: int) -> set[int]:
    """Dimensions of `tensor` that the main node indexes by its spatial loop `pos` alone."""
    axis = plan.main.tensor.op.axis[pos]
    return {d for n in _loads(plan.main, tensor) for d, i in enumerate(n.indices) if i is axis}


def outer_orders(plan: CpuPlan) -> tuple[tuple[int, ...], ...]:
    """Orders of the outer (parallel, cache-block) loops: as written, or one
    axis moved outermost (e.g. GEMM's column blocks, so a packed panel of B
    is reused by every row block)."""
    n = len(plan.main.spatial)
    moved = [(p, *[q for q in range(n) if q != p]) for p in range(1, n) if plan.main.spatial[p].extent > 1]
    return (tuple(range(n)), *moved)


def _outer_loop_for(plan: CpuPlan, tensor, outer: list, order, nfuse: int, par):
    """The outer loop to pack `tensor` at: the innermost one whose axis indexes
    it, so the packed copy is reused across the outer loops that do not."""
    deepest = max((order.index(p) for p in _spatial_positions(plan, tensor, exact=True)), default=0)
    return par if deepest < nfuse or deepest >= len(outer) else outer[deepest]


def _spatial_positions(plan: CpuPlan, tensor, exact: bool = False, width: int = 8,
                       last_dim: bool = False) -> tuple[int, ...]:
    """Positions of the main node's spatial loops whose neighbouring iterations
    read different elements of `tensor`: a loop seen only through a division by
    a multiple of `width` (a group conv's o // 64) reads the same ones across an
    aligned tile of `width` (the vectorizer then broadcasts them). `exact`:
    every loop the indices mention at all; `last_dim`: in the last (contiguous) index only."""
    from ..ir.traverse import free_vars

    used: set[int] = set()
    for n in _loads(plan.main, tensor):
        for i in n.indices[-1:] if last_dim else n.indices:
            used |= {id(v) for v in free_vars(i)} if exact else _varying_vars(i, width)
    return tuple(p for p, a in enumerate(plan.main.tensor.op.axis) if id(a) in used)


def _varying_vars(e, width: int) -> set[int]:
    from ..ir.expr import Binary, BinOp, Const, Var
    from ..ir.traverse import free_vars

    if isinstance(e, Var):
        return {id(e)}
    if isinstance(e, Binary):
        if e.op is BinOp.FLOORDIV and isinstance(e.b, Const) and e.b.value > 0 and e.b.value % width == 0:
            return set()
        return _varying_vars(e.a, width) | _varying_vars(e.b, width)
    return {id(v) for v in free_vars(e)}


def _tile_factor(point: Point, loop) -> int:
    try:
        return point[f"split.{loop.name}"][2]
    except KeyError:
        return 1


def apply_cpu(outputs, plan: CpuPlan, point: Point) -> Schedule:
    """The schedule of `point` for the plan's program (`outputs`, or the plan's rewrite of it)."""
    s = create_schedule(list(plan.outputs))
    if plan.merged is not None:
        s.views, s.view_originals = dict(plan.merged.views), plan.merged.originals
    main = plan.main
    if plan.anchor is main:
        anchor_t = main.tensor
        main_t = s.cache_write(main.tensor, "local")
    else:
        anchor_t = plan.anchor.tensor
        main_t = main.tensor
        for n in plan.inlined:
            s[n.tensor].compute_inline()
        s[main_t].set_scope("local")
    A, M = s[anchor_t], s[main_t]

    outer, middle, tile = [], [], []
    for lp, axis in zip(main.spatial, A.op.axis):
        key = f"split.{lp.name}"
        if key not in {k for k, _ in point.values}:
            outer.append(axis)
            continue
        _, f1, f2 = point[key]
        rest, a2 = A.split(axis, factor=f2)
        a0, a1 = A.split(rest, factor=f1)
        outer.append(a0)
        middle.append(a1)
        tile.append(a2)
    outer_order = outer_orders(plan)[space_option(point, "outer_order", 0)] if main.spatial else ()
    outer = [outer[p] for p in outer_order]
    A.reorder(*outer, *middle, *tile)
    nfuse = space_option(point, "fuse", 0) + 1
    par = A.fuse(*outer[:nfuse]) if nfuse > 1 else outer[0]
    A.parallel(par)
    attach = middle[-1] if middle else par
    outer_attach = par if nfuse >= len(outer) else outer[-1]
    unroll = bool(space_option(point, "unroll", False))
    _vectorize_tile(A, tile, [point[f"split.{lp.name}"][2] for lp in main.spatial if f"split.{lp.name}"
                              in {k for k, _ in point.values}], plan.lanes, unroll)

    # Reduction blocking: the main node runs once per outer block, its outer reduce loops around
    # the middle tiles, so one block of a long reduction's operand panel (a conv's weights) serves
    # every tile from cache; the tiles' accumulators live in a block-sized local buffer.
    blocked = bool(space_option(point, "reduce_block", 0))
    M.compute_at(A, outer_attach if blocked else attach)
    axes = list(M.op.axis)
    m_sp, mids = list(axes), []
    if blocked:
        for n, lp in enumerate(main.spatial):
            if f"split.{lp.name}" in {k for k, _ in point.values}:
                mid, m_sp[n] = M.split(axes[n], factor=point[f"split.{lp.name}"][2])
                mids.append(mid)
    vpos = _vec_pos(point, plan)
    vec = []
    lane_reduce = bool(space_option(point, "vec_reduce", 0))
    width = vector_width(_tile_factor(point, main.spatial[vpos]), plan.lanes) if m_sp and not lane_reduce else 1
    if width > 1:
        vo, v = M.split(m_sp[vpos], factor=width)
        vec = [vo, v]
        rows = m_sp[:vpos] + m_sp[vpos + 1:]
        if vpos != len(m_sp) - 1:  # accumulators contiguous along the vector axis
            M.storage_order(*axes[:vpos], *axes[vpos + 1:], axes[vpos])
    else:
        rows = m_sp
        vpos = len(m_sp) - 1
    r0s, r1s = [], []
    for lp, axis in zip(main.reduce, M.op.reduce_axis):
        key = f"split.{lp.name}"
        if key in {k for k, _ in point.values}:
            r0, r1 = M.split(axis, factor=point[key][1])
            r0s.append(r0)
            r1s.append(r1)
        else:
            r0s.append(axis)
    lane_parent = r1s[-1] if lane_reduce else None  # the last reduce loop's inner part (it always has a split)
    if "reduce_order" in {k for k, _ in point.values}:
        perm = space_knob_option(point, "reduce_order", _reduce_orders(len(main.reduce)))
        r0s = [r0s[i] for i in perm]
        r1s = [r1s[i] for i in perm if i < len(r1s)]
    inside = space_option(point, "reduce_inner", 0) == 1
    if lane_reduce:  # lanes of the innermost reduce loop innermost, under unrolled rows; lowering keeps
        # one vector of partial sums per row across the loop around the rows (lower/lane_sums.py)
        r1s.remove(lane_parent)
        lo, lanes = M.split(lane_parent, factor=plan.lanes)
        order = r0s + mids + r1s + [lo] + rows + [lanes]
        unroll = True
        vec = [lo, lanes]
    else:
        order = r0s + mids + (rows + r1s + vec if inside else r1s + rows + vec)
    M.reorder(*order)
    if unroll:
        for ax in rows + ([] if lane_reduce else vec[:1]):
            M.unroll(ax)
    if space_option(point, "rolled", 0):  # see Stage.no_unroll
        for ax in r0s + r1s:
            M.no_unroll(ax)
    if vec:
        (M.vectorize_sum if lane_reduce else M.vectorize)(vec[1])

    for t in plan.packable:
        choice = ("none", "outer", "tile")[space_option(point, f"pack.{t.name}", 0)]
        if choice != "none":
            packed = s.cache_read(t, "global", [M])
            if choice == "outer":
                s[packed].compute_at(A, _outer_loop_for(plan, t, outer, outer_order, nfuse, par))
            elif blocked and r0s:  # one reduce block's panel at a time
                s[packed].compute_at(M, r0s[0])
            else:
                s[packed].compute_at(A, attach)
            dims = _indexing_dims(plan, t, vpos) if vec else set()
            if len(dims) == 1 and dims != {len(t.shape) - 1}:  # the packed copy holds vector rows contiguous
                pax = list(s[packed].op.axis)
                d = dims.pop()
                s[packed].storage_order(*pax[:d], *pax[d + 1:], pax[d])
    for p in plan.producers:
        choice = ("outer", "inline", "root")[space_option(point, f"place.{p.name}", 0)]
        if choice == "inline":
            s[p.tensor].compute_inline()
        elif choice == "outer":
            s[p.tensor].compute_at(A, outer_attach)
        else:
            _parallel_root(s[p.tensor], plan.cores, plan.lanes)
    _default_others(s, plan)
    return s


def _parallel_root(stage, cores: int, lanes: int) -> None:
    """Run a root stage on every core: its leading loops fused until they hold a few
    iterations per core (a batch-1 padding copy's first loop has one); its innermost
    loop vectorized when the rest is a copy (a padding copy's rows: the lowering
    splits off the border, whose select picks zero, and the interior is a plain copy)."""
    loops = []
    for a in stage.leaf_iter_vars:  # the leading run of spatial loops (fuse needs them adjacent)
        if a.kind.value != "spatial":
            break
        loops.append(a)
    if not loops:
        return
    copy = len(loops) == len(stage.leaf_iter_vars)
    n, work = 1, loops[0].extent
    while n < len(loops) and work < 4 * cores:
        work *= loops[n].extent
        n += 1
    stage.parallel(stage.fuse(*loops[:n]) if n > 1 else loops[0])
    if copy and n < len(loops) and lanes > 1 and loops[-1].extent >= lanes:
        stage.vectorize(loops[-1])


def vector_width(extent: int, lanes: int) -> int:
    """The widest power-of-two vector (>= 4 lanes, <= the target's) dividing a
    tile extent; 1 when none does (scalar code)."""
    width = lanes
    while width >= 4:
        if extent % width == 0:
            return width
        width //= 2
    return 1


def _vectorize_tile(stage, tile: list, factors: list[int], lanes: int, unroll: bool) -> None:
    if not tile:
        return
    last = tile[-1]
    width = vector_width(factors[-1], lanes)
    if width > 1:
        lo, li = stage.split(last, factor=width)
        stage.vectorize(li)
        inner = tile[:-1] + [lo]
    else:
        inner = tile
    if unroll:
        for ax in inner:
            stage.unroll(ax)


def _default_others(s: Schedule, plan: CpuPlan) -> None:
    handled = {id(plan.main.tensor), id(plan.anchor.tensor)} | {id(n.tensor) for n in plan.inlined} \
        | {id(n.tensor) for n in plan.producers}
    for node in plan.graph.nodes:
        if id(node.tensor) in handled:
            continue
        _parallel_root(s[node.tensor], plan.cores, plan.lanes)


def space_option(point: Point, name: str, default):
    try:
        return point[name]
    except KeyError:
        return default


def space_knob_option(point: Point, name: str, options: tuple):
    return options[point[name]]

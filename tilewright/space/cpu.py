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
the main node, packing it into a contiguous buffer at the outer or tile loop
or once per call in its own parallel stage; for each elementwise producer (padding, packing), inline / per outer tile /
at root. Target-fixed: vector width, register budget.

What the analysis tells the space lives in `cpu_plan`, what each knob and
option means in `cpu_knobs`, the default point in `cpu_default`."""

from __future__ import annotations

import dataclasses
import math

from ..ir.expr import Load
from ..ir.traverse import free_vars, walk
from ..schedule import Schedule, create_schedule
from ..schedule.stage import AttachKind
from ..targets import Target
from .cpu_knobs import (
    PACK,
    PLACE,
    REDUCE_INNER,
    fused_count,
    option,
    pack_choice,
    pack_key,
    place_choice,
    place_key,
    reduce_orders,
    split_key,
    split_of,
    tile_factor,
)
from .cpu_plan import (
    CpuPlan,
    dispatch_periods,
    indexing_dims,
    lane_reduce_axis,
    lane_reduce_loop,
    main_loads,
    make_plan,
    outer_orders,
    spatial_positions,
    vector_axes,
    vector_position,
    vector_width,
)
from .cpu_tensorize import TensorizedPlan, apply_tensorized, tensorized_space
from .knobs import OrdinalKnob, SplitKnob, loop_knobs
from .space import Point, Space

# Unrolled register tile size bound (code size), in vector statements: 512 floats at AVX2's 8 lanes,
# where it was set. Counted in points, AVX-512's 16 lanes doubled a Winograd transform's one tile
# (36 positions x 1 vector = 576 points) past it and left its space without a default point.
MAX_TILE_STATEMENTS = 64
BLOCK_ACC_BYTES = 32 * 1024  # accumulators of a reduction-blocked middle block: within L1


def cpu_space(outputs, target: Target, constants=()) -> tuple[Space, CpuPlan]:
    """The space and plan of the program computing `outputs`; `constants`: its input tensors that
    never change between calls (a model's weights), whose packs the default then counts as free."""
    plan = make_plan(outputs, target, constants)
    tensorized = tensorized_space(outputs, plan, target, constants)
    if tensorized is not None:  # a registered intrinsic of the target embeds in the main node
        return tensorized
    main = plan.main
    if not main.spatial:  # a reduction to a scalar: one point, the plain loop nest (apply_cpu)
        return Space([OrdinalKnob("scalar", (True,))]), plan
    knobs = [_dispatch_totals(k, plan) for k in loop_knobs(main, 3, 2, plan.lanes)]
    if main.reduce:
        knobs.append(OrdinalKnob("reduce_inner", REDUCE_INNER))
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
    if main.reduce and target.compiler_is_gcc:
        knobs.append(OrdinalKnob("pressure_sched", (False, True)))
    for t in plan.packable:
        knobs.append(OrdinalKnob(pack_key(t), PACK))
    for p in plan.producers:
        knobs.append(OrdinalKnob(place_key(p), PLACE))

    dispatch = dispatch_periods(plan)

    def constraint(point: Point) -> bool:
        tile = [tile_factor(point, lp) for lp in main.spatial]
        if dispatch and (any(tile[n] % period for n, period in dispatch.items()) or not option(point, "unroll", 0)):
            return False
        points = math.prod(tile)
        width = 1
        if option(point, "vec_reduce", 0):  # one vector of lane sums per register row
            if split_of(point, lane_reduce_loop(plan))[1] % plan.lanes:
                return False
            regs = points
        else:
            width = vector_width(tile[vector_position(point, plan)] if tile else 1, plan.lanes)
            regs = points // width
            regs //= math.prod(tile[n] for n in dispatch)  # each branch's points are written as computed
        if option(point, "reduce_block", 0):  # accumulators of a whole middle block stay in L1
            block = math.prod(split_of(point, lp)[1] * split_of(point, lp)[2] for lp in main.spatial
                              if split_of(point, lp) is not None)
            if block * main.tensor.dtype.bytes > BLOCK_ACC_BYTES:
                return False
        return regs <= plan.registers - 4 and points // width <= MAX_TILE_STATEMENTS

    sampler = _dispatch_sampler(knobs, plan) if dispatch else None
    space = Space(knobs, constraint, sampler, added={"pressure_sched": 0})  # records from before it: no hint
    return space, plan


def _dispatch_sampler(knobs: list, plan: CpuPlan):
    """Random points whose dispatch loops hold one period in the register tile, unrolled: uniform
    draws almost never do (the 36 positions of a Winograd transform are one split of dozens)."""
    periods = {split_key(plan.main.spatial[n]): p for n, p in dispatch_periods(plan).items()}

    def sample(rng) -> Point:
        values = []
        for k in knobs:
            value = k.sample(rng)
            if k.name in periods:
                period = periods[k.name]
                total = rng.choice([t for t in k.totals if t % period == 0])
                rest = total // period
                middle = rng.choice([d for d in range(1, rest + 1) if rest % d == 0])
                value = (rest // middle, middle, period)
            elif k.name == "unroll":
                value = 1
            values.append((k.name, value))
        return Point(tuple(values))

    return sample


def _dispatch_totals(knob, plan: CpuPlan):
    """A dispatch loop's split (cpu_plan.dispatch_periods) with a total its period divides: a 6-row
    output's h % 4 rounds up to 8 (the last tile guarded)."""
    periods = {plan.main.spatial[n].name: p for n, p in dispatch_periods(plan).items()}
    period = periods.get(getattr(knob, "axis", None)) if isinstance(knob, SplitKnob) and knob.parts == 3 else None
    if period is None or any(t % period == 0 for t in knob.totals):
        return knob
    return dataclasses.replace(knob, totals=tuple(sorted((*knob.totals, -(-knob.extent // period) * period))))


def _outer_loop_for(plan: CpuPlan, tensor, outer: list, order, nfuse: int, par):
    """The outer loop to pack `tensor` at: the innermost one whose axis indexes
    it, so the packed copy is reused across the outer loops that do not."""
    deepest = max((order.index(p) for p in spatial_positions(plan, tensor, exact=True)), default=0)
    return par if deepest < nfuse or deepest >= len(outer) else outer[deepest]


def pack_repeats(plan: CpuPlan, point: Point, tensor) -> int:
    """How many times `point` packs each element of `tensor` in one call (0: not packed):
    the trip count of the loops around its pack that do not index it. A pack once per
    outer block repeats where the parallel loop fuses loops that do not index the
    operand (a conv's weights under a fused o x h loop: once per output row)."""
    choice = pack_choice(point, tensor)
    if choice in ("none", "root"):
        return int(choice == "root")
    sp = plan.main.spatial
    indexed = set(spatial_positions(plan, tensor, exact=True))
    parts = [split_of(point, lp) or (lp.extent, 1, 1) for lp in sp]
    order = outer_orders(plan)[option(point, "outer_order", 0)] if sp else ()
    nfuse = fused_count(point)
    if choice == "outer":
        deepest = max((order.index(p) for p in indexed), default=0)
        around = order[:nfuse] if deepest < nfuse or deepest >= len(order) else order[:deepest + 1]
        return math.prod(parts[p][0] for p in around if p not in indexed)
    if option(point, "reduce_block", 0) and plan.main.reduce:  # per block of the first reduce loop
        first = reduce_orders(len(plan.main.reduce))[option(point, "reduce_order", 0)][0]
        axis = plan.main.tensor.op.reduce_axis[first]
        blocks = 1 if any(axis in free_vars(i) for n in main_loads(plan, tensor) for i in n.indices) else \
            (split_of(point, plan.main.reduce[first]) or (plan.main.reduce[first].extent,))[0]
        return blocks * math.prod(parts[p][0] for p in range(len(sp)) if p not in indexed)
    return math.prod(parts[p][0] * parts[p][1] for p in range(len(sp)) if p not in indexed)


def apply_cpu(outputs, plan: CpuPlan, point: Point) -> Schedule:
    """The schedule of `point` for the plan's program (`outputs`, or the plan's rewrite of it)."""
    if isinstance(plan, TensorizedPlan):
        s = apply_tensorized(plan, point)
        _side_stages(s, plan.plan_of(point["embedding"]))
        return s
    s = create_schedule(list(plan.outputs))
    if plan.merged is not None:
        s.views, s.view_originals = dict(plan.merged.views), plan.merged.originals
    main = plan.main
    if not main.spatial:
        return s
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
        if split_of(point, lp) is None:
            outer.append(axis)
            continue
        _, f1, f2 = split_of(point, lp)
        rest, a2 = A.split(axis, factor=f2)
        a0, a1 = A.split(rest, factor=f1)
        outer.append(a0)
        middle.append(a1)
        tile.append(a2)
    outer_order = outer_orders(plan)[option(point, "outer_order", 0)] if main.spatial else ()
    outer = [outer[p] for p in outer_order]
    A.reorder(*outer, *middle, *tile)
    nfuse = fused_count(point)
    par = A.fuse(*outer[:nfuse]) if nfuse > 1 else outer[0]
    A.parallel(par)
    attach = middle[-1] if middle else par
    outer_attach = par if nfuse >= len(outer) else outer[-1]
    unroll = bool(option(point, "unroll", False))
    tiled = [n for n, lp in enumerate(main.spatial) if split_of(point, lp) is not None]
    vpos = vector_position(point, plan)
    lane_reduce = bool(option(point, "vec_reduce", 0))
    along = tiled.index(vpos) if vpos in tiled and not lane_reduce and not _epilogue_strides(plan, vpos) \
        else len(tiled) - 1
    _vectorize_tile(A, tile, [split_of(point, main.spatial[n])[2] for n in tiled], plan.lanes, unroll, along)

    # Reduction blocking: the main node runs once per outer block, its outer reduce loops around
    # the middle tiles, so one block of a long reduction's operand panel (a conv's weights) serves
    # every tile from cache; the tiles' accumulators live in a block-sized local buffer.
    blocked = bool(option(point, "reduce_block", 0))
    M.compute_at(A, outer_attach if blocked else attach)
    axes = list(M.op.axis)
    m_sp, mids = list(axes), []
    if blocked:
        for n, lp in enumerate(main.spatial):
            if split_of(point, lp) is not None:
                mid, m_sp[n] = M.split(axes[n], factor=split_of(point, lp)[2])
                mids.append(mid)
    vec = []
    width = vector_width(tile_factor(point, main.spatial[vpos]), plan.lanes) if m_sp and not lane_reduce else 1
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
        if split_of(point, lp) is not None:
            r0, r1 = M.split(axis, factor=split_of(point, lp)[1])
            r0s.append(r0)
            r1s.append(r1)
        else:
            r0s.append(axis)
    lane_parent = r1s[-1] if lane_reduce else None  # the last reduce loop's inner part (it always has a split)
    if option(point, "reduce_order", None) is not None:
        perm = reduce_orders(len(main.reduce))[point["reduce_order"]]
        r0s = [r0s[i] for i in perm]
        r1s = [r1s[i] for i in perm if i < len(r1s)]
    inside = REDUCE_INNER[option(point, "reduce_inner", 0)] == "inside_rows"
    if lane_reduce:  # lanes of the innermost reduce loop innermost, under unrolled rows; lowering keeps
        # one vector of partial sums per row across the loop around the rows (lower/lane_reductions.py)
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
    if option(point, "pressure_sched", 0):
        s.compiler_hint("pressure_scheduling")
    if option(point, "rolled", 0):  # see Stage.no_unroll
        for ax in r0s + r1s:
            M.no_unroll(ax)
    if vec:
        (M.vectorize_sum if lane_reduce else M.vectorize)(vec[1])

    for t in plan.packable:
        choice = pack_choice(point, t)
        if choice != "none":
            packed = s.cache_read(t, "global", [M])
            if choice == "root":
                _parallel_root(s[packed], plan.cores, 1)
            elif choice == "outer":
                s[packed].compute_at(A, _outer_loop_for(plan, t, outer, outer_order, nfuse, par))
            elif blocked and r0s:  # one reduce block's panel at a time
                s[packed].compute_at(M, r0s[0])
            else:
                s[packed].compute_at(A, attach)
            dims = indexing_dims(plan, t, vpos) if vec else set()
            if len(dims) == 1 and dims != {len(t.shape) - 1}:  # the packed copy holds vector rows contiguous
                pax = list(s[packed].op.axis)
                d = dims.pop()
                s[packed].storage_order(*pax[:d], *pax[d + 1:], pax[d])
    for p in plan.producers:
        choice = place_choice(point, p)
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
    splits off the border, whose select picks zero, and the interior is a plain copy),
    or when it is a reduction that reads contiguously along it (a softmax's row max:
    one vector of partial maxima per row, lower/lane_reductions.py)."""
    leaves = list(stage.leaf_iter_vars)
    loops = []
    for a in leaves:  # the leading run of spatial loops (fuse needs them adjacent)
        if a.kind.value != "spatial":
            break
        loops.append(a)
    reduce_axis = lane_reduce_axis(stage.op, lanes)
    if reduce_axis is not None and leaves and leaves[-1] is reduce_axis:
        stage.vectorize_reduce(stage.split(reduce_axis, factor=lanes)[1])
    if not loops:
        return
    copy = len(loops) == len(leaves)
    n, work = 1, loops[0].extent
    while n < len(loops) and work < 4 * cores:
        work *= loops[n].extent
        n += 1
    stage.parallel(stage.fuse(*loops[:n]) if n > 1 else loops[0])
    if copy and n < len(loops) and lanes > 1 and loops[-1].extent >= lanes:
        stage.vectorize(loops[-1])


def _epilogue_strides(plan: CpuPlan, vpos: int) -> bool:
    """The epilogue reads a tensor of its own along spatial loop `vpos` at a stride (a residual
    input in NCHW along the output channels): vectorized there it would gather lane by lane, which
    measured 4-7% slower than the scalar epilogue on ResNet-50's residual 1x1 convs (Zen 3)."""
    key = ("epilogue_strides", vpos)
    if key not in plan.memo:
        own = {id(plan.main.tensor)} | {id(n.tensor) for n in plan.inlined}
        plan.memo[key] = any(
            isinstance(load, Load) and id(load.tensor) not in own
            and any(node.tensor.op.axis[vpos] in free_vars(i) and math.prod(load.tensor.shape[d + 1:]) > 1
                    for d, i in enumerate(load.indices))
            for node in (*plan.inlined, plan.anchor) if node is not plan.main
            for load in walk(node.tensor.op.body))
    return plan.memo[key]


def _vectorize_tile(stage, tile: list, factors: list[int], lanes: int, unroll: bool, along: int) -> None:
    """The output stage's tile loops, vectorized along tile[along] as the register tile is: an epilogue
    (bias, activation) then runs as vector operations on whole accumulators, whose lanes are stored
    one by one where that axis is not the output's contiguous one (an NCHW conv's output channels)."""
    if not tile:
        return
    width = vector_width(factors[along], lanes)
    if width == 1 and along != len(tile) - 1:
        along = len(tile) - 1
        width = vector_width(factors[along], lanes)
    if width > 1:
        lo, li = stage.split(tile[along], factor=width)
        inner = tile[:along] + [lo] + tile[along + 1:]
        stage.reorder(*inner, li)
        stage.vectorize(li)
    else:
        inner = tile
    if unroll:
        for ax in inner:
            stage.unroll(ax)


def _side_stages(s: Schedule, plan: CpuPlan) -> None:
    """Around a tensorized tile: an elementwise stage read only by the epilogue (a residual's
    dequantize) inlined into it, so it costs no pass of its own over a float temporary; padding
    copies and the rest whole, before the tiles, on every core."""
    chain = {id(n.tensor) for n in plan.inlined} | {id(plan.anchor.tensor)}
    handled = chain | {id(plan.main.tensor)}
    for node in plan.graph.nodes:
        if id(node.tensor) in handled or s[node.tensor].attach is AttachKind.INLINE:
            continue
        if node.injective and node.consumers and all(id(c) in chain for c in node.consumers) \
                and node not in plan.producers:
            s[node.tensor].compute_inline()
        else:
            _parallel_root(s[node.tensor], plan.cores, plan.lanes)


def _default_others(s: Schedule, plan: CpuPlan) -> None:
    """The stages the plan does not place: an unguarded elementwise stage read only by inlined
    stages, or by an elementwise anchor (the tile's epilogue), is inlined too (a chain such as
    GPT-2's tanh GELU then runs inside the vectorized tile, not as one pass per operation over a
    temporary); the rest whole, in parallel."""
    handled = {id(plan.main.tensor), id(plan.anchor.tensor)} | {id(n.tensor) for n in plan.inlined} \
        | {id(n.tensor) for n in plan.producers}
    epilogue = plan.anchor.tensor if plan.anchor is not plan.main else None

    def absorbed(c) -> bool:
        return c is epilogue or s[c].attach is AttachKind.INLINE

    for node in reversed(plan.graph.nodes):  # consumers first
        if id(node.tensor) in handled:
            continue
        if node.injective and not node.guarded and node.consumers and not node.is_output and all(
                absorbed(c) for c in node.consumers):
            s[node.tensor].compute_inline()
        else:
            _parallel_root(s[node.tensor], plan.cores, plan.lanes)



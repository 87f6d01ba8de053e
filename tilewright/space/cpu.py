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

from ..analysis.graph import MiniGraph, Node, analyze, is_placeholder
from ..ir.expr import Load
from ..schedule import Schedule, create_schedule
from ..targets import Target
from .knobs import OrdinalKnob, SplitKnob, split_totals
from .space import Point, Space

MAX_TILE_POINTS = 512  # unrolled register tile size bound (code size)


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
    registers = 32 if target.has("avx512f") else 16
    return CpuPlan(g, main, anchor, tuple(inlined), producers, packable, lanes, registers)


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
    knobs.append(OrdinalKnob("fuse", tuple(range(1, len(main.spatial) + 1))))
    knobs.append(OrdinalKnob("unroll", (False, True)))
    for t in plan.packable:
        knobs.append(OrdinalKnob(f"pack.{t.name}", ("none", "outer", "tile")))
    for p in plan.producers:
        knobs.append(OrdinalKnob(f"place.{p.name}", ("outer", "inline", "root")))

    def constraint(point: Point) -> bool:
        tile = [_tile_factor(point, lp) for lp in main.spatial]
        points = math.prod(tile)
        last = tile[-1] if tile else 1
        width = vector_width(last, plan.lanes)
        regs = points // width
        return regs <= plan.registers - 4 and points <= MAX_TILE_POINTS

    return Space(knobs, constraint), plan


def _tile_factor(point: Point, loop) -> int:
    try:
        return point[f"split.{loop.name}"][2]
    except KeyError:
        return 1


def default_point(space: Space, plan: CpuPlan) -> Point:
    """The untuned heuristic: one vector of the innermost axis as the register
    tile, a few rows of the next axis, everything else outer; no packing."""
    values = []
    spatial = [lp for lp in plan.main.spatial if lp.extent > 1]
    for name, k in space.knobs.items():
        if isinstance(k, SplitKnob):
            inner = 1
            if spatial and k.axis == spatial[-1].name:
                inner = math.gcd(k.extent, plan.lanes)
            elif len(spatial) > 1 and k.axis == spatial[-2].name:
                inner = math.gcd(k.extent, 4)
            value = (k.extent // inner, 1, inner) if k.parts == 3 else (k.extent, 1)
            values.append((name, value))
        else:
            values.append((name, len(k.options) - 1 if name in ("unroll", "fuse") else 0))
    p = Point(tuple(values))
    if not space.valid(p):  # fall back to the smallest tile
        p = Point(tuple((n, (k.extent, 1, 1) if isinstance(k, SplitKnob) and k.parts == 3 else
                         (k.extent, 1) if isinstance(k, SplitKnob) else v) for (n, v), k in
                        zip(values, space.knobs.values())))
    return space.check(p)


def apply_cpu(outputs, plan: CpuPlan, point: Point) -> Schedule:
    s = create_schedule(outputs)
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
    A.reorder(*outer, *middle, *tile)
    nfuse = space_option(point, "fuse", 0) + 1
    par = A.fuse(*outer[:nfuse]) if nfuse > 1 else outer[0]
    A.parallel(par)
    attach = middle[-1] if middle else par
    outer_attach = par if nfuse >= len(outer) else outer[-1]
    unroll = bool(space_option(point, "unroll", False))
    _vectorize_tile(A, tile, [point[f"split.{lp.name}"][2] for lp in main.spatial if f"split.{lp.name}"
                              in {k for k, _ in point.values}], plan.lanes, unroll)

    M.compute_at(A, attach)
    m_sp = list(M.op.axis)
    last_extent = _tile_factor(point, main.spatial[-1]) if main.spatial else 1
    vec = []
    width = vector_width(last_extent, plan.lanes)
    if m_sp and width > 1:
        vo, v = M.split(m_sp[-1], factor=width)
        vec = [vo, v]
        rows = m_sp[:-1]
    else:
        rows = m_sp
    r0s, r1s = [], []
    for lp, axis in zip(main.reduce, M.op.reduce_axis):
        key = f"split.{lp.name}"
        if key in {k for k, _ in point.values}:
            r0, r1 = M.split(axis, factor=point[key][1])
            r0s.append(r0)
            r1s.append(r1)
        else:
            r0s.append(axis)
    if "reduce_order" in {k for k, _ in point.values}:
        perm = space_knob_option(point, "reduce_order", _reduce_orders(len(main.reduce)))
        r0s = [r0s[i] for i in perm]
        r1s = [r1s[i] for i in perm if i < len(r1s)]
    inside = space_option(point, "reduce_inner", 0) == 1
    order = r0s + rows + r1s + vec if inside else r0s + r1s + rows + vec
    M.reorder(*order)
    if unroll:
        for ax in rows + vec[:1]:
            M.unroll(ax)
    if vec:
        M.vectorize(vec[1])

    for t in plan.packable:
        choice = ("none", "outer", "tile")[space_option(point, f"pack.{t.name}", 0)]
        if choice != "none":
            packed = s.cache_read(t, "global", [M])
            s[packed].compute_at(A, outer_attach if choice == "outer" else attach)
    for p in plan.producers:
        choice = ("outer", "inline", "root")[space_option(point, f"place.{p.name}", 0)]
        if choice == "inline":
            s[p.tensor].compute_inline()
        elif choice == "outer":
            s[p.tensor].compute_at(A, outer_attach)
    _default_others(s, plan)
    return s


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
        st = s[node.tensor]
        if st.leaf_iter_vars and st.leaf_iter_vars[0].kind.value == "spatial":
            st.parallel(st.leaf_iter_vars[0])


def space_option(point: Point, name: str, default):
    try:
        return point[name]
    except KeyError:
        return default


def space_knob_option(point: Point, name: str, options: tuple):
    return options[point[name]]

"""What the CPU space knows of a te program (FlexTensor 4.2): the main node
(most arithmetic), the anchor it is computed in (its chain of elementwise
consumers ending at an output), its elementwise producers and packable
inputs, which of its loops may carry the vector, and which loops index which
operand. Target facts the space and the default model use ride along."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..analysis.axis_merge import MergedProgram, merge_contiguous_axes
from ..analysis.graph import MiniGraph, Node, analyze, is_placeholder
from ..targets import Target
from ..te.program import as_tensor_list
from .anchor import anchor_chain, elementwise_producers, loads_of
from .cpu_knobs import option
from .space import Point

_VECTOR_DTYPES = ("float32", "float64", "int32", "int64", "int16", "int8", "uint8", "bfloat16")


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
    target: Target | None = None  # execution units, features (the default model's machine)
    memo: dict = field(default_factory=dict, repr=False)  # the default model's per-program answers
    # ids of the placeholders (in `outputs`' program) that never change between calls: a model's weights,
    # whose packs the compiled model makes once (graph/const_packs.py), so the default prices them at zero
    constants: frozenset = frozenset()


def main_loads(plan: CpuPlan, tensor) -> list:
    """The loads of `tensor` in the main node's body (remembered per plan)."""
    key = ("loads", id(tensor))
    if key not in plan.memo:
        plan.memo[key] = loads_of(plan.main, tensor)
    return plan.memo[key]


def make_plan(outputs, target: Target, constants=()) -> CpuPlan:
    outputs = as_tensor_list(outputs, "outputs")
    merged = merge_contiguous_axes(outputs)
    constant_ids = frozenset(id(t) for t in constants)
    if merged is not None:
        outputs = merged.outputs
        constant_ids = frozenset(id(merged.views.get(id(t), t)) for t in constants)
    g = analyze(outputs)
    main = g.main
    anchor, inlined = anchor_chain(g)
    producers = elementwise_producers(g)
    packable = tuple(t for t in main.inputs if is_placeholder(t))
    dtype = main.tensor.dtype
    lanes = target.vector_lanes(dtype.bytes) if dtype.name in _VECTOR_DTYPES else 1
    return CpuPlan(g, main, anchor, tuple(inlined), producers, packable, lanes, target.vector_registers, target.cores,
                   target.cache_bytes(2) or 512 * 1024, target.cache_bytes(1) or 32 * 1024, tuple(outputs), merged,
                   target.l1_ways, target, constants=constant_ids)


def vector_width(extent: int, lanes: int) -> int:
    """The widest power-of-two vector (>= 4 lanes, <= the target's) dividing a
    tile extent; 1 when none does (scalar code)."""
    width = lanes
    while width >= 4:
        if extent % width == 0:
            return width
        width //= 2
    return 1


def vector_axes(plan: CpuPlan) -> tuple[int, ...]:
    """Positions of the main node's spatial loops its register tile may be
    vectorized along: the innermost one (contiguous in the output), then any
    other whose extent holds a whole vector (e.g. output channels of a conv
    whose rows are too short for a vector); last listed first. Never a dispatch loop."""
    sp = plan.main.spatial
    if not sp:
        return ()
    last = len(sp) - 1
    fixed = dispatch_periods(plan)  # unrolled whole: a vector along one would not fold its selects
    others = tuple(n for n, lp in enumerate(sp[:-1])
                   if plan.lanes > 1 and lp.extent % 4 == 0 and n not in fixed)
    return (last, *others) if last not in fixed else others


def vector_position(point: Point, plan: CpuPlan) -> int:
    """The spatial loop `point` vectorizes along (its `vec_axis` choice)."""
    options = vector_axes(plan)
    if not options:
        return 0
    return options[option(point, "vec_axis", 0)]


def lane_reduce_loop(plan: CpuPlan):
    """The main node's innermost reduce loop when it can carry the vector
    instead of a spatial loop (a GEMV's k): a sum whose every operand that the
    loop indexes has it alone, at unit stride, in its last dimension, so each
    lane keeps a partial sum of contiguous elements (`lane_reduce_axis`); None otherwise."""
    op = plan.main.tensor.op
    if lane_reduce_axis(op, plan.lanes) is None or not op.body.combiner.is_sum:
        return None
    return plan.main.reduce[-1]


def lane_reduce_axis(op, lanes: int):
    """A reduction stage's innermost reduce axis when a vector of `lanes` can run along
    it (`Stage.vectorize_reduce`): a sum, max or min without a condition, the extent a
    multiple of `lanes`, every load that the axis indexes contiguous along it; None otherwise."""
    from ..ir.expr import Load, Reduce
    from ..ir.traverse import walk

    body = getattr(op, "body", None)
    if lanes < 4 or not isinstance(body, Reduce) or body.condition is not None or body.combiner.lane_op is None:
        return None
    axis = op.reduce_axis[-1]
    if not isinstance(axis.extent, int) or axis.extent % lanes:
        return None
    loads = [n for n in walk(body.source) if isinstance(n, Load)]
    return axis if contiguous_along(loads, axis) else None


def contiguous_along(loads, axis) -> bool:
    """Every load that `axis` indexes has it alone, at unit stride, in its last dimension; at least one does."""
    from ..ir.traverse import free_vars

    hits = 0
    for n in loads:
        *head, last = n.indices
        if any(axis in free_vars(i) for i in head):
            return False
        if last is axis:
            hits += 1
        elif axis in free_vars(last):
            return False
    return hits > 0


def indexing_dims(plan: CpuPlan, tensor, pos: int) -> set[int]:
    """Dimensions of `tensor` that the main node indexes by its spatial loop `pos` alone."""
    axis = plan.main.tensor.op.axis[pos]
    return {d for n in main_loads(plan, tensor) for d, i in enumerate(n.indices) if i is axis}


def outer_orders(plan: CpuPlan) -> tuple[tuple[int, ...], ...]:
    """Orders of the outer (parallel, cache-block) loops: as written, or one
    axis moved outermost (e.g. GEMM's column blocks, so a packed panel of B
    is reused by every row block)."""
    n = len(plan.main.spatial)
    moved = [(p, *[q for q in range(n) if q != p]) for p in range(1, n) if plan.main.spatial[p].extent > 1]
    return (tuple(range(n)), *moved)


def spatial_positions(plan: CpuPlan, tensor, exact: bool = False, width: int = 8,
                      last_dim: bool = False) -> tuple[int, ...]:
    """Positions of the main node's spatial loops whose neighbouring iterations
    read different elements of `tensor`: a loop seen only through a division by
    a multiple of `width` (a group conv's o // 64) reads the same ones across an
    aligned tile of `width` (the vectorizer then broadcasts them). `exact`:
    every loop the indices mention at all; `last_dim`: in the last (contiguous) index only.
    Remembered per plan: the default model asks for every candidate tile and order."""
    from ..ir.traverse import free_vars

    key = ("positions", id(tensor), exact, width, last_dim)
    if key not in plan.memo:
        used: set[int] = set()
        for n in main_loads(plan, tensor):
            for i in n.indices[-1:] if last_dim else n.indices:
                used |= {id(v) for v in free_vars(i)} if exact else varying_vars(i, width)
        plan.memo[key] = tuple(p for p, a in enumerate(plan.main.tensor.op.axis) if id(a) in used)
    return plan.memo[key]


def varying_vars(e, width: int) -> set[int]:
    """ids of the variables whose neighbouring values change `e`, where an aligned
    run of `width` of them through a division by a multiple of `width` does not."""
    from ..ir.expr import Binary, BinOp, Const, Var
    from ..ir.traverse import free_vars

    if isinstance(e, Var):
        return {id(e)}
    if isinstance(e, Binary):
        if e.op is BinOp.FLOORDIV and isinstance(e.b, Const) and e.b.value > 0 and e.b.value % width == 0:
            return set()
        return varying_vars(e.a, width) | varying_vars(e.b, width)
    return {id(v) for v in free_vars(e)}


MAX_DISPATCH_PERIOD = 64  # branches one unrolled tile may pick among


def dispatch_periods(plan: CpuPlan) -> dict[int, int]:
    """{position: period} of the main node's spatial loops that pick a branch of its expression by
    `select` (a Winograd transform's coefficients): on `axis == k` (period: the loop's extent) or on
    `axis % m == k` (period m). The space keeps such a loop's register tile a whole number of periods,
    unrolled, so that every select folds to one branch and the branches' common partial sums are
    shared; tiled otherwise, every lane would evaluate the select chain. Only for a main node without
    reduction: its tile's points are written as they are computed, not accumulators kept live."""
    key = "dispatch"
    if key not in plan.memo:
        plan.memo[key] = {} if plan.main.reduce else _dispatch_periods(plan)
    return plan.memo[key]


def _dispatch_periods(plan: CpuPlan) -> dict[int, int]:
    from ..ir.expr import Binary, BinOp, CmpOp, Compare, Const, Select
    from ..ir.traverse import walk

    axes = {id(a): n for n, a in enumerate(plan.main.tensor.op.axis)}
    periods: dict[int, int] = {}
    for e in walk(plan.main.tensor.op.body):
        if not (isinstance(e, Select) and isinstance(e.cond, Compare) and e.cond.op is CmpOp.EQ):
            continue
        for v, k in ((e.cond.a, e.cond.b), (e.cond.b, e.cond.a)):
            if not isinstance(k, Const):
                continue
            if id(v) in axes:
                n, period = axes[id(v)], plan.main.spatial[axes[id(v)]].extent
            elif (isinstance(v, Binary) and v.op is BinOp.FLOORMOD and id(v.a) in axes and isinstance(v.b, Const)
                  and int(v.b.value) > 0):
                n, period = axes[id(v.a)], int(v.b.value)
            else:
                continue
            if period <= MAX_DISPATCH_PERIOD and periods.get(n, period) == period:
                periods[n] = period
    return periods

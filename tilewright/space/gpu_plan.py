"""What the GPU space knows of a te program (FlexTensor 4.2 and 5.1): the
main node, the anchor it is computed in and its elementwise producers (as on
the CPU, `anchor.py`), the tensors the main node reads (each may be staged in
shared memory), and the region of each one a block reads per reduction step,
from which the space derives shared-memory use and the default model derives
global traffic and coalescing."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..analysis.graph import MiniGraph, Node, analyze
from ..ir.expr import Binary, BinOp, Cast, Const, Var
from ..targets import Target
from ..te.program import as_tensor_list
from .anchor import anchor_chain, elementwise_producers, loads_of
from .knobs import option, split_of


@dataclass(frozen=True, eq=False)
class GpuPlan:
    graph: MiniGraph
    main: Node
    anchor: Node
    inlined: tuple[Node, ...]  # elementwise nodes between main and anchor (inlined into the anchor)
    producers: tuple[Node, ...]  # elementwise producers of main (padding): inlined, or into a shared fetch
    reads: tuple  # the tensors the main node reads, in its input order (each may be staged in shared memory)
    target: Target
    outputs: tuple = ()
    memo: dict = field(default_factory=dict, repr=False)

    @property
    def facts(self):
        return self.target.gpu

    @property
    def dtype_bytes(self) -> int:
        return self.main.tensor.dtype.bytes


def make_gpu_plan(outputs, target: Target) -> GpuPlan:
    """The plan of the program ending at `outputs` (axes are not merged: a 2-D output tile of a
    convolution is what makes its input window reusable from shared memory)."""
    outputs = tuple(as_tensor_list(outputs, "outputs"))
    g = analyze(list(outputs))
    anchor, inlined = anchor_chain(g)
    return GpuPlan(g, g.main, anchor, inlined, elementwise_producers(g), tuple(g.main.inputs), target, outputs)


# Split parts of a spatial loop and of a reduce loop, outermost first.
BLOCK, VTHREAD, THREAD, INNER = range(4)
R_OUTER, R_MIDDLE, R_INNER = range(3)


def spatial_parts(plan: GpuPlan, point) -> list[tuple[int, int, int, int]]:
    """(block, vthread, thread, inner) loop extents of every spatial loop as lowering makes them
    (extent-1 loops: all ones). A part larger than what remains of the extent is cut to it by
    bound inference (16 threads over a 14-long axis are 14), so a point's thread count is the
    product of these, not of its factors."""
    key = ("parts", point)
    if key not in plan.memo:
        out = []
        for lp in plan.main.spatial:
            f = split_of(point, lp)
            if f is None:
                out.append((1, 1, 1, 1))
                continue
            e = lp.extent
            i = min(f[INNER], e)
            t = min(f[THREAD], -(-e // i))
            v = min(f[VTHREAD], -(-e // (i * t)))
            out.append((-(-e // (v * t * i)), v, t, i))
        plan.memo[key] = out
    return plan.memo[key]


def rounded_axes(plan: GpuPlan, point) -> list:
    """The main node's spatial axes whose split covers more than their extent (guarded tails)."""
    return [a for a, lp in zip(plan.main.tensor.op.axis, plan.main.spatial)
            if split_of(point, lp) is not None and math.prod(split_of(point, lp)) > lp.extent]


def reduce_parts(plan: GpuPlan, point) -> list[tuple[int, int, int]]:
    return [split_of(point, lp) or (1, 1, 1) for lp in plan.main.reduce]


def threads(plan: GpuPlan, point) -> int:
    """Threads per block: the thread parts, or, sharing reductions (`cross`), rows x the sharing threads."""
    from .gpu_knobs import cross_threads

    cross = cross_threads(point)
    if cross > 1:
        return math.prod(p[VTHREAD] * p[THREAD] * p[INNER] for p in spatial_parts(plan, point)) * cross
    return math.prod(p[THREAD] for p in spatial_parts(plan, point))


def blocks(plan: GpuPlan, point) -> int:
    return math.prod(p[BLOCK] for p in spatial_parts(plan, point))


def outputs_per_thread(plan: GpuPlan, point) -> int:
    """The register tile: accumulators per thread (virtual threads x inner; 1 sharing reductions)."""
    from .gpu_knobs import cross_threads

    if cross_threads(point) > 1:
        return 1
    return math.prod(p[VTHREAD] * p[INNER] for p in spatial_parts(plan, point))


def reduce_steps(plan: GpuPlan, point, level: str) -> int:
    """Iterations of the reduce loops around a shared fetch at `level` ("outer": the outer parts;
    "middle": the outer and middle parts)."""
    parts = reduce_parts(plan, point)
    return math.prod(p[R_OUTER] * (p[R_MIDDLE] if level == "middle" else 1) for p in parts)


def _interval(e, spans: dict[int, int]):
    """(lo, hi) of integer index `e` when each variable with id in `spans` runs over [0, span)
    and every other one is 0 (a tile's origin); None where `e` is not interval-evaluable."""
    if isinstance(e, Var):
        return (0, spans.get(id(e), 1) - 1)
    if isinstance(e, Const):
        v = int(e.value)
        return (v, v)
    if isinstance(e, Cast):
        return _interval(e.value, spans)
    if not isinstance(e, Binary):
        return None
    a, b = _interval(e.a, spans), _interval(e.b, spans)
    if a is None or b is None:
        return None
    if e.op is BinOp.ADD:
        return (a[0] + b[0], a[1] + b[1])
    if e.op is BinOp.SUB:
        return (a[0] - b[1], a[1] - b[0])
    if e.op is BinOp.MUL:
        corners = [x * y for x in a for y in b]
        return (min(corners), max(corners))
    if e.op is BinOp.FLOORDIV and b[0] == b[1] and b[0] > 0:  # a tile at any origin: one more quotient
        return (a[0] // b[0], a[0] // b[0] + -(-(a[1] - a[0]) // b[0]))
    if e.op is BinOp.FLOORMOD and b[0] == b[1] and b[0] > 0:
        return a if a[0] >= 0 and a[1] < b[0] and a[0] // b[0] == a[1] // b[0] else (0, b[0] - 1)
    if e.op in (BinOp.MIN, BinOp.MAX):
        f = min if e.op is BinOp.MIN else max
        return (f(a[0], b[0]), f(a[1], b[1]))
    return None


def main_loads(plan: GpuPlan, tensor) -> list:
    """The main node's loads of `tensor` (found once per plan: the model asks for them per point)."""
    key = ("loads", id(tensor))
    if key not in plan.memo:
        plan.memo[key] = loads_of(plan.main, tensor)
    return plan.memo[key]


def region(plan: GpuPlan, tensor, spans: dict[int, int]) -> tuple[int, ...]:
    """Extent of each dimension of `tensor` that the main node reads while the loop variables
    (ids in `spans`) run over their spans: the union over its loads, clipped to the tensor."""
    shape = [int(d) for d in tensor.shape]
    lo, hi = [None] * len(shape), [None] * len(shape)
    for load in main_loads(plan, tensor):
        for d, index in enumerate(load.indices):
            iv = _interval(index, spans) or (0, shape[d] - 1)
            lo[d] = iv[0] if lo[d] is None else min(lo[d], iv[0])
            hi[d] = iv[1] if hi[d] is None else max(hi[d], iv[1])
    return tuple(min(shape[d], (hi[d] - lo[d] + 1) if lo[d] is not None else 1) for d in range(len(shape)))


def fetch_region(plan: GpuPlan, point, tensor, level: str) -> tuple[int, ...]:
    """The region of `tensor` one block stages in shared memory per fetch at `level`: the block's
    output tile crossed with the reduce iterations inside the fetch's loop."""
    key = ("fetch", id(tensor), level, point)
    if key in plan.memo:
        return plan.memo[key]
    op = plan.main.tensor.op
    spans = {id(a): p[VTHREAD] * p[THREAD] * p[INNER] for a, p in zip(op.axis, spatial_parts(plan, point))}
    for a, p in zip(op.reduce_axis, reduce_parts(plan, point)):
        spans[id(a)] = p[R_MIDDLE] * p[R_INNER] if level == "outer" else p[R_INNER]
    plan.memo[key] = region(plan, tensor, spans)
    return plan.memo[key]


def shared_level(point, tensor) -> str:
    """Where `tensor` is staged in shared memory ("none" where reductions are shared across threads)."""
    from .gpu_knobs import SHARED, cross_threads, shared_key

    return "none" if cross_threads(point) > 1 else SHARED[option(point, shared_key(tensor), 0)]


def shared_bytes(plan: GpuPlan, point) -> int:
    """Shared memory one block allocates: the staged region of every input in shared memory."""
    from .gpu_knobs import cross_threads

    total = threads(plan, point) * plan.dtype_bytes if cross_threads(point) > 1 else 0  # the tree's partials
    for t in plan.reads:
        level = shared_level(point, t)
        if level != "none":
            total += math.prod(fetch_region(plan, point, t, level)) * t.dtype.bytes
    return total


def thread_fragment(plan: GpuPlan, point, tensor) -> int:
    """Distinct elements of `tensor` one thread reads per innermost reduce step: its register
    tile's outputs crossed with one iteration of every reduce loop."""
    op = plan.main.tensor.op
    spans = {id(a): p[VTHREAD] * p[INNER] for a, p in zip(op.axis, spatial_parts(plan, point))}
    return math.prod(region(plan, tensor, spans))


__all__ = ["GpuPlan", "blocks", "fetch_region", "main_loads", "make_gpu_plan", "outputs_per_thread", "reduce_steps",
           "region", "rounded_axes", "shared_bytes", "shared_level", "spatial_parts", "thread_fragment", "threads"]

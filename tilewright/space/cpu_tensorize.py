"""Tensorized points of the CPU space: where a registered intrinsic of the
target embeds in the main node (its operand dtypes and its accumulation), the
space is built around it instead of plain vector arithmetic.

The embedding is found by trying it, not by a template: for each spatial
loop that could carry the intrinsic's lanes and each reduce loop that could
carry its columns, a probe schedule is lowered and kept if the matcher
(lower/tensorize.py) reads every operand in place (nothing staged): the
operands are already in a layout the intrinsic reads (weights packed
[.., lanes, columns], activations with the columns innermost, outputs with
the lanes innermost), as the graph's layout pass writes a model's int8
convolutions. Where they are not, the constraint-programming embedder says
where the intrinsic goes and space/cpu_embed.py rewrites the program's
layouts for each realizable embedding; the `embedding` knob then chooses
among the rewritten programs.

Knobs: the embedding; the register tile, `rows` positions of one spatial loop
times `blocks` lane groups (of the lanes loop, or of another spatial loop),
sized so that accumulators, widened operands and the broadcast fit the
register file; the order of the outer reduce loops; how many outer loops run
in parallel. The tile lives in registers (a cache_write stage, or the main
node made local under an elementwise epilogue such as a requantize)."""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass, field

from ..errors import TilewrightError
from ..ir.expr import Load, Reduce
from ..ir.stmt import Allocate
from ..ir.stmt_functor import walk_stmt
from ..ir.traverse import walk
from ..schedule import Schedule, create_schedule
from .cpu_plan import CpuPlan
from .knobs import OrdinalKnob
from .space import Point, Space

ROWS = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14)
BLOCKS = (1, 2, 3, 4, 6, 8)  # appended options keep older records' indices
# independent accumulators the default wants before it minimises operand traffic: a dot-product
# instruction's latency times its issue rate (vdpbf16ps, vpdpbusd: ~5-6 cycles); a 197-token dense
# layer (no row count divides 197) got one accumulator and ran at 82 GFLOP/s against 383 at 192 tokens
MIN_ACCUMULATORS = 6
_PROBE = Point((("embedding", 0), ("rows", 0), ("blocks", 0), ("tile_axes", 0), ("reduce_order", 0), ("fuse", 0),
                ("rolled", 0)))


@dataclass(frozen=True, eq=False)
class TensorizedPlan:
    base: CpuPlan
    intrin: object
    embeddings: tuple[tuple[int, int], ...]  # (lanes: spatial position, columns: reduce position)
    widens: bool = False  # the target's spelling widens its operands (intrin Emitter.widens)
    # per embedding, where operands were not in place: the rewritten program it runs (space/cpu_embed.py)
    relaid: tuple = ()
    memo: dict = field(default_factory=dict, repr=False)

    def plan_of(self, embedding: int) -> CpuPlan:
        """The plan whose main node embedding `embedding` tensorizes."""
        return self.relaid[embedding].plan if self.relaid else self.base

    @property
    def graph(self):
        return self.base.graph

    @property
    def main(self):
        return self.base.main

    @property
    def outputs(self):
        return self.base.outputs


def _candidates(plan: CpuPlan, target):
    """The target's intrinsics whose operand and accumulator dtypes are the main node's."""
    from ..intrin import get, registered

    main = plan.main
    if not main.reduce or not isinstance(main.tensor.op.body, Reduce):
        return []
    read = {n.dtype.name for n in walk(main.tensor.op.body.source) if isinstance(n, Load)}
    out = []
    for name in registered(target):
        intrin = get(name)
        if intrin.output.dtype == main.tensor.dtype and {t.dtype.name for t in intrin.inputs} == read:
            out.append(intrin)
    return sorted(out, key=lambda i: -i.output.shape[0])  # the widest first


def tensorized_space(outputs, plan: CpuPlan, target, constants=()) -> tuple[Space, TensorizedPlan] | None:
    """The tensorized space of the plan's program, or None where no intrinsic embeds (in place, or
    after the embedder's layout rewrites; `outputs` and `constants` are the caller's)."""
    if plan.anchor is not plan.main and len(plan.anchor.tensor.shape) != len(plan.main.tensor.shape):
        return None  # the anchor's loops must be the main node's, position for position
    for intrin in _candidates(plan, target):
        lanes, cols = intrin.output.shape[0], intrin.inputs[0].shape[0]
        found = []
        for lp, rp in itertools.product(range(len(plan.main.spatial)), range(len(plan.main.reduce))):
            if plan.main.spatial[lp].extent % lanes or plan.main.reduce[rp].extent % cols:
                continue
            if _embeds(TensorizedPlan(plan, intrin, ((lp, rp),)), _PROBE):
                found.append((lp, rp))
        if found:
            tp = TensorizedPlan(plan, intrin, tuple(found), _widens(intrin, target))
            return _space(tp, target), tp
    return _embedded_space(outputs, plan, target, constants)


def _widens(intrin, target) -> bool:
    return bool(getattr(intrin.emitter_for("c", target.features), "widens", False))


def _embedded_space(outputs, plan: CpuPlan, target, constants) -> tuple[Space, TensorizedPlan] | None:
    """Where no intrinsic embeds in place: the embedder's top-k embeddings whose rewritten
    programs (operands packed, output blocked and unpacked) tensorize in place, one knob option
    each; None where none does or the solver (an optional dependency) is missing."""
    from .cpu_embed import embedded_variants

    for intrin in _candidates(plan, target):
        kept, found = [], []
        for v in embedded_variants(outputs, plan, intrin, constants):  # [] where OR-Tools is missing
            main = v.plan.main
            lp, rp = len(main.spatial) - 1, len(main.reduce) - 1  # the rewrite puts lanes and columns last
            if _embeds(TensorizedPlan(plan, intrin, ((lp, rp),), relaid=(v,)), _PROBE):
                kept.append(v)
                found.append((lp, rp))
        if kept:
            tp = TensorizedPlan(plan, intrin, tuple(found), _widens(intrin, target), tuple(kept))
            return _space(tp, target), tp
    return None


def _embeds(tp: TensorizedPlan, point: Point) -> bool:
    from ..lower.lower import lower as lower_fn
    from ..te.program import collect_program

    try:
        s = apply_tensorized(tp, point)
        outputs = list(tp.plan_of(point["embedding"]).outputs)
        func = lower_fn(s, list(collect_program(outputs).inputs) + outputs)
    except TilewrightError:
        return False
    return not any(isinstance(x, Allocate) and x.buffer.name.endswith("_staged") for x in walk_stmt(func.body))


def _tile_axes(tp: TensorizedPlan, embedding: int) -> list[tuple[int, int]]:
    """(rows loop, blocks loop) pairs: rows along any spatial loop but the lanes one; blocks along
    the lanes loop or another spatial loop."""
    lp, _ = tp.embeddings[embedding]
    n = len(tp.plan_of(embedding).main.spatial)
    return [(r, b) for r in range(n) for b in range(n) if r != lp and r != b] or [(lp, lp)]


def _reduce_orders(tp: TensorizedPlan, embedding: int) -> list[tuple[int, ...]]:
    return list(itertools.permutations(range(len(tp.plan_of(embedding).main.reduce))))[:6]


def _space(tp: TensorizedPlan, target) -> Space:
    regs = target.vector_registers
    n_pairs = max(len(_tile_axes(tp, e)) for e in range(len(tp.embeddings)))
    n_orders = max(len(_reduce_orders(tp, e)) for e in range(len(tp.embeddings)))
    knobs = [OrdinalKnob("embedding", tuple(range(len(tp.embeddings)))), OrdinalKnob("rows", ROWS),
             OrdinalKnob("blocks", BLOCKS), OrdinalKnob("tile_axes", tuple(range(n_pairs))),
             OrdinalKnob("reduce_order", tuple(range(n_orders))), OrdinalKnob("fuse", (1, 2, 3)),
             OrdinalKnob("rolled", (False, True))]

    def constraint(p: Point) -> bool:
        pairs = _tile_axes(tp, p["embedding"])
        if p["tile_axes"] >= len(pairs) or p["reduce_order"] >= len(_reduce_orders(tp, p["embedding"])):
            return False
        rows, blocks = ROWS[p["rows"]], BLOCKS[p["blocks"]]
        r, b = pairs[p["tile_axes"]]
        sp = tp.plan_of(p["embedding"]).main.spatial
        lp, _ = tp.embeddings[p["embedding"]]
        lanes = tp.intrin.output.shape[0]
        # rows need not divide their loop (the last tile is guarded: 197 tokens take 14-row tiles), but
        # must fit it; lane groups divide theirs
        if rows > sp[r].extent or (sp[b].extent // (lanes if b == lp else 1)) % blocks:
            return False
        return _tile_cost(tp, p)[1] <= regs

    return Space(knobs, constraint)


def _operand_axes(tp: TensorizedPlan, embedding: int) -> tuple[set[int], set[int]]:
    """Positions of the main node's spatial loops that index the broadcast operand (the one the
    lanes loop does not index) and the vector operand."""
    lp, _ = tp.embeddings[embedding]
    key = ("operand_axes", embedding)
    if key not in tp.memo:
        main = tp.plan_of(embedding).main
        axes = main.tensor.op.axis  # in the order of main.spatial
        per_load = []
        for n in walk(main.tensor.op.body.source):
            if isinstance(n, Load):
                used = {id(v) for ix in n.indices for v in walk(ix)}
                per_load.append({k for k, a in enumerate(axes) if id(a) in used})
        vec = next((a for a in per_load if lp in a), set())
        bcast = next((a for a in per_load if lp not in a), set())
        tp.memo[key] = (bcast, vec)
    return tp.memo[key]


def _tile_cost(tp: TensorizedPlan, p: Point) -> tuple[float, int]:
    """(cost, registers) of a point's register tile. A spelling that widens its operands (AVX2 exact
    u8 x s8) pays ~3 instructions per distinct broadcast and ~4 per distinct vector per call, and holds
    both halves of the side kept while the other streams. One that does not (VNNI, vpmaddubsw) is
    ranked by its lane groups (each streams its own weights through the reduction), then broadcasts
    per call; it holds the accumulators, the lane groups, a broadcast and a constant."""
    pairs = _tile_axes(tp, p["embedding"])
    r, b = pairs[min(p["tile_axes"], len(pairs) - 1)]
    counts = {r: ROWS[p["rows"]], b: BLOCKS[p["blocks"]]}
    bcast_axes, vec_axes = _operand_axes(tp, p["embedding"])
    n_bcast = math.prod(c for a, c in counts.items() if a in bcast_axes)
    n_vec = math.prod(c for a, c in counts.items() if a in vec_axes)
    tile = counts[r] * counts[b]
    extent = tp.plan_of(p["embedding"]).main.spatial[r].extent
    waste = -(-extent // counts[r]) * counts[r] / extent  # a guarded last tile computes rows it throws away
    if tp.widens:
        return waste * (3 * n_bcast + 4 * n_vec) / tile, tile + 2 * min(n_bcast, n_vec) + 3
    # measured on Zen 3 (a 3x3 conv, 64 channels): one lane group under 8 broadcasts ran 1.3x faster than
    # 2 x 4 and 2.4x faster than 8 groups under 1 broadcast, whose weights streamed from L2: lane groups
    # first, then broadcasts per call
    return waste * (n_vec + n_bcast / tile / 2), tile + n_vec + 2


def tensorized_default(space: Space, tp: TensorizedPlan) -> Point:
    """Among register tiles of at least MIN_ACCUMULATORS accumulators (the largest there are, where
    none is that large), the one with the fewest operand instructions per product (`_tile_cost`), the
    larger tile among equals; the first embedding."""
    best, key = None, None
    rolled = int(len(tp.plan_of(0).main.reduce) > 1)  # several reduce loops (a conv's window): short ones, kept rolled
    shapes = itertools.product(range(len(ROWS)), range(len(BLOCKS)), range(len(space.knobs["tile_axes"].options)))
    for p in (Point((("embedding", 0), ("rows", r), ("blocks", b), ("tile_axes", t), ("reduce_order", 0),
                     ("fuse", 1), ("rolled", rolled))) for r, b, t in shapes):
        if not space.valid(p):
            continue
        pairs = _tile_axes(tp, p["embedding"])
        inner = sum(pairs[p["tile_axes"]])  # among equals, tiles along inner (contiguous) loops
        tile = ROWS[p["rows"]] * BLOCKS[p["blocks"]]
        k = (min(tile, MIN_ACCUMULATORS), -_tile_cost(tp, p)[0], tile, inner)
        if key is None or k > key:
            best, key = p, k
    if best is None:
        return space.sample(random.Random(0))
    return _fused_enough(space, tp, best)


def _fused_enough(space: Space, tp: TensorizedPlan, p: Point) -> Point:
    """`p` with the fewest outer loops fused into the parallel one that still give every core a
    few iterations (a tile covering all output channels leaves the first loops at extent 1)."""
    e = p["embedding"]
    lp, _ = tp.embeddings[e]
    pairs = _tile_axes(tp, e)
    r, b = pairs[min(p["tile_axes"], len(pairs) - 1)]
    lanes = tp.intrin.output.shape[0]
    factors = {r: ROWS[p["rows"]], b: BLOCKS[p["blocks"]] * (lanes if b == lp else 1)}
    factors.setdefault(lp, lanes)
    outer = [x.extent // factors.get(n, 1) for n, x in enumerate(tp.plan_of(e).main.spatial)]
    best = p
    for k in range(len(space.knobs["fuse"].options)):  # option k fuses k + 1 loops
        q = p.replace("fuse", k)
        if space.valid(q) and math.prod(outer[:k + 1]) > math.prod(outer[:best["fuse"] + 1]):
            best = q
            if math.prod(outer[:k + 1]) >= 4 * tp.base.cores:
                break
    return best


def apply_tensorized(tp: TensorizedPlan, point: Point) -> Schedule:
    """The schedule of `point`: the anchor's loops tiled (outer parallel, register tile inside),
    the main node computed per tile in registers, its lanes and columns handed to the intrinsic."""
    plan = tp.plan_of(point["embedding"])
    s = create_schedule(list(plan.outputs))
    if plan.merged is not None:
        s.views, s.view_originals = dict(plan.merged.views), plan.merged.originals
    main = plan.main
    if plan.anchor is main:
        anchor_t, main_t = main.tensor, s.cache_write(main.tensor, "local")
    else:
        anchor_t, main_t = plan.anchor.tensor, main.tensor
        for n in plan.inlined:
            s[n.tensor].compute_inline()
        s[main_t].set_scope("local")
    A, M = s[anchor_t], s[main_t]
    lp, rp = tp.embeddings[point["embedding"]]
    pairs = _tile_axes(tp, point["embedding"])
    r, b = pairs[min(point["tile_axes"], len(pairs) - 1)]
    rows, blocks = ROWS[point["rows"]], BLOCKS[point["blocks"]]
    lanes, cols = tp.intrin.output.shape[0], tp.intrin.inputs[0].shape[0]

    axes = list(A.op.axis)
    outer, tile = [], []
    factors = {r: rows, b: blocks * (lanes if b == lp else 1)}
    if lp not in factors:
        factors[lp] = lanes
    for n, axis in enumerate(axes):
        if n in factors:
            o, i = A.split(axis, factor=factors[n])
            outer.append(o)
            tile.append((n, i))
        else:
            outer.append(axis)
    tile_loops = [i for _, i in tile]
    A.reorder(*outer, *tile_loops)
    nfuse = min(point["fuse"] + 1, len(outer))
    par = A.fuse(*outer[:nfuse]) if nfuse > 1 else outer[0]
    A.parallel(par)
    attach = outer[-1] if nfuse < len(outer) else par
    lane_loop = dict(tile)[lp]
    if lp == b and blocks > 1:
        group, vec = A.split(lane_loop, factor=lanes)
        A.unroll(group)
    else:
        vec = lane_loop
    for n, i in tile:
        if n != lp:
            A.unroll(i)
    A.vectorize(vec)
    M.compute_at(A, attach)

    m_axes = list(M.op.axis)
    lo, li = M.split(m_axes[lp], factor=lanes)
    red = list(M.op.reduce_axis)
    co, ci = M.split(red[rp], factor=cols)
    reduce_outer = [co if n == rp else red[n] for n in _reduce_orders(tp, point["embedding"])[point["reduce_order"]]]
    spatial = [lo if n == lp else a for n, a in enumerate(m_axes)]
    M.reorder(*reduce_outer, *spatial, li, ci)
    for a in spatial:
        M.unroll(a)
    if point["rolled"]:  # GCC unrolls short reduce loops whole and interleaves the calls, spilling products
        for a in reduce_outer:
            M.no_unroll(a)
    M.tensorize(li, tp.intrin)
    if tp.relaid:  # an operand's padding is computed inside its pack, not in a pass of its own
        rw = tp.relaid[point["embedding"]].rewritten
        for t in rw.inlines:
            s[t].compute_inline()
        s.rewrite = rw.choice.to_args()
    return s


__all__ = ["TensorizedPlan", "apply_tensorized", "tensorized_default", "tensorized_space"]

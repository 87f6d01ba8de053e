"""Tensorizing where the operands are not in the intrinsic's layout: the
embedder (intrin/embed.py, Rieber et al.) says which operator axis carries
the intrinsic's lanes and which its columns, and each embedding that split,
pad and reorder realize becomes a rewritten program (the paper's Table 2
rewrites as te stages):

- the operands packed so that the parts on the intrinsic's axes are their
  innermost dims, zero-filled where an axis is padded (the broadcast operand
  [.., r/C, C], the vector operand [.., s/L, .., r/C, .., L, C]);
- the reduction and its elementwise epilogue computed blocked, the lanes part
  innermost ([.., s/L, .., L]);
- one unpack stage writing the caller's layout.

The packs and the unpack run inside the kernel and are timed with it (a
constant weight's pack is hoisted out by lower/hoist_packs.py when the
caller declares it constant, as a deployed model does). The CPU space's
`embedding` knob ranges over the realizable top-k embeddings, so the search
picks among layouts by measurement. Stencil unrolling, image packing and
fused axes are not realized here (they need a gather, not a pack)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..analysis.axis_merge import MergedProgram, merge_contiguous_axes
from ..analysis.graph import analyze
from ..errors import TilewrightError
from ..ir.expr import Const, Load
from ..ir.traverse import free_vars, substitute, transform, walk
from ..te import compute, if_then_else, logical_and, placeholder, reduce_axis
from ..te import sum as te_sum
from ..te.program import as_tensor_list, collect_program
from ..te.tensor import ComputeOp, PlaceholderOp
from .anchor import anchor_chain
from .cpu_plan import CpuPlan, make_plan

TOP_K = 4  # embeddings asked of the solver; the realizable ones become the knob's options
SOLVE_SECONDS = 5.0


@dataclass(frozen=True)
class LayoutChoice:
    """An embedding as the rewrite needs it (and as a tuning record's trace stores it): the main
    node's spatial axis at position `lanes` split by `L` onto the intrinsic's lanes, its reduce
    axis at position `columns` split by `C` onto the intrinsic's columns (each padded up)."""

    intrin: str
    lanes: int
    L: int
    columns: int
    C: int

    def to_args(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Rewritten:
    """The caller's program rewritten for a LayoutChoice: `outputs` to schedule, `merged` the views
    from the caller's tensors (lowering binds arguments through them), `packs` the operand packs
    (root stages), `inlines` the stages folded into them (an operand's padding), `unpack` the output
    stage (None where the blocked output is the caller's array), `constants` the ids of the
    rewritten program's tensors that hold the caller's constants."""

    choice: LayoutChoice
    outputs: list
    merged: MergedProgram
    packs: tuple
    inlines: tuple
    unpack: object
    constants: frozenset


@dataclass(frozen=True)
class Relaid:
    """A rewritten program and the plan that schedules it; `embedding` the solver's (what `print`
    shows of the choice)."""

    rewritten: Rewritten
    plan: CpuPlan
    embedding: object  # intrin.embed.Embedding


def _single_digit(emb, axis: str):
    """(operator axis name, digit extent) where intrinsic `axis` is one plain part of one operator axis."""
    digits = dict(emb.mapping)[axis]
    if len(digits) != 1:
        return None
    names, extent, stride = digits[0]
    return (names[0], extent) if len(names) == 1 and stride == 1 else None


def choice_of(main, intrin, emb) -> LayoutChoice | None:
    """The LayoutChoice of embedding `emb` in `main` (a te reduction), None where it fuses or strides."""
    if len(intrin.output.op.axis) != 1 or len(intrin.output.op.reduce_axis) != 1:
        return None
    lanes_of = _single_digit(emb, intrin.output.op.axis[0].name)
    cols_of = _single_digit(emb, intrin.output.op.reduce_axis[0].name)
    if lanes_of is None or cols_of is None:
        return None
    sp = [k for k, v in enumerate(main.op.axis) if v.name == lanes_of[0]]
    rd = [k for k, v in enumerate(main.op.reduce_axis) if v.name == cols_of[0]]
    if not sp or not rd:
        return None
    return LayoutChoice(intrin.name, sp[0], lanes_of[1], rd[0], cols_of[1])


def _dim_of(load: Load, var) -> int | None:
    """The one dim of `load` indexed by exactly `var`, where no other dim uses it."""
    uses = [d for d, ix in enumerate(load.indices) if any(v is var for v in free_vars(ix))]
    return uses[0] if len(uses) == 1 and load.indices[uses[0]] is var else None


def _uses(load: Load, var) -> bool:
    return any(v is var for ix in load.indices for v in free_vars(ix))


def _guarded(value, conds, dtype):
    conds = [c for c in conds if c is not None]
    if not conds:
        return value
    return if_then_else(logical_and(*conds) if len(conds) > 1 else conds[0], value, Const(0, dtype))


def _bound(expr, extent: int, padded: int):
    return expr < extent if padded != extent else None


@dataclass(frozen=True)
class _Operands:
    """The main node's two reads as the intrinsic pairs them: `a` broadcast along the lanes, `b` read
    per lane; `da` the dim of `a` indexed by the columns axis, `ds` / `dr` those of `b` indexed by the
    lanes and the columns axis."""

    a: Load
    b: Load
    da: int
    ds: int
    dr: int


def _operands(main, intrin, s, r) -> _Operands | None:
    from ..intrin.affine_form import affine_form, pair_operands

    op, intr = affine_form(main), affine_form(intrin.output, "intrinsic")
    pairing = pair_operands(op, intr)
    vec_n = next(n for n, acc in enumerate(intr.reads) if acc.uses(0))
    load_b, load_a = op._loads[pairing[vec_n]], op._loads[pairing[1 - vec_n]]
    dims = _dim_of(load_a, r), _dim_of(load_b, s), _dim_of(load_b, r)
    if load_a.tensor is load_b.tensor or None in dims or _uses(load_a, s):
        return None
    return _Operands(load_a, load_b, *dims)


def _packs(ops: _Operands, L: int, C: int, Es: int, Er: int, replaced: dict):
    """The operands packed with the parts on the intrinsic's axes innermost, zero where padded; the
    broadcast operand a view of the caller's array where that is the same memory (`replaced`)."""
    A, B, da, ds, dr = ops.a.tensor, ops.b.tensor, ops.da, ops.ds, ops.dr
    Ps, Pr = -(-Es // L) * L, -(-Er // C) * C

    def pack_a(*i):
        idx = list(i[:-1])
        idx[da] = i[da] * C + i[-1]
        return _guarded(A[tuple(idx)], [_bound(idx[da], Er, Pr)], A.dtype)

    def pack_b(*i):
        idx = list(i[:-2])
        idx[ds], idx[dr] = i[ds] * L + i[-2], i[dr] * C + i[-1]
        return _guarded(B[tuple(idx)], [_bound(idx[ds], Es, Ps), _bound(idx[dr], Er, Pr)], B.dtype)

    shape_a, shape_b = list(A.shape), list(B.shape)
    shape_a[da] = Pr // C
    shape_b[ds], shape_b[dr] = Ps // L, Pr // C
    if isinstance(A.op, PlaceholderOp) and da == A.ndim - 1 and Pr == Er == A.shape[da]:
        # [.., r] is [.., r/C, C] in memory: a view of the caller's array, no copy
        Ap = placeholder((*shape_a, C), A.dtype, name=A.name, value_range=A.op.value_range)
        replaced[id(A)] = Ap
    else:
        Ap = compute((*shape_a, C), pack_a, name=f"{A.name}_c{C}")
    return Ap, compute((*shape_b, L, C), pack_b, name=f"{B.name}_{L}x{C}")


def _blocked_main(main, ops: _Operands, Ap, Bp, choice: LayoutChoice, Ps: int, Pr: int, name: str):
    """The reduction over the packed operands, its lanes part innermost: [.., s/L, .., L]."""
    s, r, L, C, pos = main.op.axis[choice.lanes], main.op.reduce_axis[choice.columns], choice.L, choice.C, \
        choice.lanes
    red = [reduce_axis(Pr // C, f"{v.name}_o") if v is r else reduce_axis(v.extent, v.name)
           for v in main.op.reduce_axis]
    r_in, ro = reduce_axis(C, f"{r.name}_i"), red[choice.columns]

    def body(*i):
        m = {v: i[k] for k, v in enumerate(main.op.axis) if v is not s}
        m[s] = i[pos] * L + i[-1]
        m.update({v: nv for v, nv in zip(main.op.reduce_axis, red) if v is not r})
        ia = [substitute(ix, m) for ix in ops.a.indices]
        ia[ops.da] = ro
        ib = [substitute(ix, m) for ix in ops.b.indices]
        ib[ops.ds], ib[ops.dr] = i[pos], ro
        new = {id(ops.a.tensor): Load(Ap, (*ia, r_in), ops.a.dtype),
               id(ops.b.tensor): Load(Bp, (*ib, i[-1], r_in), ops.b.dtype)}
        source = transform(main.op.body.source, lambda n: new.get(id(n.tensor)) if isinstance(n, Load) else None)
        return te_sum(substitute(source, m), axis=[*red, r_in])

    shape = [Ps // L if v is s else v.extent for v in main.op.axis] + [L]
    return compute(tuple(shape), body, name=name)


def rewritten_program(outputs, intrin, choice: LayoutChoice, constants=()) -> Rewritten | None:
    """The program of `outputs` (the caller's tensors) rewritten for `choice`, or None where split,
    pad and reorder cannot realize it (an operand dim indexed by more than the axis, padded lanes
    under an epilogue that reads other tensors along them, several outputs). `constants`: caller
    tensors that never change. Deterministic: a record's trace replays through it."""
    outputs = as_tensor_list(outputs, "outputs")
    first = merge_contiguous_axes(outputs)
    program = first.outputs if first is not None else list(outputs)
    if len(program) != 1:
        return None
    g = analyze(program)
    anchor, inlined = anchor_chain(g)
    main = g.main.tensor
    if not main.op.reduce_axis or main.op.body.combiner.name != "sum" or choice.lanes >= main.ndim \
            or choice.columns >= len(main.op.reduce_axis):
        return None
    s, r = main.op.axis[choice.lanes], main.op.reduce_axis[choice.columns]
    L, C, pos = choice.L, choice.C, choice.lanes
    ops = _operands(main, intrin, s, r)
    if ops is None:
        return None
    Es, Er = s.extent, r.extent
    Ps, Pr = -(-Es // L) * L, -(-Er // C) * C
    replaced: dict = {}
    Ap, Bp = _packs(ops, L, C, Es, Er, replaced)
    chain = [n.tensor for n in (*inlined, anchor) if n is not g.main]
    # lanes innermost and unpadded: the blocked output is the caller's array, no unpack
    in_place = pos == main.ndim - 1 and Ps == Es

    def name(t):
        return t.name if in_place and t is (chain[-1] if chain else main) else f"{t.name}_b{L}"

    last, last_p = main, _blocked_main(main, ops, Ap, Bp, choice, Ps, Pr, name(main))
    for t in chain:
        others = [n for n in _loads_in(t) if n.tensor is not last]
        if Ps != Es and any(_uses(n, t.op.axis[pos]) for n in others):
            return None  # a padded lane would read past another tensor's end
        last, last_p = t, _blocked_consumer(t, last, last_p, pos, L, name(t))
    if not any(last is t for t in program):
        return None  # the epilogue chain does not end at the output
    if in_place:
        out = last_p
    else:
        out = compute(last.shape, lambda *i: last_p[(*i[:pos], i[pos] // L, *i[pos + 1:], i[pos] % L)],
                      name=last.name)
    replaced[id(last)] = out
    second = merge_contiguous_axes([out])
    final = second.outputs if second is not None else [out]
    inner = second.views if second is not None else {}

    def view(t):
        return inner.get(id(t), t)

    merged, consts = _caller_views(outputs, first, second, replaced, view, final, constants)
    pads = [t for t in collect_program([Ap, Bp]).tensors
            if t is not Ap and t is not Bp and isinstance(t.op, ComputeOp) and not t.op.reduce_axis]
    return Rewritten(choice, list(final), merged, tuple(view(t) for t in (Ap, Bp) if isinstance(t.op, ComputeOp)),
                     tuple(view(t) for t in pads), None if in_place else view(out), consts)


def _caller_views(outputs, first, second, replaced: dict, view, final, constants):
    """The views from the caller's tensors through the first axis merge, the rewrite and the second
    merge to the rewritten program's; and the ids there of the caller's constants."""
    before = first.views if first is not None else {}
    originals = first.originals if first is not None else collect_program(outputs).tensors
    const_ids = {id(t) for t in constants}
    views, consts = {}, set()
    for t in originals:
        now = before.get(id(t), t)
        now = view(replaced.get(id(now), now))
        if id(t) in const_ids:
            consts.add(id(now))
        if now is not t:
            views[id(t)] = now
    keep = (*originals, *before.values(), *replaced.values(), *(second.originals if second is not None else ()))
    return MergedProgram(list(final), views, keep), frozenset(consts)


def _loads_in(t) -> list[Load]:
    return [n for n in walk(t.op.body) if isinstance(n, Load)]


def _blocked_consumer(t, prev, prev_p, pos: int, L: int, name: str):
    """Elementwise `t` (reading `prev` at its own indices) over the blocked layout of `prev_p`."""
    def body(*i):
        m = {v: i[k] for k, v in enumerate(t.op.axis) if k != pos}
        m[t.op.axis[pos]] = i[pos] * L + i[-1]
        src = transform(t.op.body, lambda n: Load(prev_p, tuple(i), n.dtype)
                        if isinstance(n, Load) and n.tensor is prev else None)
        return substitute(src, m)

    return compute(prev_p.shape, body, name=name)


def embedded_variants(outputs, plan: CpuPlan, intrin, constants=()) -> list[Relaid]:
    """The realizable rewrites of the solver's top-k embeddings of `intrin` in the plan's main node,
    best ranked first, one per distinct program; `outputs` and `constants` are the caller's."""
    from ..intrin.embed import EmbeddingError, SolverTimeout, embed

    try:
        embs = embed(plan.main.tensor, intrin, pad=True, top_k=TOP_K, unroll=False, dense=True,
                     time_limit=SOLVE_SECONDS, workers=1)
    except (EmbeddingError, SolverTimeout):
        return []
    out, seen = [], set()
    for emb in embs:
        choice = choice_of(plan.main.tensor, intrin, emb)
        if choice is None or choice in seen:
            continue
        seen.add(choice)
        try:
            rw = rewritten_program(outputs, intrin, choice, constants)
        except TilewrightError:
            continue
        if rw is not None and plan.target is not None:
            p = make_plan(rw.outputs, plan.target)
            out.append(Relaid(rw, dataclasses.replace(p, merged=rw.merged, constants=rw.constants), emb))
    return out


__all__ = ["LayoutChoice", "Relaid", "Rewritten", "choice_of", "embedded_variants", "rewritten_program"]

"""Tensorize: the loops of a stage from a marked loop inward become one call of
a declared intrinsic (`s[C].tensorize(axis, intrin)`; declarations in intrin/).

Matching is semantic, not syntactic. The intrinsic's axes are paired with the
stage's loops inside the marked one by kind and extent, whatever their order
(a `reorder` does not matter); loops of extent 1 are fixed at 0. Under a
pairing, the two bodies must be the same computation up to commutative
operands, each intrinsic operand standing for one expression of the stage;
each operand's address must be affine in the paired loops, and its strides
are solved from that map. An operand whose address is not affine, whose
strides are not the layout the intrinsic requires, or that is not a plain
read (a padding `if_then_else`) is staged: copied into a small buffer in
the required layout before the call. Loops whose tile may run past the end
of an inexact split keep the scalar nest for the partial tiles.

The intrinsic is duck-typed here (lower sits below intrin/): `name`,
`output` (a te tensor: its op's axes and body are the semantics), `inputs`
(its placeholders, in operand order) and `layouts` (per operand, inputs
then output: the flat stride each axis must have, None where any will do)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ..errors import TensorizeError
from ..ir import arith
from ..ir.expr import Binary, BinOp, Cast, Const, Expr, IterVar, Load, Reduce, Var
from ..ir.stmt import Allocate, Buffer, For, ForKind, IfThenElse, IntrinCall, Scope, Stmt, Store, seq
from ..ir.traverse import structural_key, substitute, walk
from .flatten import dense_strides, flat_index
from .simplify import simplify, to_linear
from .value_range import expr_range, tensor_range


@dataclass
class _Use:
    """An intrinsic input and the stage expression it stands for."""

    placeholder: object
    indices: tuple  # the intrinsic's index expressions (in its axes)
    expr: Expr  # the stage's expression (loads already on buffers)


class BodyMismatch(Exception):
    pass


def _fail(stage, axis, intrin, reason: str):
    return TensorizeError(f"stage '{stage.name}': tensorize at loop '{axis.name}' with '{intrin.name}': {reason}",
                          getattr(stage, "tensor", None), intrin)


def _axes_text(pairs) -> str:
    return ", ".join(f"{v.name}: {n} {k.value}" for v, n, k in pairs) or "none"


def _pairings(region, dom, intrin_axes):
    """Every bijection of the region's non-unit loops onto the intrinsic's non-unit
    axes that keeps kind and extent; (loop var, intrinsic axis) lists."""
    loops = [v for v in region if dom[id(v)] > 1]
    axes = [a for a in intrin_axes if a.extent > 1]
    key = lambda kind, n: (kind.value, n)  # noqa: E731
    want = sorted(key(a.kind, a.extent) for a in axes)
    have = sorted(key(v.kind, dom[id(v)]) for v in loops)
    if want != have:
        return None
    groups: dict = {}
    for a in axes:
        groups.setdefault(key(a.kind, a.extent), []).append(a)
    per_group = []
    for k, group in groups.items():
        vs = [v for v in loops if key(v.kind, dom[id(v)]) == k]
        per_group.append([list(zip(p, group)) for p in itertools.permutations(vs)])
    return [sum(choice, []) for choice in itertools.product(*per_group)]


def match_body(pat: Expr, e: Expr, placeholders: dict, uses: list[_Use]) -> None:
    """`e` computes what `pat` (the intrinsic's body) does, reading the stage's
    expressions where `pat` reads the intrinsic's inputs."""
    if isinstance(pat, Load) and id(pat.tensor) in placeholders:
        if e.dtype != pat.dtype:
            raise BodyMismatch(f"operand '{pat.tensor.name}' is {pat.dtype}, the stage reads {e.dtype} there (`{e}`)")
        uses.append(_Use(pat.tensor, pat.indices, e))
        return
    if type(pat) is not type(e) or pat.dtype != e.dtype:
        raise BodyMismatch(f"the intrinsic computes `{pat}`, the stage `{e}`")
    if isinstance(pat, Cast):
        match_body(pat.value, e.value, placeholders, uses)
    elif isinstance(pat, Binary):
        if pat.op is not e.op:
            raise BodyMismatch(f"the intrinsic computes `{pat}`, the stage `{e}`")
        orders = [(e.a, e.b), (e.b, e.a)] if pat.op in (BinOp.ADD, BinOp.MUL) else [(e.a, e.b)]
        last = None
        for a, b in orders:
            trial: list[_Use] = []
            try:
                match_body(pat.a, a, placeholders, trial)
                match_body(pat.b, b, placeholders, trial)
            except BodyMismatch as exc:
                last = exc
                continue
            uses.extend(trial)
            return
        raise last
    elif isinstance(pat, Const):
        if pat.value != e.value:
            raise BodyMismatch(f"the intrinsic has constant {pat.value}, the stage {e.value}")
    elif structural_key(pat) != structural_key(e):
        raise BodyMismatch(f"the intrinsic computes `{pat}`, the stage `{e}`")


def _coefficients(flat: Expr, region_ids: set[int], ranges):
    """Per region loop, the coefficient of the flat offset `flat`; None if the offset
    is not affine in the region's loops."""
    lin = to_linear(simplify(flat, ranges))
    coef: dict[int, int] = {}
    for atom, c in lin.terms.values():
        if isinstance(atom, Var) and id(atom) in region_ids:
            coef[id(atom)] = c
        elif any(isinstance(n, Var) and id(n) in region_ids for n in walk(atom)):
            return None
    return coef


def _solve_strides(coef: dict[int, int], indices, pairing) -> tuple[int, ...] | None:
    """Strides s (one per operand axis) with coef[loop] == sum_d s[d] * d(index_d)/d(axis) for every
    paired (loop, axis), and no dependence on loops the operand's indices do not use."""
    rows, rhs = [], []
    for loop, axis in pairing:
        rows.append([_axis_coef(ix, axis) for ix in indices])
        rhs.append(coef.get(id(loop), 0))
    if not indices:
        return () if all(r == 0 for r in rhs) else None
    m = np.array(rows, dtype=np.float64).reshape(len(rows), len(indices))
    b = np.array(rhs, dtype=np.float64)
    sol, *_ = np.linalg.lstsq(m, b, rcond=None) if len(rows) else (np.zeros(len(indices)),)
    s = np.rint(sol).astype(np.int64)
    if len(rows) and not np.array_equal(m @ s, b):
        return None
    return tuple(int(x) for x in s)


def _axis_coef(index: Expr, axis) -> int:
    for atom, c in to_linear(index).terms.values():
        if atom is axis:
            return c
    return 0


def _fits(strides, layout, shape) -> bool:
    return all(w is None or s == w or n == 1 for s, w, n in zip(strides, layout, shape))


def _zero_region(e: Expr, zero: dict, ranges) -> Expr:
    return simplify(substitute(e, zero), ranges)


def tensorize_nest(stage, axis: IterVar, intrin, frame, buf: Buffer, offsets, source: Expr | None,
                   value: Expr | None, scalar: Stmt, init: Stmt | None, ctx) -> Stmt:
    """The statement replacing `stage`'s loops from `axis` inward (`scalar` is their
    ordinary nest, kept for partial tiles). `source` is the reduction's source
    (loads on buffers) for a reduction, `value` the stored value otherwise; `init`
    the reduction's initialisation where it falls inside those loops."""
    leaves = frame.leaves
    pos = next(n for n, v in enumerate(leaves) if v is axis)
    region = leaves[pos:]
    for v in region:
        kind = stage.loop_kind(v)
        if kind is not ForKind.SERIAL or stage.thread_tag(v):
            raise _fail(stage, axis, intrin, f"loop '{v.name}' inside it is {kind.value}; the intrinsic replaces "
                        f"those loops, so leave them serial (annotate loops outside '{axis.name}')")
        if ctx.attached.get(id(v)):
            names = [c.name for c in ctx.attached[id(v)]]
            raise _fail(stage, axis, intrin, f"stages {names} are computed at loop '{v.name}' inside it; attach "
                        f"them outside '{axis.name}'")
    out_op = intrin.output.op
    intrin_axes = list(out_op.axis) + list(out_op.reduce_axis)
    body_pat = out_op.body
    if isinstance(body_pat, Reduce) != (source is not None):
        what = "a reduction" if isinstance(body_pat, Reduce) else "elementwise"
        raise _fail(stage, axis, intrin, f"the intrinsic is {what}, the stage is not")
    pairs = _pairings(region, frame.dom, intrin_axes)
    if pairs is None:
        shape = [(a, a.extent, a.kind) for a in intrin_axes if a.extent > 1]
        loops = [(v, frame.dom[id(v)], v.kind) for v in region if frame.dom[id(v)] > 1]
        raise _fail(stage, axis, intrin, f"the intrinsic iterates [{_axes_text(shape)}], the loops from "
                    f"'{axis.name}' inward are [{_axes_text(loops)}]; split or reorder so that they match")
    zero = {v: arith.const(0) for v in region}
    placeholders = {id(t): t for t in intrin.inputs}
    first_error = None
    for pairing in pairs:
        try:
            return _build(stage, axis, intrin, frame, buf, offsets, source, value, scalar, init, pairing,
                          region, zero, placeholders, body_pat, ctx)
        except BodyMismatch as exc:
            first_error = first_error or exc
    raise _fail(stage, axis, intrin, str(first_error))


def _build(stage, axis, intrin, frame, buf, offsets, source, value, scalar, init, pairing, region, zero,
           placeholders, body_pat, ctx) -> Stmt:
    region_ids = {id(v) for v, _ in pairing}  # unit loops are fixed at 0
    ranges = {**ctx.outer.get(id(stage), {}), **frame.loop_ranges(frame.leaves)}
    uses: list[_Use] = []
    if source is not None:
        stage_body = frame.body
        if body_pat.combiner.name != stage_body.combiner.name:
            raise BodyMismatch(f"the intrinsic reduces by {body_pat.combiner.name}, the stage by "
                            f"{stage_body.combiner.name}")
        match_body(body_pat.source, source, placeholders, uses)
        if body_pat.condition is not None:
            raise BodyMismatch("intrinsics with a reduction condition are not supported")
    else:
        match_body(body_pat, value, placeholders, uses)
    by_placeholder = {}
    for u in uses:
        seen = by_placeholder.setdefault(id(u.placeholder), u)
        if seen is not u and (structural_key(seen.expr) != structural_key(u.expr)
                              or any(structural_key(p) != structural_key(q) for p, q in zip(seen.indices, u.indices))):
            raise BodyMismatch(f"the intrinsic reads '{u.placeholder.name}' twice, the stage reads `{seen.expr}` and "
                            f"`{u.expr}` there")
    missing = [t.name for t in intrin.inputs if id(t) not in by_placeholder]
    if missing:
        raise BodyMismatch(f"the intrinsic's inputs {missing} are not read by its body")
    _check_ranges(intrin, by_placeholder, frame, ctx)
    axis_of = {id(a): v for v, a in pairing}
    operands, strides, staged = [], [], []
    for n, t in enumerate(intrin.inputs):
        u = by_placeholder[id(t)]
        layout = intrin.layouts[n]
        direct = _direct_operand(u, region_ids, pairing, zero, ranges)
        if direct is not None and _fits(direct[1], layout, t.shape):
            operands.append(direct[0])
            strides.append(direct[1])
            continue
        local, fill = _stage_operand(stage, axis, intrin, u, t, pairing, axis_of, region, zero, ctx)
        staged.append((local, fill))
        operands.append(Load(local, tuple(arith.const(0) for _ in t.shape), local.dtype))
        strides.append(dense_strides(t.shape))
    out_flat = flat_index(buf, offsets)
    coef = _coefficients(out_flat, region_ids, ranges)
    out_indices = tuple(out_op_axis for out_op_axis in intrin.output.op.axis)
    out_strides = None if coef is None else _solve_strides(coef, out_indices, pairing)
    if out_strides is None:
        raise BodyMismatch(f"the output '{buf.name}' is not written at an affine address of the paired loops "
                        f"(`{out_flat}`)")
    if not _fits(out_strides, intrin.layouts[-1], intrin.output.shape):
        raise BodyMismatch(f"the output '{buf.name}' has strides {list(out_strides)} along the intrinsic's axes, it "
                        f"needs {list(intrin.layouts[-1])}; reorder its storage (storage_order) or split so "
                        f"that they match")
    operands.append(Load(buf, tuple(_zero_region(o, zero, ranges) for o in offsets), buf.dtype))
    strides.append(out_strides)
    call: Stmt = IntrinCall(intrin, tuple(operands), tuple(strides), source is not None)
    for local, fill in reversed(staged):
        call = Allocate(local, seq(fill, call))
    return _guarded(seq(init, call), scalar, frame, {id(v) for v in region}, region)


def _check_ranges(intrin, uses: dict, frame, ctx) -> None:
    """Every input the intrinsic is exact for only on a range provably lies in it."""
    needs = getattr(intrin, "value_ranges", ()) or ()
    if not any(needs):
        return
    tensor_of = {}
    for n in walk(frame.body):
        if isinstance(n, Load) and id(n.tensor) in ctx.buffers:
            tensor_of[id(ctx.buffers[id(n.tensor)])] = n.tensor
    memo: dict = {}

    def range_of(buf):
        t = tensor_of.get(id(buf))
        return tensor_range(t, memo) if t is not None else None

    for t, need in zip(intrin.inputs, needs):
        if need is None:
            continue
        have = expr_range(uses[id(t)].expr, range_of)
        if have is None or have[0] < need[0] or have[1] > need[1]:
            raise BodyMismatch(f"operand '{t.name}' must lie in {list(need)} for this intrinsic to be exact, and the "
                            f"stage's `{uses[id(t)].expr}` is only known to lie in {list(have) if have else 'nothing'}"
                            f"; declare the input's range (tw.placeholder(..., value_range=...)) or use an "
                            f"intrinsic exact for every value")


def _direct_operand(u: _Use, region_ids, pairing, zero, ranges):
    """(origin load, strides) of an operand read straight from memory, or None."""
    if not isinstance(u.expr, Load) or not isinstance(u.expr.tensor, Buffer):
        return None
    flat = flat_index(u.expr.tensor, u.expr.indices)
    coef = _coefficients(flat, region_ids, ranges)
    if coef is None:
        return None
    s = _solve_strides(coef, u.indices, pairing)
    if s is None:
        return None
    origin = Load(u.expr.tensor, tuple(_zero_region(i, zero, ranges) for i in u.expr.indices), u.expr.dtype)
    return origin, s


def _stage_operand(stage, axis, intrin, u: _Use, t, pairing, axis_of, region, zero, ctx):
    """A local buffer in the intrinsic's layout for operand `t`, and the loops filling it with the
    stage's expression (a padding select, a transposed or non-affine read)."""
    axes_used = []
    for ix in u.indices:
        if not isinstance(ix, IterVar) or id(ix) not in axis_of:
            raise BodyMismatch(f"operand '{t.name}' is not a plain read in the stage (`{u.expr}`) and its index "
                            f"`{ix}` is not one axis of the intrinsic, so it cannot be staged")
        axes_used.append(ix)
    loops_used = {id(axis_of[id(a)]) for a in axes_used}
    paired = {id(v) for v, _ in pairing}
    for n in walk(u.expr):
        if isinstance(n, Var) and id(n) in paired and id(n) not in loops_used:
            raise BodyMismatch(f"operand '{t.name}' (`{u.expr}`) depends on loop '{n.name}', which its indices in "
                            f"the intrinsic do not use")
    local = Buffer(f"{stage.name}_{t.name}_staged", tuple(t.shape), t.dtype, Scope.LOCAL)
    fill_vars = [IterVar(f"{t.name}_s{d}", extent=n) for d, n in enumerate(t.shape)]
    mapping = dict(zero)
    for a, fv in zip(axes_used, fill_vars):
        mapping[axis_of[id(a)]] = fv
    value = substitute(u.expr, mapping)
    fill: Stmt = Store(local, tuple(fill_vars), value)
    for fv, n in reversed(list(zip(fill_vars, t.shape))):
        fill = For(fv, arith.const(0), arith.const(n), ForKind.SERIAL, fill)
    return local, fill


def _guarded(call: Stmt, scalar: Stmt, frame, region_ids, region) -> Stmt:
    """`call` where every guard of an inexact split holds over the whole tile; the scalar
    nest (which checks each point) for partial tiles."""
    inner = [g for g in frame.guards if any(isinstance(n, Var) and id(n) in region_ids for n in walk(g))]
    if not inner:
        return call
    last = {v: arith.const(frame.dom[id(v)] - 1) for v in region}
    whole = None
    for g in inner:
        lin_ok = all(c > 0 for atom, c in to_linear(_lhs(g)).terms.values()
                     if isinstance(atom, Var) and id(atom) in region_ids)
        if not lin_ok:
            raise BodyMismatch(f"the guard `{g}` of an inexact split is not increasing in the tile's loops")
        cond = simplify(substitute(g, last))
        whole = cond if whole is None else arith.binary(BinOp.AND, whole, cond)
    if isinstance(whole, Const):
        return call if whole.value else scalar
    return IfThenElse(whole, call, scalar)


def _lhs(g: Expr) -> Expr:
    return getattr(g, "a", g)


def bind_emitters(func, dialect: str, target):
    """`func` with every intrinsic call given the first emitter of `dialect` whose
    features `target` has; a TilewrightError naming what is missing otherwise."""
    from dataclasses import replace

    from ..errors import TilewrightError
    from ..ir.stmt_functor import map_stmt

    def fs(s: Stmt):
        if not isinstance(s, IntrinCall):
            return None
        em = s.intrin.emitter_for(dialect, target.features)
        if em is None:
            have = ", ".join(sorted(target.features)) or "none"
            raise TilewrightError(f"intrinsic '{s.intrin.name}' needs {s.intrin.needs(dialect)}; the target has "
                                  f"[{have}]: build for a target that has them (tw.Target(features=...) to "
                                  f"compile only) or choose an intrinsic from tw.intrin.registered(target)")
        return replace(s, emitter=em)

    return replace(func, body=map_stmt(func.body, fs))


__all__ = ["bind_emitters", "tensorize_nest"]

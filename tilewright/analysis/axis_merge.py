"""Merging adjacent axes that every access walks contiguously: a layout rewrite.

A 1x1 convolution out[n, o, h, w] = sum x[n, rc, h, w] * w[o, rc] reads its
input and writes its output with (h, w) as adjacent dimensions indexed by the
axes alone, so (h, w) is one axis of extent H*W over the same memory: the
convolution is a matrix product, and its register tiles may run along whole
rows of H*W instead of being cut at every row of W. The rewrite finds such
pairs in a whole program (every producer and consumer must agree), rebuilds
it over the merged axes, and maps each changed argument to its merged tensor
(a view: the same C-contiguous memory with fewer dimensions). Reduce axes of
extent 1 (a 1x1 kernel's rh, rw) are fixed at their only value first.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.expr import Const, Expr, IterVar, Load, Reduce, Var
from ..ir.traverse import loaded_tensors, substitute, transform, walk
from ..lower.simplify import simplify
from ..te.program import as_tensor_list, collect_program
from ..te.tensor import ComputeOp, PlaceholderOp, Tensor


@dataclass(frozen=True)
class MergedProgram:
    outputs: list
    views: dict  # id(original tensor) -> its tensor in the merged program (same memory)
    originals: tuple  # the caller's tensors, kept alive while their ids key `views`


def merge_contiguous_axes(outputs) -> MergedProgram | None:
    """The program with every mergeable pair of adjacent axes merged, or None
    when no pair qualifies (or the program has several outputs)."""
    outputs = as_tensor_list(outputs, "outputs")
    if len(outputs) != 1 or not isinstance(outputs[0].op, ComputeOp):
        return None
    originals = _tensors(outputs)
    now = {id(t): t for t in originals}  # each original tensor's current version
    while True:
        out = now[id(outputs[0])]
        for q in range(out.ndim - 2, -1, -1):
            want = _propagate([out], q)
            if want is not None:
                step = _rewrite([out], want)
                now = {k: step[id(t)] for k, t in now.items()}
                break
        else:
            break
    if all(now[id(t)].shape == t.shape for t in originals):
        return None
    # every rebuilt tensor, merged or not: an intermediate passed as an argument binds through it too
    views = {id(t): now[id(t)] for t in originals if now[id(t)] is not t}
    return MergedProgram([now[id(outputs[0])]], views, tuple(originals))


def _tensors(outputs) -> tuple[Tensor, ...]:
    """Every tensor of the program, producers before consumers."""
    return collect_program(outputs).tensors


def _effective_body(op: ComputeOp) -> Expr:
    """The body with extent-1 reduce axes fixed at their value and load indices simplified."""
    fixed = {a: Const(a.begin, a.dtype) for a in op.reduce_axis if a.extent == 1}
    body = substitute(op.body, fixed) if fixed else op.body
    return transform(body, lambda n: Load(n.tensor, tuple(simplify(i) for i in n.indices), n.dtype)
                     if isinstance(n, Load) and fixed else None)


def _propagate(outputs, q: int) -> dict | None:
    """{id(tensor): first merged dimension} when merging the output's dims (q, q+1)
    is consistent across the whole program; None otherwise."""
    want = {id(outputs[0]): q}
    todo = [outputs[0]]
    while todo:
        t = todo.pop()
        if not isinstance(t.op, ComputeOp):
            continue
        r = want[id(t)]
        a, b = t.op.axis[r], t.op.axis[r + 1]
        body = _effective_body(t.op)
        uses = sum(1 for n in walk(body) if n is a or n is b)
        matched = 0
        for load in (n for n in walk(body) if isinstance(n, Load)):
            hits = [d for d, i in enumerate(load.indices) if any(v is a or v is b for v in walk(i))]
            if not hits:
                continue
            d = hits[0]
            u = load.tensor
            if (hits != [d, d + 1] or load.indices[d] is not a or load.indices[d + 1] is not b
                    or u.shape[d] != a.extent or u.shape[d + 1] != b.extent or want.get(id(u), d) != d):
                return None
            matched += 2
            if id(u) not in want:
                want[id(u)] = d
                todo.append(u)
        if matched != uses:  # the axes are used outside plain load indices (a condition, arithmetic)
            return None
    for t in _tensors(outputs):  # every read of a merged tensor walks the merged pair of its reader
        if not isinstance(t.op, ComputeOp):
            continue
        pair = (t.op.axis[want[id(t)]], t.op.axis[want[id(t)] + 1]) if id(t) in want else None
        for load in (n for n in walk(_effective_body(t.op)) if isinstance(n, Load) and id(n.tensor) in want):
            d = want[id(load.tensor)]
            if pair is None or load.indices[d] is not pair[0] or load.indices[d + 1] is not pair[1]:
                return None
    return want


def _rewrite(outputs, want: dict) -> dict:
    """{id(old tensor): new tensor} with the dims in `want` merged."""
    new: dict[int, Tensor] = {}
    for t in _tensors(outputs):
        r = want.get(id(t))
        shape = t.shape if r is None else (*t.shape[:r], t.shape[r] * t.shape[r + 1], *t.shape[r + 2:])
        if isinstance(t.op, PlaceholderOp):
            op = PlaceholderOp(t.name, shape, t.dtype, t.op.value_range)
            new[id(t)] = t if r is None else Tensor(op, shape, t.dtype)
            continue
        op = t.op
        mapping: dict = {a: IterVar(a.name, a.dtype, begin=a.begin, extent=a.extent, kind=a.kind) for a in op.axis}
        axes = [mapping[a] for a in op.axis]
        if r is not None:
            a, b = op.axis[r], op.axis[r + 1]
            names = {x.name for x in op.axis + op.reduce_axis}
            name = a.name + b.name if a.name + b.name not in names else f"{a.name}{b.name}_m"
            m = IterVar(name, a.dtype, extent=a.extent * b.extent, kind=a.kind)
            mapping[a] = mapping[b] = m
            axes[r:r + 2] = [m]
        kept = [x for x in op.reduce_axis if x.extent > 1] or list(op.reduce_axis)
        reduce_axes = [IterVar(x.name, x.dtype, begin=x.begin, extent=x.extent, kind=x.kind) for x in kept]
        mapping.update(zip(kept, reduce_axes))

        def rebuild(n, mapping=mapping, reduce_axes=tuple(reduce_axes)):
            if isinstance(n, Var):
                return mapping.get(n)
            if isinstance(n, Load) and id(n.tensor) in new:
                u, d = new[id(n.tensor)], want.get(id(n.tensor))
                idx = n.indices if d is None else (*n.indices[:d], n.indices[d], *n.indices[d + 2:])
                return Load(u, tuple(idx), n.dtype)
            if isinstance(n, Reduce):
                return Reduce(n.combiner, n.source, reduce_axes, n.condition, n.dtype, n.origin)
            return None

        body = transform(_effective_body(op), rebuild)
        new_op = ComputeOp(op.name, tuple(axes), tuple(reduce_axes), body, dict(op.attrs),
                           tuple(loaded_tensors(body)))
        new[id(t)] = Tensor(new_op, shape, t.dtype)
    return new

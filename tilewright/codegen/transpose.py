"""Transposing copies for the C backend. A pack that lays a conv's weights out
with the output channels innermost reads them along the input channels and
writes a vector row apart: as two scalar loops, one load and one store per
element. Two serial loops whose copy is contiguous in the destination along one
and in the source along the other are rendered as L x L blocks instead: L
contiguous vector loads, log2(L) rounds of L two-source shuffles (each round
swaps the off-diagonal half-blocks), L contiguous vector stores. Measured on
Zen 4 (ResNet-50's l4_expand, 4 MB of weights packed in every call): the kernel
0.80 -> 0.52 ms, of which the scalar pack had been 0.34 ms.

The IR is unchanged (every pass still sees the plain copy); only its C differs.
The loops step by L and the copy's own index expressions, rendered at the block's
first element, address it, so the blocks read and write exactly the elements
the loops did."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..ir.expr import Const, Expr, Load, Var
from ..ir.stmt import For, ForKind, Store
from ..ir.traverse import free_vars, substitute
from ..lower.simplify import to_linear

MIN_LANES = 4


@dataclass(frozen=True)
class TransposeNest:
    """A transposing copy: `store` (dst[a + dst_stride * b] = src[src_stride * a + b], plus offsets)
    under `loops`; `a` is the first loop (the destination contiguous along it), `b` the others,
    which run through the source contiguously as one loop of `b_extent` (a 3x3 conv's weights:
    input channel, row and column); `lanes` the block edge. Or the same with the roles of the
    source and the destination exchanged (`a_is_dst` False)."""

    loops: tuple[For, ...]
    store: Store
    a_is_dst: bool
    dst_stride: int
    src_stride: int
    b_extent: int
    lanes: int

    def base(self, index: Expr) -> Expr:
        """`index` at the first iteration of every loop."""
        return substitute(index, {lp.var: Const(0, lp.var.dtype) for lp in self.loops})


MAX_LOOPS = 6


def transpose_nest(s: For, max_lanes: int) -> TransposeNest | None:
    """The nest `s` as a transposing copy in blocks of up to `max_lanes`, or None."""
    if max_lanes < MIN_LANES or not _plain(s, ForKind.PARALLEL):
        return None
    loops, body = [s], s.body
    while isinstance(body, For) and len(loops) < MAX_LOOPS:
        if not _plain(body):
            return None
        loops.append(body)
        body = body.body
    store = body
    if len(loops) < 2 or not (isinstance(store, Store) and isinstance(store.value, Load) and len(store.indices) == 1
                              and len(store.value.indices) == 1 and store.value.tensor is not store.buffer):
        return None
    d = store.value.dtype
    if d.lanes != 1 or d.bits != 32 or store.buffer.dtype != d:
        return None
    loop_vars = tuple(lp.var for lp in loops)
    cd, cs = _coefficients(store.indices[0], loop_vars), _coefficients(store.value.indices[0], loop_vars)
    if cd is None or cs is None:
        return None
    extents = [int(lp.extent.value) for lp in loops]
    for a_is_dst, (ca, cb) in ((True, (cd, cs)), (False, (cs, cd))):
        # the first loop contiguous in one side, the rest one contiguous run of the other
        if ca[0] != 1 or cb[-1] != 1 or not _one_run(ca[1:], cb[1:], extents[1:]):
            continue
        b_extent = math.prod(extents[1:])
        lanes = max_lanes
        while lanes >= MIN_LANES and (extents[0] % lanes or b_extent % lanes):
            lanes //= 2
        stride_b, stride_a = ca[-1], cb[0]  # a's side along b; b's side along a
        if lanes >= MIN_LANES and min(stride_a, stride_b) >= lanes:
            dst_stride, src_stride = (stride_b, stride_a) if a_is_dst else (stride_a, stride_b)
            return TransposeNest(tuple(loops), store, a_is_dst, dst_stride, src_stride, b_extent, lanes)
    return None


def _one_run(c1: tuple[int, ...], c2: tuple[int, ...], extents: list[int]) -> bool:
    """Whether loops with coefficients c1, c2 (in two indices) and `extents` step both indices
    uniformly, as one loop over their product: each coefficient is the next one's times its extent."""
    return all(c[k] == extents[k + 1] * c[k + 1] for c in (c1, c2) for k in range(len(extents) - 1))


def _plain(s: For, *kinds: ForKind) -> bool:
    """A serial loop (or one of `kinds`: a root pack's parallel loop) from 0 over a constant extent."""
    return (s.kind in (ForKind.SERIAL, ForKind.UNROLLED, *kinds) and isinstance(s.begin, Const)
            and s.begin.value == 0 and isinstance(s.extent, Const))


def _coefficients(index: Expr, loop_vars: tuple[Var, ...]) -> tuple[int, ...] | None:
    """Each loop variable's coefficient in `index`, or None where one appears outside a linear term."""
    coef = {id(v): 0 for v in loop_vars}
    for atom, c in to_linear(index).terms.values():
        if isinstance(atom, Var) and id(atom) in coef:
            coef[id(atom)] = c
        elif any(id(v) in coef for v in free_vars(atom)):
            return None
    return tuple(coef[id(v)] for v in loop_vars)


def transpose_helper(lanes: int, vector_t: str, mask_t: str, scalar_t: str) -> tuple[str, str]:
    """(name, C definition) of `name(dst, ds, src, ss)`: dst[i + ds * j] = src[ss * i + j] for
    i, j < lanes. Round h (h = lanes/2, ..., 1) pairs rows i and i + h (bit h of i clear): the
    first keeps its lanes with bit h clear and takes the partner's lanes below them, the second
    takes the first's lanes above and keeps its own."""
    name = f"tw_transpose_{vector_t[3:]}"
    lines = [f"static inline void {name}({scalar_t} *restrict dst, int64_t ds, const {scalar_t} *restrict src, "
             f"int64_t ss) {{",
             f"  {vector_t} r0[{lanes}], r1[{lanes}];",
             f"  for (int i = 0; i < {lanes}; ++i) r0[i] = *(const {vector_t} *)(src + ss * i);"]
    cur, nxt = "r0", "r1"
    h = lanes // 2
    while h:
        low = [c if not c & h else lanes + c - h for c in range(lanes)]
        high = [c + h if not c & h else lanes + c for c in range(lanes)]
        lines.append(f"  for (int i = 0; i < {lanes}; ++i) if (!(i & {h})) {{")
        lines.append(f"    {nxt}[i] = TW_SHUFFLE({cur}[i], {cur}[i + {h}], {mask_t}, {', '.join(map(str, low))});")
        lines.append(f"    {nxt}[i + {h}] = TW_SHUFFLE({cur}[i], {cur}[i + {h}], {mask_t}, "
                     f"{', '.join(map(str, high))});")
        lines.append("  }")
        cur, nxt = nxt, cur
        h //= 2
    lines.append(f"  for (int i = 0; i < {lanes}; ++i) *({vector_t} *)(dst + ds * i) = {cur}[i];")
    lines.append("}")
    return name, "\n".join(lines)


__all__ = ["TransposeNest", "transpose_helper", "transpose_nest"]

"""Relations between a stage's loop variables (the TVM paper's Figure 10):
a split makes two loops of one, a fuse one of two. Every loop value of the
original ("root") axes is recovered from the leaf loops by walking them."""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import arith
from ..ir.expr import BinOp, CmpOp, Expr, IterVar


@dataclass(frozen=True, eq=False)
class Split:
    """parent = outer * factor + inner (0-based offsets); needs a guard when
    factor does not divide the parent's extent."""

    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: int
    nparts: int | None = None  # split by nparts: the outer loop has exactly nparts iterations
    # the inner loop is bound to a GPU thread index: it keeps its declared extent (the launch
    # dimension) in a smaller region, guarded, instead of shrinking to the region
    keep_inner: bool = False

    @property
    def exact(self) -> bool:
        return self.parent.extent % self.factor == 0


@dataclass(frozen=True, eq=False)
class Fuse:
    """outer = fused // inner.extent, inner = fused % inner.extent."""

    outer: IterVar
    inner: IterVar
    fused: IterVar


def pass_down(roots: list[IterVar], relations: list, root_extents: dict[int, int]) -> dict[int, int]:
    """Extent of every loop given the roots' extents (which shrink when a stage
    is computed at another's loop)."""
    dom = dict(root_extents)
    for rel in relations:
        if isinstance(rel, Split):
            parent = dom[id(rel.parent)]
            if rel.keep_inner:
                dom[id(rel.inner)] = rel.inner.extent
                dom[id(rel.outer)] = rel.nparts or -(-parent // rel.inner.extent)
            elif rel.nparts is not None:
                inner = -(-parent // rel.nparts)
                dom[id(rel.inner)] = inner
                dom[id(rel.outer)] = rel.nparts
            else:
                inner = min(rel.factor, parent)
                dom[id(rel.inner)] = inner
                dom[id(rel.outer)] = -(-parent // inner)
        else:
            dom[id(rel.fused)] = dom[id(rel.outer)] * dom[id(rel.inner)]
    return dom


def root_values(roots: list[IterVar], relations: list, leaf_values: dict[int, Expr],
                dom: dict[int, int]) -> tuple[dict[int, Expr], list[Expr]]:
    """Express every axis (roots included) through `leaf_values` (leaf id -> Expr).

    Returns (values by axis id, guards): the guards are the conditions under
    which the leaf point lies inside the iteration space, one per split whose
    factor does not divide its parent's extent in `dom` (see pass_down).
    Root values are 0-based offsets plus the axis' begin."""
    values: dict[int, Expr] = dict(leaf_values)
    guards: list[Expr] = []
    for rel in reversed(relations):
        if isinstance(rel, Split):
            outer, inner = values[id(rel.outer)], values[id(rel.inner)]
            inner_extent = dom[id(rel.inner)]
            offset = arith.binary(BinOp.ADD, arith.binary(BinOp.MUL, outer, arith.const(inner_extent)), inner)
            values[id(rel.parent)] = offset
            if dom[id(rel.outer)] * inner_extent != dom[id(rel.parent)]:
                guards.append(arith.compare(CmpOp.LT, offset, arith.const(dom[id(rel.parent)])))  # int64 if it must
        else:
            fused = values[id(rel.fused)]
            inner_extent = dom[id(rel.inner)]
            values[id(rel.outer)] = arith.binary(BinOp.FLOORDIV, fused, arith.const(inner_extent))
            values[id(rel.inner)] = arith.binary(BinOp.FLOORMOD, fused, arith.const(inner_extent))
    for root in roots:
        if root.begin and id(root) in values:
            values[id(root)] = arith.binary(BinOp.ADD, values[id(root)], root.begin)
    return values, guards

"""The parametrized hyper-rectangle of an embedding and what it costs.

An intrinsic axis is laid over the operator's instance space by a *plan*: an
ordered list of digits, each one operator axis (or a fused group of
reduction axes, the Fuse rewrite) with an extent and a stride; the digit
extents multiply to the intrinsic axis' extent, the last digit runs fastest.
A digit whose extent times stride does not divide its axis pads it; a stride
above 1 packs strips of an image axis into lanes (Image pack). Only operator
axes read by the same operands as the intrinsic axis are candidates (the
dataflow-edge propagation, done once before the search).

`operand_elements` and `macs` are the exact element and multiply-accumulate
counts after the rewrites a choice of plans implies (Table 2: Stencil unroll,
Image pack, Pad, Split, Reorder, Fuse): the terms of the selection rule."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from .affine_form import Access, AffineForm


@dataclass(frozen=True)
class Digit:
    axes: tuple[int, ...]  # one operator axis, or a fused group of reduction axes (outer to inner)
    extent: int
    stride: int = 1

    def real(self, op: AffineForm) -> int:
        return math.prod(op.axes[d].extent for d in self.axes)

    def covered(self, op: AffineForm) -> int:
        """The (padded) extent of the digit's axes once tiled by extent x stride."""
        block = self.extent * self.stride
        return -(-self.real(op) // block) * block

    @property
    def fused(self) -> bool:
        return len(self.axes) > 1


@dataclass(frozen=True)
class Plan:
    digits: tuple[Digit, ...]  # outer to inner

    @property
    def dims(self) -> tuple[int, ...]:
        return tuple(d for dg in self.digits for d in dg.axes)

    def coords(self, v: int, op: AffineForm) -> dict[int, int]:
        """Operator coordinates of the plan's v-th point (a padded point lies past the axis end)."""
        out = {}
        for dg in reversed(self.digits):
            v, r = divmod(v, dg.extent)
            q = r * dg.stride
            for d in reversed(dg.axes[1:]):  # a fused group: unravel, the outermost axis unbounded
                q, out[d] = divmod(q, op.axes[d].extent)
            out[dg.axes[0]] = q
        return out

    def covered(self, op: AffineForm) -> int:
        return math.prod(dg.covered(op) for dg in self.digits)


def stencil_dims(acc: Access, op: AffineForm) -> list[tuple[int, list[int], list[int]]]:
    """(tensor dim, spatial axes, reduce axes) of every index mixing both (h * s + kh)."""
    out = []
    for j, row in enumerate(acc.matrix):
        sp = [k for k, c in enumerate(row) if c and not op.axes[k].reduce]
        rd = [k for k, c in enumerate(row) if c and op.axes[k].reduce]
        if sp and rd:
            out.append((j, sp, rd))
    return out


def _windows_overlap(acc: Access, op: AffineForm, j: int, sp: list[int], rd: list[int]) -> bool:
    row = acc.matrix[j]
    reach = sum(abs(row[k]) * (op.axes[k].extent - 1) for k in rd) + 1
    return any(abs(row[k]) < reach for k in sp)


def unroll_cause(plan: Plan, acc: Access, op: AffineForm, j: int, sp: list[int], rd: list[int]) -> bool:
    """Whether this plan cuts stencil dimension j so that its data must be unrolled (im2col): a digit on its
    reduction axes with overlapping windows or a fused group, or dense lanes across its image axis while the
    window still slides over it."""
    for dg in plan.digits:
        if any(d in rd for d in dg.axes) and (dg.fused or _windows_overlap(acc, op, j, sp, rd)):
            return True
        if dg.axes[0] in sp and dg.stride == 1 and any(op.axes[r].extent > 1 for r in rd):
            return True
    return False


def _pattern(form: AffineForm, reads, a: int) -> tuple:
    return (form.axes[a].reduce, tuple(acc.uses(a) for acc in reads), form.write.uses(a))


def compatible_axes(op: AffineForm, intr: AffineForm, pairing: list[int], a: int) -> list[int]:
    """Operator axes that can carry intrinsic axis a: same kind, read by exactly the corresponding operands."""
    want = _pattern(intr, intr.reads, a)
    reads = [op.reads[k] for k in pairing]
    return [d for d in range(len(op.axes)) if _pattern(op, reads, d) == want]


def _divisors(n: int) -> list[int]:
    return [d for d in range(2, n + 1) if n % d == 0]


def _factorizations(n: int, parts: int) -> list[tuple[int, ...]]:
    if parts == 1:
        return [(n,)] if n >= 2 else []
    return [(d, *rest) for d in _divisors(n) for rest in _factorizations(n // d, parts - 1)]


def plans_for(op: AffineForm, intr: AffineForm, pairing: list[int], a: int, *, pad: bool, dense: bool,
              unroll: bool) -> list[Plan]:
    ext = intr.axes[a].extent
    if ext == 1:
        return [Plan(())]
    dims = compatible_axes(op, intr, pairing, a)
    image = {d for k in set(pairing) for _, sp, _ in stencil_dims(op.reads[k], op) for d in sp}
    out = []
    for r in range(1, min(len(dims), int(math.log2(ext))) + 1):
        for subset in itertools.combinations(dims, r):
            for factors in _factorizations(ext, r):
                choices = []
                for d, f in zip(subset, factors):
                    n = op.axes[d].extent
                    strides = {1}
                    if not dense and d in image and -(-n // f) > 1:
                        strides.add(-(-n // f))  # strips of ceil(n / f) packed into f lanes
                    choices.append([Digit((d,), f, s) for s in sorted(strides)])
                out.extend(Plan(tuple(c)) for c in itertools.product(*choices))
    if unroll and intr.axes[a].reduce:  # Fuse: one digit over a group of reduction axes (im2col's K)
        real = [d for d in dims if op.axes[d].extent > 1]  # a unit axis adds nothing to a group
        for r in range(2, len(real) + 1):
            out.extend(Plan((Digit(g, ext),)) for g in itertools.combinations(real, r))
    return [p for p in out if pad or all(dg.covered(op) == dg.real(op) for dg in p.digits)]


def _single(plans, op: AffineForm) -> tuple[dict[int, Digit], list[Digit]]:
    single, fused = {}, []
    for p in plans:
        for dg in p.digits:
            if dg.fused:
                fused.append(dg)
            else:
                single[dg.axes[0]] = dg
    return single, fused


def macs(op: AffineForm, plans) -> int:
    single, fused = _single(plans, op)
    used = {d for dg in fused for d in dg.axes}
    n = math.prod(dg.covered(op) for dg in fused)
    for d, ax in enumerate(op.axes):
        if d in single:
            n *= single[d].covered(op)
        elif d not in used:
            n *= ax.extent
    return n


def unrolled_dims(acc: Access, op: AffineForm, plans) -> set[int]:
    return {j for j, sp, rd in stencil_dims(acc, op) if any(unroll_cause(p, acc, op, j, sp, rd) for p in plans)}


def operand_elements(acc: Access, op: AffineForm, plans) -> int:
    """Elements of the operand in the layout the plans imply: unrolled stencil dimensions become one axis per
    operator axis, a fused group one axis of its padded extent, packed strips carry their halo."""
    single, fused = _single(plans, op)
    unrolled = unrolled_dims(acc, op, plans)
    ext = lambda d: single[d].covered(op) if d in single else op.axes[d].extent  # noqa: E731
    units: list[int] = []
    alone: set[int] = set()
    for j, row in enumerate(acc.matrix):
        dims = [d for d, c in enumerate(row) if c]
        if j in unrolled or len(dims) == 1:
            alone.update(dims)
            continue
        lanes, span = 1, 1
        for d in dims:
            dg = single.get(d)
            if dg is not None and dg.stride > 1:
                lanes *= dg.extent
                span += abs(row[d]) * (dg.stride - 1)
            else:
                span += abs(row[d]) * (ext(d) - 1)
        units.append(lanes * span)
    for dg in fused:
        inside = [d for d in dg.axes if d in alone]
        if inside:
            alone.difference_update(inside)
            units.append(dg.covered(op))
    units.extend(ext(d) for d in alone)
    return math.prod(units)


__all__ = ["Digit", "Plan", "compatible_axes", "macs", "operand_elements", "plans_for", "stencil_dims",
           "unroll_cause", "unrolled_dims"]

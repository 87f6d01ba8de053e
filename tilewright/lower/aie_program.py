"""The program the Vyasa passes produce for the AI-Engine-like core (lower/vyasa.py): one
software-pipelined inner-loop body of vector loads, MACs and stores with their shuffle-network
selections, the loop nest around it, and the layouts its operands are read in."""

from __future__ import annotations

import functools
from dataclasses import dataclass


@dataclass(frozen=True)
class LayoutSpec:
    """How a tensor is laid out in the core's memory (Vyasa's data-layout knob): its dimensions in
    `order` (outermost first), then the inner blocks `inner` ((dim, size): the dimension split, its
    block index innermost, in that order). (K/16)SR(C/2)(16)(2) of a [K, C, S, R] weight is
    order (0, 2, 3, 1), inner ((0, 16), (1, 2))."""

    order: tuple[int, ...]
    inner: tuple[tuple[int, int], ...] = ()

    @staticmethod
    def natural(ndim: int) -> LayoutSpec:
        return LayoutSpec(tuple(range(ndim)))

    def describe(self, names) -> str:
        blocks = dict(self.inner)
        outer = "".join(names[d] if d not in blocks else f"({names[d]}/{blocks[d]})" for d in self.order)
        return outer + "".join(f"({b})" for _, b in self.inner)


@dataclass(frozen=True)
class VyasaSchedule:
    """A point of Vyasa's space: the vector loop, the spatial loop order (outermost first; the last
    loop is the software-pipelined one), unroll-and-jam factors (for the vector axis: vectors per
    iteration), the layouts of the two operands (in the te's read order; None: as written), whether
    an odd filter axis is padded with a zero tap, and the three passes' switches."""

    vector_axis: str
    order: tuple[str, ...]
    jam: tuple[tuple[str, int], ...] = ()
    layouts: tuple = (None, None)
    pad_taps: bool = True
    reuse_graph: bool = True
    lazy_stores: bool = True
    fuse_columns: bool = True

    def factor(self, axis: str) -> int:
        return dict(self.jam).get(axis, 1)

    @staticmethod
    def from_json(d: dict) -> VyasaSchedule:
        lay = tuple(None if x is None else LayoutSpec(tuple(x["order"]), tuple(map(tuple, x["inner"])))
                    for x in d.get("layouts", (None, None)))
        return VyasaSchedule(**{**d, "order": tuple(d["order"]), "jam": tuple(map(tuple, d["jam"])), "layouts": lay})

    def __str__(self) -> str:
        jam = ",".join(f"{a}={f}" for a, f in self.jam if f > 1) or "none"
        off = [n for n, on in (("reuse", self.reuse_graph), ("lazy", self.lazy_stores),
                               ("fuse", self.fuse_columns)) if not on]
        lay = [f"{'ab'[k]}:{spec.describe([str(i) for i in range(9)])}" for k, spec in enumerate(self.layouts)
               if spec is not None and (spec.inner or spec.order != tuple(sorted(spec.order)))]
        return (f"vector {self.vector_axis}, order {''.join(self.order)}, jam {jam}"
                + (f", layouts {' '.join(lay)}" if lay else "") + ("" if self.pad_taps else ", no tap padding")
                + (f", without {'/'.join(off)}" if off else ""))


@dataclass(frozen=True)
class Layout:
    """A tensor realized in a layout: each dimension padded with zeros to `padded` (a multiple of its
    block), parts (outer / inner of each dimension) in the spec's order with `extents`, in a buffer
    of `size` elements (whole 256-bit words)."""

    shape: tuple[int, ...]
    spec: LayoutSpec
    padded: tuple[int, ...]
    extents: tuple[int, ...]  # per part
    size: int

    @property
    def parts(self) -> tuple[tuple[int, int], ...]:
        """(dim, block) per part; block 0 marks an outer part (index // block), else an inner one (% block)."""
        return tuple((d, 0) for d in self.spec.order) + tuple(self.spec.inner)

    @functools.cached_property
    def strides(self) -> tuple[int, ...]:
        out, s = [], 1
        for e in reversed(self.extents):
            out.append(s)
            s *= e
        return tuple(reversed(out))

    def offset(self, idx):
        """Element offset of te index `idx` (ints, or NumPy index arrays)."""
        blocks = dict(self.spec.inner)
        total = 0
        for (d, b), stride in zip(self.parts, self.strides):
            total = total + stride * (idx[d] // blocks.get(d, 1) if b == 0 else idx[d] % b)
        return total


@dataclass(frozen=True)
class Load:
    reg: str
    tensor: str  # "x" (the vector operand), "z" (the broadcast one) or "o" (a partial output)
    offset: int  # elements past the tensor's pointer of this iteration
    part: int  # which 256-bit part of the register it fills


@dataclass(frozen=True)
class Mac:
    acc: str
    first: bool
    xreg: str
    xsel: object
    zreg: str
    zsel: object
    taps: int  # 1-D MACs fused into it (padding included)
    x: tuple = ()  # per lane, per column: the x element read (offset past the iteration's pointer)
    z: tuple = ()  # per column: the z element read
    zero: tuple = ()  # per column: a padding tap (its weight is zero; its x element may be any)


@dataclass(frozen=True)
class Store:
    acc: str
    offset: int


@dataclass(frozen=True)
class AIEProgram:
    form: object  # the ConvForm it computes
    schedule: VyasaSchedule
    bits: int
    lanes: int
    columns: int
    loops: tuple[tuple[str, int, int], ...]  # (axis, extent, step), outermost first
    pointers: dict  # "x" / "z" / "o" -> {axis: elements per unit of the axis}
    layouts: dict  # "x" / "z" / "o" -> Layout
    roles: tuple[str, str]  # the form's two operands as "x" (vector) / "z" (broadcast)
    registers: dict  # name -> bits of its type
    body: tuple  # Load / Mac / Store in issue order
    runnable: bool  # False for the ablation's programs without lazy stores or fusion: timed only

    def count(self, kind) -> int:
        return sum(isinstance(op, kind) for op in self.body)

    @property
    def trips(self) -> int:
        n = 1
        for _, e, s in self.loops:
            n *= e // s
        return n


__all__ = ["AIEProgram", "Layout", "LayoutSpec", "Load", "Mac", "Store", "VyasaSchedule"]

"""The program the Vyasa passes produce for the AI-Engine-like core (lower/vyasa.py): one
software-pipelined inner-loop body of vector loads, MACs and stores with their shuffle-network
selections, the loop nest around it, and the layouts its operands are read in."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VyasaSchedule:
    """A point of Vyasa's space: the vector loop, the spatial loop order (outermost first; the last
    loop is the software-pipelined one), unroll-and-jam factors (for the vector axis: vectors per
    iteration) and the three passes' switches."""

    vector_axis: str
    order: tuple[str, ...]
    jam: tuple[tuple[str, int], ...] = ()
    reuse_graph: bool = True
    lazy_stores: bool = True
    fuse_columns: bool = True

    def factor(self, axis: str) -> int:
        return dict(self.jam).get(axis, 1)

    def __str__(self) -> str:
        jam = ",".join(f"{a}={f}" for a, f in self.jam if f > 1) or "none"
        off = [n for n, on in (("reuse", self.reuse_graph), ("lazy", self.lazy_stores),
                               ("fuse", self.fuse_columns)) if not on]
        return (f"vector {self.vector_axis}, order {''.join(self.order)}, jam {jam}"
                + (f", without {'/'.join(off)}" if off else ""))


@dataclass(frozen=True)
class Layout:
    """A tensor as the kernel reads it: its shape padded with zeros (a streamed operand's rows to a
    whole number of 256-bit words), in a buffer of `size` elements (whole 256-bit words)."""

    shape: tuple[int, ...]
    padded: tuple[int, ...]
    size: int

    @property
    def strides(self) -> tuple[int, ...]:
        out, s = [], 1
        for e in reversed(self.padded):
            out.append(s)
            s *= e
        return tuple(reversed(out))


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


__all__ = ["AIEProgram", "Layout", "Load", "Mac", "Store", "VyasaSchedule"]

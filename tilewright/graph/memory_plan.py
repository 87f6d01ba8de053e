"""The static memory plan (TVM section 2): every intermediate activation gets an
offset in one arena; two whose lifetimes (the span of groups from the one that
writes it to the last that reads it) do not overlap may share bytes. Placement
is greedy by size: the largest buffers first, each at the lowest 64-byte
aligned offset that clashes with no placed buffer live at the same time.
Views (groups of reshapes) alias their input and extend its lifetime; graph
inputs, outputs and constants live outside the arena."""

from __future__ import annotations

from dataclasses import dataclass

from .partition import Partition

ALIGN = 64


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


@dataclass(frozen=True)
class Interval:
    value: str
    nbytes: int
    first: int  # index of the group that writes it
    last: int  # index of the last group that reads it
    offset: int = -1

    def overlaps_in_time(self, other: Interval) -> bool:
        return self.first <= other.last and other.first <= self.last


@dataclass(frozen=True)
class MemoryPlan:
    """`buffers`: arena values with their offsets; `aliases`: a view's value -> the
    value whose memory it is (followed to the root); `external`: values outside the
    arena (graph inputs, outputs, constants)."""
    buffers: dict[str, Interval]
    aliases: dict[str, str]
    external: frozenset[str]
    peak_bytes: int
    naive_bytes: int

    def root(self, value: str) -> str:
        return self.aliases.get(value, value)

    def offset(self, value: str) -> int | None:
        """Byte offset of `value` (or of what it aliases) in the arena; None outside it."""
        b = self.buffers.get(self.root(value))
        return None if b is None else b.offset

    def __str__(self) -> str:
        saved = 1 - self.peak_bytes / self.naive_bytes if self.naive_bytes else 0.0
        return (f"memory plan: {len(self.buffers)} arena buffers, {len(self.aliases)} views, peak "
                f"{self.peak_bytes / 1024:.1f} KiB (without reuse {self.naive_bytes / 1024:.1f} KiB, "
                f"{saved:.0%} saved)")


def plan_memory(partition: Partition) -> MemoryPlan:
    graph = partition.graph
    external = set(graph.inputs) | set(graph.outputs) | set(graph.constants)
    aliases: dict[str, str] = {}
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    end = len(partition.groups)
    for i, g in enumerate(partition.groups):
        for v in g.inputs:
            r = aliases.get(v, v)
            last[r] = max(last.get(r, i), i)
        if g.is_view:
            root = aliases.get(g.inputs[0], g.inputs[0])
            for v in g.outputs:  # a view that is also a graph output is copied out of its root at the end
                aliases[v] = root
            continue
        for v in g.outputs:
            first[v] = i
    for v in graph.outputs:
        r = aliases.get(v, v)
        last[r] = end
    intervals = [Interval(v, _aligned(graph.type_of(v).nbytes), i, max(last.get(v, i), i))
                 for v, i in first.items() if v not in external]
    placed: list[Interval] = []
    for iv in sorted(intervals, key=lambda b: (-b.nbytes, b.first, b.value)):
        clashes = sorted((p for p in placed if p.overlaps_in_time(iv)), key=lambda p: p.offset)
        offset = 0
        for p in clashes:
            if offset + iv.nbytes <= p.offset:
                break
            offset = max(offset, p.offset + p.nbytes)
        placed.append(Interval(iv.value, iv.nbytes, iv.first, iv.last, offset))
    buffers = {p.value: p for p in sorted(placed, key=lambda p: (p.first, p.value))}
    peak = max((p.offset + p.nbytes for p in placed), default=0)
    return MemoryPlan(buffers, aliases, frozenset(external), peak, sum(p.nbytes for p in placed))

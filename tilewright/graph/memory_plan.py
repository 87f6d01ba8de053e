"""The static memory plan (TVM section 2): every intermediate activation gets an
offset in one arena; two whose lifetimes (the span of groups from the one that
writes it to the last that reads it) do not overlap may share bytes. Placement
is greedy: buffers in some order, each at the lowest 64-byte aligned offset
that clashes with no placed buffer live at the same time; several orders are
tried and the smallest peak kept.
Views (groups of reshapes, contiguous slices: `views.py`) alias their input at
a byte offset and extend its lifetime; the parts of a concat written in place
alias its output, which lives from its first part's writer. A kernel's large
temporaries (its workspace, lower/workspace.py) are arena buffers live only
while it runs. Graph inputs, outputs and constants live outside the arena."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from ..runtime.aligned import ALIGN
from .partition import Partition
from .views import concat_offsets, slice_offset


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
    value whose memory it is (followed to the root), `view_offsets`: where in the root
    it starts, in bytes (absent: 0); `external`: values outside the arena (graph inputs,
    outputs, constants)."""
    buffers: dict[str, Interval]
    aliases: dict[str, str]
    external: frozenset[str]
    peak_bytes: int
    naive_bytes: int
    view_offsets: dict[str, int] = field(default_factory=dict)

    def root(self, value: str) -> str:
        return self.aliases.get(value, value)

    def view_offset(self, value: str) -> int:
        """Byte offset of `value` inside its root (0 for a root or a reshape)."""
        return self.view_offsets.get(value, 0)

    def offset(self, value: str) -> int | None:
        """Byte offset of `value` in the arena; None outside it."""
        b = self.buffers.get(self.root(value))
        return None if b is None else b.offset + self.view_offset(value)

    def __str__(self) -> str:
        saved = 1 - self.peak_bytes / self.naive_bytes if self.naive_bytes else 0.0
        return (f"memory plan: {len(self.buffers)} arena buffers, {len(self.aliases)} views, peak "
                f"{self.peak_bytes / 1024:.1f} KiB (without reuse {self.naive_bytes / 1024:.1f} KiB, "
                f"{saved:.0%} saved)")


def _view_parents(partition: Partition) -> dict[str, tuple[str, int]]:
    """Each value a view group makes: the value whose memory it lies in, at what byte offset.
    A concat written in place is the other way round: its parts lie in its output."""
    graph = partition.graph
    parent: dict[str, tuple[str, int]] = {}
    for g in partition.groups:
        if not g.is_view:
            continue
        node = g.nodes[0]
        if g.view and node.op == "concat":
            for v, offset in zip(node.inputs, concat_offsets(graph, node)):
                parent[v] = (node.outputs[0], offset)
        elif g.view:
            parent[node.outputs[0]] = (node.inputs[0], slice_offset(graph, node))
        else:
            for v in g.outputs:  # a view that is also a graph output is copied out of its root at the end
                parent[v] = (g.inputs[0], 0)
    return parent


def _intervals(partition: Partition) -> tuple[list[Interval], dict[str, str], dict[str, int], set[str]]:
    """The arena buffers' lifetimes (unplaced), each view's root and byte offset in it, and
    the values outside the arena."""
    graph = partition.graph
    external = set(graph.inputs) | set(graph.outputs) | set(graph.constants)
    parent = _view_parents(partition)
    aliases: dict[str, str] = {}
    offsets: dict[str, int] = {}
    for v in parent:
        root, offset = v, 0
        while root in parent:
            root, step = parent[root]
            offset += step
        aliases[v], offsets[v] = root, offset
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    end = len(partition.groups)
    for i, g in enumerate(partition.groups):
        for v in g.inputs:
            r = aliases.get(v, v)
            last[r] = max(last.get(r, i), i)
        if not g.is_view:
            for v in g.outputs:
                r = aliases.get(v, v)
                first[r] = min(first.get(r, i), i)
    for v in graph.outputs:
        last[aliases.get(v, v)] = end
    intervals = [Interval(v, _aligned(graph.type_of(v).nbytes), i, max(last.get(v, i), i))
                 for v, i in first.items() if v not in external]
    return intervals, aliases, offsets, external


def plan_memory(partition: Partition, workspaces: dict[str, tuple[int, int]] | None = None) -> MemoryPlan:
    """`workspaces`: more arena buffers, name -> (index of a group in `partition.groups`, bytes),
    live only while that group runs: a kernel's temporaries (lower/workspace.py)."""
    intervals, aliases, offsets, external = _intervals(partition)
    intervals += [Interval(w, _aligned(n), i, i) for w, (i, n) in (workspaces or {}).items()]
    placed = _best_placement(intervals)
    buffers = {p.value: p for p in sorted(placed, key=lambda p: (p.first, p.value))}
    return MemoryPlan(buffers, aliases, frozenset(external), _peak(placed), sum(p.nbytes for p in placed),
                      {v: o for v, o in offsets.items() if o})


def live_bound(partition: Partition) -> tuple[int, tuple[str, ...]]:
    """The most arena bytes live at one step (no plan's peak is below it) and the values
    live at that step (the first such step)."""
    intervals = _intervals(partition)[0]
    live = _live_bytes(intervals)
    if not live:
        return 0, ()
    step = live.index(max(live))
    return live[step], tuple(iv.value for iv in intervals if iv.first <= step <= iv.last)


def _live_bytes(intervals: list[Interval]) -> list[int]:
    live = [0] * (max((iv.last for iv in intervals), default=-1) + 1)
    for iv in intervals:
        for i in range(iv.first, iv.last + 1):
            live[i] += iv.nbytes
    return live


# Orders in which buffers are placed first; each gives a valid plan, the smallest peak wins.
# Largest first packs big buffers tightly; by time (then size) follows the program.
_ORDERS = (
    lambda b: (-b.nbytes, b.first, b.value),
    lambda b: (b.first, -b.nbytes, b.value),
    lambda b: (-(b.last - b.first), -b.nbytes, b.value),
    lambda b: (-b.nbytes * (b.last - b.first + 1), b.value),
)


RANDOM_ORDERS = 1024  # seeded shuffles tried after _ORDERS while the peak is above its bound
STALL_ORDERS = 256  # ... and while one of the last this many improved on the best


def _best_placement(intervals: list[Interval]) -> list[Interval]:
    """The placement of smallest peak over `_ORDERS`, then seeded random orders, stopping
    at the bound no placement can beat (the most bytes live at one step) or after
    STALL_ORDERS shuffles without a gain; an order is dropped as soon as it reaches the
    best peak so far. ResNet-50's Winograd plan: largest-first 8.6 MiB, the best heuristic
    order 7.8, bound 6.9, reached by a shuffle. Deterministic: the same graph, the same plan."""
    bound = max(_live_bytes(intervals), default=0)
    clashes = {iv.value: [o for o in intervals if o is not iv and o.overlaps_in_time(iv)] for iv in intervals}
    best = _place(intervals, _ORDERS[0], clashes, None)
    best_peak = _peak(best)
    rng, stalled = random.Random(0), 0
    for n in range(1, len(_ORDERS) + RANDOM_ORDERS):
        if best_peak <= bound or stalled >= STALL_ORDERS:
            break
        if n < len(_ORDERS):
            order = _ORDERS[n]
        else:
            keys = {iv.value: rng.random() for iv in intervals}
            order = lambda b, keys=keys: keys[b.value]  # noqa: E731
        placed = _place(intervals, order, clashes, best_peak)  # None unless below best_peak
        if placed is None:
            stalled += n >= len(_ORDERS)
        else:
            best, best_peak, stalled = placed, _peak(placed), 0
    return best


def _peak(placed: list[Interval]) -> int:
    return max((p.offset + p.nbytes for p in placed), default=0)


def _place(intervals: list[Interval], order, clashes: dict, limit: int | None) -> list[Interval] | None:
    """Each buffer, in `order`, at the lowest offset that clashes with no placed buffer
    live at the same time (`clashes`: the intervals each one overlaps in time); None as
    soon as the peak would reach `limit`."""
    offsets: dict[str, int] = {}
    placed: list[Interval] = []
    for iv in sorted(intervals, key=order):
        offset = 0
        for o, size in sorted((offsets[c.value], c.nbytes) for c in clashes[iv.value] if c.value in offsets):
            if offset + iv.nbytes <= o:
                break
            offset = max(offset, o + size)
        if limit is not None and offset + iv.nbytes >= limit:
            return None
        offsets[iv.value] = offset
        placed.append(Interval(iv.value, iv.nbytes, iv.first, iv.last, offset))
    return placed

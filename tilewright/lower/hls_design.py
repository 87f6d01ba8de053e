"""An FPGA design of an `HLSForm` (FlexTensor Fig. 4c): a read / compute / write pipeline over rounds.

A round is one tile of every axis: the read stage fetches each operand's box for the tile from
DDR (zeros outside the input) and streams it to the compute stage in beats of `beat` elements;
the compute stage unpacks the beats into on-chip buffers, then runs the tile's loop nest
pipelined, its innermost `unroll` iterations of every axis at once (the PE array: spatial unrolls
are parallel accumulators, reduce unrolls an adder tree), and accumulates into the output tile's
buffer. After the last reduce tile of an output tile the buffer drains to the write stage, which
stores it. `pipelines` copies of the three stages take the output tiles in turn, sharing DDR.

Buffers are flat arrays partitioned cyclically (`partition` banks each, dual-ported); the
initiation interval follows from the banks the unrolled accesses of one iteration hit, and from
the accumulator recurrence: the loop nest runs reduce axes outside spatial ones, so one output
element is updated again only after the spatial iterations of the tile (a float adder's latency
needs that many)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ScheduleError
from .hls_form import HLSForm

# model assumptions: latencies in cycles at the design clock
ADD_LATENCY = {"float32": 5}  # integer accumulation closes in one cycle
MUL_LATENCY = {"float32": 4}
INT_MUL_LATENCY = 3
MEMORY_READ_LATENCY = 2


@dataclass(frozen=True)
class HLSDesign:
    tile: tuple[tuple[str, int], ...]  # every axis, spatial then reduce
    unroll: tuple[tuple[str, int], ...]
    partition: tuple[int, int, int]  # banks of operand a, operand b, the accumulator
    beat: int = 1  # elements per stream beat (read stage to compute stage)
    pipelines: int = 1
    double_buffer: bool = False  # two buffer sets: the next round unpacks while this one computes
    ii: int | None = None  # the initiation interval asked for; None: whatever the banks and adder allow

    def tile_of(self, axis: str) -> int:
        return dict(self.tile)[axis]

    def unroll_of(self, axis: str) -> int:
        return dict(self.unroll)[axis]

    def to_json(self) -> dict:
        return {"tile": [list(x) for x in self.tile], "unroll": [list(x) for x in self.unroll],
                "partition": list(self.partition), "beat": self.beat,
                "pipelines": self.pipelines, "double_buffer": self.double_buffer, "ii": self.ii}

    @staticmethod
    def from_json(d: dict) -> HLSDesign:
        return HLSDesign(tuple((a, int(t)) for a, t in d["tile"]), tuple((a, int(u)) for a, u in d["unroll"]),
                         tuple(d["partition"]), d["beat"], d["pipelines"], d["double_buffer"], d.get("ii"))

    def __str__(self) -> str:
        tiles = "x".join(str(t) for _, t in self.tile)
        unr = "x".join(str(u) for _, u in self.unroll)
        return (f"tile {tiles} unroll {unr} partition {'/'.join(map(str, self.partition))} beat {self.beat}"
                f"{' double-buffered' if self.double_buffer else ''}"
                f"{f' x{self.pipelines} pipelines' if self.pipelines > 1 else ''}")


def check_design(form: HLSForm, d: HLSDesign) -> None:
    names = [a for a, _ in form.axes]
    if [a for a, _ in d.tile] != names or [a for a, _ in d.unroll] != names:
        raise ScheduleError(f"HLS design of '{form.output.name}': tiles and unrolls must name the axes {names} in "
                            f"order, got {[a for a, _ in d.tile]} / {[a for a, _ in d.unroll]}")
    for k, ((a, e), (_, t), (_, u)) in enumerate(zip(form.axes, d.tile, d.unroll)):
        if t < 1 or u < 1 or t % u:
            raise ScheduleError(f"HLS design of '{form.output.name}': axis '{a}' ({e}) needs a positive tile and "
                                f"an unroll dividing it, got tile {t}, unroll {u}")
        if e % t and k >= len(form.spatial) and not zero_beyond(form, k):
            raise ScheduleError(f"HLS design of '{form.output.name}': reduce axis '{a}' ({e}) padded to a multiple "
                                f"of {t} would add products of real elements: no operand reads zero past its end; "
                                f"pick a tile dividing {e}")
    if any(p < 1 for p in d.partition) or d.beat < 1 or d.pipelines < 1:
        raise ScheduleError(f"HLS design of '{form.output.name}': partition, beat and pipelines must be positive")
    if output_tiles(form, d) % d.pipelines:
        raise ScheduleError(f"HLS design of '{form.output.name}': {d.pipelines} pipelines do not divide its "
                            f"{output_tiles(form, d)} output tiles")
    if d.ii is not None:
        ii, why = initiation_interval(form, d)
        if ii > d.ii:
            limits = ", ".join(f"{k} needs II {v}" for k, v in why.items() if v > d.ii)
            raise ScheduleError(f"HLS design of '{form.output.name}' ({d}): II {d.ii} was asked for but the design "
                                f"cannot meet it ({limits}); more banks (partition) or a smaller unroll would, "
                                f"as would a larger spatial tile for the accumulator recurrence")
    for op in form.operands:
        if any(c < 0 for row in op.matrix for c in row):
            raise ScheduleError(f"HLS operator '{form.output.name}': '{op.name}' is read with a negative "
                                f"coefficient; the read stage fetches boxes growing with every axis")


def zero_beyond(form: HLSForm, axis: int) -> bool:
    """Whether a read past the end of axis `axis` reads zero in some operand: a dimension indexed by that
    axis alone, from 0, as long as the axis (the read stage then fetches out of range)."""
    extent = form.axes[axis][1]
    for op in form.operands:
        for row, off, size in zip(op.matrix, op.offset, op.shape):
            if row[axis] == 1 and sum(map(abs, row)) == 1 and off == 0 and size == extent:
                return True
    return False


def box(op, d: HLSDesign) -> tuple[int, ...]:
    """Extent per dimension of `op`'s elements one round reads."""
    tiles = [t for _, t in d.tile]
    return tuple(sum(c * (t - 1) for c, t in zip(row, tiles)) + 1 for row in op.matrix)


def box_strides(extents) -> tuple[int, ...]:
    strides, s = [], 1
    for e in reversed(extents):
        strides.append(s)
        s *= e
    return tuple(reversed(strides))


def bursts(op, extents) -> int:
    """AXI bursts that fetch a box of `op`'s input: one per contiguous run, where a run spans the
    trailing dimensions the box covers whole (at most 4 KB, AXI's burst boundary)."""
    run, dim = extents[-1], len(extents) - 1
    while dim > 0 and extents[dim] >= op.shape[dim]:
        dim -= 1
        run *= extents[dim]
    elems = math.prod(extents)
    return max(elems // run, math.ceil(elems * op.source.dtype.bytes / 4096))


def buffer_sizes(form: HLSForm, d: HLSDesign) -> tuple[int, int, int]:
    a, b = (math.prod(box(op, d)) for op in form.operands)
    return a, b, math.prod(d.tile_of(n) for n, _ in form.spatial)


def output_tiles(form: HLSForm, d: HLSDesign) -> int:
    return math.prod(-(-e // d.tile_of(n)) for n, e in form.spatial)


def reduce_tiles(form: HLSForm, d: HLSDesign) -> int:
    return math.prod(-(-e // d.tile_of(n)) for n, e in form.reduce)


def _bank_load(addresses: list[int], banks: int) -> int:
    """Most accesses one bank of `banks` (cyclic) serves in one iteration."""
    return int(np.bincount(np.asarray(addresses) % banks).max())


def _offsets(steps_and_counts) -> list[int]:
    """Every sum of k * step over the (step, count) pairs, k < count: the Minkowski sum, built axis by axis."""
    cur = {0}
    for step, count in steps_and_counts:
        if count > 1 and step:
            cur = {x + k * step for x in cur for k in range(count)}
    return sorted(cur)


def unrolled_addresses(form: HLSForm, d: HLSDesign) -> tuple[list[int], list[int], list[int]]:
    """The buffer addresses one pipelined iteration reads, relative to its first: operands a and b
    (distinct elements) and the accumulator (one per spatial unroll)."""
    unroll = [u for _, u in d.unroll]
    out = []
    for op in form.operands:
        strides = box_strides(box(op, d))
        steps = [sum(s * row[a] for s, row in zip(strides, op.matrix)) for a in range(len(unroll))]
        out.append(_offsets(zip(steps, unroll)))
    sp = [d.tile_of(n) for n, _ in form.spatial]
    acc = _offsets(zip(box_strides(sp), unroll[:len(sp)]))
    return out[0], out[1], acc


def initiation_interval(form: HLSForm, d: HLSDesign) -> tuple[int, dict]:
    """(II, why): dual-ported banks per operand, one read-modify-write per accumulator bank and cycle,
    and the accumulator recurrence of a float adder."""
    a, b, acc = unrolled_addresses(form, d)
    ports = {"a": math.ceil(_bank_load(a, d.partition[0]) / 2), "b": math.ceil(_bank_load(b, d.partition[1]) / 2),
             "acc": _bank_load(acc, d.partition[2])}
    spatial_iters = math.prod(d.tile_of(n) // d.unroll_of(n) for n, _ in form.spatial)
    latency = ADD_LATENCY.get(form.acc_dtype, 1)
    ports["recurrence"] = math.ceil(latency / spatial_iters)
    return max(ports.values()), ports


def pipeline_depth(form: HLSForm, d: HLSDesign) -> int:
    reduce_unroll = math.prod(d.unroll_of(n) for n, _ in form.reduce)
    add = ADD_LATENCY.get(form.acc_dtype, 1)
    mul = MUL_LATENCY.get(form.acc_dtype, INT_MUL_LATENCY)
    return MEMORY_READ_LATENCY + mul + add * (math.ceil(math.log2(reduce_unroll)) + 1) + 1


def macs_per_cycle_peak(d: HLSDesign) -> int:
    return math.prod(u for _, u in d.unroll) * d.pipelines


__all__ = ["HLSDesign", "box", "bursts", "box_strides", "buffer_sizes", "check_design", "initiation_interval",
           "macs_per_cycle_peak", "output_tiles", "pipeline_depth", "reduce_tiles", "unrolled_addresses"]

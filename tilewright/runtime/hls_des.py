"""An event-level simulation of an HLS design (lower/hls_design.py), to check the closed-form model
(runtime/hls_model.py) on what it averages away: the read FIFO one round deep and the output FIFO
one tile deep (a stage stalls when its FIFO is full), DDR as one server that every pipeline's
reads and writes queue for in request order (each transfer's bursts occupy it, its first data
arrives a memory latency later), the prologue (nothing computes before the first read) and the
epilogue (the last tile's write), and the imbalance of rounds: only the last round of an output
tile drains the accumulators and writes.

Both are this project's models of one design, so agreement is a consistency check of the closed
form, not a measurement of hardware."""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from ..lower.hls_design import HLSDesign, output_tiles, reduce_tiles
from ..lower.hls_form import HLSForm
from .hls_model import round_costs


@dataclass
class _Pipe:
    rounds: int
    fill_start: float = 0.0
    fill_end: float = 0.0
    comp_end: float = 0.0
    read_end: float = 0.0
    drain_end: float = 0.0
    mac_end: float = 0.0  # the previous round's loop nest
    mac_end_before: float = 0.0  # the one before: its buffer set is the one the next fill reuses
    last_write_request: float = 0.0
    next_round: int = 0


def simulate(form: HLSForm, d: HLSDesign, dev) -> int:
    """Cycles from the first request to the last byte written."""
    c = round_costs(form, d, dev)
    nred = reduce_tiles(form, d)
    per_pipe = output_tiles(form, d) * nred // d.pipelines
    bpc = dev.bytes_per_cycle
    read_busy = c.read_bursts * dev.burst_overhead + c.read_bytes / bpc
    write_busy = c.write_bursts * dev.burst_overhead + c.write_bytes / bpc
    lat = dev.memory_latency
    pipes = [_Pipe(per_pipe) for _ in range(d.pipelines)]
    # (request time, order, pipe, kind); kind "r" reads the pipe's next round, "w" writes a tile
    events: list = [(0.0, p, p, "r") for p in range(d.pipelines)]
    order = d.pipelines
    ddr_free = 0.0
    end = 0.0
    while events:
        t, _, p, kind = heapq.heappop(events)
        pipe = pipes[p]
        start = max(t, ddr_free)
        ddr_free = start + (read_busy if kind == "r" else write_busy)
        done = ddr_free + lat
        if kind == "w":
            end = max(end, done, pipe.drain_end + lat)
            continue
        k = pipe.next_round
        pipe.next_round += 1
        # the stream delivers beats as they arrive, one per cycle at most
        pipe.read_end = max(done, start + lat + c.read_stream)
        if d.double_buffer:  # this round unpacks while the previous one computes, into the other buffer set
            fill_start = max(pipe.fill_end, pipe.mac_end_before, start + lat)
            fill_end = max(fill_start + c.fill, pipe.read_end + 1)
            comp_end = max(fill_end, pipe.comp_end) + c.loop + c.depth
        else:
            fill_start = max(pipe.comp_end, start + lat)
            fill_end = max(fill_start + c.fill, pipe.read_end + 1)
            comp_end = fill_end + c.loop + c.depth
        pipe.mac_end_before, pipe.mac_end = pipe.mac_end, comp_end
        if k % nred == nred - 1:  # the tile's last round drains into the output FIFO, one tile deep
            drain_start = max(comp_end, pipe.last_write_request)
            comp_end = drain_start + c.drain
            pipe.drain_end = comp_end
            request = max(drain_start, pipe.last_write_request)
            pipe.last_write_request = request
            heapq.heappush(events, (request, order, p, "w"))
            order += 1
        pipe.fill_start, pipe.fill_end, pipe.comp_end = fill_start, fill_end, comp_end
        if pipe.next_round < pipe.rounds:
            # requests stay outstanding: the next is issued once this one's bursts are, and early
            # enough that its data arrives as the compute stage starts unpacking this round
            request = max(ddr_free, fill_start - lat)
            heapq.heappush(events, (request, order, p, "r"))
            order += 1
    return int(math.ceil(end))


__all__ = ["simulate"]

"""FlexTensor's FPGA model (5.2): time = rounds / #PE x max(R, C, W), with its terms taken from the
design (lower/hls_design.py) and the device (targets/hls.py), and the design's resources.

R: a round's operand boxes from DDR, one burst per contiguous run (each costs the device's burst
overhead) at the sustained bandwidth, which every pipeline's reads and writes share; and the
stream to the compute stage, one beat per cycle. C: unpacking the beats into the partitioned
buffers, the pipelined loop nest (trip count x II, plus the pipeline's depth), the two overlapped
when the buffers are doubled, and, once per output tile, draining the accumulators a beat per
cycle. W: the output tile to DDR, once per output tile, spread over its rounds. The stages overlap
(a DATAFLOW region); the total is the longest of the compute path (rounds at the slowest stage), the
memory path (all DDR traffic) and the write path (a tile's write outlasting the buffered rounds).

Everything here is an estimate (no synthesis runs): `runtime/hls_des.py` checks the closed form
against an event-level simulation of the same design."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ScheduleError
from ..lower.hls_design import (
    HLSDesign,
    box,
    buffer_sizes,
    bursts,
    check_design,
    initiation_interval,
    output_tiles,
    pipeline_depth,
    reduce_tiles,
)
from ..lower.hls_form import HLSForm

BITS = {"float32": 32, "int8": 8, "uint8": 8, "int16": 16, "uint16": 16, "int32": 32, "int64": 64}
# LUTs per multiply-accumulate besides its DSPs (model assumption, from PG060's full-DSP float
# operators and a carry-chain adder per integer accumulator) and per bank port of a partitioned buffer
LUTS_PER_MAC = {"float32": 390, "int16": 48, "uint16": 48, "int8": 40, "uint8": 40}
LUTS_PER_BANK = 24
LUTRAM_BITS = 1024  # arrays this small per bank are registers or LUT RAM, not block RAM
_BRAM18_SHAPES = ((16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18), (512, 36))


def bram18(words: int, bits: int, banks: int = 1) -> int:
    """Block RAM (18 Kb halves) an array of `words` x `bits` takes split cyclically into `banks`."""
    depth = math.ceil(words / banks)
    if depth * bits <= LUTRAM_BITS:
        return 0
    per_bank = min(math.ceil(depth / d) * math.ceil(bits / w) for d, w in _BRAM18_SHAPES)
    return per_bank * banks


@dataclass(frozen=True)
class RoundCosts:
    """Cycles of one round of one pipeline (averaged over the rounds of an output tile)."""

    read_stream: float  # beats of the larger operand box
    memory: float  # DDR time of the round's reads and its share of the tile's write, all pipelines
    mem_read: float  # DDR time of one round's reads, all pipelines
    mem_write: float  # DDR time of one output tile's write, all pipelines
    read_bytes: int
    write_bytes: int
    read_bursts: int
    write_bursts: int
    fill: int
    loop: int
    depth: int
    drain: int
    compute: float  # fill + loop + depth + drain / reduce tiles
    write_stream: float


@dataclass(frozen=True)
class HLSEstimate:
    cycles: int
    seconds: float
    ii: int
    ii_why: dict
    rounds: int
    output_tiles: int
    costs: RoundCosts
    bound: str  # which stage sets the round time
    dsp: int
    bram36: int
    luts: int
    macs: int

    @property
    def gops(self) -> float:
        """Operations (a MAC is two) per second, in billions."""
        return 2 * self.macs / self.seconds / 1e9

    def as_dict(self) -> dict:
        return {"estimate": "model (no synthesis)", "cycles": self.cycles, "seconds": self.seconds,
                "gops": round(self.gops, 3), "ii": self.ii, "ii_limits": self.ii_why, "rounds": self.rounds,
                "bound": self.bound, "dsp": self.dsp, "bram36": self.bram36, "luts": self.luts}


def round_costs(form: HLSForm, d: HLSDesign, dev) -> RoundCosts:
    bits = BITS[form.in_dtype]
    acc_bits = BITS[form.acc_dtype]
    boxes = [box(op, d) for op in form.operands]
    elems = [math.prod(b) for b in boxes]
    n_bursts = sum(bursts(op, b) for op, b in zip(form.operands, boxes))
    read_bytes = sum(elems) * bits // 8
    acc_words = buffer_sizes(form, d)[2]
    tiles, extents = [d.tile_of(n) for n, _ in form.spatial], [e for _, e in form.spatial]
    run, dim = tiles[-1], len(tiles) - 1
    while dim > 0 and tiles[dim] == extents[dim]:
        dim -= 1
        run *= tiles[dim]
    write_bytes = acc_words * acc_bits // 8
    write_bursts = max(acc_words // run, math.ceil(write_bytes / 4096))
    nred = reduce_tiles(form, d)
    bpc = dev.bytes_per_cycle
    mem_read = d.pipelines * (n_bursts * dev.burst_overhead + read_bytes / bpc)
    mem_write = d.pipelines * (write_bursts * dev.burst_overhead + write_bytes / bpc)
    memory = mem_read + mem_write / nred
    beats = [math.ceil(e / d.beat) for e in elems]
    fill = sum(bt * math.ceil(math.ceil(d.beat / min(d.beat, p)) / 2) for bt, p in zip(beats, d.partition[:2]))
    ii, _ = initiation_interval(form, d)
    loop = math.prod(t // u for (_, t), (_, u) in zip(d.tile, d.unroll)) * ii
    depth = pipeline_depth(form, d)
    drain = math.ceil(acc_words / d.beat) * math.ceil(d.beat / min(d.beat, d.partition[2]))
    compute = (max(fill, loop + depth) if d.double_buffer else fill + loop + depth) + drain / nred
    return RoundCosts(max(beats), memory, mem_read, mem_write, read_bytes, write_bytes, n_bursts, write_bursts,
                      fill, loop, depth, drain,
                      compute, math.ceil(acc_words / d.beat) / nred)


def resources(form: HLSForm, d: HLSDesign, dev) -> tuple[int, int, int]:
    """(DSPs, BRAM36, LUTs) of the design: every pipeline's PE array, its compute buffers, the FIFOs
    that let the read stage run a round ahead and the write stage a tile behind."""
    unrolled = math.prod(u for _, u in d.unroll)
    dsp = math.ceil(unrolled * dev.dsp_per_mac(form.in_dtype)) * d.pipelines
    bits, acc_bits = BITS[form.in_dtype], BITS[form.acc_dtype]
    a, b, acc = buffer_sizes(form, d)
    copies = 2 if d.double_buffer else 1
    halves = (copies * (bram18(a, bits, d.partition[0]) + bram18(b, bits, d.partition[1]))
              + bram18(acc, acc_bits, d.partition[2]))
    # stream FIFOs a round deep (beats of `beat` elements) and an output tile deep
    halves += (sum(bram18(math.ceil(n / d.beat), bits * d.beat) for n in (a, b))
               + bram18(math.ceil(acc / d.beat), acc_bits * d.beat))
    luts = (unrolled * LUTS_PER_MAC[form.in_dtype] + sum(d.partition) * LUTS_PER_BANK) * d.pipelines
    return dsp, math.ceil(halves * d.pipelines / 2), luts


def over_budget(form: HLSForm, d: HLSDesign, dev) -> str:
    """'' when the design fits `dev`, else which resources are over and by how much."""
    dsp, bram, luts = resources(form, d, dev)
    over = [f"{what} {need} of {have} ({need - have} over)" for what, need, have in
            (("DSP", dsp, dev.dsp), ("BRAM36", bram, dev.bram36), ("LUT", luts, dev.luts)) if need > have]
    return "; ".join(over)


def estimate(form: HLSForm, d: HLSDesign, dev, check_resources: bool = True) -> HLSEstimate:
    """The closed-form time and the resources of `d` on `dev`; ScheduleError naming the resource when
    the design does not fit (unless `check_resources` is False: the ablation of a fixed design)."""
    check_design(form, d)
    if check_resources:
        over = over_budget(form, d, dev)
        if over:
            raise ScheduleError(f"HLS design of '{form.output.name}' ({d}) does not fit {dev.name}: {over}")
    c = round_costs(form, d, dev)
    rounds = output_tiles(form, d) * reduce_tiles(form, d)
    per_pipe = rounds // d.pipelines
    mem_first = c.read_bytes / dev.bytes_per_cycle + c.read_bursts * dev.burst_overhead
    # compute-bound: the first round's read, the rounds at the slowest stage, what of the last tile's
    # write outlasts its drain (the write stage stores beats as they drain); memory-bound: every byte
    # of every round through DDR, then the last round's compute
    terms = {"read": c.read_stream, "compute": c.compute, "write": c.write_stream}
    bound = max(terms, key=terms.get)
    compute_path = mem_first + per_pipe * terms[bound] + max(0.0, c.mem_write - c.drain)
    # (its unpacking streams with its read; the writes still queued behind the last read, the last
    # tiles' and, where every round ends a tile, the previous ones', overlap the loop nest and drain)
    nred = reduce_tiles(form, d)
    tiles = output_tiles(form, d) // d.pipelines
    tail = c.loop + c.depth + max(c.drain, c.mem_write / d.pipelines)
    queued = c.mem_write * (2 if nred == 1 and tiles > 1 else 1)
    memory_path = per_pipe * c.memory + max(0.0, tail - queued)
    # a tile's write holds DDR while the compute stage has only the rounds it buffered (the read FIFO's
    # one, and the second buffer set) to work on
    buffered = 2 if d.double_buffer else 1
    write_path = tiles * (c.mem_write + max(0, nred - buffered) * c.compute) + mem_first
    paths = {bound: compute_path, "memory": memory_path, "write": write_path}
    bound = max(paths, key=paths.get)
    total = 2 * dev.memory_latency + paths[bound]
    ii, why = initiation_interval(form, d)
    dsp, bram, luts = resources(form, d, dev)
    cycles = int(math.ceil(total))
    return HLSEstimate(cycles, cycles / (dev.clock_mhz * 1e6), ii, why, rounds, output_tiles(form, d), c, bound,
                       dsp, bram, luts, form.macs)


__all__ = ["BITS", "HLSEstimate", "RoundCosts", "bram18", "estimate", "over_budget", "resources", "round_costs"]

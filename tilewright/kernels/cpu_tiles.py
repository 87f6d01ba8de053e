"""The CPU template's parameters and the rules that enumerate them from the target's facts
(Bolt's light profiler prunes by hardware rules instead of searching a large space).

A `CpuTile` fixes the tile at each level of the memory hierarchy: the register tile (`mr`
rows x `nrv` vectors of `vec_bytes`), the reduction block `kc` whose packed weight panel
(kc x nr) stays in L1, and the task block (`mc` rows x `nc` columns) whose input rows stay
in L2 and which one thread owns."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..errors import ScheduleError
from ..targets import Target

DTYPE_BYTES = 4  # fp32 templates
L1_DEFAULT, L2_DEFAULT = 32 * 1024, 512 * 1024  # synthetic targets without cache facts
TILE_SHAPES = 6  # register-tile shapes the profiler measures, each with its best blocks
MAX_MR = 14  # rows of a register tile: one general-purpose register holds each row's input pointer


@dataclass(frozen=True)
class CpuTile:
    vec_bytes: int
    mr: int
    nrv: int
    kc: int
    mc: int
    nc: int

    @property
    def lanes(self) -> int:
        return self.vec_bytes // DTYPE_BYTES

    @property
    def nr(self) -> int:
        return self.nrv * self.lanes

    @property
    def registers(self) -> int:
        """Vector registers the microkernel keeps live: accumulators, one weight row, one broadcast."""
        return self.mr * self.nrv + self.nrv + 1

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> CpuTile:
        return CpuTile(**{k: int(d[k]) for k in ("vec_bytes", "mr", "nrv", "kc", "mc", "nc")})

    def __str__(self) -> str:
        return f"{self.mr}x{self.nr} regs/v{self.vec_bytes * 8}, kc {self.kc}, block {self.mc}x{self.nc}"


def caches(target: Target) -> tuple[int, int]:
    return target.cache_bytes(1) or L1_DEFAULT, target.cache_bytes(2) or L2_DEFAULT


def check_tile(tile: CpuTile, target: Target, rows: int = 0, cols: int = 0) -> None:
    """Refuse a tile the target cannot run as meant: wider vectors than it has, a register tile over
    its register file, task blocks that are not whole register tiles."""
    if tile.vec_bytes not in (16, 32, 64) or tile.vec_bytes > target.vector_bytes:
        raise ScheduleError(f"template tile {tile}: {tile.vec_bytes * 8}-bit vectors, but target {target.key} has "
                            f"{target.vector_bytes * 8}-bit vectors at most")
    if tile.registers > target.vector_registers:
        raise ScheduleError(f"template tile {tile}: the {tile.mr}x{tile.nrv}-vector register tile needs "
                            f"{tile.registers} vector registers (accumulators + weight row + broadcast); the target "
                            f"has {target.vector_registers}")
    if min(tile.mr, tile.nrv, tile.kc, tile.mc, tile.nc) < 1:
        raise ScheduleError(f"template tile {tile}: every parameter must be positive")
    if tile.mc % tile.mr or tile.nc % tile.nr:
        raise ScheduleError(f"template tile {tile}: the task block {tile.mc}x{tile.nc} must be whole register tiles "
                            f"({tile.mr}x{tile.nr})")


def check_layout(tile: CpuTile, problem) -> None:
    """A channel-blocked output (NCHW{b}c) is stored a vector at a time into one block: each vector must
    lie inside a block, and a register tile either inside one block or over whole blocks."""
    blk = getattr(problem, "out_block", 0)
    if blk and (blk % tile.lanes or (blk % tile.nr and tile.nr % blk)):
        raise ScheduleError(f"template tile {tile} on {problem.name}: its {tile.lanes}-lane vectors and "
                            f"{tile.nr}-column register tile do not fit the output's {blk}-channel blocks (the block "
                            f"must be a multiple of the lanes, and of the tile's columns or they of it)")


def problem_tiles(problem, target: Target, limit: int = 24) -> list[CpuTile]:
    """The rules' tiles for a GEMM or convolution problem, those that fit its output layout."""
    out = []
    for t in cpu_tiles(target, problem.M, problem.N, problem.K, limit=4 * limit):
        try:
            check_layout(t, problem)
        except ScheduleError:
            continue
        out.append(t)
    if not out:
        raise ScheduleError(f"{problem.name}: no template tile of target {target.key} fits its "
                            f"{problem.out_block}-channel output blocks")
    return out[:limit]


def _round_to(x: float, step: int) -> int:
    return max(step, int(x) // step * step)


def cpu_tiles(target: Target, rows: int, cols: int, reduction: int, limit: int = 24) -> list[CpuTile]:
    """A few tens of tiles for a problem class, best-first by a static score: the register-file rule
    (use most of it, keep fma_latency x fma_units independent accumulators), L1 for the weight
    panel, L2 for the input block, and at least two task blocks per core where the problem allows."""
    if target.vector_bytes < 16:
        raise ScheduleError(f"the CPU templates need SIMD vectors; target {target.key} has none")
    l1, l2 = caches(target)
    widths = sorted({target.vector_bytes, 32} & {16, 32, 64}, reverse=True) if target.vector_bytes >= 32 else [16]
    chains = target.fma_latency * max(1, target.fma_units)
    scored = []
    for vb in widths:
        lanes = vb // DTYPE_BYTES
        col_vectors = math.ceil(cols / lanes)
        for nrv in range(1, 5):
            if nrv > col_vectors:
                break
            fits = [mr for mr in range(1, MAX_MR + 1) if mr * nrv + nrv + 1 <= target.vector_registers]
            for mr in fits[-3:]:  # the tallest tiles that fit: most of the register file, fewest reloads
                if mr * nrv < min(chains, 8) and mr < fits[-1]:
                    continue
                nr = nrv * lanes
                kc = min(reduction, _round_to(l1 / 2 / (nr * DTYPE_BYTES), 8))
                whole = reduction if reduction * nr * DTYPE_BYTES <= l2 / 2 else kc  # one pass, panel in L2
                for kc_choice in {kc, min(reduction, 2 * kc), whole}:
                    for mc in _row_blocks(rows, mr, kc_choice, l2):
                        for nc in _col_blocks(cols, nr):
                            tile = CpuTile(vb, mr, nrv, kc_choice, mc, nc)
                            scored.append((_score(tile, rows, cols, target), str(tile), tile))
    scored.sort(key=lambda t: (-t[0], t[1]))
    # round-robin over register-tile shapes, best-first within each: the static score ranks blocks of one
    # register tile well but cannot tell 9x3 from 5x4 vectors apart, which only a measurement can
    groups: dict[tuple, list[CpuTile]] = {}
    for _, _, t in scored:
        bucket = groups.setdefault((t.vec_bytes, t.mr, t.nrv), [])
        if t not in bucket:
            bucket.append(t)
    out, queues = [], list(groups.values())[:TILE_SHAPES]  # dicts keep insertion (best-first) order
    while queues and len(out) < limit:
        for q in list(queues):
            if q:
                out.append(q.pop(0))
            if not q:
                queues.remove(q)
    return out[:limit]


def _row_blocks(rows: int, mr: int, kc: int, l2: int) -> list[int]:
    fit = _round_to(l2 / 2 / (kc * DTYPE_BYTES), mr)
    whole = math.ceil(rows / mr) * mr
    return sorted({min(fit, whole), min(max(mr, fit // 4 // mr * mr), whole)})


def _col_blocks(cols: int, nr: int) -> list[int]:
    whole = math.ceil(cols / nr) * nr
    return sorted({whole, min(whole, max(nr, (whole // 2) // nr * nr)), min(whole, 4 * nr)})


def _score(tile: CpuTile, rows: int, cols: int, target: Target) -> float:
    """Higher is better: FMAs per load of the microkernel, discounted for padded rows/columns
    and for cores left idle by too few task blocks."""
    intensity = tile.mr * tile.nrv / (tile.mr + tile.nrv)
    waste = (math.ceil(cols / tile.nr) * tile.nr / cols) * (math.ceil(rows / tile.mr) * tile.mr / rows)
    tasks = math.ceil(rows / tile.mc) * math.ceil(cols / tile.nc)
    balance = tasks / (math.ceil(tasks / target.cores) * target.cores)
    width = tile.vec_bytes / target.vector_bytes
    passes = tile.kc / (tile.kc + 16)  # each reduction block reloads and stores the C tile once
    return intensity * width * balance * passes / waste

"""The GPU template's parameters (CUTLASS's hierarchy: threadblock tile, warp tile, the
m16n8k16 `mma.sync` instruction, a multi-stage shared-memory pipeline) and Bolt's rules that
enumerate a few tens of them from the GPU's facts: 4 to 8 warps per block (2 for small
problems), warp tiles as large as the register file allows, the pipeline within the shared
memory a block gets without opting in, and small blocks when the problem would not fill the SMs."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..errors import ScheduleError
from ..targets.gpu import GpuFacts

MMA_M, MMA_N, MMA_K = 16, 8, 16
PAD = 8  # halves after each shared-memory row: rows start 16 bytes apart mod 128, fewer bank conflicts
REGS_OVERHEAD = 48  # addresses, loop counters, the epilogue's temporaries (a ptxas report bounds the estimate)


@dataclass(frozen=True)
class GpuTile:
    bm: int
    bn: int
    bk: int
    wm: int
    wn: int
    stages: int
    align: int = 8  # halves per global->shared copy (8: 16 bytes); must divide K

    @property
    def warps(self) -> int:
        return (self.bm // self.wm) * (self.bn // self.wn)

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def accumulators(self) -> int:
        """fp32 accumulator registers per thread."""
        return (self.wm // MMA_M) * (self.wn // MMA_N) * 4

    @property
    def registers(self) -> int:
        """Estimated 32-bit registers per thread: accumulators, one k-step's A and B fragments, overhead."""
        return self.accumulators + (self.wm // MMA_M) * 4 + (self.wn // MMA_N) * 2 + REGS_OVERHEAD

    @property
    def smem_bytes(self) -> int:
        return self.stages * (self.bm + self.bn) * (self.bk + PAD) * 2

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return (f"block {self.bm}x{self.bn}x{self.bk}, warp {self.wm}x{self.wn}, {self.warps} warps, "
                f"{self.stages} stages, align {self.align}")


def check_gpu_tile(tile: GpuTile, gpu: GpuFacts, k: int | None = None) -> None:
    """Refuse what the GPU cannot run as meant, naming the limit."""
    if tile.bm % tile.wm or tile.bn % tile.wn or tile.wm % MMA_M or tile.wn % MMA_N or tile.bk % MMA_K:
        raise ScheduleError(f"GPU tile {tile}: the block must be whole warp tiles and a warp tile whole "
                            f"{MMA_M}x{MMA_N}x{MMA_K} instructions")
    if tile.threads > gpu.max_threads_per_block:
        raise ScheduleError(f"GPU tile {tile}: {tile.threads} threads per block; {gpu.name} allows "
                            f"{gpu.max_threads_per_block}")
    if tile.registers > min(255, gpu.regs_per_thread or 255):
        raise ScheduleError(f"GPU tile {tile}: about {tile.registers} registers per thread (accumulators "
                            f"{tile.accumulators}); the limit is 255: a smaller warp tile")
    if tile.registers * tile.threads > (gpu.regs_per_block or 65536):
        raise ScheduleError(f"GPU tile {tile}: {tile.registers} x {tile.threads} registers exceed the "
                            f"{gpu.regs_per_block or 65536} a block may use")
    if tile.smem_bytes > gpu.shared_mem_per_block:
        raise ScheduleError(f"GPU tile {tile}: the {tile.stages}-stage pipeline needs {tile.smem_bytes} bytes of "
                            f"shared memory; a block gets {gpu.shared_mem_per_block} without opting in")
    if tile.align not in (1, 2, 4, 8) or tile.bk % tile.align:
        raise ScheduleError(f"GPU tile {tile}: align must be 1, 2, 4 or 8 halves and divide bk")
    if k is not None and k % tile.align:
        raise ScheduleError(f"GPU tile {tile}: K = {k} is not a multiple of the {tile.align}-half copy; pad K "
                            f"(kernels.padding) or use align {math.gcd(k, 8)}")


def gpu_tiles(gpu: GpuFacts, m: int, n: int, k: int, limit: int = 24, align: int | None = None) -> list[GpuTile]:
    """Best-first by a static score: work per block (bm*bn/(bm+bn), the operand reuse), warp tiles
    large, enough blocks for every SM, little padding waste. `align`: halves per copy (default the
    widest that divides K; a convolution's must divide its input channels)."""
    align = align or math.gcd(k, 8)
    out = []
    for bm in (32, 64, 128, 256):
        for bn in (32, 64, 128, 256):
            for wm in (16, 32, 64):
                for wn in (16, 32, 64):
                    if bm % wm or bn % wn:
                        continue
                    warps = (bm // wm) * (bn // wn)
                    small = math.ceil(m / bm) * math.ceil(n / bn) < gpu.sm_count
                    if not (4 <= warps <= 8 or (small and warps == 2)):
                        continue
                    for bk in (32, 64):
                        for stages in (2, 3, 4):
                            tile = GpuTile(bm, bn, bk, wm, wn, stages, align)
                            try:
                                check_gpu_tile(tile, gpu, k)
                            except ScheduleError:
                                continue
                            out.append((_score(tile, m, n, gpu), str(tile), tile))
    out.sort(key=lambda t: (-t[0], t[1]))
    return [t for _, _, t in out[:limit]]


def _score(t: GpuTile, m: int, n: int, gpu: GpuFacts) -> float:
    blocks = math.ceil(m / t.bm) * math.ceil(n / t.bn)
    waves = blocks / max(1, gpu.sm_count)
    fill = waves / math.ceil(waves) if waves >= 1 else waves
    waste = (math.ceil(m / t.bm) * t.bm / m) * (math.ceil(n / t.bn) * t.bn / n)
    reuse = t.bm * t.bn / (t.bm + t.bn)
    warp = t.wm * t.wn / (t.wm + t.wn)
    return reuse * warp * fill * (1 + 0.05 * t.stages) / waste

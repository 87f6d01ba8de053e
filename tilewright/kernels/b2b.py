"""Persistent back-to-back fusion (Bolt section 3.2): GEMM -> epilogue -> GEMM, or conv ->
epilogue -> 1x1 conv, as one kernel whose threads each own whole rows of the intermediate
(Bolt's threadblock residence, TB_N = N0) and keep them in a thread-owned buffer sized to stay
in L2 while the second stage reads them. The second stage walks its own column panels, so
N1 may differ from N0 (the intermediate is staged, not held in the first stage's registers).

`check_residency` proves the constraints statically and refuses a configuration that breaks
them with a ScheduleError naming the constraint, where a silent violation would compute a
wrong result (NVIDIA/cutlass#461) or fall out of cache."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..errors import ScheduleError, ShapeError
from ..runtime.timing import TimingResult
from ..targets import Target
from .cpu_source import b2b_source
from .cpu_tiles import DTYPE_BYTES, CpuTile, caches, check_tile, cpu_tiles
from .epilogue import Epilogue
from .problem import ConvProblem, GemmProblem
from .template_kernel import NativeKernel, check_array, pack_bias, pack_weight

RESIDENT_SHARE = 0.5  # of L2 the intermediate rows may take (the rest: weight panels, input rows)


@dataclass(frozen=True)
class B2BProblem:
    """first (GEMM or conv) -> epilogues[0] -> second (GEMM over its output rows, or a pointwise conv)
    -> epilogues[1]."""
    first: GemmProblem | ConvProblem
    second: GemmProblem | ConvProblem
    epilogues: tuple[Epilogue, Epilogue] = (Epilogue(), Epilogue())

    def __post_init__(self):
        f, s = self.first, self.second
        if any(isinstance(q, ConvProblem) and q.blocked for q in (f, s)):
            raise ScheduleError(f"b2b {f.name} -> {s.name}: the fused kernels read and write NHWC; channel-blocked "
                                "(NCHW{b}c) convolutions run unfused")
        if isinstance(s, ConvProblem):
            if not s.pointwise:
                raise ScheduleError(f"b2b {f.name} -> {s.name}: the second conv must be 1x1, stride 1 and unpadded "
                                    f"(got {s.KH}x{s.KW}, stride {s.stride}, pad {s.pad}); a larger window needs "
                                    "neighbouring rows of the intermediate that another thread owns")
            if not isinstance(f, ConvProblem) or (s.batch, s.H, s.W, s.IC) != (f.batch, f.OH, f.OW, f.OC):
                raise ShapeError(f"b2b {f.name} -> {s.name}: the second conv's input must be the first's output "
                                 f"{f.output_shape}, got {s.input_shape}")
        elif s.M != f.M or s.K != f.N:
            raise ShapeError(f"b2b {f.name} -> {s.name}: the second GEMM must read the first's output [M={f.M}, "
                             f"N={f.N}] as [M, K]; got M={s.M}, K={s.K}")
        if self.epilogues[0].residual:
            raise ScheduleError(f"b2b {f.name}: the first epilogue cannot add a residual (the intermediate is never "
                                "materialised); put it on the second")

    @property
    def gemm1(self) -> GemmProblem:
        """The second stage as a GEMM over the first's output rows."""
        return GemmProblem(self.first.M, self.second.N, self.first.N)

    @property
    def name(self) -> str:
        return f"b2b_{self.first.name}__{self.second.name}"

    @property
    def flops(self) -> int:
        return self.first.flops + self.gemm1.flops

    @property
    def output_shape(self) -> tuple[int, ...]:
        return self.second.output_shape

    def reference(self, x, w0, w1, bias0=None, bias1=None, residual=None) -> np.ndarray:
        t = self.epilogues[0].apply(self.first.reference(x, w0), bias0)
        t = t.astype(np.float32).reshape(self.first.M, self.first.N)
        y = self.epilogues[1].apply(t.astype(np.float64) @ w1.reshape(self.first.N, self.second.N).astype(np.float64),
                                    bias1, residual)
        return y.reshape(self.output_shape)


def check_residency(problem: B2BProblem, tile: CpuTile, target: Target) -> None:
    """The static proof a fused pair needs: each task owns whole rows of the intermediate (its column
    block covers N0, TB_N = N0), and the intermediate rows it owns fit the resident share of L2."""
    check_tile(tile, target)
    n0p = math.ceil(problem.first.N / tile.nr) * tile.nr
    if tile.nc < n0p:
        raise ScheduleError(f"{problem.name}: threadblock residence fails: the task block's {tile.nc} columns do not "
                            f"cover the intermediate's N0 = {problem.first.N} ({n0p} padded to the {tile.nr}-column "
                            f"register tile); the second stage would read rows another thread has not finished")
    l2 = caches(target)[1]
    need = tile.mc * n0p * DTYPE_BYTES
    if need > RESIDENT_SHARE * l2:
        raise ScheduleError(f"{problem.name}: the intermediate tile {tile.mc} x {n0p} fp32 = {need} bytes is over "
                            f"the resident share of L2 ({int(RESIDENT_SHARE * l2)} of {l2} bytes); use at most "
                            f"{int(RESIDENT_SHARE * l2 // (n0p * DTYPE_BYTES)) // tile.mr * tile.mr} rows per task")


def b2b_tiles(problem: B2BProblem, target: Target, limit: int = 16) -> list[CpuTile]:
    """The single-stage rules' tiles for the first stage, with the task block widened to all of N0 and
    its rows capped so the intermediate stays resident; every tile returned passes check_residency."""
    f = problem.first
    l2 = caches(target)[1]
    out = []
    for t in cpu_tiles(target, f.M, f.N, f.K, limit=4 * limit):
        n0p = math.ceil(f.N / t.nr) * t.nr
        cap = int(RESIDENT_SHARE * l2 // (n0p * DTYPE_BYTES)) // t.mr * t.mr
        if cap < t.mr:
            continue
        mc = min(t.mc, cap, math.ceil(math.ceil(f.M / target.cores) / t.mr) * t.mr)
        tile = replace(t, nc=n0p, mc=max(t.mr, mc))
        if tile not in out:
            out.append(tile)
    if not out:
        raise ScheduleError(f"{problem.name}: no register tile keeps even one row block of the intermediate "
                            f"(N0 = {f.N}) in L2; run the two operators unfused")
    return out[:limit]


def second_tile(tile: CpuTile, problem: B2BProblem, target: Target) -> CpuTile:
    """Stage 1's own register tile (the rules' first for an mc x N1 x N0 GEMM at stage 0's vector
    width): N1 may be far narrower or wider than N0."""
    g = problem.gemm1
    same = [t for t in cpu_tiles(target, tile.mc, g.N, g.K, limit=64) if t.vec_bytes == tile.vec_bytes]
    best = same[0] if same else tile
    return replace(best, mc=math.ceil(tile.mc / best.mr) * best.mr, nc=math.ceil(g.N / best.nr) * best.nr)


class B2BKernel(NativeKernel):
    """`kernel(x, out, residual=None)` runs both stages in one call."""

    def __init__(self, problem: B2BProblem, target: Target, tile: CpuTile, w0, w1, bias0=None, bias1=None,
                 tile1: CpuTile | None = None, load: bool = True):
        check_residency(problem, tile, target)
        tile1 = tile1 or second_tile(tile, problem, target)
        check_tile(tile1, target)
        self.problem, self.tile, self.tile1 = problem, tile, tile1
        f, g = problem.first, problem.gemm1
        e0, e1 = problem.epilogues
        for ep, b, n, nm in ((e0, bias0, f.N, "bias0"), (e1, bias1, g.N, "bias1")):
            if ep.bias and b is None:
                raise ShapeError(f"{problem.name}: the epilogue adds a bias; pass {nm} of shape ({n},)")
        self.consts = [pack_weight(check_array(w0, f.weight_shape, problem.name, "w0"), f.K, f.N, tile.nr)]
        if e0.bias:
            self.consts.append(pack_bias(check_array(bias0, (f.N,), problem.name, "bias0"), f.N, tile.nr))
        w1 = check_array(w1, problem.second.weight_shape, problem.name, "w1")
        self.consts.append(pack_weight(w1, g.K, g.N, tile1.nr))
        if e1.bias:
            self.consts.append(pack_bias(check_array(bias1, (g.N,), problem.name, "bias1"), g.N, tile1.nr))
        super().__init__(b2b_source(f, g, (e0, e1), tile, tile1), target, problem.name, load)

    @property
    def constants(self) -> list[np.ndarray]:
        return list(self.consts)

    def arrays(self, x, out, residual=None) -> list[np.ndarray]:
        p = self.problem
        x = check_array(x, p.first.input_shape, p.name, "input")
        if out.shape != p.output_shape or out.dtype != np.float32 or not out.flags.c_contiguous:
            raise ShapeError(f"{p.name}: out must be a C-contiguous float32 array of shape {p.output_shape}")
        arrays = [x, *self.consts]
        if p.epilogues[1].residual:
            if residual is None:
                raise ShapeError(f"{p.name}: the epilogue adds a residual; pass residual= of shape {p.output_shape}")
            arrays.append(check_array(residual, p.output_shape, p.name, "residual"))
        return arrays + [out]

    def __call__(self, x, out, residual=None) -> np.ndarray:
        self.run(self.arrays(x, out, residual))
        return out

    def time(self, x, out, residual=None, **kw) -> TimingResult:
        return self.time_arrays(self.arrays(x, out, residual), **kw)


def build_b2b(problem: B2BProblem, w0, w1, target: Target | str = "cpu", bias0=None, bias1=None,
              tile: CpuTile | None = None) -> B2BKernel:
    target = target if isinstance(target, Target) else Target(target)
    tile = tile or b2b_tiles(problem, target)[0]
    return B2BKernel(problem, target, tile, w0, w1, bias0, bias1)

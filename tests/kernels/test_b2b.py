"""Back-to-back fusion: the fused kernel computes GEMM -> epilogue -> GEMM and conv -> epilogue ->
1x1 conv, with N1 != N0; configurations that break threadblock residence or overflow the resident
share of L2 are refused with the constraint named (never computed wrongly, NVIDIA/cutlass#461)."""

import dataclasses

import numpy as np
import pytest
from synthetic_targets import AVX2, host_runs

from tilewright.errors import ScheduleError, ShapeError
from tilewright.kernels import B2BProblem, ConvProblem, CpuTile, Epilogue, GemmProblem, build_b2b, check_residency
from tilewright.kernels.b2b import b2b_tiles

needs_avx2 = pytest.mark.skipif(not host_runs(AVX2), reason="host lacks AVX2")
RELU = Epilogue(("relu",))
CASES = [
    B2BProblem(GemmProblem(2464, 1, 4), GemmProblem(2464, 4, 1), (RELU, RELU)),
    B2BProblem(GemmProblem(301, 64, 56), GemmProblem(301, 256, 64), (Epilogue(("bias", "gelu")),
                                                                     Epilogue(("bias", "residual")))),
    B2BProblem(GemmProblem(97, 40, 33), GemmProblem(97, 10, 40), (RELU, Epilogue(("bias", "relu")))),
    B2BProblem(ConvProblem(1, 17, 15, 3, 24, 3, 3, 2, 1), ConvProblem(1, 9, 8, 24, 40, 1, 1),
               (Epilogue(("bias", "relu")), Epilogue(("bias", "relu")))),
]


@needs_avx2
@pytest.mark.parametrize("problem", CASES, ids=lambda p: p.name)
def test_fused_pair_computes_the_reference(problem, rng):
    f = problem.first
    x = rng.standard_normal(f.input_shape).astype(np.float32)
    w0 = rng.standard_normal(f.weight_shape).astype(np.float32)
    w1 = np.abs(rng.standard_normal(problem.second.weight_shape)).astype(np.float32)  # relu(x)@w1 not all 0
    b0 = rng.standard_normal(f.N).astype(np.float32)
    b1 = rng.standard_normal(problem.second.N).astype(np.float32)
    res = rng.standard_normal(problem.output_shape).astype(np.float32)
    ref = problem.reference(x, w0, w1, b0, b1, res)
    assert np.abs(ref).max() > 0
    for tile in b2b_tiles(problem, AVX2)[:4]:
        check_residency(problem, tile, AVX2)
        out = np.full(problem.output_shape, np.nan, np.float32)
        build_b2b(problem, w0, w1, AVX2, b0, b1, tile)(x, out, res if problem.epilogues[1].residual else None)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(ref).max()))


def test_residency_violations_are_refused():
    problem = B2BProblem(GemmProblem(4096, 128, 64), GemmProblem(4096, 512, 128))
    good = b2b_tiles(problem, AVX2)[0]
    check_residency(problem, good, AVX2)
    with pytest.raises(ScheduleError, match="threadblock residence fails.*N0 = 128"):
        check_residency(problem, dataclasses.replace(good, nc=good.nr), AVX2)
    big = dataclasses.replace(good, mc=good.mr * 512)
    with pytest.raises(ScheduleError, match="over the resident share of L2"):
        check_residency(problem, big, AVX2)
    with pytest.raises(ScheduleError, match="needs .* vector registers"):
        check_residency(problem, CpuTile(32, 8, 4, 64, 64, 128), AVX2)


def test_pairs_that_cannot_fuse_are_refused():
    with pytest.raises(ScheduleError, match="second conv must be 1x1"):
        B2BProblem(ConvProblem(1, 8, 8, 4, 8, 3, 3, 1, 1), ConvProblem(1, 8, 8, 8, 8, 3, 3, 1, 1))
    with pytest.raises(ShapeError, match="must be the first's output"):
        B2BProblem(ConvProblem(1, 8, 8, 4, 8, 3, 3, 1, 1), ConvProblem(1, 8, 8, 16, 8, 1, 1))
    with pytest.raises(ShapeError, match="as \\[M, K\\]"):
        B2BProblem(GemmProblem(8, 16, 4), GemmProblem(8, 4, 8))
    with pytest.raises(ScheduleError, match="cannot add a residual"):
        B2BProblem(GemmProblem(8, 16, 4), GemmProblem(8, 4, 16), (Epilogue(("residual",)), Epilogue()))
    with pytest.raises(ScheduleError, match="no register tile keeps"):
        b2b_tiles(B2BProblem(GemmProblem(64, 1 << 20, 4), GemmProblem(64, 4, 1 << 20)), AVX2)

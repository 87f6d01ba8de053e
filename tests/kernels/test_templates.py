"""CPU templates: every tile the rules propose computes the reference, for GEMMs and NHWC or
channel-blocked (NCHW{b}c) convolutions (stride, padding, dilation, odd channel counts), with each
epilogue; tiles the target cannot hold are refused with the constraint named."""

import numpy as np
import pytest
from synthetic_targets import AVX2, AVX512, host_runs

from tilewright.errors import ScheduleError, ShapeError
from tilewright.kernels import ConvProblem, CpuTile, Epilogue, GemmProblem, build_template, cpu_tiles
from tilewright.kernels.cpu_tiles import problem_tiles
from tilewright.kernels.template_kernel import random_inputs

TARGETS = [pytest.param(t, id=t.isa, marks=pytest.mark.skipif(not host_runs(t), reason=f"host lacks {t.isa}"))
           for t in (AVX2, AVX512)]
PROBLEMS = [GemmProblem(37, 50, 70), GemmProblem(64, 16, 300), GemmProblem(1, 33, 9),
            ConvProblem(1, 14, 13, 46, 32, 3, 3, 1, 1), ConvProblem(2, 9, 9, 5, 20, 3, 3, 2, 1),
            ConvProblem(1, 11, 10, 7, 9, 3, 2, 1, 2, dilation=2), ConvProblem(1, 6, 6, 200, 24, 1, 1)]
BLOCKED = [ConvProblem(1, 14, 13, 32, 48, 3, 3, 1, 1, in_block=16, out_block=16),
           ConvProblem(2, 9, 9, 3, 32, 3, 3, 2, 1, in_block=3, out_block=16),
           ConvProblem(1, 10, 11, 16, 32, 1, 1, in_block=8, out_block=8),
           ConvProblem(1, 11, 10, 16, 48, 3, 2, 1, 2, dilation=2, in_block=16, out_block=16),
           ConvProblem(1, 7, 7, 64, 96, 3, 3, 2, 1, in_block=16, out_block=32)]


def _check(problem, target, tile, epilogue, rng):
    x, w = random_inputs(problem)
    bias = rng.standard_normal(problem.N).astype(np.float32)
    res = rng.standard_normal(problem.output_shape).astype(np.float32)
    k = build_template(problem, w, target, epilogue, bias, tile)
    out = np.full(problem.output_shape, np.nan, np.float32)
    k(x, out, res if epilogue.residual else None)
    acc = problem.to_rows(problem.reference(x, w))
    ref = problem.from_rows(epilogue.apply(acc, bias, problem.to_rows(res)))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(ref).max()))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.name)
def test_every_proposed_tile_computes_the_reference(problem, target, rng):
    tiles = cpu_tiles(target, problem.M, problem.N, problem.K)
    assert 1 <= len(tiles) <= 24
    for tile in tiles[:: max(1, len(tiles) // 4)]:
        _check(problem, target, tile, Epilogue(), rng)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("problem", BLOCKED, ids=lambda p: p.name)
def test_channel_blocked_convolutions_compute_the_reference(problem, target, rng):
    tiles = problem_tiles(problem, target)
    assert tiles and all(problem.out_block % t.lanes == 0 for t in tiles)
    for tile in tiles[:: max(1, len(tiles) // 4)]:
        _check(problem, target, tile, Epilogue(("bias", "residual", "relu")), rng)


def test_a_tile_that_splits_an_output_block_is_refused(rng):
    problem = ConvProblem(1, 6, 6, 16, 16, 3, 3, 1, 1, in_block=8, out_block=8)
    x, w = random_inputs(problem)
    wide = CpuTile(64, 4, 1, 64, 36, 16)  # 16-lane vectors over 8-channel blocks
    with pytest.raises(ScheduleError, match="8-channel blocks"):
        build_template(problem, w, AVX512, (), None, wide)
    with pytest.raises(ShapeError, match="both 0"):
        ConvProblem(1, 6, 6, 16, 16, 3, 3, in_block=8)
    with pytest.raises(ShapeError, match="do not split"):
        ConvProblem(1, 6, 6, 12, 16, 3, 3, in_block=8, out_block=8)


@pytest.mark.parametrize("steps", [("bias", "relu"), ("bias", "gelu"), ("gelu_tanh",), ("hardswish",),
                                   ("bias", "softplus"), ("residual", "sigmoid"), ("bias", "residual", "silu")])
def test_epilogues_match_numpy(steps, rng):
    target = AVX2 if host_runs(AVX2) else pytest.skip("host lacks AVX2")
    for problem in (GemmProblem(29, 40, 33), ConvProblem(1, 7, 9, 6, 19, 3, 3, 1, 1)):
        _check(problem, target, cpu_tiles(target, problem.M, problem.N, problem.K)[0], Epilogue(steps), rng)


def test_rules_respect_the_register_file():
    for target in (AVX2, AVX512):
        for tile in cpu_tiles(target, 1000, 1000, 1000):
            assert tile.registers <= target.vector_registers
            assert tile.vec_bytes <= target.vector_bytes
            # the weight panel in L1, or the whole reduction in one pass with the panel in half of L2
            assert tile.kc * tile.nr * 4 <= 32 * 1024 or (tile.kc == 1000 and tile.kc * tile.nr * 4 <= 256 * 1024)
    assert any(t.vec_bytes == 64 for t in cpu_tiles(AVX512, 1000, 1000, 1000))
    assert all(t.vec_bytes == 32 for t in cpu_tiles(AVX2, 1000, 1000, 1000))


def test_a_tile_over_the_register_file_is_refused(rng):
    problem = GemmProblem(16, 64, 16)
    w = rng.standard_normal((16, 64)).astype(np.float32)
    with pytest.raises(ScheduleError, match="needs 37 vector registers.*has 16"):
        build_template(problem, w, AVX2, tile=CpuTile(32, 8, 4, 16, 16, 32))
    with pytest.raises(ScheduleError, match="512-bit vectors, but target"):
        build_template(problem, w, AVX2, tile=CpuTile(64, 4, 1, 16, 16, 16))
    with pytest.raises(ScheduleError, match="whole register tiles"):
        build_template(problem, w, AVX2, tile=CpuTile(32, 4, 1, 16, 6, 8))


def test_bad_inputs_name_what_is_wrong(rng):
    target = AVX2 if host_runs(AVX2) else pytest.skip("host lacks AVX2")
    problem = GemmProblem(8, 8, 8)
    w = rng.standard_normal((8, 8)).astype(np.float32)
    with pytest.raises(ShapeError, match="weight has shape"):
        build_template(problem, w[:4], target)
    with pytest.raises(ShapeError, match="bias"):
        build_template(problem, w, target, ("bias",))
    with pytest.raises(ScheduleError, match="not one a template fuses"):
        Epilogue(("swish7",))
    k = build_template(problem, w, target)
    with pytest.raises(ShapeError, match="input has dtype float64"):
        k(np.zeros((8, 8)), np.zeros((8, 8), np.float32))
    with pytest.raises(ShapeError, match="out must be"):
        k(np.zeros((8, 8), np.float32), np.zeros((8, 9), np.float32))
    with pytest.raises(ShapeError, match="must be a positive integer"):
        GemmProblem(0, 4, 4)
    with pytest.raises(ShapeError, match="does not fit"):
        ConvProblem(1, 2, 2, 3, 3, 5, 5)

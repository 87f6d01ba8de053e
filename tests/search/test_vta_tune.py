"""tw.build / tw.tune on target "vta": the blocked conv operator lowered from the tiling space, tuned
against the simulator's cycle model, records filed under the accelerator configuration."""

import numpy as np
import pytest

import tilewright as tw
from tilewright.errors import LoweringError
from tilewright.lower.vta_operator import match_conv
from tilewright.ops.blocked_conv import conv2d_blocked, shift_bias_clip
from tilewright.reference import evaluate
from tilewright.search.vta_tune import best_tiling, default_tiling, tune_conv
from tilewright.space.vta import tvm_tutorial_tiling
from tilewright.te import placeholder


def _conv(block=16, batch=1):
    d = placeholder((1, 2, 8, 8, batch, block), "int8", "data")
    w = placeholder((3, 2, 3, 3, block, block), "int8", "weight")
    b = placeholder((1, 3, 1, 1, batch, block), "int32", "bias")
    return d, w, b, shift_bias_clip(conv2d_blocked(d, w, 1, 1), b)


def _arrays(tensors, seed=0):
    rng = np.random.default_rng(seed)
    d, w, b, out = tensors
    return [rng.integers(-128, 128, d.shape, dtype=np.int8), rng.integers(-128, 128, w.shape, dtype=np.int8),
            rng.integers(-99, 99, b.shape, dtype=np.int32), np.zeros(out.shape, np.int8)]


def test_build_runs_in_the_simulator_and_matches_the_reference():
    tensors = _conv()
    kernel = tw.build(list(tensors), target="vta")
    arrays = _arrays(tensors)
    kernel(*arrays)
    d, w, b, out = tensors
    np.testing.assert_array_equal(arrays[3], evaluate([out], dict(zip((d, w, b), arrays[:3])))[0])
    s = kernel.stats()
    assert s.cycles > 0 and s.gemm_uops * 256 == 8 * 8 * 48 * 32 * 9
    assert "LOAD  INP" in kernel.source and "simulated" in str(kernel.time())


def test_tune_records_under_the_configuration_and_build_replays_them(tmp_path):
    tensors = list(_conv())
    result = tw.tune(tensors, target="vta", trials=12, records=tmp_path / "r.sqlite")
    assert result.seconds <= result.default_seconds and "simulated" in result.report()
    with tw.records(tmp_path / "r.sqlite") as store:
        op = match_conv(tensors, tw.Target("vta").vta)
        assert best_tiling(op.shape, tw.Target("vta").vta, store, op.epilogue) == result.tiling
        assert best_tiling(op.shape, tw.Target("vta -bus_bytes=16").vta, store, op.epilogue) is None
        assert tw.build(tensors, target="vta").program.tiling == result.tiling


def test_search_never_loses_to_the_default_and_reports_failures():
    op = match_conv(list(_conv()), tw.Target("vta").vta)
    cfg = tw.Target("vta").vta
    best, history = tune_conv(op.shape, cfg, trials=10, seed=3, epilogue=op.epilogue)
    assert history[0][0] == default_tiling(op.shape, cfg, op.epilogue)
    assert min(c for _, c, _ in history) == next(c for t, c, _ in history if t == best)
    assert tvm_tutorial_tiling(op.shape, cfg).tile_co == 3


def test_what_the_accelerator_cannot_take_is_refused_clearly():
    d, w, b, out = _conv()
    with pytest.raises(LoweringError, match="scope 'global'"):  # a schedule must place its stages on chip
        tw.build(tw.create_schedule(out), [d, w, b, out], target="vta")
    with pytest.raises(LoweringError, match="block is 1x16x16"):
        tw.build(list(_conv(block=8)), target="vta")
    x = placeholder((4, 4), "float32", "x")
    y = tw.te.compute((4, 4), lambda i, j: x[i, j] * 2, name="y")
    with pytest.raises(LoweringError, match="conv2d_blocked followed by ops.shift_bias_clip"):
        tw.build([x, y], target="vta")
    with pytest.raises(LoweringError, match="miss"):
        tw.build([d, w, out], target="vta")

"""Loops that pick a branch of an expression by `select` (a Winograd transform's coefficient
positions) are kept whole in the unrolled register tile, so the selects fold to constants."""

import numpy as np
import pytest
from synthetic_targets import AVX2, AVX512

import tilewright as tw
from tilewright.graph.blocked import from_blocked, to_blocked
from tilewright.graph.reference import conv2d
from tilewright.ops import winograd as wino
from tilewright.space.cpu import cpu_space
from tilewright.space.cpu_default import default_point
from tilewright.space.cpu_knobs import tile_factor
from tilewright.space.cpu_plan import dispatch_periods


def transforms(c=16, h=6):
    x = tw.placeholder((1, c // 8, h, h, 8), "float32", name="x")
    v = wino.winograd_input(x, (1, 1), name="V")
    th, tw_ = wino.tiles(h, h)
    m = tw.placeholder((36, th * tw_, c), "float32", name="M")
    y = wino.winograd_output(m, None, (1, c // 8, h, h, 8), name="Y")
    return [x, v], [m, y]


def test_dispatch_periods_and_the_default_tile():
    (x, v), (m, y) = transforms()
    for args, want in (([x, v], {0: 36}), ([m, y], {2: 4, 3: 4})):
        space, plan = cpu_space(args, AVX2)
        assert dispatch_periods(plan) == want
        p = default_point(space, plan)
        assert all(tile_factor(p, plan.main.spatial[n]) == period for n, period in want.items())
    a = tw.placeholder((8, 8), "float32", name="a")
    b = tw.placeholder((8, 8), "float32", name="b")
    _, plan = cpu_space([a, b, tw.ops.matmul(a, b)], AVX2)
    assert dispatch_periods(plan) == {}


@pytest.mark.parametrize("h", [8, 6])  # whole tiles; a partial last tile (guarded)
def test_transforms_fold_their_selects_and_compute_a_convolution(h):
    c = 16
    (x, v), (m, y) = transforms(c, h)
    kin, kout = tw.build([x, v], target="cpu -isa=avx2"), tw.build([m, y], target="cpu -isa=avx2")
    assert " == " not in kin.source  # every dispatch select folded
    # a partial last output tile is computed shifted back inside the tensor (bound.required_region),
    # off the h % 4 grid: its selects stay (graph/winograd.py writes whole tiles and slices instead)
    assert (" == " in kout.source) == bool(h % 4)
    rng = np.random.default_rng(0)
    xa = rng.standard_normal((1, c, h, h)).astype(np.float32)
    wa = rng.standard_normal((c, c, 3, 3)).astype(np.float32)
    va = np.zeros([int(d) for d in v.shape], np.float32)
    kin(to_blocked(xa, 8), va)
    ma = np.einsum("epc,eco->epo", va, wino.winograd_weight(wa)).astype(np.float32)
    ya = np.zeros([int(d) for d in y.shape], np.float32)
    kout(ma, ya)
    np.testing.assert_allclose(from_blocked(ya), conv2d(xa, wa, None, padding=(1, 1, 1, 1)), rtol=1e-4, atol=1e-4)


def test_random_points_keep_the_dispatch_tile_and_tuning_runs(tmp_path):
    import random

    (x, v), (m, y) = transforms()
    space, plan = cpu_space([x, v], AVX2)
    rng = random.Random(0)
    for _ in range(20):
        p = space.sample(rng)
        assert space.valid(p) and tile_factor(p, plan.main.spatial[0]) == 36
    result = tw.tune([m, y], target="cpu", trials=3, method="q", seed=0, records=tmp_path / "r.db")
    assert result.best_point is not None and len(result.history) >= 3


def test_sixteen_lane_transforms_have_a_default():
    """On a 16-lane target a transform's one dispatch tile, 36 positions x 1 vector, is 576 points:
    the code-size bound counts it as 36 vector statements. Counted in points it left the input
    transform of ResNet-50's 3x3 layers without any default (a compile error at 0 trials)."""
    x = tw.placeholder((1, 2, 28, 28, 16), "float32", name="x")
    v = wino.winograd_input(x, (1, 1), name="V")
    space, plan = cpu_space([x, v], AVX512)
    assert plan.lanes == 16
    p = default_point(space, plan)
    assert space.valid(p) and tile_factor(p, plan.main.spatial[0]) == 36

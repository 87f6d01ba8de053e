"""Knobs, points and neighbourhoods."""

import math
import random

from tilewright.space import OrdinalKnob, Point, Space, SplitKnob
from tilewright.space.knobs import factorizations, split_totals


def test_split_knob_has_n_choose_2_directions_walkable_both_ways():
    k = SplitKnob("split.i", "i", 64, 4, (64,))
    assert len(k.directions()) == 6
    v = (4, 2, 2, 4)
    assert k.move(v, (0, 3), 1) == (8, 2, 2, 2)  # a factor 2 moves from part 3 to part 0
    assert k.move(v, (0, 3), -1) == (2, 2, 2, 8)
    assert k.move((1, 1, 1, 64), (0, 1), 1) is None  # nothing to move out of a 1
    assert all(math.prod(n) == 64 for n in k.neighbours(v))


def test_non_divisible_totals_for_poor_extents():
    assert split_totals(7) == (7, 8)
    assert split_totals(56) == (56, 57)  # 3 register rows; 60 (5, 6 rows) wastes more than 1/32
    assert split_totals(100) == (100, 102, 104, 112)
    assert split_totals(1024) == (1024, 1025, 1026, 1029)  # 5, 3 or 6, 7 register rows
    assert split_totals(64) == (64, 65, 66)
    # round-ups to the target's vector lanes: with 16 (AVX-512) 56 and 196 are not whole vectors
    assert split_totals(56, lanes=16) == (56, 57, 64) and split_totals(56) == (56, 57)
    assert 208 in split_totals(196, lanes=16) and 224 in split_totals(196, lanes=16)


def test_default_gemm_register_block_fills_the_register_file():
    """The untuned GEMM point uses the register block of a hand schedule: two vectors of
    columns and as many rows as the rest of the register file holds, over a guarded total."""
    import tilewright as tw
    from tilewright.space import cpu_space, default_point

    A = tw.placeholder((1024, 1024), "float32", name="A")
    B = tw.placeholder((1024, 1024), "float32", name="B")
    r = tw.reduce_axis(1024, name="k")
    C = tw.compute((1024, 1024), lambda i, j: tw.sum(A[i, r] * B[r, j], axis=r), name="C")
    from synthetic_targets import AVX2

    space, plan = cpu_space([C], AVX2)  # a default point: no host needed
    p = default_point(space, plan)
    assert p["split.j"][2] == 16 and p["split.i"] == (171, 1, 6)
    k = SplitKnob("split.h", "h", 7, 3, split_totals(7))
    assert k.retotal((7, 1, 1), 1) == (8, 1, 1)
    assert k.retotal((1, 1, 7), 1) == (8, 1, 1)  # 7 does not divide 8: restart from the whole
    assert k.valid((2, 2, 2)) and not k.valid((3, 1, 1))


def test_factorizations_are_complete():
    assert sorted(factorizations(12, 2)) == [(1, 12), (2, 6), (3, 4), (4, 3), (6, 2), (12, 1)]
    assert len(factorizations(64, 3)) == 28


def test_points_are_hashable_and_json_round_trip():
    p = Point((("split.i", (4, 2, 8)), ("unroll", 1)))
    assert Point.from_json(p.to_json()) == p
    assert len({p, Point.from_json(p.to_json())}) == 1
    assert p["split.i"] == (4, 2, 8) and p.replace("unroll", 0)["unroll"] == 0


def test_space_samples_valid_points_and_neighbours_respect_the_constraint():
    knobs = [SplitKnob("split.i", "i", 32, 3, (32,)), OrdinalKnob("unroll", (False, True))]
    space = Space(knobs, constraint=lambda p: p["split.i"][2] <= 8)
    rng = random.Random(0)
    for _ in range(50):
        p = space.sample(rng)
        assert space.valid(p)
        for n in space.neighbours(p):
            assert space.valid(n) and n != p
    assert len(space.directions()) == 3 * 2 + 2 + 2
    assert len(space.features(space.sample(rng))) == 4

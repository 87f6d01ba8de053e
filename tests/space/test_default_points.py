"""Golden default points: the untuned default (every knob value) of a few workloads on synthetic
CPU targets (ISA and execution units, cores, caches), so any change to the default model shows
up here as a changed point to explain. The targets are data only; nothing reads the host.

Regenerate after an intended change to the model with
    UPDATE_GOLDEN=1 .venv/bin/pytest tests/space/test_default_points.py
and review the diff of golden/default_points.json."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from tilewright.space import cpu_space, default_point
from tilewright.space.cpu import pack_repeats
from tilewright.space.cpu_knobs import PACK, pack_key
from tilewright.space.cpu_tiles import live_vectors
from tilewright.targets import ISA_FEATURES, Target
from tilewright.workloads.builders import suite_program

GOLDEN = Path(__file__).parent / "golden" / "default_points.json"

UNITS = {  # (features, execution units)
    "avx2": (ISA_FEATURES["avx2"], dict(fma_units=2, fma_bits=256, load_bits=256)),  # Zen 3, Skylake client
    "avx512": (ISA_FEATURES["avx512"], dict(fma_units=2, fma_bits=512, load_bits=512)),  # Xeon, 2 FMA units
    "avx512dp": (ISA_FEATURES["avx512"], dict(fma_units=2, fma_bits=256, load_bits=256)),  # Zen 4: two halves
    # Zen 1: 256-bit vectors on 128-bit units, FMA latency 5
    "avx2half": (ISA_FEATURES["avx2"], dict(fma_units=2, fma_bits=128, load_bits=128, fma_latency=5)),
}
CACHES = {
    "small": (((1, "Data", 32 * 1024), (2, "Unified", 512 * 1024)), 8),
    "large": (((1, "Data", 48 * 1024), (2, "Unified", 2 * 1024 * 1024)), 12),
}
CORES = (4, 16)
WORKLOADS = {  # name -> (suite operator, case)
    "yolo_3x3": ("C2D", "yolo_conv8"),  # 256 -> 512, 28x28, 3x3
    "resnet_1x1": ("R50", "l2_reduce2"),  # 512 -> 128, 28x28, 1x1
    "conv1": ("R50", "conv1"),  # 3 -> 64, 7x7, stride 2, 224x224
    "depthwise": ("DEP", "mbv2_dw_1"),  # 16 x 6, 3x3, stride 2, 112x112
    "gemm_1024": ("GEMM", "gemm_1024"),
    "gemv_1024": ("GEMV", "gemv_1024"),
}


def target(isa: str, cores: int, cache: str) -> Target:
    features, units = UNITS[isa]
    caches, ways = CACHES[cache]
    return Target(kind="cpu", arch="x86_64", cores=cores, features=frozenset(features), isa="native",
                  caches=caches, l1_ways=ways, compiler="cc", compiler_version="gcc (synthetic) 12.2.0", **units)


TARGETS = {f"{isa}-{cores}c-{cache}": target(isa, cores, cache) for isa in UNITS for cores in CORES
           for cache in CACHES}


def _defaults():
    out = {}
    for tname, t in TARGETS.items():
        for wname, (op, case) in WORKLOADS.items():
            tensors = suite_program(op, case)
            space, plan = cpu_space(tensors[-1:], t)
            out[f"{tname}/{wname}"] = (space, plan, default_point(space, plan))
    return out


@pytest.fixture(scope="module")
def defaults():
    return _defaults()


def test_default_points_match_the_golden_file(defaults):
    got = {key: str(p) for key, (_, _, p) in defaults.items()}
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        return
    if not GOLDEN.exists():
        pytest.fail(f"{GOLDEN} is missing; run UPDATE_GOLDEN=1 pytest {__file__} to create it")
    want = json.loads(GOLDEN.read_text())
    changed = [f"{key}\n  golden: {want.get(key)}\n  now:    {got.get(key)}" for key in sorted(set(want) | set(got))
               if want.get(key) != got.get(key)]
    assert not changed, f"{len(changed)} default points changed (UPDATE_GOLDEN=1 to accept):\n" + "\n".join(changed)


def test_no_default_inner_loop_needs_more_vectors_than_the_register_file(defaults):
    for key, (_, plan, p) in defaults.items():
        assert live_vectors(plan, p) <= plan.registers, (key, live_vectors(plan, p), plan.registers, str(p))


def test_no_default_packs_an_operand_twice(defaults):
    """Packed once per outer block or once per call: never repacked under parallel loops that do
    not index the operand (a per-reduction-block pack of a blocked panel aside)."""
    for key, (space, plan, p) in defaults.items():
        for t in plan.packable:
            if pack_key(t) in space.knobs and PACK[p[pack_key(t)]] in ("outer", "root"):
                assert pack_repeats(plan, p, t) == 1, (key, t.name, str(p))


def _tile(space, plan, p):
    vec = plan.main.spatial[space.knobs["vec_axis"].options[p["vec_axis"]]].name
    return vec, {lp.name: p[f"split.{lp.name}"][2] for lp in plan.main.spatial if f"split.{lp.name}" in space.knobs
                 and p[f"split.{lp.name}"][2] > 1}


def test_zmm_register_tiles_follow_the_fma_rate(defaults):
    """A 3x3 conv on Zen 4 (one zmm FMA per cycle): 2 zmm of output channels x 7 columns, the tile
    measured fastest there (2x14, 1x28 and 4x7 were 5-12% slower); on a Xeon with two 512-bit FMA
    units a tile needs twice the accumulators to hide the latency; on AVX2, 2 ymm of output
    channels as before."""
    for cores in CORES:
        for cache in CACHES:
            space, plan, p = defaults[f"avx512dp-{cores}c-{cache}/yolo_3x3"]
            assert _tile(space, plan, p) == ("o", {"o": 32, "w": 7})
            space, plan, p = defaults[f"avx512-{cores}c-{cache}/yolo_3x3"]
            vec, tile = _tile(space, plan, p)
            assert vec == "o" and tile["o"] // 16 * tile.get("w", 1) * tile.get("h", 1) >= 12
            space, plan, p = defaults[f"avx2-{cores}c-{cache}/yolo_3x3"]
            vec, tile = _tile(space, plan, p)
            assert vec == "o" and tile["o"] == 16


def test_depthwise_with_a_channel_multiplier_vectorizes_along_its_width(defaults):
    """o // 6 differs across the lanes of a vector along o (a gather: scalar code); along the output
    width the stride-2 input is two loads and a permute per vector, and rows of the 6 output channels
    of one input channel share its vector."""
    for key, (space, plan, p) in defaults.items():
        if key.endswith("/depthwise"):
            vec, tile = _tile(space, plan, p)
            assert vec == "w" and (6 % tile.get("o", 1) == 0 or tile.get("o", 1) % 6 == 0), (key, str(p))


def test_split_fmas_wait_a_cycle_longer_per_accumulator_chain():
    """Zen 1 runs a 256-bit FMA as two 128-bit halves: 7 accumulators, balanced against the chain
    latency (5 + slack 2) on paper, measured 1.25-1.36x slower than 10-12 (MobileNet-v2's 7x7 1x1
    convs), so such a target models one more cycle per chain; a target with 256-bit units not."""
    from tilewright.space.cpu_tiles import FMA_LATENCY_SLACK, SPLIT_FMA_SLACK, step_cost

    tensors = suite_program("R50", "l4_reduce")  # 1x1 conv at 7x7, vectorized along h*w
    cycles = {}
    for isa in ("avx2half", "avx2"):
        t = target(isa, 4, "small")
        t = dataclasses.replace(t, fma_latency=5)  # the same latency on both
        space, plan = cpu_space(tensors[-1:], t)
        names = [lp.name for lp in plan.main.spatial]
        vpos, rows = names.index("hw"), names.index("o")
        lane_fmas, cycles[isa], accumulators, _, _ = step_cost(plan, vpos, 8, 1, {vpos: 8, rows: 7})
        assert accumulators == 7 and lane_fmas == 56
    assert cycles["avx2"] == 5 + FMA_LATENCY_SLACK
    assert cycles["avx2half"] == 5 + FMA_LATENCY_SLACK + SPLIT_FMA_SLACK

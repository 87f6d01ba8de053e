"""The FPGA schedule space of an `HLSForm`, built from the workload (FlexTensor Table 2, no template):
per axis a split into (rounds, tile / unroll, unroll), the tile being what the `buffer` primitive
holds on chip and the unrolls the PE array; per buffer a `partition` level (the fewest cyclic banks
that serve one iteration's unrolled accesses without conflict, or a half or a quarter of that,
trading II for block RAM); the stream's beat width; `pipeline`: how many copies of the read /
compute / write stages share the output tiles, and whether the compute stage's buffers are doubled
(the next round unpacks while this one computes). Points over the device's DSPs, block RAM or LUTs
are invalid (the paper's resource pruning); the model's cycles are the cost."""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..errors import ScheduleError
from ..lower.hls_design import HLSDesign, output_tiles, unrolled_addresses, zero_beyond
from ..lower.hls_form import HLSForm
from ..runtime.hls_model import BITS, estimate
from .knobs import OrdinalKnob, SplitKnob, split_totals
from .space import Point, Space

PARTITION_LEVELS = (1, 2, 4)  # the conflict-free bank count divided by this
PIPELINES = (1, 2, 4)


def conflict_free_banks(addresses: list[int], ports: int) -> int:
    """The fewest cyclic banks that serve `addresses` with at most `ports` accesses per bank."""
    addr = np.asarray(addresses)
    need = max(1, math.ceil(len(addresses) / ports))
    for banks in range(need, 4 * len(addresses) + 1):
        if np.bincount(addr % banks).max() <= ports:
            return banks
    return len(addresses)


def design_of(form: HLSForm, tile: dict, unroll: dict, levels=(1, 1, 1), beat: int = 1, pipelines: int = 1,
              double_buffer: bool = False) -> HLSDesign:
    """A design whose buffers get the conflict-free bank counts divided by `levels`."""
    names = [n for n, _ in form.axes]
    probe = HLSDesign(tuple((n, tile[n]) for n in names), tuple((n, unroll[n]) for n in names), (1, 1, 1), beat,
                      pipelines)
    a, b, acc = unrolled_addresses(form, probe)
    full = (conflict_free_banks(a, 2), conflict_free_banks(b, 2), conflict_free_banks(acc, 1))
    parts = tuple(max(1, f // lv) for f, lv in zip(full, levels))
    return HLSDesign(probe.tile, probe.unroll, parts, beat, pipelines, double_buffer)


def beats_for(form: HLSForm, device) -> tuple[int, ...]:
    widest = device.axi_bits // BITS[form.in_dtype]
    return tuple(b for b in (1, 2, 4, 8, 16, 32, 64) if b <= widest)


def hls_space(form: HLSForm, device) -> Space:
    # tiles that overhang an axis (its extent rounded up) where the overhang reads zero: FPGA'15's ceil terms
    knobs: list = [SplitKnob(f"split_{n}", n, e, 3, split_totals(e, 16) if k < len(form.spatial) or zero_beyond(form, k)
                             else (e,)) for k, (n, e) in enumerate(form.axes)]
    beats = beats_for(form, device)
    knobs += [OrdinalKnob(f"partition_{x}", PARTITION_LEVELS) for x in ("a", "b", "acc")]
    knobs += [OrdinalKnob("beat", beats), OrdinalKnob("pipelines", PIPELINES),
              OrdinalKnob("double_buffer", (False, True))]
    space = Space(knobs)
    space.form, space.device = form, device
    cache: dict[Point, tuple[float, str]] = {}

    def cost(p: Point) -> tuple[float, str]:
        """(modelled cycles, "") of a design that fits the device, (inf, why) of one that does not."""
        if p not in cache:
            try:
                cache[p] = (float(estimate(form, design_at(space, p), device).cycles), "")
            except ScheduleError as exc:
                cache[p] = (math.inf, str(exc))
        return cache[p]

    def sampler(rng):
        """A draw whose unrolled MACs fit the DSPs: uniform splits mostly ask for more than any part has."""
        p = Point(tuple((name, k.sample(rng)) for name, k in space.knobs.items()))
        unrolled = math.prod(p[f"split_{n}"][2] for n, _ in form.axes)
        pipes = PIPELINES[p["pipelines"]]
        return p if unrolled * pipes * device.dsp_per_mac(form.in_dtype) <= device.dsp else None

    space.sampler = sampler
    space.cost = cost
    space.constraint = lambda p: math.isfinite(cost(p)[0])
    return space


def design_at(space: Space, p: Point) -> HLSDesign:
    form = space.form
    tile = {n: p[f"split_{n}"][1] * p[f"split_{n}"][2] for n, _ in form.axes}
    unroll = {n: p[f"split_{n}"][2] for n, _ in form.axes}
    levels = tuple(PARTITION_LEVELS[p[f"partition_{x}"]] for x in ("a", "b", "acc"))
    beat = space.knobs["beat"].options[p["beat"]]
    d = design_of(form, tile, unroll, levels, beat, PIPELINES[p["pipelines"]], bool(p["double_buffer"]))
    if output_tiles(form, d) % d.pipelines:
        raise ScheduleError(f"{d.pipelines} pipelines do not divide the {output_tiles(form, d)} output tiles")
    return d


def point_of(space: Space, d: HLSDesign) -> Point:
    """The point of a design whose partitions are at one of the space's levels (the default's are)."""
    form = space.form
    values = [(f"split_{n}", (-(-e // t), t // u, u)) for (n, e), (_, t), (_, u) in zip(form.axes, d.tile, d.unroll)]
    ref = design_of(form, dict(d.tile), dict(d.unroll))
    for x, have, full in zip(("a", "b", "acc"), d.partition, ref.partition):
        level = next((i for i, lv in enumerate(PARTITION_LEVELS) if max(1, full // lv) == have), None)
        if level is None:
            raise ValueError(f"partition {have} of buffer {x} is not at a level of the space (full {full})")
        values.append((f"partition_{x}", level))
    values += [("beat", space.knobs["beat"].options.index(d.beat)),
               ("pipelines", PIPELINES.index(d.pipelines)), ("double_buffer", int(d.double_buffer))]
    return Point(tuple(values))


def _fits(space: Space, axis: str, tile: int) -> bool:
    k = space.knobs[f"split_{axis}"]
    return -(-k.extent // tile) * tile in k.totals


def heuristic_designs(space: Space, per_pair: int = 2) -> list[HLSDesign]:
    """Starting points the search refines: for each pair of one spatial and one reduce axis, a PE
    array over the two sized to the DSPs (the most useful MACs a cycle, padding counted), its reduce
    tile one or eight arrays deep, windows (reduce axes with a small extent) whole in the tile, the
    last two spatial axes tiled by their largest divisors up to 16 or 64, the widest beat, double
    buffers. Built from the
    workload's axes, not a template."""
    form, dev = space.form, space.device
    budget = int(dev.dsp / dev.dsp_per_mac(form.in_dtype))
    beat = space.knobs["beat"].options[-1]
    out = []
    for s_axis, s_ext in form.spatial:
        for r_axis, r_ext in form.reduce:
            if s_ext < 2 or r_ext < 2:
                continue
            def useful(us, ur, s_ext=s_ext, r_ext=r_ext):
                return us * ur * s_ext / (-(-s_ext // us) * us) * r_ext / (-(-r_ext // ur) * ur)

            pairs = sorted(((useful(us, ur), us, ur) for us in range(1, min(s_ext, budget) + 1)
                            if _fits(space, s_axis, us)
                            for ur in range(1, min(r_ext, budget // us) + 1) if _fits(space, r_axis, ur)),
                           reverse=True)
            for (_, us, ur), depth, plane in itertools.product(pairs[:per_pair], (1, 8), (16, 64)):
                if depth > 1 and not _fits(space, r_axis, ur * depth):
                    continue
                tile = {n: 1 for n, _ in form.axes}
                for n, e in form.reduce:
                    tile[n] = e if e <= 11 else 1
                for n, e in form.spatial[-2:]:
                    tile[n] = max(t for t in range(1, min(e, plane) + 1) if e % t == 0)
                tile[s_axis], tile[r_axis] = us, ur * depth
                unroll = {n: 1 for n, _ in form.axes}
                unroll[s_axis], unroll[r_axis] = us, ur
                out.append(design_of(form, tile, unroll, beat=beat, double_buffer=True))
    return out


def default_design(form: HLSForm, device) -> HLSDesign:
    """What HLS makes of the loop nest with no directives worth the name: one multiply-accumulate per
    cycle, a tile of the innermost spatial axis (a row) per round, the stages overlapped."""
    tile = {n: 1 for n, _ in form.axes}
    tile[form.spatial[-1][0]] = form.spatial[-1][1]
    return design_of(form, tile, {n: 1 for n, _ in form.axes}, beat=1)


__all__ = ["beats_for", "conflict_free_banks", "default_design", "design_at", "design_of", "heuristic_designs",
           "hls_space", "point_of"]

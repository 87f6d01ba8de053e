"""Vyasa's schedule space for a convolution on the AI-Engine-like core (Vyasa III-F), built from the
workload (no template): the order of the spatial loops (the last one is software-pipelined), an
unroll-and-jam factor per spatial axis (a divisor of its extent; along the vector axis, vectors
per iteration), with the reduce axes always unrolled (the paper's first pruning rule) and the
vector loop on the output's innermost axis (the store writes whole vectors). A point is valid when
the Vyasa passes accept it: registers and accumulators fit, every selection is expressible, and
the pipelined loop fits the program memory (the paper's second rule)."""

from __future__ import annotations

import itertools

from ..errors import ScheduleError
from ..lower.aie_program import VyasaSchedule
from ..lower.vyasa import build_program
from ..runtime.aie_cycles import cycles
from .knobs import OrdinalKnob
from .space import Point, Space

MAX_JAM = 8  # unroll-and-jam factors tried per axis (program memory bounds the product anyway)


def _jams(extent: int, unit: int) -> tuple[int, ...]:
    return tuple(d for d in range(1, MAX_JAM + 1) if extent % (d * unit) == 0)


def aie_space(form, config, passes: dict | None = None) -> Space:
    """The space of `form` (a lower.vyasa_form.ConvForm); `passes` switches the Vyasa passes off
    for the ablation (reuse_graph / lazy_stores / fuse_columns = False)."""
    names = [n for n, _ in form.spatial]
    lanes = config.datapath(form.bits)[0]
    orders = tuple(itertools.permutations(names))
    knobs = [OrdinalKnob("order", orders)]
    for k, (name, extent) in enumerate(form.spatial):
        unit = lanes if k == len(names) - 1 else 1
        if extent % unit:
            raise ScheduleError(f"the vector axis '{name}' of '{form.output.name}' has {extent} elements, not a "
                                f"multiple of the {form.bits}-bit datapath's {lanes} lanes (pad the output)")
        knobs.append(OrdinalKnob(f"jam_{name}", _jams(extent, unit)))
    space = Space(knobs)
    space.form, space.config, space.passes = form, config, dict(passes or {})
    cache: dict[Point, bool] = {}

    def valid(p: Point) -> bool:
        if p not in cache:
            try:
                program = build_program(form, schedule_of(space, p), config)
                cache[p] = cycles(program, config).code_bytes <= config.program_memory_bytes
            except ScheduleError:
                cache[p] = False
        return cache[p]

    space.constraint = valid
    return space


def schedule_of(space: Space, point: Point) -> VyasaSchedule:
    k = space.knobs
    names = [n for n, _ in space.form.spatial]
    order = k["order"].options[point["order"]]
    jam = tuple((n, k[f"jam_{n}"].options[point[f"jam_{n}"]]) for n in names)
    return VyasaSchedule(names[-1], tuple(order), jam, **space.passes)


def point_of(space: Space, schedule: VyasaSchedule) -> Point:
    names = [n for n, _ in space.form.spatial]
    values = [("order", space.knobs["order"].options.index(tuple(schedule.order)))]
    for n in names:
        values.append((f"jam_{n}", space.knobs[f"jam_{n}"].options.index(schedule.factor(n))))
    return Point(tuple(values))


def default_schedule(form) -> VyasaSchedule:
    """No unroll-and-jam, the te's loop order: what a plain vectorizer would do."""
    names = tuple(n for n, _ in form.spatial)
    return VyasaSchedule(names[-1], names)


__all__ = ["aie_space", "default_schedule", "point_of", "schedule_of"]

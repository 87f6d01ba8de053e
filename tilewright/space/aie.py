"""Vyasa's schedule space for a convolution on the AI-Engine-like core (Vyasa III-F), built from the
workload (no template): the vector loop, the order of the spatial loops (the last one is
software-pipelined), an unroll-and-jam factor per spatial axis (along the vector axis: vectors per
iteration), each operand's data layout (dimension order and blocking) and, for 16-bit, whether an
odd filter axis is padded with a zero tap; the reduce axes are always unrolled (the paper's first
pruning rule) and the output is laid out with the vector axis innermost. A point is valid when
the Vyasa passes accept it: registers and accumulators fit, every selection is expressible, and
the pipelined loop fits the program memory (the paper's second rule)."""

from __future__ import annotations

import itertools
import math

from ..errors import ScheduleError
from ..lower.aie_program import LayoutSpec, VyasaSchedule
from ..lower.vyasa import build_program, layout_probe
from ..runtime.aie_cycles import cycles
from .knobs import OrdinalKnob
from .space import Point, Space

MAX_JAM = 8  # unroll-and-jam factors tried per axis (program memory bounds the product anyway)


def _jams(extent: int) -> tuple[int, ...]:
    return tuple(d for d in range(1, MAX_JAM + 1) if extent % d == 0)


def layout_candidates(shape, lanes: int, columns: int) -> tuple:
    """Vyasa's data layouts of one operand, from its rank alone: the dimensions as written or with one
    moved innermost, each bare, with one dimension blocked innermost by the column count (16-bit
    pairs: (C/2)...(2)) or the lane count ((K/16)...(16)), or both ((K/16)...(C/2)(16)(2))."""
    n = len(shape)
    orders = [tuple(range(n))] + [tuple(d for d in range(n) if d != m) + (m,) for m in range(n - 1)]
    dims = [d for d in range(n) if shape[d] > 1]
    inners = [()] + [((d, lanes),) for d in dims if shape[d] >= lanes]
    if columns > 1:
        inners += [((d, columns),) for d in dims]
        inners += [((d, lanes), (e, columns)) for d in dims for e in dims if d != e and shape[d] >= lanes]
    return (None,) + tuple(LayoutSpec(o, i) for o in orders for i in inners if o != tuple(range(n)) or i)


def aie_space(form, config, passes: dict | None = None) -> Space:
    """The space of `form` (a lower.vyasa_form.ConvForm); `passes` switches the Vyasa passes off
    for the ablation (reuse_graph / lazy_stores / fuse_columns = False)."""
    names = [n for n, _ in form.spatial]
    lanes, columns = config.datapath(form.bits)
    vectors = tuple(n for n, e in form.spatial if e % lanes == 0)
    if not vectors:
        raise ScheduleError(f"no spatial axis of '{form.output.name}' ({dict(form.spatial)}) is a multiple of the "
                            f"{form.bits}-bit datapath's {lanes} lanes; pad the output")
    knobs = [OrdinalKnob("vector", vectors), OrdinalKnob("order", tuple(itertools.permutations(names)))]
    knobs += [OrdinalKnob(f"jam_{name}", _jams(extent)) for name, extent in form.spatial]
    layouts = [layout_candidates(op.tensor.shape, lanes, columns) for op in form.operands]
    knobs += [OrdinalKnob(f"layout_{c}", options) for c, options in zip("ab", layouts)]
    if columns > 1:
        knobs.append(OrdinalKnob("pad_taps", (True, False)))
    # the layout pairs worth drawing for each vector axis (most combinations cannot stream the vector)
    pairs = {}
    for name in vectors:
        pairs[name] = [(ia, ib) for ia, la in enumerate(layouts[0]) for ib, lb in enumerate(layouts[1])
                       if layout_probe(form, name, (la, lb), config)]
    usable = [n for n in vectors if pairs[n]]
    if not usable:
        raise ScheduleError(f"no operand layout lets '{form.output.name}' stream a vector along "
                            f"{', '.join(vectors)}; the product needs one operand independent of the vector axis")

    def sampler(rng):
        """A usable (vector, layouts) pair, and jams whose output vectors could share the accumulators."""
        name = rng.choice(usable)
        ia, ib = rng.choice(pairs[name])
        fixed = {"vector": vectors.index(name), "layout_a": ia, "layout_b": ib}
        p = Point(tuple((k, fixed[k] if k in fixed else knob.sample(rng)) for k, knob in space.knobs.items()))
        jam = 1
        for n in names:
            jam *= space.knobs[f"jam_{n}"].options[p[f"jam_{n}"]]
        return p if jam <= 2 * config.accumulators else None

    space = Space(knobs, sampler=sampler)
    space.form, space.config, space.passes = form, config, dict(passes or {})
    cache: dict[Point, tuple[float, str]] = {}

    def cost(p: Point) -> tuple[float, str]:
        """(modelled cycles, "") of a valid point, (inf, why) of one the passes or the program memory refuse;
        each point is lowered once, for the constraint and the search alike."""
        if p not in cache:
            try:
                report = cycles(build_program(form, schedule_of(space, p), config), config)
                cache[p] = (float(report.cycles), "") if report.code_bytes <= config.program_memory_bytes else (
                    math.inf, f"{report.code_bytes} bytes of code exceed the {config.program_memory_bytes}-byte "
                              f"program memory")
            except ScheduleError as exc:
                cache[p] = (math.inf, str(exc))
        return cache[p]

    space.cost = cost
    space.constraint = lambda p: math.isfinite(cost(p)[0])
    return space


def schedule_of(space: Space, point: Point) -> VyasaSchedule:
    k = space.knobs
    names = [n for n, _ in space.form.spatial]
    jam = tuple((n, k[f"jam_{n}"].options[point[f"jam_{n}"]]) for n in names)
    layouts = tuple(k[f"layout_{c}"].options[point[f"layout_{c}"]] for c in "ab")
    pad = k["pad_taps"].options[point["pad_taps"]] if "pad_taps" in k else True
    return VyasaSchedule(k["vector"].options[point["vector"]], tuple(k["order"].options[point["order"]]), jam,
                         layouts, pad, **space.passes)


def point_of(space: Space, schedule: VyasaSchedule) -> Point:
    k = space.knobs
    values = [("vector", k["vector"].options.index(schedule.vector_axis)),
              ("order", k["order"].options.index(tuple(schedule.order)))]
    values += [(f"jam_{n}", k[f"jam_{n}"].options.index(schedule.factor(n))) for n, _ in space.form.spatial]
    values += [(f"layout_{c}", k[f"layout_{c}"].options.index(spec)) for c, spec in zip("ab", schedule.layouts)]
    if "pad_taps" in k:
        values.append(("pad_taps", k["pad_taps"].options.index(schedule.pad_taps)))
    return Point(tuple(values))


def default_schedule(form) -> VyasaSchedule:
    """The output's innermost axis vectorized, no unroll-and-jam, the te's loop order and layouts: what a
    plain vectorizer would do."""
    names = tuple(n for n, _ in form.spatial)
    return VyasaSchedule(names[-1], names)


__all__ = ["aie_space", "default_schedule", "layout_candidates", "point_of", "schedule_of"]

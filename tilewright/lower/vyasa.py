"""Vyasa's passes (Vyasa section III): a convolution's loop body, unrolled over its reduce axes and
jammed over the unroll-and-jam factors, as triplets (update operand, two MAC operands); lazy
stores (one accumulator and one store per output vector); the reuse graph (vector loads whose
windows share an element form one connected component, loaded once as a wide aligned register
that the shuffle network selects unaligned windows from; scalar operands adjacent in memory
likewise share one load); fusion of 1-D MACs into the datapath's columns (16-bit: pairs, odd filter
widths padded with a zero tap as the paper does); and loads interleaved with the MACs that use
them, so that registers live briefly. The result is an `AIEProgram`: one inner-loop body of loads,
MACs and stores, its loop nest and its operands' layouts, which codegen/aie.py renders and
runtime/aie_cycles.py times.

The three passes can be switched off (`reuse_graph`, `lazy_stores`, `fuse_columns`) for the
ablation; a program without lazy stores or fusion is timed by the model but not rendered."""

from __future__ import annotations

import itertools

from ..errors import LoweringError, ScheduleError
from ..targets.aie import AIEConfig
from .aie_program import AIEProgram, Layout, VyasaSchedule
from .vyasa_form import ConvForm, Operand
from .vyasa_passes import assemble


def _roles(form: ConvForm, v: int) -> tuple[Operand, Operand, tuple[str, str]]:
    a, b = form.operands
    def streams(o: Operand) -> bool:
        col = o.column(v)
        return col[-1] == 1 and not any(col[:-1])
    if streams(a) and not any(b.column(v)):
        return a, b, ("x", "z")
    if streams(b) and not any(a.column(v)):
        return b, a, ("z", "x")
    name = form.spatial[v][0]
    raise ScheduleError(f"vector axis '{name}' of '{form.output.name}': one operand must read consecutive "
                        f"elements along it (its innermost index = {name} + ...) and the other must not depend "
                        f"on it; got {a.name} {a.column(v)} and {b.name} {b.column(v)}")


def _padded_tap_axis(form: ConvForm, x: Operand, z: Operand) -> int | None:
    """The reduce axis that slides x's window by one element per step and walks z's innermost
    dimension: the one a zero tap pads to an even count."""
    n_sp = len(form.spatial)
    for k in range(len(form.reduce)):
        if x.column(n_sp + k)[-1] == 1 and z.column(n_sp + k)[-1] == 1:
            return k
    return None


def _layout(op: Operand, extents: list[int], elems_256: int, align_rows: bool) -> Layout:
    reach = []
    for row, o, dim in zip(op.matrix, op.offset, op.tensor.shape):
        hi = o + sum(max(c, 0) * (e - 1) for c, e in zip(row, extents))
        lo = o + sum(min(c, 0) * (e - 1) for c, e in zip(row, extents))
        if lo < 0:
            raise LoweringError(f"'{op.name}' is read at a negative index; pad the input first")
        reach.append(max(hi + 1, dim))
    if align_rows:
        reach[-1] = -(-reach[-1] // elems_256) * elems_256
    return _sized(tuple(op.tensor.shape), tuple(reach), elems_256)


def _sized(shape, padded, elems_256: int) -> Layout:
    n = 1
    for e in padded:
        n *= e
    return Layout(shape, padded, -(-n // elems_256) * elems_256)


def _linear(op: Operand, layout: Layout, point) -> int:
    return sum(s * i for s, i in zip(layout.strides, op.index(point)))


def build_program(form: ConvForm, schedule: VyasaSchedule, config: AIEConfig) -> AIEProgram:
    """The Vyasa passes on `form` under `schedule`; a point the hardware cannot run is a ScheduleError
    naming the constraint (register file, register width, shuffle network, alignment, divisibility)."""
    bits = form.bits
    lanes, columns = config.datapath(bits)
    e256 = config.port_bits // bits
    names = [n for n, _ in form.spatial]
    if sorted(schedule.order) != sorted(names):
        raise ScheduleError(f"loop order {schedule.order} must name each spatial axis of '{form.output.name}' "
                            f"once: {', '.join(names)}")
    v = form.spatial_index(schedule.vector_axis)
    if v != len(names) - 1:
        raise ScheduleError(f"vector axis '{schedule.vector_axis}' must be the output's innermost dimension "
                            f"('{names[-1]}'): the output is stored as whole vectors")
    x, z, roles = _roles(form, v)
    red = [e for _, e in form.reduce]
    pad_axis = _padded_tap_axis(form, x, z) if columns == 2 else None
    if columns == 2 and pad_axis is not None and red[pad_axis] % 2:
        red[pad_axis] += 1  # the paper's zero column: z padded, x read one element further
    extents = [e for _, e in form.spatial] + red
    layouts = {"x": _layout(x, extents, e256, True), "z": _layout(z, extents, e256, False)}
    out_shape = tuple(e for _, e in form.spatial)
    layouts["o"] = _sized(out_shape, out_shape[:-1] + (-(-out_shape[-1] // e256) * e256,), e256)
    if not schedule.fuse_columns and columns == 2:
        # each 1-D MAC pairs with its own zero weight: z laid out with a zero after every element
        zl = layouts["z"]
        layouts["z"] = _sized(zl.shape, zl.padded[:-1] + (2 * zl.padded[-1],), e256)

    steps = {}
    for k, (name, ext) in enumerate(form.spatial):
        step = schedule.factor(name) * (lanes if k == v else 1)
        if ext % step:
            raise ScheduleError(f"axis '{name}' ({ext}) is not a multiple of its step {step} (unroll-and-jam "
                                f"{schedule.factor(name)}{f' x {lanes} lanes' if k == v else ''})")
        steps[name] = step
    loops = tuple((a, dict(form.spatial)[a], steps[a]) for a in schedule.order)
    ops = {"x": x, "z": z}
    pointers = {}
    for role in ("x", "z", "o"):
        inc = {}
        for k, name in enumerate(names):
            if role == "o":
                e = layouts["o"].strides[k]
            else:
                unit = tuple(int(j == k) for j in range(len(extents)))
                e = _linear(ops[role], layouts[role], unit) - _linear(ops[role], layouts[role], (0,) * len(extents))
            if e * steps[name] % e256:
                raise ScheduleError(f"a step of axis '{name}' moves {role} by {e * steps[name]} elements, not a "
                                    f"whole number of 256-bit words: loads would be unaligned")
            inc[name] = e
        pointers[role] = inc

    # triplets: per output vector (jam point), one row per reduce point
    jams = [range(0, steps[n], lanes if k == v else 1) for k, n in enumerate(names)]
    zero = (0,) * len(extents)
    groups = []
    for d in itertools.product(*jams):
        rows = []
        for r in itertools.product(*(range(e) for e in red)):
            pt = d + r
            cz = _linear(z, layouts["z"], pt) - _linear(z, layouts["z"], zero)
            if not schedule.fuse_columns and columns == 2:
                cz *= 2
            rows.append((_linear(x, layouts["x"], pt) - _linear(x, layouts["x"], zero), cz))
        groups.append((sum(s * i for s, i in zip(layouts["o"].strides, d)), rows))
    return assemble(form, schedule, config, loops, pointers, layouts, roles, groups)

__all__ = ["AIEProgram", "VyasaSchedule", "build_program"]

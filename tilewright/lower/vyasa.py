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

import numpy as np

from ..errors import LoweringError, ScheduleError
from ..targets.aie import AIEConfig
from .aie_program import AIEProgram, Layout, LayoutSpec, VyasaSchedule
from .vyasa_form import ConvForm, Operand
from .vyasa_passes import assemble


def _roles(form: ConvForm, v: int) -> tuple[int, int]:
    """(index of the streamed operand x, index of the broadcast operand z) for vector axis `v`."""
    a, b = form.operands
    if any(a.column(v)) and not any(b.column(v)):
        return 0, 1
    if any(b.column(v)) and not any(a.column(v)):
        return 1, 0
    name = form.spatial[v][0]
    raise ScheduleError(f"vector axis '{name}' of '{form.output.name}': exactly one operand may depend on it (the "
                        f"streamed one; the other is broadcast), got {a.name} {a.column(v)} and {b.name} "
                        f"{b.column(v)}")


def realize(op_shape, spec: LayoutSpec, reach, align: int, elems_256: int) -> Layout:
    """`spec` over a tensor read up to `reach` (exclusive) per dimension; the last outer part is padded so
    that rows are whole `align`-element words (the core's 128-bit load alignment), and the buffer ends
    one 256-bit word past its data (a wide load may read beyond the last element it uses)."""
    blocks = dict(spec.inner)
    if sorted(spec.order) != list(range(len(op_shape))) or any(not 0 <= d < len(op_shape) for d in blocks):
        raise ScheduleError(f"layout {spec} does not name each of the {len(op_shape)} dimensions once")
    padded = tuple(-(-max(r, n) // blocks.get(d, 1)) * blocks.get(d, 1) for d, (r, n) in
                   enumerate(zip(reach, op_shape)))
    extents = [padded[d] // blocks.get(d, 1) for d in spec.order] + [b for _, b in spec.inner]
    tail = 1
    for e in extents[len(spec.order):]:
        tail *= e
    k = len(spec.order) - 1
    while extents[k] * tail % align:
        extents[k] += 1
    n = 1
    for e in extents:
        n *= e
    return Layout(tuple(op_shape), spec, padded, tuple(extents), (-(-n // elems_256) + 1) * elems_256)


def _reach(op: Operand, extents) -> list[int]:
    out = []
    for row, o in zip(op.matrix, op.offset):
        hi = o + sum(max(c, 0) * (e - 1) for c, e in zip(row, extents))
        lo = o + sum(min(c, 0) * (e - 1) for c, e in zip(row, extents))
        if lo < 0:
            raise LoweringError(f"'{op.name}' is read at a negative index; pad the input first")
        out.append(hi + 1)
    return out


def _check_blocks(op: Operand, spec: LayoutSpec, steps: list[int], what: str) -> None:
    """Each loop step must move a blocked dimension by whole blocks, so that one body serves every
    iteration (the offsets are translation-invariant)."""
    for d, b in spec.inner:
        for k, step in enumerate(steps):
            if op.matrix[d][k] * step % b:
                raise ScheduleError(f"{what}: dimension {d} is blocked by {b}, but a step of loop {k} moves it by "
                                    f"{op.matrix[d][k] * step}; choose a block that divides the step")


def _increments(op: Operand, lay: Layout, steps, n_ax: int) -> list[int]:
    """Elements `op`'s pointer moves per step of each spatial loop (`steps` per spatial axis)."""
    zero = (0,) * n_ax
    base = lay.offset(op.index(zero))
    return [lay.offset(op.index(tuple(step if j == k else 0 for j in range(n_ax)))) - base
            for k, step in enumerate(steps)]


def _pad_axis(form: ConvForm, x: Operand, z: Operand, lx: Layout, lz: Layout, n_sp: int) -> int | None:
    """An odd reduce axis one step of which moves both x's window and z by one element: the paper pads
    such a filter axis with a zero tap so that 1-D MACs pair into the 16-bit datapath's columns."""
    zero = (0,) * (n_sp + len(form.reduce))
    for k, (_, e) in enumerate(form.reduce):
        unit = tuple(int(j == n_sp + k) for j in range(len(zero)))
        if e % 2 and all(lay.offset(op.index(unit)) - lay.offset(op.index(zero)) == 1
                         for op, lay in ((x, lx), (z, lz))):
            return k
    return None


def layout_probe(form: ConvForm, vector_axis: str, layouts, config: AIEConfig) -> bool:
    """A cheap necessary condition for (vector axis, operand layouts): one operand streams along the
    vector axis with lanes the shuffle network can address (32-bit: within 16 words; 16-bit: at a
    stride of one or two elements), blocks move by whole blocks, loops step by whole 128-bit words."""
    lanes, _ = config.datapath(form.bits)
    e256, ealign = config.port_bits // form.bits, config.align_bits // form.bits
    try:
        v = form.spatial_index(vector_axis)
        xi, zi = _roles(form, v)
        specs = [s or LayoutSpec.natural(len(o.tensor.shape)) for s, o in zip(layouts, form.operands)]
        steps = [lanes if k == v else 1 for k in range(len(form.spatial))] + [1] * len(form.reduce)
        extents = [e for _, e in form.spatial] + [e for _, e in form.reduce]
        lays = []
        for i, op in enumerate(form.operands):
            _check_blocks(op, specs[i], steps, op.name)
            lays.append(realize(op.tensor.shape, specs[i], _reach(op, extents), ealign, e256))
        x, lx = form.operands[xi], lays[xi]
        zero = [0] * len(extents)
        lane = [lx.offset(x.index(tuple(i if j == v else 0 for j in range(len(zero))))) for i in range(lanes)]
        strides = {b - a for a, b in zip(lane, lane[1:])}
        if form.bits == 32:
            ok = max(lane) - min(lane) <= 15
        else:
            ok = strides in ({1}, {2})
        n_sp = len(form.spatial)
        return ok and all(e % ealign == 0 for op, lay in zip(form.operands, lays)
                          for e in _increments(op, lay, steps[:n_sp], len(extents)))
    except (ScheduleError, LoweringError):
        return False


def build_program(form: ConvForm, schedule: VyasaSchedule, config: AIEConfig) -> AIEProgram:
    """The Vyasa passes on `form` under `schedule`; a point the hardware cannot run is a ScheduleError
    naming the constraint (register file, register width, shuffle network, alignment, divisibility)."""
    bits = form.bits
    lanes, columns = config.datapath(bits)
    e256, ealign = config.port_bits // bits, config.align_bits // bits
    names = [n for n, _ in form.spatial]
    n_sp = len(names)
    if sorted(schedule.order) != sorted(names):
        raise ScheduleError(f"loop order {schedule.order} must name each spatial axis of '{form.output.name}' "
                            f"once: {', '.join(names)}")
    v = form.spatial_index(schedule.vector_axis)
    xi, zi = _roles(form, v)
    x, z = form.operands[xi], form.operands[zi]
    specs = [s or LayoutSpec.natural(len(o.tensor.shape)) for s, o in zip(schedule.layouts, form.operands)]
    steps = []
    for k, (name, ext) in enumerate(form.spatial):
        step = schedule.factor(name) * (lanes if k == v else 1)
        if ext % step:
            raise ScheduleError(f"axis '{name}' ({ext}) is not a multiple of its step {step} (unroll-and-jam "
                                f"{schedule.factor(name)}{f' x {lanes} lanes' if k == v else ''})")
        steps.append(step)
    for op, spec in ((x, specs[xi]), (z, specs[zi])):
        _check_blocks(op, spec, steps + [1] * len(form.reduce), f"layout of '{op.name}'")
    red = [e for _, e in form.reduce]
    real = list(red)

    def place(red):
        # x is laid out for the real taps only: a zero tap's x element is whatever sits past them (a
        # pitch's padding, the next row, the buffer's slack word) and is multiplied by zero
        return (realize(x.tensor.shape, specs[xi], _reach(x, [e for _, e in form.spatial] + real), ealign, e256),
                realize(z.tensor.shape, specs[zi], _reach(z, [e for _, e in form.spatial] + red), ealign, e256))

    lx, lz = place(red)
    taps = 1
    for e in red:
        taps *= e
    if columns == 2 and schedule.fuse_columns and schedule.pad_taps and taps % 2:
        k = _pad_axis(form, x, z, lx, lz, n_sp)
        if k is not None:
            red[k] += 1  # the zero column: z padded, x read one element further
            lx, lz = place(red)
    out_order = tuple(k for k in range(n_sp) if k != v) + (v,)
    lo = realize(tuple(e for _, e in form.spatial), LayoutSpec(out_order), [0] * n_sp, ealign, e256)
    zscale = 2 if columns == 2 and not schedule.fuse_columns else 1  # a zero after every weight (model only)
    layouts = {"x": lx, "z": lz, "o": lo}
    n_ax = n_sp + len(red)

    loops = tuple((a, dict(form.spatial)[a], steps[names.index(a)]) for a in schedule.order)
    out_op = Operand(form.output, tuple(tuple(int(j == k) for j in range(n_sp)) for k in range(n_sp)), (0,) * n_sp)
    pointers = {}
    for role, op, n in (("x", x, n_ax), ("z", z, n_ax), ("o", out_op, n_sp)):
        moves = _increments(op, layouts[role], steps, n)
        for name, e in zip(names, moves):
            if e % ealign:
                raise ScheduleError(f"a step of axis '{name}' moves {role} ({op.name}) by {e} elements, not a whole "
                                    f"number of 128-bit words: loads would be unaligned")
        pointers[role] = {name: e * (zscale if role == "z" else 1) for name, e in zip(names, moves)}

    # triplets: per output vector (jam point), one row per reduce point: (x offset of each lane, z offset)
    jams = np.array(list(itertools.product(*(range(0, steps[k], lanes if k == v else 1) for k in range(n_sp)))),
                    dtype=np.int64).T.reshape(n_sp, -1)
    reds = np.array(list(itertools.product(*(range(e) for e in red))), dtype=np.int64).T.reshape(len(red), -1)
    nd, nr = jams.shape[1], reds.shape[1]
    pts = np.concatenate([np.repeat(jams, nr, axis=1), np.tile(reds, nd)])
    lane = np.zeros((n_ax, 1), np.int64)
    lane[v] = 1

    def offsets(op, lay, p):
        return lay.offset(np.asarray(op.matrix, np.int64) @ p + np.asarray(op.offset, np.int64)[:, None])

    xl = np.stack([offsets(x, lx, pts + i * lane) for i in range(lanes)], axis=1).tolist()
    zo = (offsets(z, lz, pts) * zscale).tolist()
    zero_tap = np.zeros(pts.shape[1], bool)
    for k, e_real in enumerate(real):
        zero_tap |= pts[n_sp + k] >= e_real
    zero_tap = zero_tap.tolist()
    outs = np.stack([lo.offset(jams + i * lane[:n_sp]) for i in range(lanes)], axis=1)
    if not (np.diff(outs, axis=1) == 1).all():
        raise ScheduleError(f"the output's lanes along '{schedule.vector_axis}' are not contiguous")
    groups = [(int(outs[g, 0]), [(tuple(xl[g * nr + j]), zo[g * nr + j], zero_tap[g * nr + j]) for j in range(nr)])
              for g in range(nd)]
    roles = ("x", "z") if xi == 0 else ("z", "x")
    return assemble(form, schedule, config, loops, pointers, layouts, roles, groups)


__all__ = ["AIEProgram", "VyasaSchedule", "build_program", "layout_probe", "realize"]

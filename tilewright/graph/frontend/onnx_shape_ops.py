"""ONNX ops that move or mask data on run-time tensors: Gather, GatherElements, Expand, Tile, Split,
Slice, Trilu; and Range and ConstantOfShape whose inputs are known (constants, or graph inputs
given example values), which become constants. Sizes must be known when the model is read: they come from constants or
from the example values the module then checks on every call."""

from __future__ import annotations

import numpy as np


def _ints(imp, name: str, what: str) -> list[int]:
    return [int(v) for v in np.asarray(imp.const(name, what)).ravel()]


def _expand(imp, n, ins, a):
    """x broadcast to the shape: a `where` over an all-true mask that is full only along the grown axes."""
    x = imp.value(ins[0])
    shape = imp.b.types[x].shape
    target = _ints(imp, ins[1], "the target shape")
    rank = max(len(shape), len(target))
    have = (1,) * (rank - len(shape)) + tuple(shape)
    want = (1,) * (rank - len(target)) + tuple(target)
    if any(h != w and 1 not in (h, w) for h, w in zip(have, want)):
        raise imp.fail(f"shape {list(shape)} does not broadcast to {target}")
    grown = tuple(w if h == 1 and w != 1 else 1 for h, w in zip(have, want))
    if all(g == 1 for g in grown) and rank == len(shape):
        imp.env[n.output[0]] = x
        return
    mask = imp.b.constant(np.ones(grown, np.bool_), "expand_mask")
    imp.emit("where", [mask, x, x], out=n.output[0])


def _tile(imp, n, ins, a):
    x = imp.value(ins[0])
    for axis, times in enumerate(_ints(imp, ins[1], "repeats")):
        if times < 1:
            raise imp.fail("repeats below 1 (an empty result)")
        if times > 1:
            x = imp.emit("concat", [x] * times, {"axis": axis})
    imp.env[n.output[0]] = x


def _slice_along(imp, x: str, axis: int, start: int, stop: int, step: int = 1, out: str | None = None) -> str:
    shape = imp.b.types[x].shape
    begin, end, steps = [0] * len(shape), list(shape), [1] * len(shape)
    begin[axis], end[axis], steps[axis] = start, stop, step
    return imp.emit("slice", [x], {"begin": tuple(begin), "end": tuple(end), "step": tuple(steps)}, out)


def _split(imp, n, ins, a):
    x = imp.value(ins[0])
    shape = imp.b.types[x].shape
    axis = int(a.get("axis", 0)) % len(shape)
    outs = [o for o in n.output]
    if len(ins) > 1 and ins[1]:
        sizes = _ints(imp, ins[1], "the split sizes")
    elif "split" in a:
        sizes = [int(s) for s in a["split"]]
    else:
        parts = int(a.get("num_outputs", len(outs)))
        step = -(-shape[axis] // parts)
        sizes = [min(step, shape[axis] - k * step) for k in range(parts)]
    if sum(sizes) != shape[axis] or len(sizes) != len(outs) or min(sizes) < 1:
        raise imp.fail(f"split sizes {sizes} for {len(outs)} outputs of an axis of {shape[axis]}")
    start = 0
    for size, out in zip(sizes, outs):
        if out:
            _slice_along(imp, x, axis, start, start + size, out=out)
        start += size


def _slice(imp, n, ins, a):
    x = imp.value(ins[0])
    shape = imp.b.types[x].shape
    starts, ends = _ints(imp, ins[1], "starts"), _ints(imp, ins[2], "ends")
    axes = _ints(imp, ins[3], "axes") if len(ins) > 3 and ins[3] else list(range(len(starts)))
    steps = _ints(imp, ins[4], "steps") if len(ins) > 4 and ins[4] else [1] * len(starts)
    begin, end, step = [0] * len(shape), list(shape), [1] * len(shape)
    reversed_axes = []
    for s, e, ax, st in zip(starts, ends, axes, steps):
        ax %= len(shape)
        if st < 0:  # a gather at the positions Python's slice picks
            reversed_axes.append((ax, np.arange(shape[ax], dtype=np.int64)[slice(s, e, st)]))
            continue
        lo, hi, st = slice(s, e, st).indices(shape[ax])
        if lo >= hi:
            raise imp.fail("an empty slice")
        begin[ax], end[ax], step[ax] = lo, hi, st
    if reversed_axes:
        if any(picks.size == 0 for _, picks in reversed_axes):
            raise imp.fail("an empty slice")
        if (begin, end, step) != ([0] * len(shape), list(shape), [1] * len(shape)):
            x = imp.emit("slice", [x], {"begin": tuple(begin), "end": tuple(end), "step": tuple(step)})
        for ax, picks in reversed_axes:
            x = imp.emit("take", [x, imp.b.constant(picks, "slice_positions")], {"axis": ax})
        imp.env[n.output[0]] = x
        return
    if (begin, end, step) == ([0] * len(shape), list(shape), [1] * len(shape)):
        imp.env[n.output[0]] = x
        return
    imp.emit("slice", [x], {"begin": tuple(begin), "end": tuple(end), "step": tuple(step)}, n.output[0])


def _trilu(imp, n, ins, a):
    """x where the last two axes' (row, column) lie on the kept side of diagonal k, else 0."""
    x = imp.value(ins[0])
    shape = imp.b.types[x].shape
    if len(shape) < 2:
        raise imp.fail("an input of fewer than 2 axes")
    k = _ints(imp, ins[1], "k")[0] if len(ins) > 1 and ins[1] else 0
    rows, cols = np.indices(shape[-2:])
    keep = (cols - rows >= k) if a.get("upper", 1) else (cols - rows <= k)
    zero = imp.b.constant(np.zeros((), imp.b.types[x].dtype), "zero")
    imp.emit("where", [imp.b.constant(keep, "trilu_mask"), x, zero], out=n.output[0])


def pad_by_index(imp, n, x: str, pads, mode: str):
    """Pad modes edge, reflect and wrap: per padded axis, a gather at the constant source indices NumPy's pad
    of the same mode gives an arange."""
    shape = imp.b.types[x].shape
    rank = len(shape)
    if min(pads) < 0:
        raise imp.fail(f"negative pads {list(pads)} with mode '{mode}'")
    for axis in range(rank):
        before, after = pads[axis], pads[rank + axis]
        if before or after:
            if mode == "reflect" and max(before, after) >= shape[axis]:
                raise imp.fail(f"reflect pads {before}, {after} on an axis of {shape[axis]} (each must be shorter)")
            source = np.pad(np.arange(shape[axis], dtype=np.int64), (before, after), mode=mode)
            x = imp.emit("take", [x, imp.b.constant(source, "pad_source")], {"axis": axis})
    imp.env[n.output[0]] = x


def _indices(imp, name: str, extent: int) -> str:
    """A gather's indices; constant ones are checked here (run-time ones by the Module, before any kernel)."""
    if name in imp.known:
        idx = np.asarray(imp.known[name])
        if idx.size and (idx.min() < -extent or idx.max() >= extent):
            raise imp.fail(f"index {int(idx.min()) if idx.min() < -extent else int(idx.max())} outside "
                           f"[{-extent}, {extent})")
    return imp.value(name)


def _gather(imp, n, ins, a):
    """Rows of a constant 2-D table are an embedding; any other Gather a `take` of run-time data."""
    table = imp.known.get(ins[0])
    rank = len(imp.type_of(ins[0]).shape)
    axis = int(a.get("axis", 0)) % max(rank, 1)
    if table is not None and table.ndim == 2 and axis == 0:
        imp.emit("embedding", [imp.value(ins[0]), _indices(imp, ins[1], table.shape[0])], {"negative_wraps": True},
                 n.output[0])
        return
    extent = imp.type_of(ins[0]).shape[axis]
    imp.emit("take", [imp.value(ins[0]), _indices(imp, ins[1], extent)], {"axis": axis}, n.output[0])


def _gather_elements(imp, n, ins, a):
    shape = imp.type_of(ins[0]).shape
    axis = int(a.get("axis", 0)) % max(len(shape), 1)
    imp.emit("take_along", [imp.value(ins[0]), _indices(imp, ins[1], shape[axis])], {"axis": axis}, n.output[0])


def _one_hot(imp, n, ins, a):
    """where(indices (negatives wrapped), with a new axis, equal each position along it: on, off)."""
    idx = imp.value(ins[0])
    shape = imp.b.types[idx].shape
    depth = int(np.asarray(imp.const(ins[1], "depth")).ravel()[0])
    axis = int(a.get("axis", -1)) % (len(shape) + 1)
    dtype = imp.b.types[idx].dtype
    wrapped = imp.emit("where", [imp.emit("less", [idx, imp.b.constant(np.zeros((), dtype), "zero")]),
                                 imp.emit("add", [idx, imp.b.constant(np.array(depth, dtype), "depth")]), idx])
    column = imp.emit("reshape", [wrapped], {"shape": shape[:axis] + (1,) + shape[axis:]})
    positions = np.arange(depth, dtype=dtype).reshape([-1 if d == axis else 1 for d in range(len(shape) + 1)])
    hit = imp.emit("equal", [column, imp.b.constant(positions, "positions")])
    values = imp.value(ins[2])
    off, on = (_slice_along(imp, values, 0, k, k + 1) for k in (0, 1))
    imp.emit("where", [hit, on, off], out=n.output[0])


def _known(build):
    """An op whose every input is known once example values are read: its output becomes a constant."""
    def handler(imp, n, ins, a):
        values = [np.asarray(imp.const(i, f"input {k}")) if i else None for k, i in enumerate(ins)]
        imp.known[n.output[0]] = build(a, values)
    return handler


def _constant_of_shape(a, xs):
    value = a["value"].ravel()[0] if "value" in a else np.float32(0)
    return np.full(tuple(int(d) for d in xs[0]), value)


SHAPE_HANDLERS = {
    "Gather": _gather, "GatherElements": _gather_elements, "Expand": _expand, "Tile": _tile, "Split": _split,
    "Slice": _slice, "Trilu": _trilu, "OneHot": _one_hot,
    "Range": _known(lambda a, xs: np.arange(xs[0], xs[1], xs[2]).astype(xs[0].dtype)),
    "ConstantOfShape": _known(_constant_of_shape),
}

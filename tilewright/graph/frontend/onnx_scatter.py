"""ONNX's GatherND, ScatterND and ScatterElements from gathers, comparisons and reductions. GatherND
flattens the indexed leading axes: one `take` at the row index sum_j idx_j * stride_j (negative
components wrapped). A scatter compares every update's target with every output position (a
[updates, positions] match mask, so its cost is their product: fine for the cache writes and label
maps models use it for, not a bulk scatter): the reduction's combine of the matching updates (add,
mul, max, min) or, with none, the last matching update (ONNX leaves duplicates undefined; NumPy and
ONNX's reference keep the last) replaces the data where any update lands. Constant indices are
checked at import; a run-time index outside its axis selects nothing (scatter) or is clamped (gather)
by the kernels."""

from __future__ import annotations

import numpy as np

_IDENTITY = {"add": 0, "mul": 1, "max": -np.inf, "min": np.inf}
_COMBINE = {"add": ("reduce_sum", "add"), "mul": ("reduce_prod", "mul"), "max": ("reduce_max", "maximum"),
            "min": ("reduce_min", "minimum")}


def _const(imp, value, dtype, hint="c"):
    return imp.b.constant(np.array(value, dtype=np.float32 if dtype == "bfloat16" else dtype), hint)


def _row_index(imp, idx: str, dims, outside: int | None = None) -> str:
    """sum_j wrap(idx[..., j]) * stride_j over the last axis of idx (int64), for the leading `dims` of the data;
    with `outside`, that value where a component is out of its range (else the kernels clamp)."""
    dims = np.asarray(dims, np.int64)
    known = imp.b.const_value(idx)
    if known is not None and known.size and ((known < -dims).any() or (known >= dims).any()):
        raise imp.fail(f"an index outside the indexed axes {dims.tolist()}")
    strides = np.array([int(np.prod(dims[j + 1:])) for j in range(len(dims))], np.int64)
    idx = imp.emit("cast", [idx], {"dtype": "int64"}) if imp.b.types[idx].dtype != "int64" else idx
    extents = imp.b.constant(dims, "dims")
    wrapped = imp.emit("where", [imp.emit("less", [idx, _const(imp, 0, "int64")]), imp.emit("add", [idx, extents]),
                                 idx])
    last = (len(imp.b.types[idx].shape) - 1,)
    row = imp.emit("reduce_sum", [imp.emit("mul", [wrapped, imp.b.constant(strides, "strides")])],
                   {"axes": last, "keepdims": False})
    if outside is None:
        return row
    inside = imp.emit("logical_and", [imp.emit("greater_equal", [wrapped, _const(imp, 0, "int64")]),
                                      imp.emit("less", [wrapped, extents])])
    all_inside = imp.emit("reduce_min", [imp.emit("cast", [inside], {"dtype": "int8"})],
                          {"axes": last, "keepdims": False})
    return imp.emit("where", [imp.emit("cast", [all_inside], {"dtype": "bool"}), row, _const(imp, outside, "int64")])


def _gather_nd(imp, n, ins, a):
    data, idx = imp.value(ins[0]), imp.value(ins[1])
    dshape, ishape = imp.b.types[data].shape, imp.b.types[idx].shape
    b = int(a.get("batch_dims", 0))
    k = ishape[-1] if ishape else 0
    if not ishape or b + k > len(dshape) or ishape[:b] != dshape[:b]:
        raise imp.fail(f"indices {list(ishape)} for data {list(dshape)} with batch_dims {b}")
    batch, rows = int(np.prod(dshape[:b], dtype=np.int64)), int(np.prod(dshape[b:b + k], dtype=np.int64))
    rest = dshape[b + k:]
    row = _row_index(imp, idx, dshape[b:b + k])
    if b:
        offsets = (np.arange(batch, dtype=np.int64) * rows).reshape(dshape[:b] + (1,) * (len(ishape) - 1 - b))
        row = imp.emit("add", [row, imp.b.constant(offsets, "batch_offsets")])
    table = imp.emit("reshape", [data], {"shape": (batch * rows, *rest)})
    imp.emit("take", [table, row], {"axis": 0}, n.output[0])


def _scatter(imp, data: str, hits: str, updates: str, reduction: str) -> str:
    """data [P, *R] where hits [U, P, *X] (X: R, or units) says which of updates [U, *R] land where."""
    p, rest = imp.b.types[data].shape[0], imp.b.types[data].shape[1:]
    u = imp.b.types[updates].shape[0]
    dtype = imp.b.types[data].dtype
    over_updates = {"axes": (0,), "keepdims": False}
    landed = imp.emit("cast", [imp.emit("reduce_max", [imp.emit("cast", [hits], {"dtype": "int8"})], over_updates)],
                      {"dtype": "bool"})
    columns = imp.b.types[hits].shape[2:] == rest and any(d != 1 for d in rest)
    if reduction == "none":  # the last update that lands, gathered
        order = imp.b.constant(np.arange(u, dtype=np.int64).reshape(u, *(1,) * (len(rest) + 1)), "order")
        last = imp.emit("reduce_max", [imp.emit("where", [hits, order, _const(imp, -1, "int64")])], over_updates)
        last = imp.emit("maximum", [last, _const(imp, 0, "int64")])
        if columns:
            new = imp.emit("take_along", [updates, last], {"axis": 0})
        else:
            new = imp.emit("take", [updates, imp.emit("reshape", [last], {"shape": (p,)})], {"axis": 0})
    else:
        reduce, combine = _COMBINE[reduction]
        identity = _IDENTITY[reduction]
        if not dtype.startswith(("float", "bfloat")) and reduction in ("max", "min"):
            identity = np.iinfo(dtype).min if reduction == "max" else np.iinfo(dtype).max
        spread = imp.emit("reshape", [updates], {"shape": (u, 1, *rest)})
        picked = imp.emit("where", [hits, spread, _const(imp, identity, dtype)])
        new = imp.emit(combine, [data, imp.emit(reduce, [picked], over_updates)])
    return imp.emit("where", [landed, new, data])


def _scatter_nd(imp, n, ins, a):
    data, idx, updates = (imp.value(i) for i in ins[:3])
    dshape, ishape = imp.b.types[data].shape, imp.b.types[idx].shape
    k = ishape[-1]
    lead = ishape[:-1]
    if imp.b.types[updates].shape != lead + dshape[k:]:
        raise imp.fail(f"updates {list(imp.b.types[updates].shape)} (must be {list(lead + dshape[k:])})")
    rows, count = int(np.prod(dshape[:k], dtype=np.int64)), int(np.prod(lead, dtype=np.int64))
    unit = (1,) * len(dshape[k:])
    targets = imp.emit("reshape", [_row_index(imp, idx, dshape[:k], outside=-1)], {"shape": (count, 1, *unit)})
    hits = imp.emit("equal", [targets, imp.b.constant(np.arange(rows, dtype=np.int64).reshape(1, rows, *unit),
                                                      "rows")])
    flat = imp.emit("reshape", [data], {"shape": (rows, *dshape[k:])})
    flat_updates = imp.emit("reshape", [updates], {"shape": (count, *dshape[k:])})
    out = _scatter(imp, flat, hits, flat_updates, a.get("reduction", "none"))
    imp.emit("reshape", [out], {"shape": dshape}, n.output[0])


def _scatter_elements(imp, n, ins, a):
    """Along `axis`, each other position independent: the axis moved to the front, the others flattened
    into one row payload, and each update's position along the axis its target row."""
    data, idx, updates = (imp.value(i) for i in ins[:3])
    dshape, ishape = imp.b.types[data].shape, imp.b.types[idx].shape
    rank = len(dshape)
    axis = int(a.get("axis", 0)) % rank
    if imp.b.types[updates].shape != ishape or len(ishape) != rank:
        raise imp.fail(f"indices {list(ishape)} and updates {list(imp.b.types[updates].shape)} (one shape, "
                       f"of data's rank)")
    if any(i != d for k, (i, d) in enumerate(zip(ishape, dshape)) if k != axis):
        raise imp.fail(f"indices {list(ishape)} shorter than data {list(dshape)} off the axis {axis} (only the "
                       "scattered axis may be shorter)")
    front = (axis, *(k for k in range(rank) if k != axis))
    back = tuple(front.index(k) for k in range(rank))
    payload = int(np.prod([dshape[k] for k in front[1:]], dtype=np.int64))
    u, p = ishape[axis], dshape[axis]
    moved = lambda v, extent: imp.emit("reshape", [imp.emit("permute", [v], {"dims": front})],  # noqa: E731
                                       {"shape": (extent, payload)})
    rows = _row_index(imp, imp.emit("reshape", [moved(idx, u)], {"shape": (u, payload, 1)}), (p,), outside=-1)
    hits = imp.emit("equal", [imp.emit("reshape", [rows], {"shape": (u, 1, payload)}),
                              imp.b.constant(np.arange(p, dtype=np.int64).reshape(1, p, 1), "rows")])
    out = _scatter(imp, moved(data, p), hits, moved(updates, u), a.get("reduction", "none"))
    shaped = imp.emit("reshape", [out], {"shape": tuple(dshape[k] for k in front)})
    imp.emit("permute", [shaped], {"dims": back}, n.output[0])


SCATTER_HANDLERS = {"GatherND": _gather_nd, "ScatterND": _scatter_nd, "ScatterElements": _scatter_elements,
                    "Scatter": _scatter_elements}

__all__ = ["SCATTER_HANDLERS"]

"""ONNX's Reduce family and ArgMax / ArgMin onto the graph's reductions: Mean, Max, Min, Sum and
Prod directly; SumSquare, L1, L2, LogSum and LogSumExp as a sum with elementwise ops around it
(LogSumExp shifted by the maximum, so large inputs do not overflow). Axes come as an attribute
(opsets < 18; Sum < 13) or as a second input: a constant, or a graph input given a value in
the example inputs."""

from __future__ import annotations

import numpy as np


def _axes(imp, n, ins, a) -> tuple[int, ...] | None:
    """The sorted axes to reduce, or None for "no reduction" (empty axes with noop_with_empty_axes)."""
    shape = imp.type_of(ins[0]).shape
    axes = [int(x) for x in imp.const(ins[1], "axes").ravel()] if len(ins) > 1 and ins[1] else a.get("axes", [])
    if not axes and a.get("noop_with_empty_axes", 0):
        return None
    if len(shape) == 0 or 0 in shape:
        raise imp.fail("a reduction of a scalar or an empty tensor")
    return tuple(sorted(x % len(shape) for x in axes)) if axes else tuple(range(len(shape)))


def _reduce(op: str, before: str | None = None, after: str | None = None):
    """`op` over the axes, with the unary `before` applied to the input ("square": x * x) and `after` to
    the result."""
    def handler(imp, n, ins, a):
        x = imp.value(ins[0])
        axes = _axes(imp, n, ins, a)
        if before == "square":
            x = imp.emit("mul", [x, x])
        elif before:
            x = imp.emit(before, [x])
        if axes is None:  # no reduction: the elementwise parts alone
            y = x
        elif imp.b.types[x].dtype == "bool" and op in ("reduce_max", "reduce_min"):  # any / all, through int8
            wide = imp.emit(op, [imp.emit("cast", [x], {"dtype": "int8"})],
                            {"axes": axes, "keepdims": bool(a.get("keepdims", 1))})
            y = imp.emit("cast", [wide], {"dtype": "bool"}, None if after else n.output[0])
        else:
            y = imp.emit(op, [x], {"axes": axes, "keepdims": bool(a.get("keepdims", 1))},
                         None if after else n.output[0])
        if after:
            imp.emit(after, [y], out=n.output[0])
        elif axes is None:
            imp.env[n.output[0]] = y
    return handler


def _log_sum_exp(imp, n, ins, a):
    x = imp.value(ins[0])
    axes = _axes(imp, n, ins, a)
    if axes is None:
        imp.env[n.output[0]] = x  # log(exp(x)) = x
        return
    top = imp.emit("reduce_max", [x], {"axes": axes, "keepdims": True})
    total = imp.emit("reduce_sum", [imp.emit("exp", [imp.emit("sub", [x, top])])], {"axes": axes, "keepdims": True})
    kept = imp.emit("add", [imp.emit("log", [total]), top])
    if a.get("keepdims", 1):
        imp.env[n.output[0]] = kept
    else:
        shape = tuple(d for i, d in enumerate(imp.b.types[x].shape) if i not in axes)
        imp.emit("reshape", [kept], {"shape": shape}, n.output[0])


REDUCE_HANDLERS = {
    "ReduceMean": _reduce("mean"), "ReduceMax": _reduce("reduce_max"), "ReduceMin": _reduce("reduce_min"),
    "ReduceSum": _reduce("reduce_sum"), "ReduceProd": _reduce("reduce_prod"),
    "ReduceSumSquare": _reduce("reduce_sum", before="square"), "ReduceL1": _reduce("reduce_sum", before="abs"),
    "ReduceL2": _reduce("reduce_sum", before="square", after="sqrt"),
    "ReduceLogSum": _reduce("reduce_sum", after="log"), "ReduceLogSumExp": _log_sum_exp,
}


def _arg_extreme(reduce_op: str):
    """ArgMax / ArgMin: the first (or, with select_last_index, the last) index along `axis` holding the
    extreme value, as int64: the extreme reduced, compared back, and the smallest (largest) matching index
    reduced in turn (exact; no pair reducer needed)."""
    def handler(imp, n, ins, a):
        x = imp.value(ins[0])
        shape = imp.b.types[x].shape
        if len(shape) == 0 or 0 in shape:
            raise imp.fail("an arg reduction of a scalar or an empty tensor")
        axis = int(a.get("axis", 0)) % len(shape)
        keep = bool(a.get("keepdims", 1))
        last = bool(a.get("select_last_index", 0))
        top = imp.emit(reduce_op, [x], {"axes": (axis,), "keepdims": True})
        hit = imp.emit("equal", [x, top])
        index = np.arange(shape[axis], dtype=np.int64).reshape([-1 if d == axis else 1 for d in range(len(shape))])
        miss = imp.b.constant(np.array(-1 if last else shape[axis], np.int64), "miss")
        candidates = imp.emit("where", [hit, imp.b.constant(index, "index"), miss])
        imp.emit("reduce_max" if last else "reduce_min", [candidates], {"axes": (axis,), "keepdims": keep},
                 n.output[0])
    return handler


def _cumsum(imp, n, ins, a):
    x = imp.value(ins[0])
    rank = len(imp.b.types[x].shape)
    axis = int(np.asarray(imp.const(ins[1], "axis")).ravel()[0])
    if not -rank <= axis < rank:
        raise imp.fail(f"axis {axis} of a {rank}-axis input")
    imp.emit(n.op_type.lower(), [x], {"axis": axis % rank, "exclusive": int(a.get("exclusive", 0)),
                             "reverse": int(a.get("reverse", 0))}, n.output[0])


REDUCE_HANDLERS.update({"ArgMax": _arg_extreme("reduce_max"), "ArgMin": _arg_extreme("reduce_min"),
                        "CumSum": _cumsum, "CumProd": _cumsum})

"""ONNX pooling: MaxPool, AveragePool and LpPool of any number of spatial dimensions, and the global
forms. A 2-D max or average pool the graph's pool ops take (padding at most half the window, no
dilated average) is one node; any other pool is built from its window's taps: the input padded once
(-inf for max, 0 otherwise), one strided slice per tap combined by maximum or sum, an average divided
by each window's count of counted elements (computed at import: ONNX's count_include_pad and
ceil_mode rules), an Lp pool the p-th root of the sum of |x|^p."""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..infer import pool_out
from .onnx_conv import spatial

MAX_TAPS = 128  # a window with more taps than this is refused rather than built from that many slices
_KIND = {"MaxPool": "max", "AveragePool": "avg", "LpPool": "lp"}


def pool(imp, n, ins, a):
    kernel = tuple(int(k) for k in a["kernel_shape"])
    x = imp.value(ins[0])
    shape = imp.b.types[x].shape
    rank = len(kernel)
    if len(shape) != rank + 2:
        raise imp.fail(f"a {len(kernel)}-D window over an input of rank {len(shape)} (needs N, C and "
                       f"{rank} spatial dims)")
    indices = len(n.output) > 1 and bool(n.output[1])
    if indices and (n.op_type != "MaxPool" or (a.get("storage_order", 0) and rank > 2)):
        raise imp.fail("the Indices output of a 3-D pool in column-major storage order (row-major, or 1-D / 2-D)")
    stride, pads, dil = spatial(imp, n, ins, a, kernel)
    kind, ceil = _KIND[n.op_type], bool(a.get("ceil_mode", 0))
    fits = all(p <= k // 2 for p, k in zip(pads, kernel * 2))
    if rank == 2 and fits and kind != "lp" and (kind == "max" or dil == (1, 1)) and not indices:
        attrs = {"kernel": kernel, "stride": stride, "padding": pads, "ceil_mode": ceil}
        if kind == "max":
            return imp.emit("max_pool2d", [x], {**attrs, "dilation": dil}, n.output[0])
        attrs["count_include_pad"] = bool(a.get("count_include_pad", 0))
        return imp.emit("avg_pool2d", [x], attrs, n.output[0])
    if math.prod(kernel) > MAX_TAPS:
        raise imp.fail(f"a window of {math.prod(kernel)} taps {list(kernel)} outside the 2-D pool ops (at most "
                       f"{MAX_TAPS} taps)")
    _by_taps(imp, n, x, kind, kernel, stride, pads, dil, ceil, a)


def _by_taps(imp, n, x, kind, kernel, stride, pads, dil, ceil, a):
    shape, rank = imp.b.types[x].shape, len(kernel)
    sizes = shape[2:]
    before, after = pads[:rank], pads[rank:]
    out = [pool_out(s, k, st, b, e, d, ceil) for s, k, st, b, e, d in zip(sizes, kernel, stride, before, after, dil)]
    if min(out) < 1:
        raise imp.fail(f"the window {list(kernel)} does not fit the padded input {list(sizes)}")
    spans = [(o - 1) * st + (k - 1) * d + 1 for o, st, k, d in zip(out, stride, kernel, dil)]
    extra = [max(0, span - (s + b + e)) for span, s, b, e in zip(spans, sizes, before, after)]
    if kind == "lp":
        p = float(a.get("p", 2))
        mag = imp.emit("abs", [x])
        x = imp.emit("mul", [x, x]) if p == 2 else imp.emit("pow", [mag, _scalar(imp, x, p)])
    dtype = imp.b.types[x].dtype
    fill = (-np.inf if dtype.startswith(("float", "bfloat")) else np.iinfo(dtype).min) if kind == "max" else 0.0
    if any(before) or any(a_ + e for a_, e in zip(after, extra)):
        x = imp.emit("pad", [x], {"pads": (0, 0, *before, 0, 0, *(e + x_ for e, x_ in zip(after, extra))),
                                  "value": float(fill)})
    total, where = None, None
    want_indices = len(n.output) > 1 and bool(n.output[1])
    for tap in itertools.product(*(range(k) for k in kernel)):
        begin = tuple(t * d for t, d in zip(tap, dil))
        piece = imp.emit("slice", [x], {"begin": (0, 0, *begin),
                                        "end": (*shape[:2], *(b + (o - 1) * st + 1
                                                             for b, o, st in zip(begin, out, stride))),
                                        "step": (1, 1, *stride)})
        if want_indices:  # the first position holding the maximum: a later tap wins only when greater
            at = imp.b.constant(_flat_positions(shape, begin, before, stride, out, bool(a.get("storage_order", 0))),
                                "positions")
            if total is not None:
                better = imp.emit("greater", [piece, total])
                where = imp.emit("where", [better, at, where])
                total = imp.emit("where", [better, piece, total])
            else:
                total, where = piece, at
            continue
        total = piece if total is None else imp.emit("maximum" if kind == "max" else "add", [total, piece])
    if kind == "max":
        imp.env[n.output[0]] = total
        if want_indices:
            imp.env[n.output[1]] = where
    elif kind == "avg":
        counted = _window_counts(sizes, kernel, stride, before, after, extra, dil, out,
                                 bool(a.get("count_include_pad", 0)))
        imp.emit("div", [total, imp.b.constant(counted.astype(dtype).reshape(1, 1, *out), "counts")],
                 out=n.output[0])
    else:
        p = float(a.get("p", 2))
        root = imp.emit("sqrt", [total]) if p == 2 else imp.emit("pow", [total, _scalar(imp, total, 1 / p)])
        imp.env[n.output[0]] = root


def _flat_positions(shape, begin, before, stride, out, column_major: bool) -> np.ndarray:
    """int64 [N, C, *out]: the flat index into the unpadded input of each window's tap at `begin` (in padded
    coordinates), its spatial part row-major or (2-D) column-major, as MaxPool's storage_order says."""
    grids = np.meshgrid(*(np.arange(o) * st + b - p for o, st, b, p in zip(out, stride, begin, before)),
                        indexing="ij")
    spatial = np.zeros(out, np.int64)
    order = list(zip(grids, shape[2:]))
    for g, size in (order[::-1] if column_major else order):
        spatial = spatial * size + g
    plane = int(np.prod(shape[2:]))
    base = np.arange(shape[0] * shape[1], dtype=np.int64).reshape(shape[0], shape[1], *(1,) * len(out)) * plane
    return base + spatial[None, None]


def _window_counts(sizes, kernel, stride, before, after, extra, dil, out, include_pad) -> np.ndarray:
    """How many elements each window averages: the input's (and with include_pad its explicit padding's),
    never the extra positions ceil_mode adds past the padding."""
    padded = [b + s + e + x for s, b, e, x in zip(sizes, before, after, extra)]
    mask = np.zeros(padded, np.float64)
    if include_pad:
        mask[tuple(slice(0, b + s + e) for s, b, e in zip(sizes, before, after))] = 1
    else:
        mask[tuple(slice(b, b + s) for s, b in zip(sizes, before))] = 1
    counts = np.zeros(out, np.float64)
    for tap in itertools.product(*(range(k) for k in kernel)):
        counts += mask[tuple(slice(t * d, t * d + (o - 1) * st + 1, st)
                             for t, d, o, st in zip(tap, dil, out, stride))]
    return np.maximum(counts, 1)


def _scalar(imp, like: str, value: float) -> str:
    return imp.b.constant(np.array(value, dtype=imp.b.types[like].dtype), "p")


def global_pool(imp, n, ins, a):
    x = imp.value(ins[0])
    axes = {"axes": tuple(range(2, len(imp.b.types[x].shape))), "keepdims": True}
    if n.op_type == "GlobalAveragePool":
        return imp.emit("mean", [x], axes, n.output[0])
    if n.op_type == "GlobalMaxPool":
        return imp.emit("reduce_max", [x], axes, n.output[0])
    p = float(a.get("p", 2))
    powered = imp.emit("mul", [x, x]) if p == 2 else imp.emit("pow", [imp.emit("abs", [x]), _scalar(imp, x, p)])
    total = imp.emit("reduce_sum", [powered], axes)
    if p == 2:
        return imp.emit("sqrt", [total], out=n.output[0])
    imp.emit("pow", [total, _scalar(imp, total, 1 / p)], out=n.output[0])


POOL_HANDLERS = {"MaxPool": pool, "AveragePool": pool, "LpPool": pool, "GlobalAveragePool": global_pool,
                 "GlobalMaxPool": global_pool, "GlobalLpPool": global_pool}

__all__ = ["MAX_TAPS", "POOL_HANDLERS"]

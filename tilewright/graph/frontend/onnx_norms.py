"""ONNX's normalizations along one axis, composed from reductions and elementwise ops: LpNormalization (p 1 or 2;
zero where the norm is zero), LRN (the squares summed over a window of channels, as shifted slices of the
zero-padded squares) and Hardmax (one at the first maximum). 16-bit floats are computed in float32 and rounded once
at the end. Also the helpers `onnx_normalization` and `onnx_losses` share."""

from __future__ import annotations

import numpy as np


def axis_of(imp, axis: int, rank: int) -> int:
    """`axis` in [0, rank), or a refusal naming the valid range."""
    if rank == 0:
        raise imp.fail("a scalar input (it needs at least one axis)")
    if not -rank <= int(axis) < rank:
        raise imp.fail(f"axis {axis} of a {rank}-axis input (valid: {-rank} to {rank - 1})")
    return int(axis) % rank


def cast_to(imp, v: str, dtype: str, out: str | None = None) -> str:
    """`v` in `dtype` (written to `out` where given)."""
    if imp.b.types[v].dtype != dtype:
        return imp.emit("cast", [v], {"dtype": dtype}, out)
    if out:
        imp.env[out] = v
    return v


def widened(imp, v: str) -> str:
    """16-bit floats in float32: each step rounded to 16 bits would drift past what the op defines."""
    return cast_to(imp, v, "float32") if imp.b.types[v].dtype in ("float16", "bfloat16") else v


def const_like(imp, like: str, value, hint: str = "c") -> str:
    """A constant of `like`'s dtype (the builder stores floating constants as float32: others are cast)."""
    dtype = imp.b.types[like].dtype
    floating = dtype.startswith("float") or dtype == "bfloat16"
    return cast_to(imp, imp.b.constant(np.array(value, dtype=np.float32 if floating else dtype), hint), dtype)


def _float_input(imp, ins) -> tuple[str, tuple, str]:
    x = imp.value(ins[0])
    t = imp.b.types[x]
    if t.dtype != "bfloat16" and not np.issubdtype(np.dtype(t.dtype), np.floating):
        raise imp.fail(f"a {t.dtype} input (only floating point)")
    return x, t.shape, t.dtype


def lp_norm(imp, n, ins, a):
    x, shape, dtype = _float_input(imp, ins)
    axis, p = axis_of(imp, a.get("axis", -1), len(shape)), int(a.get("p", 2))
    if p not in (1, 2):
        raise imp.fail(f"p {p} (valid: 1 or 2)")
    wide, keep = widened(imp, x), {"axes": (axis,), "keepdims": True}
    if p == 2:
        norm = imp.emit("sqrt", [imp.emit("reduce_sum", [imp.emit("mul", [wide, wide])], keep)])
    else:
        norm = imp.emit("reduce_sum", [imp.emit("abs", [wide])], keep)
    zero = const_like(imp, wide, 0)
    y = imp.emit("where", [imp.emit("equal", [norm, zero]), zero, imp.emit("div", [wide, norm])])
    cast_to(imp, y, dtype, n.output[0])


def lrn(imp, n, ins, a):
    """x / (bias + alpha / size * square_sum) ^ beta, square_sum over channels c - floor((size - 1) / 2) to
    c + ceil((size - 1) / 2) (within [0, C))."""
    x, shape, dtype = _float_input(imp, ins)
    size = int(a.get("size", 0))
    if len(shape) < 2 or size < 1:
        raise imp.fail(f"size {size} for input of shape {list(shape)}: it must be at least 1, the input [N, C, ...]")
    channels, before = shape[1], (size - 1) // 2
    wide = widened(imp, x)
    pads = [0] * (2 * len(shape))
    pads[1], pads[len(shape) + 1] = before, size - 1 - before
    padded = imp.emit("pad", [imp.emit("mul", [wide, wide])], {"pads": tuple(pads), "value": 0.0})
    total = None
    for k in range(size):
        if k + channels <= before or k >= before + channels:
            continue  # this offset sees only padding
        part = imp.emit("slice", [padded], {"begin": (0, k) + (0,) * (len(shape) - 2), "end": (shape[0], k + channels,
                                            *shape[2:]), "step": (1,) * len(shape)})
        total = part if total is None else imp.emit("add", [total, part])
    scaled = imp.emit("add", [imp.emit("mul", [total, const_like(imp, wide, float(a.get("alpha", 1e-4)) / size)]),
                              const_like(imp, wide, float(a.get("bias", 1.0)))])
    denominator = imp.emit("pow", [scaled, const_like(imp, wide, float(a.get("beta", 0.75)))])
    cast_to(imp, imp.emit("div", [wide, denominator]), dtype, n.output[0])


def hardmax(imp, n, ins, a):
    """1 where the first maximum along `axis` lies: the maximum compared back, the smallest matching index
    reduced, compared with every index."""
    x, shape, dtype = _float_input(imp, ins)
    axis = axis_of(imp, a.get("axis", -1), len(shape))
    keep = {"axes": (axis,), "keepdims": True}
    hit = imp.emit("equal", [x, imp.emit("reduce_max", [x], keep)])
    index = imp.b.constant(np.arange(shape[axis], dtype=np.int64).reshape(
        [-1 if d == axis else 1 for d in range(len(shape))]), "index")
    candidates = imp.emit("where", [hit, index, imp.b.constant(np.array(shape[axis], np.int64), "miss")])
    first = imp.emit("reduce_min", [candidates], keep)
    imp.emit("cast", [imp.emit("equal", [index, first])], {"dtype": dtype}, n.output[0])


AXIS_NORM_HANDLERS = {"LpNormalization": lp_norm, "LRN": lrn, "Hardmax": hardmax}

__all__ = ["AXIS_NORM_HANDLERS", "axis_of", "cast_to", "const_like", "widened"]

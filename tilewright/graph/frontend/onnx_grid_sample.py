"""ONNX `GridSample` (2-D and 3-D; nearest, linear and cubic; zeros, border and reflection padding;
align_corners) from elementwise ops and one gather per tap, following the definition's order of
steps: each sampling coordinate denormalized, rounded half to even (nearest), moved inside the image
where it falls outside (border: clamped; reflection: reflected by the near edge until inside), then
split into its interpolation taps (1, 2 or 4 per axis, Keys' cubic with a = -0.75), each tap's pixel
read at its padding mode's index (zeros: nothing outside the image) and weighted by the product of its
axes' coefficients. The taps multiply across axes: 4 (linear) or 16 (cubic) gathers for an image."""

from __future__ import annotations

import itertools

import numpy as np

_A = -0.75  # Keys' cubic convolution parameter, as ONNX defines GridSample's cubic mode
_MODES = {"bilinear": "linear", "bicubic": "cubic", "nearest": "nearest", "linear": "linear", "cubic": "cubic"}


def _c(imp, value) -> str:
    return imp.b.constant(np.array(value, np.float32), "c")


def _op(imp, op, *args):
    return imp.emit(op, list(args))


def _reflect(imp, u, lo: float, hi: float) -> str:
    """u reflected by the nearer edge of [lo, hi] until inside (ONNX's rule, as an expression)."""
    span = hi - lo

    def fold(distance, near, far):
        turns = _op(imp, "floor", _op(imp, "div", distance, _c(imp, span)))
        rest = _op(imp, "sub", distance, _op(imp, "mul", turns, _c(imp, span)))
        odd = _op(imp, "sub", turns, _op(imp, "mul", _op(imp, "floor", _op(imp, "mul", turns, _c(imp, 0.5))),
                                         _c(imp, 2)))
        even_side = _op(imp, near[0], _c(imp, near[1]), rest)
        odd_side = _op(imp, far[0], _c(imp, far[1]), rest)
        return imp.emit("where", [_op(imp, "equal", odd, _c(imp, 0)), even_side, odd_side])

    below = fold(_op(imp, "sub", _c(imp, lo), u), ("add", lo), ("sub", hi))
    above = fold(_op(imp, "sub", u, _c(imp, hi)), ("sub", hi), ("add", lo))
    inner = imp.emit("where", [_op(imp, "greater", u, _c(imp, hi)), above, u])
    return imp.emit("where", [_op(imp, "less", u, _c(imp, lo)), below, inner])


def _cubic(imp, s) -> list[str]:
    """Keys' coefficients of the taps at -1, 0, 1, 2 for the fraction s in [0, 1)."""
    def near(t):  # |t| <= 1: (a + 2)|t|^3 - (a + 3)|t|^2 + 1
        sq = _op(imp, "mul", t, t)
        return _op(imp, "add", _op(imp, "mul", sq, _op(imp, "sub", _op(imp, "mul", t, _c(imp, _A + 2)),
                                                          _c(imp, _A + 3))), _c(imp, 1))

    def far(t):  # 1 < |t| < 2: a|t|^3 - 5a|t|^2 + 8a|t| - 4a
        inner = _op(imp, "add", _op(imp, "mul", _op(imp, "sub", _op(imp, "mul", t, _c(imp, _A)), _c(imp, 5 * _A)), t),
                    _c(imp, 8 * _A))
        return _op(imp, "sub", _op(imp, "mul", inner, t), _c(imp, 4 * _A))

    one_minus = _op(imp, "sub", _c(imp, 1), s)
    return [far(_op(imp, "add", s, _c(imp, 1))), near(s), near(one_minus), far(_op(imp, "add", one_minus, _c(imp, 1)))]


def _axis_taps(imp, u, mode: str) -> list[tuple[str, str | None]]:
    """(tap coordinate, weight) pairs along one axis; nearest has one tap of weight 1 (None)."""
    if mode == "nearest":
        return [(u, None)]
    base = _op(imp, "floor", u)
    s = _op(imp, "sub", u, base)
    if mode == "linear":
        return [(base, _op(imp, "sub", _c(imp, 1), s)), (_op(imp, "add", base, _c(imp, 1)), s)]
    return [(_op(imp, "add", base, _c(imp, k)), w) for k, w in zip((-1, 0, 1, 2), _cubic(imp, s))]


def _resolve(imp, t, size: int, padding: str, lo: float, hi: float) -> tuple[str, str | None]:
    """(index inside [0, size), validity or None) of an integer-valued tap coordinate."""
    top = _c(imp, size - 1)
    if padding == "reflection":
        r = _reflect(imp, t, lo, hi)
        t = imp.emit("where", [_op(imp, "less", r, _c(imp, 0)), _op(imp, "ceil", r), _op(imp, "floor", r)])
    index = _op(imp, "minimum", _op(imp, "maximum", t, _c(imp, 0)), top)
    if padding != "zeros":
        return index, None
    inside = _op(imp, "logical_and", _op(imp, "greater_equal", t, _c(imp, 0)), _op(imp, "less_equal", t, top))
    return index, inside


def grid_sample(imp, n, ins, a):
    x, grid = imp.value(ins[0]), imp.value(ins[1])
    xs, gs = imp.b.types[x].shape, imp.b.types[grid].shape
    rank = len(xs) - 2
    mode, padding = _MODES.get(a.get("mode", "linear")), a.get("padding_mode", "zeros")
    align = bool(a.get("align_corners", 0))
    if rank not in (2, 3) or gs[0] != xs[0] or len(gs) != rank + 2 or gs[-1] != rank:
        raise imp.fail(f"input {list(xs)} with grid {list(gs)} (N, C, H, W with N, H_out, W_out, 2; or 3-D)")
    if mode is None or padding not in ("zeros", "border", "reflection"):
        raise imp.fail(f"mode {a.get('mode')!r} / padding_mode {padding!r}")
    if imp.b.types[x].dtype != "float32" or imp.b.types[grid].dtype != "float32":
        raise imp.fail("inputs other than float32")
    bsz, channels, sizes, out = xs[0], xs[1], xs[2:], gs[1:-1]
    q = int(np.prod(out))
    per_axis = []
    for i, size in enumerate(sizes):  # the grid lists x (the last axis) first
        j = rank - 1 - i
        g = imp.emit("slice", [grid], {"begin": (0,) * (rank + 1) + (j,), "end": (*gs[:-1], j + 1),
                                       "step": (1,) * (rank + 2)})
        g = imp.emit("reshape", [g], {"shape": (bsz, 1, q)})
        if align:
            u = _op(imp, "mul", _op(imp, "add", g, _c(imp, 1)), _c(imp, (size - 1) / 2))
            lo, hi = 0.0, size - 1.0
        else:
            u = _op(imp, "mul", _op(imp, "sub", _op(imp, "mul", _op(imp, "add", g, _c(imp, 1)), _c(imp, size)),
                                    _c(imp, 1)), _c(imp, 0.5))
            lo, hi = -0.5, size - 0.5
        if mode == "nearest":
            u = imp.emit("round", [u])
        outside = _op(imp, "logical_or", _op(imp, "less", u, _c(imp, lo)), _op(imp, "greater", u, _c(imp, hi)))
        if padding == "border":
            u = imp.emit("where", [outside, _op(imp, "minimum", _op(imp, "maximum", u, _c(imp, 0)),
                                                _c(imp, size - 1)), u])
        elif padding == "reflection":
            u = _reflect(imp, u, lo, hi)
        per_axis.append([(*_resolve(imp, t, size, padding, lo, hi), w) for t, w in _axis_taps(imp, u, mode)])
    strides = [int(np.prod(sizes[i + 1:])) for i in range(rank)]
    table = imp.emit("reshape", [x], {"shape": (bsz, channels, int(np.prod(sizes)))})
    spread = imp.b.constant(np.zeros((1, channels, 1), np.int64), "channels")
    total = None
    for combo in itertools.product(*per_axis):
        flat = None
        weight, valid = None, None
        for (index, inside, w), stride in zip(combo, strides):
            term = _op(imp, "mul", index, _c(imp, stride)) if stride != 1 else index
            flat = term if flat is None else _op(imp, "add", flat, term)
            weight = w if weight is None else (weight if w is None else _op(imp, "mul", weight, w))
            valid = inside if valid is None else (valid if inside is None else _op(imp, "logical_and", valid,
                                                                                    inside))
        flat = _op(imp, "add", imp.emit("cast", [flat], {"dtype": "int64"}), spread)
        value = imp.emit("take_along", [table, flat], {"axis": 2})
        if weight is not None:
            value = _op(imp, "mul", value, weight)
        if valid is not None:
            value = imp.emit("where", [valid, value, _c(imp, 0)])
        total = value if total is None else _op(imp, "add", total, value)
    imp.emit("reshape", [total], {"shape": (bsz, channels, *out)}, n.output[0])


GRID_HANDLERS = {"GridSample": grid_sample}

__all__ = ["GRID_HANDLERS"]

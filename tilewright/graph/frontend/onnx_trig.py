"""ONNX's inverse and hyperbolic trigonometric ops (Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh,
Atanh) from exp, log, sqrt and an arctangent polynomial, each arranged to keep float32 accuracy
where the textbook formula cancels (small arguments, arguments near 1): the graph has no kernels
of their own, and these are rare enough in models that a few elementwise ops fused into one loop
are the right cost."""

from __future__ import annotations

import math

from .onnx_activations import _c, _elementwise

# atan(u) = u * P(u^2) on [0, 1]: a least-squares fit at Chebyshev nodes, relative error < 2e-7 in float32
_ATAN = (0.9999999055434062, -0.3333265783861477, 0.19986537259374976, -0.14164331734190183, 0.10507313691400486,
         -0.07247937985913283, 0.039899411372624365, -0.014458605261929188, 0.0024682234263711834)


def _polynomial(imp, x, coefficients):
    """sum_k c_k x^k by Horner's rule."""
    acc = _c(imp, x, coefficients[-1])
    for c in coefficients[-2::-1]:
        acc = imp.emit("add", [imp.emit("mul", [acc, x]), _c(imp, x, c)])
    return acc


def _odd(imp, x, coefficients, out=None):
    """x * sum_k c_k x^(2k)."""
    return imp.emit("mul", [x, _polynomial(imp, imp.emit("mul", [x, x]), coefficients)], out=out)


def _negated_where_negative(imp, x, magnitude, out):
    return imp.emit("where", [imp.emit("less", [x, _c(imp, x, 0)]), imp.emit("neg", [magnitude]), magnitude], out=out)


def _atan_of(imp, x, out=None):
    t = imp.emit("abs", [x])
    big = imp.emit("greater", [t, _c(imp, x, 1)])
    u = imp.emit("where", [big, imp.emit("div", [_c(imp, x, 1), t]), t])
    p = _odd(imp, u, _ATAN)
    r = imp.emit("where", [big, imp.emit("sub", [_c(imp, x, math.pi / 2), p]), p])
    return _negated_where_negative(imp, x, r, out)


def _one_minus_square(imp, x):
    """1 - x^2 as (1 - x)(1 + x): exact near |x| = 1."""
    return imp.emit("mul", [imp.emit("sub", [_c(imp, x, 1), x]), imp.emit("add", [_c(imp, x, 1), x])])


def _asin(imp, x, a, out, _):
    _atan_of(imp, imp.emit("div", [x, imp.emit("sqrt", [_one_minus_square(imp, x)])]), out)


def _acos(imp, x, a, out, _):
    """2 atan(sqrt((1 - x) / (1 + x))): no cancellation near x = 1."""
    ratio = imp.emit("div", [imp.emit("sub", [_c(imp, x, 1), x]), imp.emit("add", [_c(imp, x, 1), x])])
    imp.emit("mul", [_atan_of(imp, imp.emit("sqrt", [ratio])), _c(imp, x, 2)], out=out)


def _small(imp, x, limit, series, general, out):
    """series(x) where |x| < limit, general(x) elsewhere."""
    near = imp.emit("less", [imp.emit("abs", [x]), _c(imp, x, limit)])
    imp.emit("where", [near, series, general], out=out)


def _sinh(imp, x, a, out, _):
    up, down = imp.emit("exp", [x]), imp.emit("exp", [imp.emit("neg", [x])])
    general = imp.emit("mul", [imp.emit("sub", [up, down]), _c(imp, x, 0.5)])
    _small(imp, x, 0.5, _odd(imp, x, (1, 1 / 6, 1 / 120, 1 / 5040, 1 / 362880)), general, out)


def _cosh(imp, x, a, out, _):
    up, down = imp.emit("exp", [x]), imp.emit("exp", [imp.emit("neg", [x])])
    imp.emit("mul", [imp.emit("add", [up, down]), _c(imp, x, 0.5)], out=out)


def _asinh(imp, x, a, out, _):
    t = imp.emit("abs", [x])
    root = imp.emit("sqrt", [imp.emit("add", [imp.emit("mul", [t, t]), _c(imp, x, 1)])])
    general = _negated_where_negative(imp, x, imp.emit("log", [imp.emit("add", [t, root])]), None)
    series = _odd(imp, x, (1, -1 / 6, 3 / 40, -15 / 336, 105 / 3456, -945 / 42240, 10395 / 599040))
    _small(imp, x, 0.5, series, general, out)


def _acosh(imp, x, a, out, _):
    square_less_one = imp.emit("mul", [imp.emit("sub", [x, _c(imp, x, 1)]), imp.emit("add", [x, _c(imp, x, 1)])])
    root = imp.emit("sqrt", [square_less_one])
    imp.emit("log", [imp.emit("add", [x, root])], out=out)


def _atanh(imp, x, a, out, _):
    ratio = imp.emit("div", [imp.emit("add", [_c(imp, x, 1), x]), imp.emit("sub", [_c(imp, x, 1), x])])
    general = imp.emit("mul", [imp.emit("log", [ratio]), _c(imp, x, 0.5)])
    _small(imp, x, 0.25, _odd(imp, x, tuple(1 / k for k in range(1, 14, 2))), general, out)


TRIG_HANDLERS = {name: _elementwise(f) for name, f in (
    ("Asin", _asin), ("Acos", _acos), ("Atan", lambda imp, x, a, out, _: _atan_of(imp, x, out)), ("Sinh", _sinh),
    ("Cosh", _cosh), ("Asinh", _asinh), ("Acosh", _acosh), ("Atanh", _atanh))}

__all__ = ["TRIG_HANDLERS"]

"""ONNX's activations and other elementwise ops that the graph's ops spell: HardSigmoid, HardSwish,
Swish, Elu, Celu, Selu, Softplus, Softsign, ThresholdedRelu, Mish, PRelu, Shrink, Sign, Tan, IsNaN,
IsInf, variadic Sum and Mean, and LogSoftmax (shifted by the maximum, as a softmax is)."""

from __future__ import annotations

import numpy as np


def _c(imp, x: str, value) -> str:
    """A scalar constant of x's dtype."""
    return imp.b.constant(np.array(value, dtype=imp.b.types[x].dtype), "c")


def _where_positive(imp, x, positive, other, out):
    return imp.emit("where", [imp.emit("greater", [x, _c(imp, x, 0)]), positive, other], out=out)


def _elementwise(build, widen: bool = True):
    """A handler for `build(imp, x, attrs, out, other inputs)`; with `widen`, 16-bit floats computed in float32
    and rounded once at the end (each step rounded to bfloat16 would drift past what the op defines)."""
    def handler(imp, n, ins, a):
        x, rest = imp.value(ins[0]), [imp.value(i) for i in ins[1:] if i]
        dtype = imp.b.types[x].dtype
        if not widen or dtype not in ("float16", "bfloat16"):
            return build(imp, x, a, n.output[0], rest)
        wide = [imp.emit("cast", [v], {"dtype": "float32"}) for v in (x, *rest)]
        out = n.output[0] + "_float32"
        build(imp, wide[0], a, out, wide[1:])
        if imp.b.types[imp.env[out]].dtype == "bool":  # a test (IsInf): nothing to round
            imp.env[n.output[0]] = imp.env[out]
        else:
            imp.emit("cast", [imp.env[out]], {"dtype": dtype}, n.output[0])
    return handler


def _hard_sigmoid(imp, x, a, out, _):
    y = imp.emit("add", [imp.emit("mul", [x, _c(imp, x, a.get("alpha", 0.2))]), _c(imp, x, a.get("beta", 0.5))])
    imp.emit("clip", [y], {"min": 0.0, "max": 1.0}, out)


def _swish(imp, x, a, out, _):
    imp.emit("mul", [x, imp.emit("sigmoid", [imp.emit("mul", [x, _c(imp, x, a.get("alpha", 1.0))])])], out=out)


def _expm1_times(imp, x, alpha):
    return imp.emit("mul", [imp.emit("sub", [imp.emit("exp", [x]), _c(imp, x, 1)]), _c(imp, x, alpha)])


def _elu(imp, x, a, out, _):
    _where_positive(imp, x, x, _expm1_times(imp, x, a.get("alpha", 1.0)), out)


def _celu(imp, x, a, out, _):
    alpha = a.get("alpha", 1.0)
    neg = _expm1_times(imp, imp.emit("div", [x, _c(imp, x, alpha)]), alpha)
    imp.emit("add", [imp.emit("maximum", [x, _c(imp, x, 0)]), imp.emit("minimum", [neg, _c(imp, x, 0)])], out=out)


def _selu(imp, x, a, out, _):
    y = _where_positive(imp, x, x, _expm1_times(imp, x, a.get("alpha", 1.67326319217681884765625)), None)
    imp.emit("mul", [y, _c(imp, x, a.get("gamma", 1.05070102214813232421875))], out=out)


def _softplus_of(imp, x, out=None):
    """max(x, 0) + log(1 + exp(-|x|)): log(1 + e^x) without overflow."""
    decay = imp.emit("exp", [imp.emit("neg", [imp.emit("abs", [x])])])
    tail = imp.emit("log", [imp.emit("add", [_c(imp, x, 1), decay])])
    return imp.emit("add", [imp.emit("maximum", [x, _c(imp, x, 0)]), tail], out=out)


def _softsign(imp, x, a, out, _):
    imp.emit("div", [x, imp.emit("add", [_c(imp, x, 1), imp.emit("abs", [x])])], out=out)


def _thresholded_relu(imp, x, a, out, _):
    above = imp.emit("greater", [x, _c(imp, x, a.get("alpha", 1.0))])
    imp.emit("where", [above, x, _c(imp, x, 0)], out=out)


def _mish(imp, x, a, out, _):
    imp.emit("mul", [x, imp.emit("tanh", [_softplus_of(imp, x)])], out=out)


def _prelu(imp, x, a, out, rest):
    imp.emit("where", [imp.emit("less", [x, _c(imp, x, 0)]), imp.emit("mul", [x, rest[0]]), x], out=out)


def _shrink(imp, x, a, out, _):
    bias, lambd = a.get("bias", 0.0), a.get("lambd", 0.5)
    high = imp.emit("where", [imp.emit("greater", [x, _c(imp, x, lambd)]), imp.emit("sub", [x, _c(imp, x, bias)]),
                              _c(imp, x, 0)])
    imp.emit("where", [imp.emit("less", [x, _c(imp, x, -lambd)]), imp.emit("add", [x, _c(imp, x, bias)]), high],
             out=out)


def _sign(imp, x, a, out, _):
    negative = imp.emit("where", [imp.emit("less", [x, _c(imp, x, 0)]), _c(imp, x, -1), _c(imp, x, 0)])
    _where_positive(imp, x, _c(imp, x, 1), negative, out)


def _tan(imp, x, a, out, _):
    imp.emit("div", [imp.emit("sin", [x]), imp.emit("cos", [x])], out=out)


def _is_nan(imp, x, a, out, _):
    imp.emit("logical_not", [imp.emit("equal", [x, x])], out=out)


def _is_inf(imp, x, a, out, _):
    sides = [imp.emit("equal", [x, _c(imp, x, s * np.inf)])
             for s, key in ((1, "detect_positive"), (-1, "detect_negative")) if a.get(key, 1)]
    if not sides:
        imp.emit("logical_and", [imp.emit("equal", [x, x]), imp.emit("logical_not", [imp.emit("equal", [x, x])])],
                 out=out)
    elif len(sides) == 1:
        imp.env[out] = sides[0]
    else:
        imp.emit("logical_or", sides, out=out)


def _sum_of(imp, ins, out=None) -> tuple[str, int]:
    """The sum of the present inputs (written to `out` where given) and their count."""
    values = [imp.value(i) for i in ins if i]
    total = values[0]
    for k, v in enumerate(values[1:]):
        total = imp.emit("add", [total, v], out=out if k == len(values) - 2 else None)
    return total, len(values)


def _sum(imp, n, ins, a):
    total, count = _sum_of(imp, ins, n.output[0])
    if count == 1:
        imp.env[n.output[0]] = total


def _mean(imp, n, ins, a):
    total, count = _sum_of(imp, ins)
    imp.emit("div", [total, _c(imp, total, count)], out=n.output[0])


def _log_softmax(imp, n, ins, a):
    x = imp.value(ins[0])
    rank = len(imp.b.types[x].shape)
    axis = (int(a.get("axis", -1)) % rank,)
    shifted = imp.emit("sub", [x, imp.emit("reduce_max", [x], {"axes": axis, "keepdims": True})])
    total = imp.emit("reduce_sum", [imp.emit("exp", [shifted])], {"axes": axis, "keepdims": True})
    imp.emit("sub", [shifted, imp.emit("log", [total])], out=n.output[0])


ACTIVATION_HANDLERS = {
    "HardSigmoid": _elementwise(_hard_sigmoid), "Swish": _elementwise(_swish), "Elu": _elementwise(_elu),
    "Celu": _elementwise(_celu), "Selu": _elementwise(_selu),
    "Softplus": _elementwise(lambda imp, x, a, out, _: _softplus_of(imp, x, out)),
    "Softsign": _elementwise(_softsign), "ThresholdedRelu": _elementwise(_thresholded_relu),
    "Mish": _elementwise(_mish), "PRelu": _elementwise(_prelu), "Shrink": _elementwise(_shrink),
    "Sign": _elementwise(_sign), "Tan": _elementwise(_tan), "IsNaN": _elementwise(_is_nan, widen=False),
    "IsInf": _elementwise(_is_inf),
    "HardSwish": lambda imp, n, ins, a: imp.emit("hardswish", [imp.value(ins[0])], out=n.output[0]),
    "Sum": _sum, "Mean": _mean, "LogSoftmax": _log_softmax,
}

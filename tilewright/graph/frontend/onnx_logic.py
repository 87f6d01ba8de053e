"""ONNX's comparisons, logical ops, Where (graph/logic_ops.py), Div, Mod (graph/integer_ops.py) and Pow of mixed
dtypes."""

from __future__ import annotations

_OPS = {"Equal": "equal", "Less": "less", "LessOrEqual": "less_equal", "Greater": "greater",
        "GreaterOrEqual": "greater_equal", "And": "logical_and", "Or": "logical_or", "Xor": "logical_xor",
        "Not": "logical_not", "Where": "where"}


def _handler(op: str):
    return lambda imp, n, ins, a: imp.emit(op, [imp.value(i) for i in ins], out=n.output[0])


def _mod(imp, n, ins, a):
    """Integer or float Mod; 16-bit floats computed in float32 (their remainder is exact there too)."""
    x, y = imp.value(ins[0]), imp.value(ins[1])
    dtype = imp.b.types[x].dtype
    attrs = {"fmod": int(a.get("fmod", 0))}
    if dtype in ("float16", "bfloat16"):
        wide = imp.emit("mod", [imp.emit("cast", [v], {"dtype": "float32"}) for v in (x, y)], attrs)
        return imp.emit("cast", [wide], {"dtype": dtype}, n.output[0])
    imp.emit("mod", [x, y], attrs, n.output[0])


def _pow(imp, n, ins, a):
    """x ** y in x's dtype (ONNX's rule): a float base takes the exponent cast to its dtype; an integer base is
    raised in float64 (exact while the power stays below 2^53) and truncated back."""
    x, y = imp.value(ins[0]), imp.value(ins[1])
    xd, yd = imp.b.types[x].dtype, imp.b.types[y].dtype
    if xd.startswith(("float", "bfloat")):
        if yd != xd:
            y = imp.emit("cast", [y], {"dtype": xd})
        return imp.emit("pow", [x, y], out=n.output[0])
    wide = imp.emit("pow", [imp.emit("cast", [v], {"dtype": "float64"}) for v in (x, y)])
    imp.emit("cast", [wide], {"dtype": xd}, n.output[0])


def _div(imp, n, ins, a):
    """Division: true division on floats, rounding toward zero on integers (C's `/`)."""
    x = imp.value(ins[0])
    integer = imp.b.types[x].dtype.startswith(("int", "uint"))
    imp.emit("truncdiv" if integer else "div", [x, imp.value(ins[1])], out=n.output[0])


LOGIC_HANDLERS = {**{name: _handler(op) for name, op in _OPS.items()}, "Mod": _mod, "Div": _div, "Pow": _pow}

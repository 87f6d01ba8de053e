"""ONNX's comparisons, logical ops, Where (graph/logic_ops.py) and integer Mod (graph/integer_ops.py)."""

from __future__ import annotations

_OPS = {"Equal": "equal", "Less": "less", "LessOrEqual": "less_equal", "Greater": "greater",
        "GreaterOrEqual": "greater_equal", "And": "logical_and", "Or": "logical_or", "Xor": "logical_xor",
        "Not": "logical_not", "Where": "where"}


def _handler(op: str):
    return lambda imp, n, ins, a: imp.emit(op, [imp.value(i) for i in ins], out=n.output[0])


def _mod(imp, n, ins, a):
    x = imp.value(ins[0])
    if not imp.b.types[x].dtype.startswith(("int", "uint")):
        raise imp.fail(f"a {imp.b.types[x].dtype} Mod (integer Mod only)")
    imp.emit("mod", [x, imp.value(ins[1])], {"fmod": int(a.get("fmod", 0))}, n.output[0])


LOGIC_HANDLERS = {**{name: _handler(op) for name, op in _OPS.items()}, "Mod": _mod}

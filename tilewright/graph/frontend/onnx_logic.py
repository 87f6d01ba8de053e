"""ONNX's comparisons, logical ops and Where onto the graph's (graph/logic_ops.py)."""

from __future__ import annotations

_OPS = {"Equal": "equal", "Less": "less", "LessOrEqual": "less_equal", "Greater": "greater",
        "GreaterOrEqual": "greater_equal", "And": "logical_and", "Or": "logical_or", "Xor": "logical_xor",
        "Not": "logical_not", "Where": "where"}


def _handler(op: str):
    return lambda imp, n, ins, a: imp.emit(op, [imp.value(i) for i in ins], out=n.output[0])


LOGIC_HANDLERS = {name: _handler(op) for name, op in _OPS.items()}

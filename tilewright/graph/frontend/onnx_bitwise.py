"""ONNX's bitwise ops (BitwiseAnd/Or/Xor/Not, BitShift) on integer tensors (graph/bitwise_ops.py)."""

from __future__ import annotations

from ..bitwise_ops import INTEGER_DTYPES

_OPS = {"BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor",
        "BitwiseNot": "bitwise_not"}
_DIRECTIONS = {"LEFT": "left_shift", "RIGHT": "right_shift"}


def _inputs(imp, ins) -> list[str]:
    values = [imp.value(i) for i in ins]
    for v in values:
        if imp.b.types[v].dtype not in INTEGER_DTYPES:
            raise imp.fail(f"a {imp.b.types[v].dtype} input; valid: {', '.join(INTEGER_DTYPES)}")
    return values


def _handler(op: str):
    return lambda imp, n, ins, a: imp.emit(op, _inputs(imp, ins), out=n.output[0])


def _bit_shift(imp, n, ins, a):
    direction = a.get("direction")
    if direction not in _DIRECTIONS:
        raise imp.fail(f"direction {direction!r}; valid: 'LEFT', 'RIGHT'")
    imp.emit(_DIRECTIONS[direction], _inputs(imp, ins), out=n.output[0])


BITWISE_HANDLERS = {**{name: _handler(op) for name, op in _OPS.items()}, "BitShift": _bit_shift}

"""Which ONNX opsets the frontend reads: 13 to the newest the installed onnx knows. The handlers
follow the op definitions of opsets 13-21; later versions of the ops they take only added element
types and attributes whose absence keeps the old meaning, so a node that sets such an attribute is
refused by name (the ONNX node tests, bench/onnx_node_tests.py, check the rest)."""

from __future__ import annotations

import functools

REVIEWED_OPSET = 21  # the handlers follow the op definitions of opsets 13-21


def supported_opsets() -> range:
    """Opset 13 to the newest the installed onnx knows."""
    import onnx

    return range(13, max(REVIEWED_OPSET, onnx.defs.onnx_opset_version()) + 1)


@functools.cache
def newer_attributes(op: str, opset: int) -> frozenset:
    """Attributes `op` has at `opset` that its opset-21 definition lacks."""
    import onnx

    try:
        new = onnx.defs.get_schema(op, opset).attributes
        old = onnx.defs.get_schema(op, REVIEWED_OPSET).attributes
    except onnx.defs.SchemaError:
        return frozenset()
    return frozenset(set(new) - set(old))


__all__ = ["REVIEWED_OPSET", "newer_attributes", "supported_opsets"]

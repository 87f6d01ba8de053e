"""Which ONNX opsets the frontend reads: 13 to the newest the installed onnx knows. The handlers
follow the op definitions of opsets 13-21; later versions of the ops they take only added element
types and attributes whose absence keeps the old meaning, so a node that sets such an attribute is
refused by name (the ONNX node tests, bench/onnx_node_tests.py, check the rest). A model of an
older opset is first converted to opset 13 by onnx's own version converter."""

from __future__ import annotations

import functools

REVIEWED_OPSET = 21  # the handlers follow the op definitions of opsets 13-21


def supported_opsets() -> range:
    """Opset 13 to the newest the installed onnx knows."""
    import onnx

    return range(13, max(REVIEWED_OPSET, onnx.defs.onnx_opset_version()) + 1)


def converted_to_supported(model):
    """(model, its default-domain opset): an opset older than 13 converted to 13 by `onnx.version_converter`;
    one the converter cannot take, or a newer opset than the installed onnx knows, an UnsupportedOpError."""
    import onnx

    from .builder import UnsupportedOpError

    version = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    opsets = supported_opsets()
    if version is None:
        domains = sorted({o.domain for o in model.opset_import})
        raise UnsupportedOpError(f"from_onnx: model '{model.graph.name}' imports no default-domain opset (only "
                                 f"{', '.join(domains) or 'none'}); supported: ai.onnx opsets {opsets.start}-"
                                 f"{opsets.stop - 1}")
    if version < opsets.start:
        try:
            model = onnx.version_converter.convert_version(model, opsets.start)
        except Exception as e:  # noqa: BLE001 - the converter's own errors are many kinds: name it
            raise UnsupportedOpError(f"from_onnx: model '{model.graph.name}' uses opset {version}, which "
                                     f"onnx.version_converter could not convert to {opsets.start} "
                                     f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
                                     f"supported opsets: {opsets.start}-{opsets.stop - 1}") from None
        return model, opsets.start
    if version not in opsets:
        raise UnsupportedOpError(f"from_onnx: model '{model.graph.name}' uses opset {version}; supported opsets: "
                                 f"{opsets.start}-{opsets.stop - 1} (a newer onnx may know it)")
    return model, version


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


__all__ = ["REVIEWED_OPSET", "converted_to_supported", "newer_attributes", "supported_opsets"]

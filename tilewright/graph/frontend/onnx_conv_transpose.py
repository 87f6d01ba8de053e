"""ONNX `ConvTranspose` as the graph's conv_transpose2d (F.conv_transpose2d's semantics)."""

from __future__ import annotations


def conv_transpose(imp, n, ins, a):
    """2-D ConvTranspose; asymmetric pads crop the symmetric result with a slice."""
    x, w = imp.value(ins[0]), imp.value(ins[1])
    if len(imp.b.types[w].shape) != 4:
        raise imp.fail("only 2-D transposed convolution")
    for attr in ("output_shape",):
        if attr in a:
            raise imp.fail(f"attribute {attr} (give pads and output_padding)")
    if a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise imp.fail(f"auto_pad {a['auto_pad']}")
    pads = (0, 0, 0, 0) if a.get("auto_pad") == "VALID" else tuple(a.get("pads", (0, 0, 0, 0)))
    attrs = {"stride": tuple(a.get("strides", (1, 1))), "output_padding": tuple(a.get("output_padding", (0, 0))),
             "dilation": tuple(a.get("dilations", (1, 1))), "groups": int(a.get("group", 1))}
    operands = [x, w] + ([imp.value(ins[2])] if len(ins) > 2 and ins[2] else [])
    if pads[:2] == pads[2:]:
        return imp.emit("conv_transpose2d", operands, {**attrs, "padding": pads[:2]}, n.output[0])
    full = imp.emit("conv_transpose2d", operands, {**attrs, "padding": (0, 0)})
    shape = imp.b.types[full].shape
    imp.emit("slice", [full], {"begin": (0, 0, pads[0], pads[1]),
                               "end": (shape[0], shape[1], shape[2] - pads[2], shape[3] - pads[3]),
                               "step": (1, 1, 1, 1)}, n.output[0])


__all__ = ["conv_transpose"]

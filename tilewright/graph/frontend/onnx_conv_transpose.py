"""ONNX `ConvTranspose` (1-D or 2-D) as the graph's conv_transpose2d (F.conv_transpose2d's
semantics; 1-D over a unit height). Symmetric pads are the op's padding; anything else (asymmetric
pads, `output_shape`, SAME auto_pad, whose padding ONNX derives from the output shape) is the
unpadded result cropped, or grown with zeros, to ONNX's output window, then the bias added."""

from __future__ import annotations

from .onnx_conv import reshaped


def _pads(imp, a, sizes, kernel, stride, dil, out_pad):
    """(begins, ends) of ONNX's padding; negative ends grow the output."""
    rank = len(sizes)
    auto = a.get("auto_pad", "NOTSET")
    if "output_shape" not in a and auto not in ("SAME_UPPER", "SAME_LOWER"):
        pads = (0,) * 2 * rank if auto == "VALID" else tuple(a.get("pads", (0,) * 2 * rank))
        return pads[:rank], pads[rank:]
    want = list(a["output_shape"])[-rank:] if "output_shape" in a else [s * st for s, st in zip(sizes, stride)]
    total = [st * (s - 1) + op + (k - 1) * d + 1 - w
             for s, st, op, k, d, w in zip(sizes, stride, out_pad, kernel, dil, want)]
    if auto == "SAME_UPPER":
        return [t // 2 for t in total], [t - t // 2 for t in total]
    return [t - t // 2 for t in total], [t // 2 for t in total]


def conv_transpose(imp, n, ins, a):
    x, w = imp.value(ins[0]), imp.value(ins[1])
    rank = len(imp.b.types[w].shape) - 2
    if rank not in (1, 2):
        raise imp.fail(f"a {rank}-D transposed convolution (1-D or 2-D)")
    if rank == 1:
        (bsz, c, length), (ci, og, k) = imp.b.types[x].shape, imp.b.types[w].shape
        x, w = reshaped(imp, x, (bsz, c, 1, length)), reshaped(imp, w, (ci, og, 1, k))
        a = _as_2d(a)
    sizes, kernel = imp.b.types[x].shape[2:], imp.b.types[w].shape[2:]
    stride, dil = tuple(a.get("strides", (1, 1))), tuple(a.get("dilations", (1, 1)))
    out_pad = tuple(a.get("output_padding", (0, 0)))
    begins, ends = _pads(imp, a, sizes, kernel, stride, dil, out_pad)
    attrs = {"stride": stride, "output_padding": out_pad, "dilation": dil, "groups": int(a.get("group", 1))}
    bias = [imp.value(ins[2])] if len(ins) > 2 and ins[2] else []
    if list(begins) == list(ends) and min(begins) >= 0:
        y = imp.emit("conv_transpose2d", [x, w, *bias], {**attrs, "padding": tuple(begins)})
    else:
        y = _window(imp, imp.emit("conv_transpose2d", [x, w], {**attrs, "padding": (0, 0)}), begins, ends)
        if bias:
            channels = imp.b.types[y].shape[1]
            y = imp.emit("add", [y, reshaped(imp, bias[0], (1, channels, 1, 1))])
    if rank == 1:
        shape = imp.b.types[y].shape
        y = imp.emit("reshape", [y], {"shape": (shape[0], shape[1], shape[3])})
    imp.env[n.output[0]] = y


def _as_2d(a: dict) -> dict:
    """A 1-D node's attributes for the same op over a unit height."""
    a = dict(a)
    for key, unit in (("strides", 1), ("dilations", 1), ("output_padding", 0), ("output_shape", 1)):
        if key in a:
            a[key] = (unit, list(a[key])[-1])
    if "pads" in a:
        a["pads"] = (0, a["pads"][0], 0, a["pads"][1])
    return a


def _window(imp, y: str, begins, ends) -> str:
    """y cropped by positive pads and grown with zeros by negative ones, per spatial axis."""
    shape = imp.b.types[y].shape
    crop_b = [max(b, 0) for b in begins]
    crop_e = [max(e, 0) for e in ends]
    if any(crop_b) or any(crop_e):
        y = imp.emit("slice", [y], {"begin": (0, 0, *crop_b), "end": (*shape[:2], *(s - e for s, e in
                                                                                    zip(shape[2:], crop_e))),
                                    "step": (1,) * len(shape)})
    grow_b, grow_e = [max(-b, 0) for b in begins], [max(-e, 0) for e in ends]
    if any(grow_b) or any(grow_e):
        y = imp.emit("pad", [y], {"pads": (0, 0, *grow_b, 0, 0, *grow_e), "value": 0.0})
    return y


__all__ = ["conv_transpose"]

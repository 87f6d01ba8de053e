"""ONNX `Conv` of 1, 2 or 3 spatial dimensions, and the stride/padding/dilation reading every
Conv-like node shares. 2-D is the graph's conv2d; 1-D is a 2-D convolution over a unit height; 3-D is
a sum over the depth taps of 2-D convolutions, each over the input's depth slices folded into the
batch (no 3-D kernel of its own: KD conv2d nodes on [N * D_out, C, H, W])."""

from __future__ import annotations

import numpy as np


def spatial(imp, n, ins, a, kernel):
    """(stride, padding (begins..., ends...), dilation) of a Conv/pool node of len(kernel) spatial dims,
    auto_pad resolved."""
    rank = len(kernel)
    stride, dil = tuple(a.get("strides", (1,) * rank)), tuple(a.get("dilations", (1,) * rank))
    pads = tuple(a.get("pads", (0,) * 2 * rank))
    auto = a.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        sizes = imp.type_of(ins[0]).shape[2:]
        total = [max(0, (-(-size // s) - 1) * s + (k - 1) * d + 1 - size)
                 for size, s, k, d in zip(sizes, stride, kernel, dil)]
        small, big = [t // 2 for t in total], [t - t // 2 for t in total]
        before, after = (small, big) if auto == "SAME_UPPER" else (big, small)
        pads = (*before, *after)
    elif auto == "VALID":
        pads = (0,) * 2 * rank
    return stride, pads, dil


def reshaped(imp, v: str, shape) -> str:
    """`v` reshaped (at import when constant)."""
    known = imp.b.const_value(v)
    if known is not None:
        return imp.b.constant(known.reshape(shape), "reshaped")
    return imp.emit("reshape", [v], {"shape": tuple(int(d) for d in shape)})


def conv(imp, n, ins, a):
    w_type = imp.type_of(ins[1])
    rank = len(w_type.shape) - 2 if w_type is not None else 0
    if rank not in (1, 2, 3):
        raise imp.fail(f"a weight of rank {rank + 2} (1-D, 2-D or 3-D convolution)")
    stride, pads, dil = spatial(imp, n, ins, a, w_type.shape[2:])
    vals = [imp.value(i) for i in ins if i]
    groups = a.get("group", 1)
    if rank == 2:
        return imp.emit("conv2d", vals, {"stride": stride, "padding": pads, "dilation": dil, "groups": groups},
                        n.output[0])
    if rank == 1:
        x, w = vals[:2]
        (bsz, c, length), (o, cg, k) = imp.b.types[x].shape, imp.b.types[w].shape
        y = imp.emit("conv2d", [reshaped(imp, x, (bsz, c, 1, length)), reshaped(imp, w, (o, cg, 1, k)), *vals[2:]],
                     {"stride": (1, stride[0]), "padding": (0, pads[0], 0, pads[1]), "dilation": (1, dil[0]),
                      "groups": groups})
        return imp.emit("reshape", [y], {"shape": (bsz, o, imp.b.types[y].shape[3])}, n.output[0])
    _conv3d(imp, n, vals, stride, pads, dil, groups)


def _conv3d(imp, n, vals, stride, pads, dil, groups):
    x, w = vals[:2]
    (bsz, c, depth, h, wd), (o, cg, kd, kh, kw) = imp.b.types[x].shape, imp.b.types[w].shape
    if pads[0] or pads[3]:
        x = imp.emit("pad", [x], {"pads": (0, 0, pads[0], 0, 0, 0, 0, pads[3], 0, 0), "value": 0.0})
        depth += pads[0] + pads[3]
    d_out = (depth - dil[0] * (kd - 1) - 1) // stride[0] + 1
    if d_out < 1:
        raise imp.fail(f"the depth kernel ({kd}, dilation {dil[0]}) does not fit the padded depth {depth}")
    attrs = {"stride": stride[1:], "padding": (pads[1], pads[2], pads[4], pads[5]), "dilation": dil[1:],
             "groups": groups}
    total = None
    for t in range(kd):
        begin = t * dil[0]
        end = (bsz, c, begin + (d_out - 1) * stride[0] + 1, h, wd)
        xs = imp.emit("slice", [x], {"begin": (0, 0, begin, 0, 0), "end": end, "step": (1, 1, stride[0], 1, 1)})
        xs = reshaped(imp, imp.emit("permute", [xs], {"dims": (0, 2, 1, 3, 4)}), (bsz * d_out, c, h, wd))
        ws = _depth_tap(imp, w, t, (o, cg, kh, kw))
        y = imp.emit("conv2d", [xs, ws, *(vals[2:] if t == 0 else [])], attrs)
        total = y if total is None else imp.emit("add", [total, y])
    _, _, ho, wo = imp.b.types[total].shape
    imp.emit("permute", [reshaped(imp, total, (bsz, d_out, o, ho, wo))], {"dims": (0, 2, 1, 3, 4)}, n.output[0])


def _depth_tap(imp, w: str, t: int, shape) -> str:
    known = imp.b.const_value(w)
    if known is not None:
        return imp.b.constant(np.ascontiguousarray(known[:, :, t]), "weight_tap")
    full = imp.b.types[w].shape
    s = imp.emit("slice", [w], {"begin": (0, 0, t, 0, 0), "end": (full[0], full[1], t + 1, full[3], full[4]),
                                "step": (1,) * 5})
    return reshaped(imp, s, shape)


__all__ = ["conv", "reshaped", "spatial"]

"""ONNX ops that are a few graph ops each: the window functions (HannWindow, HammingWindow,
BlackmanWindow: constants of their size), CenterCropPad (slice and pad), ReverseSequence (a gather at
computed time indices), AffineGrid (a constant grid times theta), SwiGLU, CausalConvWithState (the
state concatenated, a depthwise convolution, SiLU) and Col2Im (a transposed convolution)."""

from __future__ import annotations

import numpy as np

from .onnx_activations import _elementwise, _swish


def _window(formula):
    def handler(imp, n, ins, a):
        size = int(np.asarray(imp.const(ins[0], "the window size")).ravel()[0])
        if size < 1:
            raise imp.fail(f"a window of size {size}")
        span = size if a.get("periodic", 1) else size - 1
        k = np.arange(size, dtype=np.float64)
        values = formula(k, max(span, 1))
        imp.known[n.output[0]] = values.astype(imp.onnx.helper.tensor_dtype_to_np_dtype(a.get("output_datatype", 1)))
    return handler


_WINDOWS = {
    "HannWindow": lambda k, span: np.sin(np.pi * k / span) ** 2,
    "HammingWindow": lambda k, span: 25 / 46 - (21 / 46) * np.cos(2 * np.pi * k / span),
    "BlackmanWindow": lambda k, span: 0.42 - 0.5 * np.cos(2 * np.pi * k / span) + 0.08 * np.cos(4 * np.pi * k / span),
}


def _center_crop_pad(imp, n, ins, a):
    x = imp.value(ins[0])
    shape = imp.b.types[x].shape
    rank = len(shape)
    target = [int(t) for t in np.asarray(imp.const(ins[1], "the target shape")).ravel()]
    axes = [int(ax) % rank for ax in a.get("axes", range(rank))]
    if len(axes) != len(target):
        raise imp.fail(f"{len(target)} target extents for {len(axes)} axes")
    begin, end = [0] * rank, list(shape)
    before, after = [0] * rank, [0] * rank
    for ax, t in zip(axes, target):
        extra = shape[ax] - t
        if extra > 0:
            begin[ax], end[ax] = extra // 2, extra // 2 + t
        else:
            before[ax], after[ax] = -extra // 2, -extra - (-extra // 2)
    if begin != [0] * rank or end != list(shape):
        x = imp.emit("slice", [x], {"begin": tuple(begin), "end": tuple(end), "step": (1,) * rank})
    if any(before) or any(after):
        x = imp.emit("pad", [x], {"pads": (*before, *after), "value": 0.0})
    imp.env[n.output[0]] = x


def _reverse_sequence(imp, n, ins, a):
    """src[t, b] = lens[b] - 1 - t where t < lens[b], else t; the output gathers x at src along time."""
    x, lens = imp.value(ins[0]), imp.value(ins[1])
    shape = imp.b.types[x].shape
    rank = len(shape)
    time, batch = int(a.get("time_axis", 0)) % rank, int(a.get("batch_axis", 1)) % rank
    if time == batch:
        raise imp.fail("time_axis and batch_axis must differ")
    lens = imp.emit("cast", [lens], {"dtype": "int64"}) if imp.b.types[lens].dtype != "int64" else lens
    along = [1] * rank
    along[batch] = shape[batch]
    lens = imp.emit("reshape", [lens], {"shape": tuple(along)})
    steps = [1] * rank
    steps[time] = shape[time]
    t = imp.b.constant(np.arange(shape[time], dtype=np.int64).reshape(steps), "time")
    reversed_ = imp.emit("sub", [imp.emit("sub", [lens, imp.b.constant(np.array(1, np.int64), "one")]), t])
    src = imp.emit("where", [imp.emit("less", [t, lens]), reversed_, t])
    full = imp.b.constant(np.zeros([1 if k in (time, batch) else d for k, d in enumerate(shape)], np.int64), "zeros")
    imp.emit("take_along", [x, imp.emit("add", [src, full])], {"axis": time}, n.output[0])


def _affine_grid(imp, n, ins, a):
    theta = imp.value(ins[0])
    size = [int(s) for s in np.asarray(imp.const(ins[1], "size")).ravel()]
    spatial = size[2:]
    if len(spatial) not in (2, 3) or imp.b.types[theta].shape != (size[0], len(spatial), len(spatial) + 1):
        raise imp.fail(f"theta {list(imp.b.types[theta].shape)} for size {size} (2-D: N x 2 x 3, 3-D: N x 3 x 4)")
    if a.get("align_corners", 0):
        axes = [np.linspace(-1, 1, d) if d > 1 else np.zeros(1) for d in spatial]
    else:
        axes = [(2 * np.arange(d) + 1) / d - 1 for d in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # one array per spatial axis, outermost first
    homogeneous = np.stack([*mesh[::-1], np.ones(spatial)], axis=-1).reshape(1, -1, len(spatial) + 1)
    grid = imp.emit("matmul", [imp.b.constant(homogeneous.astype(np.float32), "grid"),
                               imp.emit("permute", [theta], {"dims": (0, 2, 1)})])
    imp.emit("reshape", [grid], {"shape": (size[0], *spatial, len(spatial))}, n.output[0])


def _swiglu(imp, x, a, out, rest):
    gate = f"{out}_gate"
    _swish(imp, x, a, gate, None)
    imp.emit("mul", [imp.env[gate], rest[0]], out=out)


def _causal_conv_with_state(imp, n, ins, a):
    x, w = imp.value(ins[0]), imp.value(ins[1])
    (bsz, c, length), k = imp.b.types[x].shape, imp.b.types[w].shape[2]
    if imp.b.types[w].shape != (c, 1, k):
        raise imp.fail(f"weight {list(imp.b.types[w].shape)} (must be [{c}, 1, k]: depthwise)")
    activation = a.get("activation", "none")
    if activation not in ("none", "silu", "swish"):
        raise imp.fail(f"activation '{activation}' (none, silu or swish)")
    past = ins[3] if len(ins) > 3 and ins[3] else None
    if past:
        state = imp.value(past)
    else:  # constants are stored as float32: cast to a 16-bit input's dtype
        state = imp.b.constant(np.zeros((bsz, c, k - 1), np.float32), "state")
        if imp.b.types[x].dtype != "float32":
            state = imp.emit("cast", [state], {"dtype": imp.b.types[x].dtype})
    padded = imp.emit("concat", [state, x], {"axis": 2}) if k > 1 else x
    operands = [imp.emit("reshape", [padded], {"shape": (bsz, c, 1, length + k - 1)}),
                imp.emit("reshape", [w], {"shape": (c, 1, 1, k)})]
    if len(ins) > 2 and ins[2]:
        operands.append(imp.value(ins[2]))
    y = imp.emit("reshape", [imp.emit("conv2d", operands, {"groups": c})], {"shape": (bsz, c, length)})
    if activation != "none":
        y = imp.emit("mul", [y, imp.emit("sigmoid", [y])])
    imp.env[n.output[0]] = y
    if len(n.output) > 1 and n.output[1]:
        if k == 1:
            raise imp.fail("present_state of a kernel of size 1 (an empty tensor)")
        imp.emit("slice", [padded], {"begin": (0, 0, length), "end": (bsz, c, length + k - 1), "step": (1, 1, 1)},
                 n.output[1])


def _col2im(imp, n, ins, a):
    """Col2Im over a 2-D image: the columns reshaped to their block grid and summed back into the image by a
    transposed convolution whose per-channel kernel is one-hot at each block offset (groups = channels),
    then cropped by the pads."""
    from .onnx_conv_transpose import _window

    x = imp.value(ins[0])
    image = [int(v) for v in np.asarray(imp.const(ins[1], "image_shape")).ravel()]
    block = [int(v) for v in np.asarray(imp.const(ins[2], "block_shape")).ravel()]
    if len(image) != 2:
        raise imp.fail(f"a {len(image)}-D image (2-D only)")
    strides, dil = list(a.get("strides", (1, 1))), list(a.get("dilations", (1, 1)))
    pads = list(a.get("pads", (0, 0, 0, 0)))
    bsz, rows, length = imp.b.types[x].shape
    taps = block[0] * block[1]
    grid = [(image[i] + pads[i] + pads[i + 2] - (dil[i] * (block[i] - 1) + 1)) // strides[i] + 1 for i in range(2)]
    if rows % taps or grid[0] * grid[1] != length:
        raise imp.fail(f"input {[bsz, rows, length]} for blocks {block} over image {image} (expects C * "
                       f"{taps} rows and {grid[0] * grid[1]} columns)")
    channels = rows // taps
    weight = np.zeros((rows, 1, *block), np.float32)
    for c in range(channels):
        for i in range(block[0]):
            for j in range(block[1]):
                weight[c * taps + i * block[1] + j, 0, i, j] = 1.0
    cols = imp.emit("reshape", [x], {"shape": (bsz, rows, *grid)})
    full = imp.emit("conv_transpose2d", [cols, imp.b.constant(weight, "one_hot")],
                    {"stride": tuple(strides), "padding": (0, 0), "output_padding": (0, 0),
                     "dilation": tuple(dil), "groups": channels})
    spans = imp.b.types[full].shape[2:]
    ends = [pads[2 + i] - (image[i] + pads[i] + pads[2 + i] - spans[i]) for i in range(2)]
    imp.env[n.output[0]] = _window(imp, full, pads[:2], ends)


MISC_HANDLERS = {**{name: _window(f) for name, f in _WINDOWS.items()}, "CenterCropPad": _center_crop_pad,
                 "ReverseSequence": _reverse_sequence, "AffineGrid": _affine_grid, "SwiGLU": _elementwise(_swiglu),
                 "CausalConvWithState": _causal_conv_with_state, "Col2Im": _col2im}

__all__ = ["MISC_HANDLERS"]

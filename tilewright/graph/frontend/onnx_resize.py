"""ONNX Resize (nearest, linear, cubic; every coordinate transformation) as gathers along each resized
axis: the shapes are static, so every output coordinate's source taps and weights are computed here
once, in float64, and the graph holds `take`s at those constant indices times constant weights. Taps
outside the input repeat its edge, as ONNX's reference does; `exclude_outside` drops them and
renormalizes; tf_crop_and_resize reads its (constant) roi and gives extrapolation_value wherever a
coordinate falls outside the input. Antialiasing is refused by name."""

from __future__ import annotations

import numpy as np

_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
          "tf_half_pixel_for_nn", "tf_crop_and_resize")


def _source(mode: str, out_len: int, in_len: int, scale: float, roi=(0.0, 1.0)) -> np.ndarray:
    """The input coordinate of every output index along one axis (ONNX measures the resized length as
    scale x input length, unrounded, where a formula needs it; tf_crop_and_resize the roi's start and end
    as fractions of the input)."""
    x = np.arange(out_len, dtype=np.float64)
    width = scale * in_len
    if mode == "tf_crop_and_resize":
        start, end = roi
        if out_len == 1:
            return np.full(1, (start + end) * (in_len - 1) / 2)
        return start * (in_len - 1) + x * (end - start) * (in_len - 1) / (out_len - 1)
    if mode == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        adjustment = out_len / width
        offset = in_len / 2 * (1 - adjustment)
        return offset + (x + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if out_len > 1 else np.zeros_like(x)
    if mode == "align_corners":
        return x * (in_len - 1) / (width - 1) if width != 1 else np.zeros_like(x)
    if mode == "asymmetric":
        return x / scale
    return (x + 0.5) / scale  # tf_half_pixel_for_nn


def _nearest(x: np.ndarray, rounding: str) -> np.ndarray:
    if rounding == "round_prefer_floor":
        return np.ceil(x - 0.5)
    if rounding == "round_prefer_ceil":
        return np.floor(x + 0.5)
    return np.floor(x) if rounding == "floor" else np.ceil(x)


def _cubic(t: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution weights of the taps at -1, 0, 1, 2 from the floor, for fraction t."""
    def near(d):  # |d| <= 1
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):  # 1 < |d| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)])


def taps(mode: str, kind: str, in_len: int, out_len: int, scale: float, a,
         roi=(0.0, 1.0)) -> tuple[np.ndarray, np.ndarray]:
    """(indices [taps, out_len] into the input, weights [taps, out_len]) along one axis."""
    x = _source(mode, out_len, in_len, scale, roi)
    if kind == "nearest":
        idx = np.clip(_nearest(x, a.get("nearest_mode", "round_prefer_floor")), 0, in_len - 1)
        return idx[None].astype(np.int64), np.ones((1, out_len))
    base = np.floor(x)
    t = x - base
    if kind == "linear":
        offsets, weights = np.array([0, 1]), np.stack([1 - t, t])
    else:
        offsets, weights = np.arange(-1, 3), _cubic(t, float(a.get("cubic_coeff_a", -0.75)))
    idx = base[None] + offsets[:, None]
    if a.get("exclude_outside", 0):
        weights = np.where((idx < 0) | (idx > in_len - 1), 0.0, weights)
        weights = weights / weights.sum(axis=0, keepdims=True)
    return np.clip(idx, 0, in_len - 1).astype(np.int64), weights


def resize(imp, n, ins, a):
    x = imp.value(ins[0])
    shape = imp.b.types[x].shape
    kind = a.get("mode", "nearest")
    mode = a.get("coordinate_transformation_mode", "half_pixel")
    if a.get("antialias", 0) or mode not in _MODES or kind not in ("nearest", "linear", "cubic"):
        raise imp.fail(f"mode {kind!r} with {mode!r}{' and antialias' if a.get('antialias', 0) else ''}; "
                       f"valid: nearest / linear / cubic, {', '.join(_MODES)}, no antialias")
    policy = a.get("keep_aspect_ratio_policy", "stretch")
    if policy not in ("stretch", "not_larger", "not_smaller"):
        raise imp.fail(f"keep_aspect_ratio_policy {policy!r} (stretch, not_larger or not_smaller)")
    axes = [int(v) % len(shape) for v in a.get("axes", range(len(shape)))]
    scales = np.asarray(imp.const(ins[2], "scales"), np.float64).ravel() if len(ins) > 2 and ins[2] else None
    sizes = np.asarray(imp.const(ins[3], "sizes")).ravel() if len(ins) > 3 and ins[3] else None
    if sizes is not None and sizes.size:
        out = {ax: int(s) for ax, s in zip(axes, sizes)}
        scale = {ax: out[ax] / shape[ax] for ax in axes}
        if policy != "stretch":  # one scale for every axis: the smallest (not_larger) or largest fitting one
            common = (min if policy == "not_larger" else max)(scale.values())
            scale = dict.fromkeys(axes, common)
            out = {ax: int(common * shape[ax] + 0.5) for ax in axes}
    elif scales is not None and scales.size:
        scale = {ax: float(s) for ax, s in zip(axes, scales)}
        out = {ax: int(np.floor(shape[ax] * scale[ax])) for ax in axes}
    else:
        raise imp.fail("neither scales nor sizes")
    dtype = imp.b.types[x].dtype
    if kind != "nearest" and dtype not in ("float16", "float32", "float64"):
        raise imp.fail(f"{kind} interpolation of {dtype} data (float16/32/64; nearest for any dtype)")
    roi = {ax: (0.0, 1.0) for ax in axes}
    if mode == "tf_crop_and_resize":
        box = np.asarray(imp.const(ins[1], "roi"), np.float64).ravel()
        if box.size != 2 * len(axes):
            raise imp.fail(f"a roi of {box.size} values for {len(axes)} axes (starts, then ends)")
        roi = {ax: (box[k], box[len(axes) + k]) for k, ax in enumerate(axes)}
    resized = [ax for ax in axes if out[ax] != shape[ax] or mode != "asymmetric" or scale[ax] != 1.0]
    outside = np.zeros([out.get(d, size) for d, size in enumerate(shape)], np.bool_)
    for k, ax in enumerate(resized):
        idx, weights = taps(mode, kind, shape[ax], out[ax], scale[ax], a, roi[ax])
        if mode == "tf_crop_and_resize":
            src = _source(mode, out[ax], shape[ax], scale[ax], roi[ax])
            outside |= ((src < 0) | (src > shape[ax] - 1)).reshape([-1 if d == ax else 1 for d in range(len(shape))])
        last = k == len(resized) - 1 and not outside.any()
        x = _along(imp, x, ax, idx, weights, dtype, n.output[0] if last else None)
    if outside.any():  # tf_crop_and_resize past the input: extrapolation_value
        fill = np.array(a.get("extrapolation_value", 0.0), np.float32 if dtype == "bfloat16" else dtype)
        imp.emit("where", [imp.b.constant(outside, "outside"), imp.b.constant(fill, "extrapolation"), x],
                 out=n.output[0])
    elif not resized:
        imp.env[n.output[0]] = x


def _along(imp, x: str, axis: int, idx: np.ndarray, weights: np.ndarray, dtype: str, out) -> str:
    """sum over taps of take(x, idx[tap], axis) * weights[tap] (weights shaped to broadcast along `axis`)."""
    rank = len(imp.b.types[x].shape)
    total = None
    for k in range(idx.shape[0]):
        last = k == idx.shape[0] - 1
        picked = imp.emit("take", [x, imp.b.constant(idx[k], "resize_index")], {"axis": axis},
                          out if last and idx.shape[0] == 1 else None)
        if idx.shape[0] == 1:
            return picked
        w = weights[k].reshape([-1 if d == axis else 1 for d in range(rank)]).astype(dtype)
        term = imp.emit("mul", [picked, imp.b.constant(w, "resize_weight")])
        total = term if total is None else imp.emit("add", [total, term], out=out if last else None)
    return total

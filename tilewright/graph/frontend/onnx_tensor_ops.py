"""ONNX's EyeLike (a constant of the input's static shape), DepthToSpace / SpaceToDepth (reshape,
permute, reshape), TopK (k rounds of a masked maximum; k at most MAX_TOPK) and Compress (a gather)."""

from __future__ import annotations

import numpy as np

MAX_TOPK = 64  # each of the k rounds is a reduction over the axis: past this, a sort would be the right kernel


def _eye_like(imp, n, ins, a):
    t = imp.type_of(ins[0])
    if t is None or len(t.shape) != 2:
        raise imp.fail("the input must be 2-D with a static shape")
    dtype = imp.onnx.helper.tensor_dtype_to_np_dtype(a["dtype"]) if "dtype" in a else np.dtype(t.dtype)
    imp.known[n.output[0]] = np.eye(*t.shape, k=int(a.get("k", 0)), dtype=dtype)


def _block_permute(imp, n, ins, a, split, dims):
    x = imp.value(ins[0])
    shape = imp.b.types[x].shape
    b = int(a["blocksize"])
    if len(shape) != 4:
        raise imp.fail(f"a rank-{len(shape)} input (NCHW only)")
    bsz, c, h, w = shape
    if n.op_type == "DepthToSpace" and c % (b * b):
        raise imp.fail(f"{c} channels do not divide into blocks of {b}x{b}")
    if n.op_type == "SpaceToDepth" and (h % b or w % b):
        raise imp.fail(f"the {h}x{w} image does not divide into {b}x{b} blocks")
    parts = imp.emit("reshape", [x], {"shape": split(bsz, c, h, w, b)})
    moved = imp.emit("permute", [parts], {"dims": dims})
    out = (bsz, c // (b * b), h * b, w * b) if n.op_type == "DepthToSpace" else (bsz, c * b * b, h // b, w // b)
    imp.emit("reshape", [moved], {"shape": out}, n.output[0])


def _depth_to_space(imp, n, ins, a):
    if a.get("mode", "DCR") == "DCR":
        return _block_permute(imp, n, ins, a, lambda n_, c, h, w, b: (n_, b, b, c // (b * b), h, w),
                              (0, 3, 4, 1, 5, 2))
    _block_permute(imp, n, ins, a, lambda n_, c, h, w, b: (n_, c // (b * b), b, b, h, w), (0, 1, 4, 2, 5, 3))


def _space_to_depth(imp, n, ins, a):
    split = lambda n_, c, h, w, b: (n_, c, h // b, b, w // b, b)  # noqa: E731
    dims = (0, 3, 5, 1, 2, 4) if a.get("mode", "DCR") == "DCR" else (0, 1, 3, 5, 2, 4)
    _block_permute(imp, n, ins, a, split, dims)


def _top_k(imp, n, ins, a):
    """Round j takes the extreme of the not yet taken elements and its first index; NaNs order last."""
    x = imp.value(ins[0])
    shape, dtype = imp.b.types[x].shape, imp.b.types[x].dtype
    rank = len(shape)
    if rank == 0:
        raise imp.fail("a scalar input")
    axis = int(a.get("axis", -1)) % rank
    k = int(np.asarray(imp.const(ins[1], "k")).ravel()[0])
    if not 0 < k <= min(shape[axis], MAX_TOPK):
        raise imp.fail(f"k = {k} along an axis of {shape[axis]} (1 <= k <= {min(shape[axis], MAX_TOPK)})")
    largest = bool(a.get("largest", 1))
    floating = dtype.startswith(("float", "bfloat"))
    if floating:
        worst = -np.inf if largest else np.inf
    else:
        worst = np.iinfo(dtype).min if largest else np.iinfo(dtype).max

    def c(value, dt=dtype):
        return imp.b.constant(np.array(value, dtype=np.float32 if dt == "bfloat16" else dt), "c")

    score = x
    if floating:  # a NaN never wins a round
        score = imp.emit("where", [imp.emit("equal", [x, x]), x, c(worst)])
    index = imp.b.constant(np.arange(shape[axis], dtype=np.int64).reshape(
        [-1 if d == axis else 1 for d in range(rank)]), "index")
    reduce, keep = ("reduce_max" if largest else "reduce_min"), {"axes": (axis,), "keepdims": True}
    taken, picks = None, []
    for _ in range(k):
        open_ = score if taken is None else imp.emit("where", [taken, c(worst), score])
        best = imp.emit(reduce, [open_], keep)
        hit = imp.emit("equal", [score, best])
        if taken is not None:
            hit = imp.emit("logical_and", [hit, imp.emit("logical_not", [taken])])
        pick = imp.emit("reduce_min", [imp.emit("where", [hit, index, c(shape[axis], "int64")])], keep)
        picks.append(pick)
        chosen = imp.emit("equal", [index, pick])
        taken = chosen if taken is None else imp.emit("logical_or", [taken, chosen])
    indices = picks[0] if k == 1 else imp.emit("concat", picks, {"axis": axis})
    imp.emit("take_along", [x, indices], {"axis": axis}, n.output[0])
    if len(n.output) > 1 and n.output[1]:
        imp.env[n.output[1]] = indices


def _compress(imp, n, ins, a):
    """The slices along `axis` (or elements of the flattened input) where the condition holds: a gather at the
    condition's true positions, so the condition is read when the model is (a constant, or an input fixed
    at its example value: it decides the output's shape)."""
    x = imp.value(ins[0])
    keep = np.flatnonzero(np.asarray(imp.const(ins[1], "the condition (it decides the output shape)")).astype(bool))
    if "axis" not in a:
        x = imp.emit("reshape", [x], {"shape": (int(np.prod(imp.b.types[x].shape)),)})
        axis = 0
    else:
        axis = int(a["axis"]) % len(imp.b.types[x].shape)
    extent = imp.b.types[x].shape[axis]
    keep = keep[keep < extent]  # a condition longer than the axis selects nothing past it
    if keep.size == 0:
        raise imp.fail("a condition that selects nothing (an empty output)")
    imp.emit("take", [x, imp.b.constant(keep.astype(np.int64), "kept")], {"axis": axis}, n.output[0])


TENSOR_HANDLERS = {"Compress": _compress, "EyeLike": _eye_like, "DepthToSpace": _depth_to_space,
                   "SpaceToDepth": _space_to_depth, "TopK": _top_k}

__all__ = ["MAX_TOPK", "TENSOR_HANDLERS"]

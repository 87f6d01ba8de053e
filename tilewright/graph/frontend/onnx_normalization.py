"""ONNX's normalizations as graph ops: BatchNormalization (inference, and training mode from the batch's
statistics) and LayerNormalization (with its Mean and
InvStdDev outputs, as ONNX defines them) directly; RMSNormalization, InstanceNormalization, GroupNormalization and
MeanVarianceNormalization composed from reductions and elementwise ops (instance and group statistics by the
layer_norm op over the right axes), their statistics in the type `stash_type` names; LpNormalization, LRN and Hardmax
in `onnx_norms`."""

from __future__ import annotations

import math

import numpy as np

from .onnx_norms import AXIS_NORM_HANDLERS, axis_of, cast_to, const_like, widened


def batch_norm(imp, n, ins, a):
    if a.get("training_mode", 0):
        return _batch_norm_training(imp, n, ins, a)
    imp.emit("batch_norm", [imp.value(i) for i in ins[:5]], {"eps": float(a.get("epsilon", 1e-5))}, n.output[0])


def _batch_norm_training(imp, n, ins, a):
    """Training mode: normalized by the batch's own statistics (over every axis but the channels, the
    population variance), the running mean and variance updated by momentum, as ONNX defines them."""
    x = imp.value(ins[0])
    shape = imp.b.types[x].shape
    if imp.b.types[x].dtype != "float32":
        raise imp.fail(f"a {imp.b.types[x].dtype} training-mode batch norm (float32)")
    eps, momentum = float(a.get("epsilon", 1e-5)), float(a.get("momentum", 0.9))
    axes = {"axes": tuple(d for d in range(len(shape)) if d != 1), "keepdims": False}
    mean = imp.emit("mean", [x], axes)
    per_channel = (1, shape[1], *(1,) * (len(shape) - 2))
    centred = imp.emit("sub", [x, imp.emit("reshape", [mean], {"shape": per_channel})])
    var = imp.emit("mean", [imp.emit("mul", [centred, centred])], axes)
    imp.emit("batch_norm", [x, imp.value(ins[1]), imp.value(ins[2]), mean, var], {"eps": eps}, n.output[0])
    for slot, (batch, running) in ((1, (mean, ins[3])), (2, (var, ins[4]))):
        if len(n.output) > slot and n.output[slot]:
            kept = imp.emit("mul", [imp.value(running), imp.b.constant(np.float32(momentum), "momentum")])
            fresh = imp.emit("mul", [batch, imp.b.constant(np.float32(1 - momentum), "momentum")])
            imp.emit("add", [kept, fresh], out=n.output[slot])


def layer_norm(imp, n, ins, a):
    rank = len(imp.type_of(ins[0]).shape)
    axis, eps = a.get("axis", -1) % rank, float(a.get("epsilon", 1e-5))
    if a.get("stash_type", 1) != 1:
        raise imp.fail(f"stash_type {a['stash_type']} (only 1: statistics in float32)")
    imp.emit("layer_norm", [imp.value(i) for i in ins if i], {"axes": rank - axis, "eps": eps}, n.output[0])
    used = {i for m in imp.g.node for i in m.input} | {o.name for o in imp.g.output}
    if not any(o in used for o in n.output[1:] if o):
        return
    # Mean and InvStdDev (kept dims), as ONNX defines them: the mean and 1 / sqrt(variance + epsilon)
    x, reduced = imp.value(ins[0]), {"axes": tuple(range(axis, rank)), "keepdims": True}
    out = [o if len(n.output) > k and (o := n.output[k]) in used else None for k in (1, 2)]
    mean = imp.emit("mean", [x], reduced, out[0])
    centered = imp.emit("sub", [x, mean])
    var = imp.emit("mean", [imp.emit("mul", [centered, centered])], reduced)
    std = imp.emit("sqrt", [imp.emit("add", [var, imp.b.constant(np.array([eps], np.float32), "eps")])])
    if out[1]:
        imp.emit("div", [imp.b.constant(np.ones(1, np.float32), "one"), std], out=out[1])


def _stash_dtype(imp, x: str, a) -> str:
    """The dtype `stash_type` computes statistics in: 1 (float32) or the input's own floating type."""
    stash, dtype = int(a.get("stash_type", 1)), imp.b.types[x].dtype
    if stash == 1:
        return "float32"
    try:
        named = np.dtype(imp.onnx.helper.tensor_dtype_to_np_dtype(stash)).name
    except (KeyError, TypeError, ValueError):
        named = "unknown"
    if named != dtype:
        raise imp.fail(f"stash_type {stash} ({named}) for a {dtype} input (valid: 1, statistics in float32, or the "
                       "input's own type)")
    return dtype


def _eps(imp, like: str, a, default: float = 1e-5) -> str:
    return const_like(imp, like, float(a.get("epsilon", default)), "eps")


def rms_norm(imp, n, ins, a):
    """X / sqrt(mean(X^2 over axes [axis, rank)) + epsilon) in the stash type, back to X's type, times scale."""
    x = imp.value(ins[0])
    shape, dtype = imp.b.types[x].shape, imp.b.types[x].dtype
    axis = axis_of(imp, a.get("axis", -1), len(shape))
    wide = cast_to(imp, x, _stash_dtype(imp, x, a))
    square_mean = imp.emit("mean", [imp.emit("mul", [wide, wide])],
                           {"axes": tuple(range(axis, len(shape))), "keepdims": True})
    rms = imp.emit("sqrt", [imp.emit("add", [square_mean, _eps(imp, square_mean, a)])])
    normalized = cast_to(imp, imp.emit("div", [wide, rms]), dtype)
    scale = imp.value(ins[1])  # Y takes the scale's type, which may differ from X's
    imp.emit("mul", [cast_to(imp, normalized, imp.b.types[scale].dtype), scale], out=n.output[0])


def _per_channel(imp, v: str, channels: int, rank: int) -> str:
    """A [C] scale or bias shaped to broadcast along axis 1 of a rank-`rank` tensor."""
    if imp.b.types[v].shape != (channels,):
        raise imp.fail(f"scale and bias of shape {list(imp.b.types[v].shape)}: they must be [{channels}]")
    return imp.emit("reshape", [v], {"shape": (channels,) + (1,) * (rank - 2)})


def _scaled(imp, normalized: str, ins, count: int, rank: int, out: str | None):
    """scale * normalized + bias in normalized's type, scale and bias per channel (`count` of them, axis 1)."""
    dtype = imp.b.types[normalized].dtype
    scale, bias = (_per_channel(imp, cast_to(imp, imp.value(i), dtype), count, rank) for i in ins[1:3])
    return imp.emit("add", [imp.emit("mul", [normalized, scale]), bias], out=out)


def instance_norm(imp, n, ins, a):
    """Each (instance, channel) normalized over its spatial axes, then scale[c] * . + B[c]."""
    x = imp.value(ins[0])
    shape, dtype = imp.b.types[x].shape, imp.b.types[x].dtype
    if len(shape) < 3:
        raise imp.fail(f"input of shape {list(shape)}: it must be [N, C, D1, ...] (at least one spatial axis)")
    normalized = imp.emit("layer_norm", [widened(imp, x)], {"axes": len(shape) - 2,
                                                            "eps": float(a.get("epsilon", 1e-5))})
    cast_to(imp, _scaled(imp, normalized, ins, shape[1], len(shape), None), dtype, n.output[0])


def group_norm(imp, n, ins, a):
    """Each instance's groups of C / num_groups channels normalized together in the stash type, back to X's type,
    then scaled and shifted per channel (opset 21) or per group (opset 18)."""
    x = imp.value(ins[0])
    shape, dtype = imp.b.types[x].shape, imp.b.types[x].dtype
    groups = int(a.get("num_groups", 0))
    if len(shape) < 2 or groups < 1 or shape[1] % groups:
        raise imp.fail(f"num_groups {groups} for input of shape {list(shape)}: it must divide the channels (axis 1)")
    grouped = imp.emit("reshape", [cast_to(imp, x, _stash_dtype(imp, x, a))],
                       {"shape": (shape[0], groups, math.prod(shape[1:]) // groups)})
    normalized = cast_to(imp, imp.emit("layer_norm", [grouped], {"axes": 1, "eps": float(a.get("epsilon", 1e-5))}),
                         dtype)
    if imp.opset >= 21:
        _scaled(imp, imp.emit("reshape", [normalized], {"shape": shape}), ins, shape[1], len(shape), n.output[0])
    else:
        imp.emit("reshape", [_scaled(imp, normalized, ins, groups, 3, None)], {"shape": shape}, n.output[0])


def mean_variance_norm(imp, n, ins, a):
    """(X - mean) / (sqrt(variance) + 1e-9) over `axes`, the variance as the mean of the centered squares (the
    spec's E[X^2] - E[X]^2 can round below zero)."""
    x = imp.value(ins[0])
    shape, dtype = imp.b.types[x].shape, imp.b.types[x].dtype
    axes = tuple(sorted({axis_of(imp, k, len(shape)) for k in a.get("axes", (0, 2, 3))}))
    wide, keep = widened(imp, x), {"axes": axes, "keepdims": True}
    centered = imp.emit("sub", [wide, imp.emit("mean", [wide], keep)])
    std = imp.emit("sqrt", [imp.emit("mean", [imp.emit("mul", [centered, centered])], keep)])
    y = imp.emit("div", [centered, imp.emit("add", [std, _eps(imp, std, {}, 1e-9)])])
    cast_to(imp, y, dtype, n.output[0])


NORM_HANDLERS = {"BatchNormalization": batch_norm, "LayerNormalization": layer_norm, "RMSNormalization": rms_norm,
                 "InstanceNormalization": instance_norm, "GroupNormalization": group_norm,
                 "MeanVarianceNormalization": mean_variance_norm, **AXIS_NORM_HANDLERS}

__all__ = ["NORM_HANDLERS", "batch_norm", "layer_norm"]

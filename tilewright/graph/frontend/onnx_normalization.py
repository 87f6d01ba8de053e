"""ONNX BatchNormalization (inference) and LayerNormalization (with its Mean and InvStdDev
outputs, as ONNX defines them) as graph ops."""

from __future__ import annotations

import numpy as np


def batch_norm(imp, n, ins, a):
    if a.get("training_mode", 0):
        raise imp.fail("training-mode batch norm")
    imp.emit("batch_norm", [imp.value(i) for i in ins[:5]], {"eps": float(a.get("epsilon", 1e-5))}, n.output[0])


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


__all__ = ["batch_norm", "layer_norm"]

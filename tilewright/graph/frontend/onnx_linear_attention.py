"""ONNX `LinearAttention` (opset 27: linear, gated, delta and gated-delta state updates, grouped
key / value heads) unrolled over its static sequence, as the recurrent ops are: a [batch, kv heads,
d_k, d_v] state decayed by exp(decay), corrected by beta * (v - S^T k), grown by k v^T and read by
each query head group's q S (times the scale), all in float32 (16-bit inputs widened, the outputs
rounded once)."""

from __future__ import annotations

import math

import numpy as np

from .onnx_recurrent import MAX_STEPS

_RULES = {"linear": (False, False), "gated": (True, False), "delta": (False, True), "gated_delta": (True, True)}


def _heads(imp, x: str, heads: int) -> str:
    """(B, T, H * D) -> (B, H, T, D), in float32."""
    b, t, hd = imp.b.types[x].shape
    if imp.b.types[x].dtype != "float32":
        x = imp.emit("cast", [x], {"dtype": "float32"})
    return imp.emit("permute", [imp.emit("reshape", [x], {"shape": (b, t, heads, hd // heads)})],
                    {"dims": (0, 2, 1, 3)})


def _step(imp, x: str, t: int, shape) -> str:
    """x[:, :, t] of a (B, H, T, D) tensor, reshaped to `shape`."""
    b, h, _, d = imp.b.types[x].shape
    s = imp.emit("slice", [x], {"begin": (0, 0, t, 0), "end": (b, h, t + 1, d), "step": (1, 1, 1, 1)})
    return imp.emit("reshape", [s], {"shape": shape})


def linear_attention(imp, n, ins, a):
    ins = list(ins) + [""] * (6 - len(ins))
    rule = a.get("update_rule", "gated_delta")
    if rule not in _RULES:
        raise imp.fail(f"update_rule '{rule}' (linear, gated, delta or gated_delta)")
    gating, delta = _RULES[rule]
    if gating != bool(ins[4]) or delta != bool(ins[5]):
        raise imp.fail(f"update_rule '{rule}' takes {'a' if gating else 'no'} decay and {'a' if delta else 'no'} beta")
    hq, hkv = int(a["q_num_heads"]), int(a["kv_num_heads"])
    query = imp.value(ins[0])
    bsz, steps, qdim = imp.b.types[query].shape
    if hq % hkv or steps > MAX_STEPS:
        raise imp.fail(f"{hq} query heads over {hkv} kv heads, {steps} steps (heads must divide; at most "
                       f"{MAX_STEPS} steps unrolled)")
    q, k, v = _heads(imp, query, hq), _heads(imp, imp.value(ins[1]), hkv), _heads(imp, imp.value(ins[2]), hkv)
    dk, dv, group = qdim // hq, imp.b.types[v].shape[3], hq // hkv
    scale = float(a.get("scale", 0.0)) or 1 / math.sqrt(dk)
    if ins[3]:
        state = imp.value(ins[3])
        if imp.b.types[state].dtype != "float32":
            state = imp.emit("cast", [state], {"dtype": "float32"})
    else:
        state = imp.b.constant(np.zeros((bsz, hkv, dk, dv), np.float32), "state")
    decay = _heads(imp, imp.value(ins[4]), hkv) if gating else None
    beta = None
    if delta:
        bt = imp.value(ins[5])
        width = imp.b.types[bt].shape[2]
        beta = _heads(imp, bt, width)  # (B, H_kv or 1, T, 1)
    outs = []
    for t in range(steps):
        k_t, v_t = _step(imp, k, t, (bsz, hkv, dk)), _step(imp, v, t, (bsz, hkv, dv))
        if gating:
            width = imp.b.types[decay].shape[3]
            g = _step(imp, decay, t, (bsz, hkv, width, 1))
            state = imp.emit("mul", [state, imp.emit("exp", [g])])
        if delta:
            row = imp.emit("reshape", [k_t], {"shape": (bsz, hkv, 1, dk)})
            retrieved = imp.emit("reshape", [imp.emit("matmul", [row, state])], {"shape": (bsz, hkv, dv)})
            b_t = _step(imp, beta, t, (bsz, imp.b.types[beta].shape[1], 1))
            v_t = imp.emit("mul", [b_t, imp.emit("sub", [v_t, retrieved])])
        outer = imp.emit("mul", [imp.emit("reshape", [k_t], {"shape": (bsz, hkv, dk, 1)}),
                                 imp.emit("reshape", [v_t], {"shape": (bsz, hkv, 1, dv)})])
        state = imp.emit("add", [state, outer])
        q_t = _step(imp, q, t, (bsz, hkv, group, dk))  # query head h = kv head h // group, as np.repeat orders
        read = imp.emit("mul", [imp.emit("matmul", [q_t, state]), imp.b.constant(np.float32(scale), "scale")])
        outs.append(imp.emit("reshape", [read], {"shape": (bsz, 1, hq * dv)}))
    y = outs[0] if steps == 1 else imp.emit("concat", outs, {"axis": 1})
    dtype = imp.b.types[query].dtype
    imp.env[n.output[0]] = y if dtype == "float32" else imp.emit("cast", [y], {"dtype": dtype})
    if len(n.output) > 1 and n.output[1]:
        state_dtype = imp.b.types[imp.value(ins[3])].dtype if ins[3] else dtype
        imp.env[n.output[1]] = state if state_dtype == "float32" else imp.emit("cast", [state],
                                                                              {"dtype": state_dtype})


LINEAR_ATTENTION_HANDLERS = {"LinearAttention": linear_attention}

__all__ = ["LINEAR_ATTENTION_HANDLERS"]

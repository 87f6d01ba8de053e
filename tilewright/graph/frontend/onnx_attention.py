"""ONNX `Attention` (opset 23+) as graph ops: Q K^T scaled, soft-capped, the causal bias, softmax,
times V; 3-D inputs split into heads, grouped-query heads through broadcasting matmuls, a
past key / value cache concatenated (the present outputs), the QK output in modes 0-3.

Refused by name: a run-time `attn_mask` or `nonpad_kv_seqlen` (a row they mask fully must give
zeros, ONNX's rule, which a plain softmax does not), sliding windows, `softmax_precision`, and
element types other than float32."""

from __future__ import annotations

import math

import numpy as np


def _reshape(imp, x: str, shape) -> str:
    return imp.emit("reshape", [x], {"shape": tuple(int(d) for d in shape)})


def _heads(imp, x: str, heads: int) -> str:
    """(B, S, H * D) -> (B, H, S, D)."""
    b, s, hd = imp.b.types[x].shape
    return imp.emit("permute", [_reshape(imp, x, (b, s, heads, hd // heads))], {"dims": (0, 2, 1, 3)})


def _constant(imp, value: float) -> str:
    return imp.b.constant(np.array([value], np.float32), "attention_const")


def attention(imp, n, ins, a):
    ins = list(ins) + [""] * (7 - len(ins))
    q, k, v = (imp.value(i) for i in ins[:3])
    for role, i in (("attn_mask", ins[3]), ("nonpad_kv_seqlen", ins[6])):
        if i:
            raise imp.fail(f"a {role} input (a fully masked row must give zeros, which this lowering does not do)")
    for attr in ("softmax_precision", "left_window_size", "right_window_size"):
        if attr in a and not (attr.endswith("window_size") and a[attr] == -1):
            raise imp.fail(f"attribute {attr}")
    if any(imp.b.types[x].dtype != "float32" for x in (q, k, v)):
        raise imp.fail(f"{imp.b.types[q].dtype} inputs (float32 only)")
    rank = len(imp.b.types[q].shape)
    if rank == 3:
        if "q_num_heads" not in a or "kv_num_heads" not in a:
            raise imp.fail("3-D inputs need q_num_heads and kv_num_heads")
        q, k, v = _heads(imp, q, a["q_num_heads"]), _heads(imp, k, a["kv_num_heads"]), _heads(imp, v, a["kv_num_heads"])
    elif rank != 4:
        raise imp.fail(f"rank-{rank} inputs (3-D or 4-D)")
    if bool(ins[4]) != bool(ins[5]):
        raise imp.fail("past_key and past_value go together")
    past = imp.b.types[imp.value(ins[4])].shape[2] if ins[4] else 0
    if ins[4]:
        k = imp.emit("concat", [imp.value(ins[4]), k], {"axis": 2})
        v = imp.emit("concat", [imp.value(ins[5]), v], {"axis": 2})
    for slot, value in ((1, k), (2, v)):
        if len(n.output) > slot and n.output[slot]:
            imp.env[n.output[slot]] = value
    (bsz, hq, s, d), (_, hkv, length, _), dv = imp.b.types[q].shape, imp.b.types[k].shape, imp.b.types[v].shape[3]
    if hq % hkv:
        raise imp.fail(f"{hq} query heads over {hkv} key/value heads (must divide)")
    group = hq // hkv
    kt = imp.emit("permute", [k], {"dims": (0, 1, 3, 2)})
    grouped = _reshape(imp, q, (bsz, hkv, group, s, d))  # query heads grouped over their key/value head
    scores = imp.emit("matmul", [grouped, _reshape(imp, kt, (bsz, hkv, 1, d, length))])
    scale = float(a.get("scale", 1 / math.sqrt(d)))
    scores = imp.emit("mul", [scores, _constant(imp, scale)])
    softcap = float(a.get("softcap", 0.0))
    if softcap > 0:
        capped = imp.emit("tanh", [imp.emit("mul", [scores, _constant(imp, 1 / softcap)])])
        scores = imp.emit("mul", [capped, _constant(imp, softcap)])
    mode = int(a.get("qk_matmul_output_mode", 0))
    qk_out = n.output[3] if len(n.output) > 3 and n.output[3] else None
    if mode in (0, 1) and qk_out:
        imp.emit("reshape", [scores], {"shape": (bsz, hq, s, length)}, qk_out)
    if a.get("is_causal", 0):
        allowed = np.arange(length)[None, :] <= np.arange(s)[:, None] + past
        if not allowed.any(axis=1).all():
            raise imp.fail("a causal mask that masks whole rows (more queries than keys)")
        bias = np.where(allowed, 0.0, -np.inf).astype(np.float32)
        scores = imp.emit("add", [scores, imp.b.constant(bias, "causal_bias")])
    if mode == 2 and qk_out:
        imp.emit("reshape", [scores], {"shape": (bsz, hq, s, length)}, qk_out)
    probs = imp.emit("softmax", [scores], {"axis": -1})
    if mode == 3 and qk_out:
        imp.emit("reshape", [probs], {"shape": (bsz, hq, s, length)}, qk_out)
    y = imp.emit("matmul", [probs, _reshape(imp, v, (bsz, hkv, 1, length, dv))])
    if rank == 3:
        y = imp.emit("permute", [_reshape(imp, y, (bsz, hq, s, dv))], {"dims": (0, 2, 1, 3)})
        imp.emit("reshape", [y], {"shape": (bsz, s, hq * dv)}, n.output[0])
    else:
        imp.emit("reshape", [y], {"shape": (bsz, hq, s, dv)}, n.output[0])


__all__ = ["attention"]

"""ONNX `RotaryEmbedding` (opset 23) as graph ops: the first `rotary_embedding_dim` channels of each
head turned by the angle whose cosine and sine the caches hold (rows picked by `position_ids`, or
given per batch and position), as pairs of halves or, `interleaved`, as adjacent pairs; the other
channels pass through. 4-D input is (batch, heads, sequence, head size), 3-D input (batch,
sequence, num_heads * head size). float16 and bfloat16 are computed in float32 and rounded once."""

from __future__ import annotations

import numpy as np

_FLOATS = ("float16", "bfloat16", "float32")


def _slice_last(imp, x: str, start: int, stop: int) -> str:
    shape = imp.b.types[x].shape
    if (start, stop) == (0, shape[-1]):
        return x
    begin, end = (0,) * (len(shape) - 1) + (start,), (*shape[:-1], stop)
    return imp.emit("slice", [x], {"begin": begin, "end": end, "step": (1,) * len(shape)})


def _widen(imp, x: str) -> str:
    return x if imp.b.types[x].dtype == "float32" else imp.emit("cast", [x], {"dtype": "float32"})


def _reshape(imp, x: str, shape) -> str:
    shape = tuple(int(d) for d in shape)
    return x if imp.b.types[x].shape == shape else imp.emit("reshape", [x], {"shape": shape})


def _cache(imp, name: str, ids: str | None, bsz: int, seq: int, half: int, role: str) -> str:
    """The cache's rows for each (batch, position): (B, S, half)."""
    t = imp.type_of(name)
    if t is None or t.dtype not in _FLOATS:
        raise imp.fail(f"{role} of {t} (float16, bfloat16 or float32)")
    if t.shape[-1] != half:
        raise imp.fail(f"{role} of shape {list(t.shape)}: its last axis must be rotary_embedding_dim / 2 = {half}")
    if ids is None:
        if t.shape != (bsz, seq, half):
            raise imp.fail(f"{role} of shape {list(t.shape)} without position_ids (needs [{bsz}, {seq}, {half}])")
        return _widen(imp, imp.value(name))
    if len(t.shape) != 2:
        raise imp.fail(f"{role} of shape {list(t.shape)} with position_ids (needs [max_position, {half}])")
    if ids in imp.known:
        found = np.asarray(imp.known[ids])
        if found.size and (found.min() < -t.shape[0] or found.max() >= t.shape[0]):
            raise imp.fail(f"position_ids outside [{-t.shape[0]}, {t.shape[0]}) for a {role} of {t.shape[0]} rows")
    return imp.emit("take", [_widen(imp, imp.value(name)), imp.value(ids)], {"axis": 0})


def _rotate(imp, x1: str, x2: str, cos: str, sin: str) -> tuple[str, str]:
    """(cos x1 - sin x2, sin x1 + cos x2)."""
    real = imp.emit("sub", [imp.emit("mul", [cos, x1]), imp.emit("mul", [sin, x2])])
    imag = imp.emit("add", [imp.emit("mul", [sin, x1]), imp.emit("mul", [cos, x2])])
    return real, imag


def rotary_embedding(imp, n, ins, a):
    ins = list(ins) + [""] * (4 - len(ins))
    x = imp.value(ins[0])
    t = imp.b.types[x]
    if t.dtype not in _FLOATS:
        raise imp.fail(f"a {t.dtype} input (float16, bfloat16 or float32)")
    if len(t.shape) == 4:
        bsz, _, seq, head = t.shape
        heads_axis = 1  # (B, H, S, D): the caches broadcast over axis 1
    elif len(t.shape) == 3:
        bsz, seq, hidden = t.shape
        heads = int(a.get("num_heads", 0))
        if heads <= 0 or hidden % heads:
            raise imp.fail(f"3-D input of hidden size {hidden} needs num_heads dividing it (got {heads or 'none'})")
        head, heads_axis = hidden // heads, 2
        x = _reshape(imp, x, (bsz, seq, heads, head))
    else:
        raise imp.fail(f"a rank-{len(t.shape)} input (3-D or 4-D)")
    rot = int(a.get("rotary_embedding_dim", 0)) or head
    if rot % 2 or not 0 < rot <= head:
        raise imp.fail(f"rotary_embedding_dim {rot} (even, at most the head size {head})")
    half = rot // 2
    ids = ins[3] or None
    if ids is not None:
        it = imp.type_of(ids)
        if it is None or not it.dtype.startswith("int") or it.shape != (bsz, seq):
            raise imp.fail(f"position_ids of {it} (integers of shape [{bsz}, {seq}])")
    cs = [_cache(imp, ins[k], ids, bsz, seq, half, role) for k, role in ((1, "cos_cache"), (2, "sin_cache"))]
    x = _widen(imp, x)
    rotated = _slice_last(imp, x, 0, rot)
    lead = imp.b.types[rotated].shape[:-1]
    cache_shape = (bsz, 1, seq) if heads_axis == 1 else (bsz, seq, 1)
    if a.get("interleaved", 0):
        pairs = _reshape(imp, rotated, (*lead, half, 2))  # channel 2i with channel 2i + 1
        cos, sin = (_reshape(imp, c, (*cache_shape, half, 1)) for c in cs)
        real, imag = _rotate(imp, _slice_last(imp, pairs, 0, 1), _slice_last(imp, pairs, 1, 2), cos, sin)
        parts = [_reshape(imp, imp.emit("concat", [real, imag], {"axis": len(lead) + 1}), (*lead, rot))]
    else:
        cos, sin = (_reshape(imp, c, (*cache_shape, half)) for c in cs)
        parts = list(_rotate(imp, _slice_last(imp, rotated, 0, half), _slice_last(imp, rotated, half, rot), cos, sin))
    if rot < head:
        parts.append(_slice_last(imp, x, rot, head))
    y = parts[0] if len(parts) == 1 else imp.emit("concat", parts, {"axis": len(lead)})
    y = _reshape(imp, y, t.shape)
    if t.dtype == "float32":
        imp.env[n.output[0]] = y
    else:
        imp.emit("cast", [y], {"dtype": t.dtype}, n.output[0])


__all__ = ["rotary_embedding"]

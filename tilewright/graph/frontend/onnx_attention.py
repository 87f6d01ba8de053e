"""ONNX `Attention` (opsets 23-25) as graph ops: Q K^T scaled, soft-capped, plus one additive bias
(the attention mask, the causal and sliding-window masks, the key padding of `nonpad_kv_seqlen`),
softmax, times V; 3-D inputs split into heads, grouped-query heads through broadcasting matmuls, a
past key / value cache concatenated (the present outputs), the QK output in modes 0-3.

A query row the bias masks throughout (-inf everywhere) gives zeros, ONNX's rule: the rows are found
on the bias, not on the scores, so inf or NaN in Q or K cannot leak into them. float16 and bfloat16
inputs are computed in float32 and rounded once at the end (ONNX's reference rounds every step, which
lands a unit or two in the last place away). Refused by name: other element types,
`softmax_precision` narrower than float32 on wider inputs, a mask wider than the keys or not
broadcasting to (batch, heads, queries, keys), and `nonpad_kv_seqlen` with a past cache (ONNX forbids
the pair)."""

from __future__ import annotations

import math

import numpy as np

from .onnx_rotary import rotary_embedding

_FLOATS = ("float16", "bfloat16", "float32")
# softmax_precision values (TensorProto codes) this lowering honours by computing in float32
_PRECISION = {1: "float32", 10: "float16", 11: "float64", 16: "bfloat16"}


def _reshape(imp, x: str, shape) -> str:
    shape = tuple(int(d) for d in shape)
    return x if imp.b.types[x].shape == shape else imp.emit("reshape", [x], {"shape": shape})


def _heads(imp, x: str, heads: int) -> str:
    """(B, S, H * D) -> (B, H, S, D)."""
    b, s, hd = imp.b.types[x].shape
    return imp.emit("permute", [_reshape(imp, x, (b, s, heads, hd // heads))], {"dims": (0, 2, 1, 3)})


def _constant(imp, value: float) -> str:
    return imp.b.constant(np.array([value], np.float32), "attention_const")


def _widen(imp, x: str) -> str:
    return x if imp.b.types[x].dtype == "float32" else imp.emit("cast", [x], {"dtype": "float32"})


def _output(imp, x: str, shape, dtype: str, out: str) -> None:
    """`x` (float32) reshaped to `shape` and rounded to `dtype` as the ONNX output `out`."""
    if dtype == "float32":
        if imp.b.types[x].shape == tuple(shape):
            imp.env[out] = x
        else:
            imp.emit("reshape", [x], {"shape": tuple(int(d) for d in shape)}, out)
        return
    imp.emit("cast", [_reshape(imp, x, shape)], {"dtype": dtype}, out)


def _rounded_scale(scale: float, dtype: str) -> float:
    """ONNX scales Q and K each by sqrt(scale) rounded to the input type: the product of the two."""
    if dtype == "float32":
        return scale
    return float(np.float32(np.float16(math.sqrt(scale)))) ** 2


def _check(imp, ins, a) -> tuple[str, str, str]:
    """The dtypes of Q, K and V; refuses what this lowering does not compute as ONNX does."""
    types = [imp.type_of(i) for i in ins[:3]]
    dtypes = [t.dtype if t else "?" for t in types]
    if any(d not in _FLOATS for d in dtypes):
        raise imp.fail(f"{'/'.join(dtypes)} Q/K/V; valid: float16, bfloat16 or float32")
    precision = a.get("softmax_precision")
    if precision is not None:
        wanted = _PRECISION.get(int(precision))
        if wanted is None:
            raise imp.fail(f"softmax_precision {precision} (valid: 1 float, 10 float16, 11 double, 16 bfloat16)")
        if wanted in ("float16", "bfloat16") and wanted != dtypes[0]:
            raise imp.fail(f"softmax_precision {wanted} on {dtypes[0]} inputs (the softmax is computed in float32: "
                           "a narrower precision only for inputs of that type)")
    for side in ("left_window_size", "right_window_size"):
        if int(a.get(side, -1)) < -1:
            raise imp.fail(f"{side} {a[side]} (-1 for unbounded, or >= 0)")
    if ins[6] and ins[4]:
        raise imp.fail("nonpad_kv_seqlen with past_key / past_value (ONNX forbids combining them)")
    if bool(ins[4]) != bool(ins[5]):
        raise imp.fail("past_key and past_value go together")
    return dtypes[0], dtypes[1], dtypes[2]


def _mask_bias(imp, name: str, full: tuple) -> str:
    """attn_mask as a float32 additive bias (bool: True attends, False is -inf), its key axis padded with
    -inf up to the keys, as ONNX pads a shorter mask."""
    m = imp.value(name)
    t = imp.b.types[m]
    rank, length = len(t.shape), full[-1]
    if not 1 <= rank <= 4:
        raise imp.fail(f"a rank-{rank} attn_mask (ranks 1-4, broadcasting to (batch, heads, queries, keys))")
    if t.shape[-1] > length:
        raise imp.fail(f"an attn_mask over {t.shape[-1]} keys for {length} keys (at most as many as the keys)")
    padded = (*t.shape[:-1], length)
    if any(d not in (1, f) for d, f in zip(reversed(padded), reversed(full))):
        raise imp.fail(f"attn_mask of shape {list(t.shape)}: does not broadcast to {list(full)} "
                       "(batch, heads, queries, keys), the key axis padded")
    if t.dtype == "bool":
        m = imp.emit("where", [m, _constant(imp, 0.0), _constant(imp, -np.inf)])
    elif t.dtype in _FLOATS:
        m = _widen(imp, m)
    else:
        raise imp.fail(f"a {t.dtype} attn_mask (bool, or the floats of Q)")
    if t.shape[-1] < length:
        pads = (0,) * (2 * rank - 1) + (length - t.shape[-1],)
        m = imp.emit("pad", [m], {"pads": pads, "value": float("-inf")})
    return m


def _allowed_static(s: int, length: int, offset: int, causal: bool, left: int, right: int) -> np.ndarray:
    """(S, L) bool: query i (at absolute position i + offset) may attend key j."""
    diff = np.arange(s)[:, None] + offset - np.arange(length)[None, :]
    allowed = np.ones((s, length), np.bool_)
    if causal:
        allowed &= diff >= 0
    if left >= 0:
        allowed &= diff <= left
    if right >= 0:
        allowed &= -diff <= right
    return allowed


def _nonpad_allowed(imp, name: str, bsz: int, s: int, length: int, causal: bool, left: int, right: int) -> str:
    """(B, 1, S, L) bool from the run-time key lengths n[b]: keys j < n[b]; with the causal and window
    masks aligned bottom-right at offset n[b] - S (query i sits at absolute position i + n[b] - S)."""
    n = imp.value(name)
    t = imp.b.types[n]
    if t.dtype not in ("int64", "int32") or t.shape != (bsz,):
        raise imp.fail(f"nonpad_kv_seqlen of {t} (int64 of shape [{bsz}], one length per batch)")
    n = _reshape(imp, n, (bsz, 1, 1, 1))
    dtype = np.dtype(t.dtype)
    j = np.arange(length)[None, None, None, :]
    # i + n - S - j is the distance back from the query to the key; each test rearranged to compare with n
    behind = (j - np.arange(s)[None, None, :, None] + s).astype(dtype)  # j - i + S
    tests = [("less", imp.b.constant(j.astype(dtype), "key_positions"), n)]
    if causal:
        tests.append(("less_equal", imp.b.constant(behind, "causal_keys"), n))
    if left >= 0:
        tests.append(("less_equal", n, imp.b.constant(behind + left, "window_left")))
    if right >= 0:
        tests.append(("less_equal", imp.b.constant(behind - right, "window_right"), n))
    allowed = None
    for op, x, y in tests:
        got = imp.emit(op, [x, y])
        allowed = got if allowed is None else imp.emit("logical_and", [allowed, got])
    return allowed


def _bias(imp, ins, a, full: tuple, past: int):
    """(bias, rows): the float32 additive bias broadcasting to `full` (B, Hq, S, L), or None; and the
    bool condition of rows it masks throughout, or None where no row is."""
    bsz, _, s, length = full
    causal = bool(a.get("is_causal", 0))
    left, right = int(a.get("left_window_size", -1)), int(a.get("right_window_size", -1))
    parts, run_time = [], False
    if ins[3]:
        parts.append(_mask_bias(imp, ins[3], full))
        run_time = True
    if ins[6]:
        allowed = _nonpad_allowed(imp, ins[6], bsz, s, length, causal, left, right)
        parts.append(imp.emit("where", [allowed, _constant(imp, 0.0), _constant(imp, -np.inf)]))
        run_time = True
        static_rows = None
    else:
        allowed = _allowed_static(s, length, past, causal, left, right)
        static_rows = ~allowed.any(axis=1, keepdims=True)
        if not allowed.all():
            parts.append(imp.b.constant(np.where(allowed, 0.0, -np.inf).astype(np.float32), "attention_bias"))
    if not parts:
        return None, None
    bias = parts[0]
    for p in parts[1:]:
        bias = imp.emit("add", [bias, p])
    if run_time:
        rank = len(imp.b.types[bias].shape)
        top = imp.emit("reduce_max", [bias], {"axes": (rank - 1,), "keepdims": True})
        return bias, imp.emit("equal", [top, _constant(imp, -np.inf)])
    if static_rows.any():
        return bias, imp.b.constant(static_rows, "masked_rows")
    return bias, None


def attention(imp, n, ins, a):
    ins = list(ins) + [""] * (7 - len(ins))
    q_dtype, k_dtype, v_dtype = _check(imp, ins, a)
    q, k, v = (_widen(imp, imp.value(i)) for i in ins[:3])
    rank = len(imp.b.types[q].shape)
    if rank == 3:
        if "q_num_heads" not in a or "kv_num_heads" not in a:
            raise imp.fail("3-D inputs need q_num_heads and kv_num_heads")
        q, k, v = _heads(imp, q, a["q_num_heads"]), _heads(imp, k, a["kv_num_heads"]), _heads(imp, v, a["kv_num_heads"])
    elif rank != 4:
        raise imp.fail(f"rank-{rank} inputs (3-D or 4-D)")
    past = imp.b.types[imp.value(ins[4])].shape[2] if ins[4] else 0
    if ins[4]:
        k = imp.emit("concat", [_widen(imp, imp.value(ins[4])), k], {"axis": 2})
        v = imp.emit("concat", [_widen(imp, imp.value(ins[5])), v], {"axis": 2})
    for slot, value, dtype in ((1, k, k_dtype), (2, v, v_dtype)):
        if len(n.output) > slot and n.output[slot]:
            _output(imp, value, imp.b.types[value].shape, dtype, n.output[slot])
    (bsz, hq, s, d), (_, hkv, length, _), dv = imp.b.types[q].shape, imp.b.types[k].shape, imp.b.types[v].shape[3]
    if hq % hkv:
        raise imp.fail(f"{hq} query heads over {hkv} key/value heads (must divide)")
    group, full = hq // hkv, (bsz, hq, s, length)
    kt = imp.emit("permute", [k], {"dims": (0, 1, 3, 2)})
    grouped = _reshape(imp, q, (bsz, hkv, group, s, d))  # query heads grouped over their key/value head
    scores = imp.emit("matmul", [grouped, _reshape(imp, kt, (bsz, hkv, 1, d, length))])
    scale = _rounded_scale(float(a.get("scale", 1 / math.sqrt(d))), q_dtype)
    scores = imp.emit("mul", [_reshape(imp, scores, full), _constant(imp, scale)])
    softcap = float(a.get("softcap", 0.0))
    if softcap > 0:
        capped = imp.emit("tanh", [imp.emit("mul", [scores, _constant(imp, 1 / softcap)])])
        scores = imp.emit("mul", [capped, _constant(imp, softcap)])
    mode = int(a.get("qk_matmul_output_mode", 0))
    qk_out = n.output[3] if len(n.output) > 3 and n.output[3] else None
    if mode in (0, 1) and qk_out:
        _output(imp, scores, full, q_dtype, qk_out)
    bias, rows = _bias(imp, ins, a, full, past)
    if bias is not None:
        scores = imp.emit("add", [scores, bias])
    if mode == 2 and qk_out:
        _output(imp, scores, full, q_dtype, qk_out)
    probs = imp.emit("softmax", [scores], {"axis": -1, "masked_rows_zero": rows is not None})
    if rows is not None:
        probs = imp.emit("where", [rows, _constant(imp, 0.0), probs])
    if mode == 3 and qk_out:
        _output(imp, probs, full, q_dtype, qk_out)
    y = imp.emit("matmul", [_reshape(imp, probs, (bsz, hkv, group, s, length)),
                            _reshape(imp, v, (bsz, hkv, 1, length, dv))])
    if rank == 3:
        y = imp.emit("permute", [_reshape(imp, y, (bsz, hq, s, dv))], {"dims": (0, 2, 1, 3)})
        _output(imp, y, (bsz, s, hq * dv), q_dtype, n.output[0])
    else:
        _output(imp, y, (bsz, hq, s, dv), q_dtype, n.output[0])


__all__ = ["attention", "ATTENTION_HANDLERS"]


ATTENTION_HANDLERS = {"Attention": attention, "RotaryEmbedding": rotary_embedding}

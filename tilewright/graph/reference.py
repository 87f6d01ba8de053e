"""The graph's NumPy oracle: `run_reference(graph, inputs)` runs every op of
`opset.OPS` in plain NumPy (float32 in, float32 out), and `evaluate_node` runs
one node (constant folding uses it). Written for clarity first, but vectorized
enough (im2col convolution, a series erf) that a ResNet-18 at 64x64 takes about
a second, since every graph test of the project compares against it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..errors import EvaluationError
from . import bitwise_ops, blocked, gather_ops, integer_ops, logic_ops, quantized_ops, reduce_ops, winograd_ops
from .infer import pair, pool_out, quad, reduce_axes, reshape_target
from .ir import Graph, Node, TensorType
from .opset import spec


def erf(x: np.ndarray) -> np.ndarray:
    """erf to about 1e-15 without SciPy: erf(a) = 2/sqrt(pi) e^(-a^2) sum_n (2a^2)^n a / (1*3*...*(2n+1)),
    a series of positive terms (no cancellation), summed until every element's next term is negligible;
    |x| >= 6 gives +-1 (erfc(6) ~ 2e-17)."""
    x = np.asarray(x)
    a = np.abs(x.astype(np.float64)).ravel()
    out = np.ones_like(a)
    idx = np.nonzero(a < 6.0)[0]
    av = a[idx]
    two_a2 = 2.0 * av * av
    term = av.copy()
    total = av.copy()
    n = 0
    while idx.size:
        for _ in range(8):
            n += 1
            term *= two_a2 / (2 * n + 1)
            total += term
        done = term <= 1e-17 * total
        if done.any():
            out[idx[done]] = (2.0 / np.sqrt(np.pi)) * np.exp(-av[done] ** 2) * total[done]
            keep = ~done
            idx, av, two_a2, term, total = idx[keep], av[keep], two_a2[keep], term[keep], total[keep]
    return (np.sign(x) * out.reshape(x.shape)).astype(x.dtype if x.dtype.kind == "f" else np.float64)


def _windows(xp: np.ndarray, oh: int, ow: int, kh: int, kw: int, s, d) -> np.ndarray:
    """A (N, C, OH, OW, KH, KW) view of padded NCHW `xp` (no copy)."""
    n, c = xp.shape[:2]
    s0, s1, s2, s3 = xp.strides
    return as_strided(xp, (n, c, oh, ow, kh, kw), (s0, s1, s2 * s[0], s3 * s[1], s2 * d[0], s3 * d[1]),
                      writeable=False)


def conv2d(x, w, b=None, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1):
    s, d = pair(stride), pair(dilation)
    pt, pl, pb, pr = quad(padding)
    xp = np.ascontiguousarray(np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr))))
    n, c, h, wd = xp.shape
    o, ci, kh, kw = w.shape
    oh = (h - d[0] * (kh - 1) - 1) // s[0] + 1
    ow = (wd - d[1] * (kw - 1) - 1) // s[1] + 1
    cols = _windows(xp, oh, ow, kh, kw, s, d)
    if groups == 1:
        out = np.tensordot(cols, w, axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)
    else:
        cols = cols.reshape(n, groups, ci, oh, ow, kh, kw)
        wg = w.reshape(groups, o // groups, ci, kh, kw)
        out = np.einsum("ngchwij,gocij->ngohw", cols, wg, optimize=True).reshape(n, o, oh, ow)
    if b is not None:
        out = out + b.reshape(1, o, 1, 1)
    return np.ascontiguousarray(out, dtype=x.dtype)


def conv_transpose2d(x, w, b=None, stride=(1, 1), padding=(0, 0), output_padding=(0, 0), dilation=(1, 1), groups=1):
    """Each input pixel scattered through the kernel (float64 sums), then the padding cropped."""
    s, p, op, d = pair(stride), pair(padding), pair(output_padding), pair(dilation)
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    full = np.zeros((n, og * groups, (h - 1) * s[0] + d[0] * (kh - 1) + 1 + op[0],
                     (wd - 1) * s[1] + d[1] * (kw - 1) + 1 + op[1]))
    cg = c // groups
    for g in range(groups):
        xs, ws = x[:, g * cg:(g + 1) * cg].astype(np.float64), w[g * cg:(g + 1) * cg].astype(np.float64)
        for i in range(kh):
            for j in range(kw):
                contrib = np.einsum("nchw,co->nohw", xs, ws[:, :, i, j])
                full[:, g * og:(g + 1) * og, i * d[0]:i * d[0] + (h - 1) * s[0] + 1:s[0],
                     j * d[1]:j * d[1] + (wd - 1) * s[1] + 1:s[1]] += contrib
    out = full[:, :, p[0]:full.shape[2] - p[0], p[1]:full.shape[3] - p[1]]
    if b is not None:
        out = out + b.reshape(1, -1, 1, 1)
    return np.ascontiguousarray(out, dtype=x.dtype)


def _pool_geometry(x, attrs):
    kh, kw = pair(attrs["kernel"])
    stride = attrs.get("stride")
    s = pair(stride if stride is not None else (kh, kw))
    d = pair(attrs.get("dilation", (1, 1)))
    pt, pl, pb, pr = quad(attrs.get("padding", (0, 0, 0, 0)))
    ceil = bool(attrs.get("ceil_mode", False))
    h, w = x.shape[2:]
    oh, ow = pool_out(h, kh, s[0], pt, pb, d[0], ceil), pool_out(w, kw, s[1], pl, pr, d[1], ceil)
    # pad far enough for the last (ceil-mode) window; windows never read past it
    eb = max(pb, (oh - 1) * s[0] + d[0] * (kh - 1) + 1 - h - pt)
    er = max(pr, (ow - 1) * s[1] + d[1] * (kw - 1) + 1 - w - pl)
    return (kh, kw), s, d, (pt, pl, pb, pr), (eb, er), (oh, ow)


def max_pool2d(x, attrs):
    (kh, kw), s, d, (pt, pl, _, _), (eb, er), (oh, ow) = _pool_geometry(x, attrs)
    low = np.iinfo(x.dtype).min if x.dtype.kind in "iu" else -np.inf
    xp = np.pad(x, ((0, 0), (0, 0), (pt, eb), (pl, er)), constant_values=low)
    return np.ascontiguousarray(_windows(xp, oh, ow, kh, kw, s, d).max(axis=(4, 5)))


def _avg_divisor(size, k, s, p0, p1, out, include_pad):
    start = np.arange(out) * s - p0
    end = np.minimum(start + k, size + p1)
    if not include_pad:
        start, end = np.maximum(start, 0), np.minimum(end, size)
    return (end - start).astype(np.float64)


def avg_pool2d(x, attrs):
    (kh, kw), s, d, (pt, pl, pb, pr), (eb, er), (oh, ow) = _pool_geometry(x, attrs)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, eb), (pl, er)))
    total = _windows(xp, oh, ow, kh, kw, s, d).sum(axis=(4, 5))
    inc = bool(attrs.get("count_include_pad", True))
    h, w = x.shape[2:]
    div = np.outer(_avg_divisor(h, kh, s[0], pt, pb, oh, inc), _avg_divisor(w, kw, s[1], pl, pr, ow, inc))
    return (total / div).astype(x.dtype)


def _layer_norm(x, weight=None, bias=None, axes=1, eps=1e-5):
    ax = tuple(range(x.ndim - int(axes), x.ndim))
    x64 = x.astype(np.float64)
    mu = x64.mean(axis=ax, keepdims=True)
    var = ((x64 - mu) ** 2).mean(axis=ax, keepdims=True)
    y = (x64 - mu) / np.sqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y.astype(x.dtype)


def _softmax(x, axis=-1, masked_rows_zero=False):
    top = x.max(axis=axis, keepdims=True)
    if masked_rows_zero:  # a row that is -inf throughout gives zeros
        masked = np.isneginf(top)
        e = np.exp(x - np.where(masked, 0, top))
        return np.where(masked, 0, e / np.where(masked, 1, e.sum(axis=axis, keepdims=True))).astype(x.dtype)
    e = np.exp(x - top)
    return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)


def _batch_norm(x, weight, bias, mean, var, eps=1e-5):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    scale = (weight.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)).reshape(shape)
    return ((x - mean.reshape(shape)) * scale + bias.reshape(shape)).astype(x.dtype)


def _gelu(x, approximate="none"):
    x64 = x.astype(np.float64)
    if approximate == "tanh":
        y = 0.5 * x64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64 ** 3)))
    else:
        y = 0.5 * x64 * (1 + erf(x64 / np.sqrt(2)))
    return y.astype(x.dtype)


def _clip(x, lo=None, hi=None):
    if lo is not None:
        x = np.maximum(x, np.asarray(lo, dtype=x.dtype))
    if hi is not None:
        x = np.minimum(x, np.asarray(hi, dtype=x.dtype))
    return x


def _pad(x, pads, value=0.0):
    nd = x.ndim
    before, after = [int(p) for p in pads[:nd]], [int(p) for p in pads[nd:]]
    crop = tuple(slice(max(-b, 0), x.shape[i] - max(-a, 0)) for i, (b, a) in enumerate(zip(before, after)))
    x = x[crop]
    width = [(max(b, 0), max(a, 0)) for b, a in zip(before, after)]
    return np.pad(x, width, constant_values=value)


def _sigmoid(x):
    return (0.5 * (1 + np.tanh(0.5 * x.astype(np.float64)))).astype(x.dtype)


_UNARY = {
    "relu": lambda x: np.maximum(x, 0).astype(x.dtype),
    "sigmoid": _sigmoid,
    "tanh": np.tanh,
    "silu": lambda x: (x * _sigmoid(x)).astype(x.dtype),
    "hardswish": lambda x: (x * np.clip(x + 3, 0, 6) / 6).astype(x.dtype),
    "exp": np.exp,
    "sqrt": np.sqrt,
    "neg": np.negative,
    "erf": erf,
    "abs": np.abs, "log": np.log, "floor": np.floor, "ceil": np.ceil, "round": np.round, "sin": np.sin, "cos": np.cos,
    "reciprocal": np.reciprocal,
}
_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "maximum": np.maximum,
           "minimum": np.minimum, "pow": np.power}


# the op modules' own references, (node, *inputs) -> array
_OP_TABLES = {**winograd_ops.REFERENCE, **quantized_ops.REFERENCE, **integer_ops.REFERENCE, **reduce_ops.REFERENCE,
              **logic_ops.REFERENCE, **gather_ops.REFERENCE, **bitwise_ops.REFERENCE}


def _evaluate(node: Node, xs: list[np.ndarray]) -> np.ndarray:
    op, a = node.op, dict(node.attrs)
    if op in _OP_TABLES:
        return _OP_TABLES[op](node, *xs)
    if op in ("conv2d", "dense") and xs[0].dtype.name == "bfloat16":  # products of bfloat16 values are exact
        xs = [x.astype(np.float32) for x in xs]  # in float32: the sums are float32 as the kernels' are
    block = blocked.block_of(a.pop("layout", None))
    if block:  # packed data: the same op on NCHW, packed again
        plain = [blocked.from_blocked(xs[0]), *(blocked.unpack_weight(x) if x.ndim == 6 else
                                                quantized_ops.unpack_qconv_weight(x) if x.ndim == 7 else x
                                                for x in xs[1:])]
        return blocked.to_blocked(_evaluate(node.replace(attrs=a), plain), block)
    if op == "layout_transform":
        return blocked.transform(xs[0], a["src"], a["dst"])
    if op in _UNARY:
        return _UNARY[op](xs[0])
    if op in _BINARY:
        dtype = np.result_type(xs[0].dtype, xs[1].dtype)
        return _BINARY[op](xs[0], xs[1]).astype(dtype, copy=False)
    if op == "conv2d":
        return conv2d(xs[0], xs[1], xs[2] if len(xs) > 2 else None, a.get("stride", (1, 1)),
                      a.get("padding", (0, 0, 0, 0)), a.get("dilation", (1, 1)), int(a.get("groups", 1)))
    if op == "conv_transpose2d":
        return conv_transpose2d(xs[0], xs[1], xs[2] if len(xs) > 2 else None, a.get("stride", (1, 1)),
                                a.get("padding", (0, 0)), a.get("output_padding", (0, 0)), a.get("dilation", (1, 1)),
                                int(a.get("groups", 1)))
    if op == "embedding":
        ids = xs[1].astype(np.int64)
        return np.take(xs[0], ids + np.where(ids < 0, xs[0].shape[0], 0) if a.get("negative_wraps") else ids, axis=0,
                       mode="raise")
    if op == "dense":
        y = np.matmul(xs[0], xs[1].T)
        return (y + xs[2] if len(xs) > 2 else y).astype(xs[0].dtype)
    if op == "matmul":
        return np.matmul(xs[0], xs[1])
    if op == "batch_norm":
        return _batch_norm(*xs, eps=a.get("eps", 1e-5))
    if op == "layer_norm":
        return _layer_norm(xs[0], *xs[1:], axes=a.get("axes", 1), eps=a.get("eps", 1e-5))
    if op == "softmax":
        return _softmax(xs[0], int(a.get("axis", -1)), bool(a.get("masked_rows_zero", False)))
    if op == "max_pool2d":
        return max_pool2d(xs[0], a)
    if op == "avg_pool2d":
        return avg_pool2d(xs[0], a)
    if op == "mean":
        axes = reduce_axes(node, xs[0].ndim)
        return xs[0].astype(np.float64).mean(axis=axes, keepdims=bool(a.get("keepdims", True))).astype(xs[0].dtype)
    if op == "leaky_relu":
        return np.where(xs[0] >= 0, xs[0], xs[0] * np.asarray(a.get("alpha", 0.01), xs[0].dtype))
    if op == "gelu":
        return _gelu(xs[0], a.get("approximate", "none"))
    if op == "clip":
        return _clip(xs[0], a.get("min"), a.get("max"))
    if op == "reshape":
        return xs[0].reshape(reshape_target(node, TensorType(xs[0].shape, xs[0].dtype.name)))
    if op == "permute":
        return np.ascontiguousarray(np.transpose(xs[0], [int(d) for d in a["dims"]]))
    if op == "pad":
        return _pad(xs[0], a["pads"], a.get("value", 0.0))
    if op == "concat":
        return np.concatenate(xs, axis=int(a.get("axis", 0)))
    if op == "slice":
        return np.ascontiguousarray(xs[0][tuple(slice(int(b), int(e), int(s))
                                                for b, e, s in zip(a["begin"], a["end"], a["step"]))])
    raise EvaluationError(f"node '{node.name}': the reference has no rule for op '{op}'")


def evaluate_node(node: Node, arrays: Sequence[np.ndarray] | Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The outputs of `node` given its input arrays (in `node.inputs` order, or a
    mapping from value names)."""
    spec(node.op, node.name)
    if node.op == "constant":
        raise EvaluationError(f"node '{node.name}': a constant is read from Graph.constants, not evaluated")
    if isinstance(arrays, Mapping):
        missing = [v for v in node.inputs if v not in arrays]
        if missing:
            raise EvaluationError(f"node '{node.name}' ({node.op}): no array for inputs {missing}")
        arrays = [arrays[v] for v in node.inputs]
    xs = [np.asarray(x) for x in arrays]
    if len(xs) != len(node.inputs):
        raise EvaluationError(f"node '{node.name}' ({node.op}): {len(node.inputs)} inputs, {len(xs)} arrays given")
    return [np.asarray(_evaluate(node, xs))]


def run_reference(graph: Graph, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> list[np.ndarray]:
    """The graph's outputs, computed node by node in NumPy. `inputs` maps input
    names to arrays or lists them in `graph.inputs` order; shapes are checked
    against `graph.types` where known."""
    if not isinstance(inputs, Mapping):
        inputs = list(inputs)
        if len(inputs) != len(graph.inputs):
            raise EvaluationError(f"graph '{graph.name}' takes {len(graph.inputs)} inputs "
                                  f"({', '.join(graph.inputs)}), got {len(inputs)}")
        inputs = dict(zip(graph.inputs, inputs))
    env: dict[str, np.ndarray] = {}
    for v in graph.inputs:
        if v not in inputs:
            raise EvaluationError(f"graph '{graph.name}': no array for input '{v}'")
        x = np.asarray(inputs[v])
        t = graph.types.get(v)
        if t is not None and tuple(x.shape) != t.shape:
            raise EvaluationError(f"graph '{graph.name}': input '{v}' has shape {tuple(x.shape)}, expected {t.shape}")
        if t is not None and x.dtype != np.dtype(t.dtype):
            x = x.astype(t.dtype)
        env[v] = x
    last_use = {v: i for i, n in enumerate(graph.nodes) for v in n.inputs}
    keep = set(graph.outputs)
    for i, node in enumerate(graph.nodes):
        if node.op == "constant":
            env[node.outputs[0]] = np.asarray(graph.constants[node.outputs[0]])
            continue
        for v, y in zip(node.outputs, evaluate_node(node, [env[v] for v in node.inputs])):
            env[v] = y
        for v in set(node.inputs):
            if last_use.get(v) == i and v not in keep:
                env.pop(v, None)
    return [env[v] for v in graph.outputs]


__all__ = ["run_reference", "evaluate_node", "erf", "conv2d", "max_pool2d", "avg_pool2d"]

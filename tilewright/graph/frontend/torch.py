"""PyTorch frontend: `from_torch(module, example_inputs) -> Graph`.

The module is exported with `torch.export.export(module.eval(), inputs)` and
then `.run_decompositions()`, so the graph is read in core ATen (a stable,
small op set: convolution, addmm, _native_batch_norm_legit_no_training, ...).
The pre-decomposition ops (conv2d, linear, batch_norm, layer_norm, softmax,
matmul, flatten, dropout, ...) are mapped too, for `decompose=False`.
Parameters, buffers and lifted constants become constant nodes (float32);
user inputs are named input0, input1, ...; every value's type comes from the
exported node's meta["val"]. An op outside `SUPPORTED` raises
UnsupportedOpError naming the ATen op, the node and the supported set."""

from __future__ import annotations

import numbers

import numpy as np

from ...errors import TilewrightError
from ..ir import TensorType
from .builder import GraphBuilder, unsupported
from .torch_export import exported
from .torch_fold import fold_constant
from .torch_indexing import concat, embedding, split
from .torch_masked_softmax import RowMask, any_dim, eq_scalar, logical_not, where_masked_softmax, zeros_like
from .torch_quantized import QUANTIZED_HANDLERS


def _type(val) -> TensorType:
    return TensorType(tuple(int(d) for d in val.shape), str(val.dtype).replace("torch.", ""))


def _pair(v, n=2):
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return tuple(int(x) for x in (v * n if len(v) == 1 else v))


class _Ctx:
    def __init__(self, name: str):
        self.b = GraphBuilder(name)
        self.env: dict[str, object] = {}  # fx node name -> value name (or a tuple of them for multi-output ops)
        self.node = None

    def v(self, arg, like=None) -> str:
        """The graph value of an fx argument; a Python number becomes a 0-d constant of `like`'s dtype."""
        if isinstance(arg, numbers.Number):
            dtype = self.b.types[like].dtype if like else "float32"
            return self.b.constant(np.array(arg, dtype=dtype), "scalar")
        got = self.env[arg.name]
        if isinstance(got, RowMask):
            raise unsupported("from_torch", "boolean mask", self.node.name, SUPPORTED,
                              "a boolean tensor outside attention's fully-masked-row guard")
        if isinstance(got, tuple):
            raise unsupported("from_torch", "tuple value", self.node.name, SUPPORTED, "a multi-output op read whole")
        return got

    def out(self, op, inputs, attrs=None, val=None):
        val = self.node.meta["val"] if val is None else val
        if isinstance(val, (tuple, list)):
            val = val[0]
        return self.b.node(op, inputs, _type(val), attrs, self.node.name)

    def is_permute_t(self, arg) -> str | None:
        """If `arg` is a 2-D transpose of some value, that value (so dense folds the transpose)."""
        if not hasattr(arg, "target"):
            return None
        name = getattr(arg.target, "__name__", "").split(".")[0]
        if name == "t" or (name == "permute" and list(arg.args[1]) in ([1, 0], [-1, -2])) or (
                name == "transpose" and sorted(int(d) % 2 for d in arg.args[1:3]) == [0, 1]
                and len(arg.meta["val"].shape) == 2):
            src = self.env.get(arg.args[0].name)
            return src if isinstance(src, str) else None
        return None


def _unary(op):
    return lambda c, a: c.out(op, [c.v(a["self"])])


def _binary(op):
    def f(c, a):
        x, y = a["self"], a["other"]
        like = None if isinstance(x, numbers.Number) else c.v(x)
        if like is None and not isinstance(y, numbers.Number):
            like = c.v(y)
        yv = c.v(y, like)
        alpha = a.get("alpha", 1)
        if alpha != 1:  # add/sub's alpha scales the second operand
            yv = c.b.node("mul", [yv, c.v(alpha, yv)], c.b.types[yv], hint=c.node.name + "_alpha")
        return c.out(op, [c.v(x, like), yv])
    return f


def _identity(c, a):
    return c.v(a["self"] if "self" in a else a["input"])


def _reshape(c, a):
    x = c.v(a["self"] if "self" in a else a["input"])
    shape = tuple(int(d) for d in c.node.meta["val"].shape)
    return x if c.b.types[x].shape == shape else c.out("reshape", [x], {"shape": shape})


def _permute(c, a):
    x = c.v(a["self"])
    rank = len(c.b.types[x].shape)
    name = c.node.target.__name__.split(".")[0]
    if name == "permute":
        dims = [int(d) % rank for d in a["dims"]]
    else:
        dims = list(range(rank))
        if name == "t":
            dims = dims[::-1]
        else:
            i, j = int(a["dim0"]) % rank, int(a["dim1"]) % rank
            dims[i], dims[j] = dims[j], dims[i]
    return x if dims == sorted(dims) else c.out("permute", [x], {"dims": tuple(dims)})


def _guard_step(fn):
    """A step of attention's softmax guard (torch_masked_softmax.py); any other use is refused."""
    def handler(c, a):
        got = fn(c, a)
        if got is None:
            raise unsupported("from_torch", str(c.node.target), c.node.name, SUPPORTED,
                              "only as the fully-masked-row guard of an attention softmax")
        return got
    return handler




def _conv(c, a):
    if isinstance(a["padding"], str):
        raise unsupported("from_torch", str(c.node.target), c.node.name, SUPPORTED, "string padding")
    w = c.v(a["weight"])
    if len(c.b.types[w].shape) != 4:
        raise unsupported("from_torch", str(c.node.target), c.node.name, SUPPORTED, "only 2-D convolution")
    ph, pw = _pair(a["padding"])
    ins = [c.v(a["input"]), w] + ([c.v(a["bias"])] if a["bias"] is not None else [])
    if a.get("transposed"):
        return c.out("conv_transpose2d", ins, {"stride": _pair(a["stride"]), "padding": (ph, pw),
                                               "output_padding": _pair(a.get("output_padding", 0)),
                                               "dilation": _pair(a["dilation"]), "groups": int(a["groups"])})
    return c.out("conv2d", ins, {"stride": _pair(a["stride"]), "padding": (ph, pw, ph, pw),
                                 "dilation": _pair(a["dilation"]), "groups": int(a["groups"])})


def _dense_weight(c, w_t):
    """dense's weight is [N, K]: fold a transpose feeding the matmul, else transpose explicitly."""
    src = c.is_permute_t(w_t)
    if src is not None:
        return src
    w = c.v(w_t)
    k, n = c.b.types[w].shape
    return c.b.node("permute", [w], TensorType((n, k), c.b.types[w].dtype), {"dims": (1, 0)}, c.node.name + "_wt")


def _addmm(c, a):
    if a.get("beta", 1) != 1 or a.get("alpha", 1) != 1:
        raise unsupported("from_torch", str(c.node.target), c.node.name, SUPPORTED, "alpha/beta other than 1")
    return c.out("dense", [c.v(a["mat1"]), _dense_weight(c, a["mat2"]), c.v(a["self"])])


def _linear(c, a):
    ins = [c.v(a["input"]), c.v(a["weight"])] + ([c.v(a["bias"])] if a["bias"] is not None else [])
    return c.out("dense", ins)


def _matmul(c, a):
    return c.out("matmul", [c.v(a["self"]), c.v(a["mat2"] if "mat2" in a else a["other"])])


def _norm_params(c, a, n, keys):
    out = []
    for k, fill in zip(keys, (1.0, 0.0, 0.0, 1.0)):
        out.append(c.v(a[k]) if a.get(k) is not None else c.b.constant(np.full((n,), fill, np.float32), k))
    return out


def _batch_norm(c, a):
    if a.get("training"):
        raise unsupported("from_torch", str(c.node.target), c.node.name, SUPPORTED, "training-mode batch norm")
    x = c.v(a["input"])
    n = c.b.types[x].shape[1]
    params = _norm_params(c, a, n, ("weight", "bias", "running_mean", "running_var"))
    return c.out("batch_norm", [x, *params], {"eps": float(a["eps"])})


def _layer_norm(c, a):
    x = c.v(a["input"])
    shape = tuple(int(d) for d in a["normalized_shape"])
    ins = [x] + [c.v(a[k]) if a.get(k) is not None else c.b.constant(np.full(shape, f, np.float32), k)
                 for k, f in (("weight", 1.0), ("bias", 0.0))]
    return c.out("layer_norm", ins, {"axes": len(shape), "eps": float(a["eps"])})


def _softmax(c, a):
    return c.out("softmax", [c.v(a["self"])], {"axis": int(a["dim"])})


def _pool_attrs(a, stride_default):
    kernel = _pair(a["kernel_size"])
    stride = _pair(a["stride"]) if a.get("stride") else stride_default(kernel)
    ph, pw = _pair(a["padding"])
    return {"kernel": kernel, "stride": stride, "padding": (ph, pw, ph, pw), "ceil_mode": bool(a["ceil_mode"])}


def _max_pool(c, a):
    attrs = _pool_attrs(a, lambda k: k)
    attrs["dilation"] = _pair(a["dilation"])
    return c.out("max_pool2d", [c.v(a["self"])], attrs)


def _avg_pool(c, a):
    if a.get("divisor_override") is not None:
        raise unsupported("from_torch", str(c.node.target), c.node.name, SUPPORTED, "divisor_override")
    attrs = _pool_attrs(a, lambda k: k)
    attrs["count_include_pad"] = bool(a["count_include_pad"])
    return c.out("avg_pool2d", [c.v(a["self"])], attrs)


def _adaptive_avg_pool(c, a):
    x = c.v(a["self"])
    h, w = c.b.types[x].shape[2:]
    oh, ow = _pair(a["output_size"])
    if (oh, ow) == (1, 1):
        return c.out("mean", [x], {"axes": (2, 3), "keepdims": True})
    if (oh, ow) == (h, w):
        return x
    if h % oh or w % ow:
        raise unsupported("from_torch", str(c.node.target), c.node.name, SUPPORTED,
                          f"output {oh}x{ow} does not divide input {h}x{w}")
    k = (h // oh, w // ow)
    return c.out("avg_pool2d", [x], {"kernel": k, "stride": k})


def _mean(c, a):
    x = c.v(a["self"])
    rank = len(c.b.types[x].shape)
    axes = tuple(sorted(int(d) % rank for d in (a["dim"] or range(rank))))
    return c.out("mean", [x], {"axes": axes, "keepdims": bool(a["keepdim"])})


def _clip(c, a):
    lo = a.get("min_val", a.get("min"))
    hi = a.get("max_val", a.get("max"))
    return c.out("clip", [c.v(a["self"])], {"min": None if lo is None else float(lo),
                                            "max": None if hi is None else float(hi)})


def _expand(c, a):
    x = c.v(a["self"])
    if c.b.types[x].shape != tuple(int(d) for d in c.node.meta["val"].shape):
        raise unsupported("from_torch", str(c.node.target), c.node.name, SUPPORTED, "a broadcasting expand")
    return x



def _slice(c, a):
    """aten.slice(self, dim, start, end, step): Python slicing along one dim (None ends, negatives, clamping)."""
    x = c.v(a["self"])
    shape = c.b.types[x].shape
    dim = int(a["dim"]) % len(shape)
    start, stop, step = slice(a["start"], a["end"], int(a["step"] or 1)).indices(shape[dim])
    if step < 1 or start >= stop:
        raise unsupported("from_torch", str(c.node.target), c.node.name, SUPPORTED, "an empty or reversed slice")
    if (start, stop, step) == (0, shape[dim], 1):
        return x
    begin, end, steps = [0] * len(shape), list(shape), [1] * len(shape)
    begin[dim], end[dim], steps[dim] = start, stop, step
    return c.out("slice", [x], {"begin": tuple(begin), "end": tuple(end), "step": tuple(steps)})


def _pad(c, a):
    x = c.v(a["self"])
    rank = len(c.b.types[x].shape)
    before, after = [0] * rank, [0] * rank
    pad = list(a["pad"])
    for i in range(len(pad) // 2):  # torch lists (before, after) pairs from the last dim backwards
        before[rank - 1 - i], after[rank - 1 - i] = int(pad[2 * i]), int(pad[2 * i + 1])
    return c.out("pad", [x], {"pads": tuple(before + after), "value": float(a["value"] or 0.0)})


def _to_copy(c, a):
    x = c.v(a["self"])
    if c.b.types[x].dtype != str(c.node.meta["val"].dtype).replace("torch.", ""):
        raise unsupported("from_torch", str(c.node.target), c.node.name, SUPPORTED, "a dtype conversion")
    return x


def _composite(c, op, inputs, attrs=None):
    """An intermediate node of an op written as several graph ops."""
    x = inputs[0]
    return c.b.node(op, inputs, c.b.types[x], attrs, f"{c.node.name}_{op}")


def _rsqrt(c, a):
    x = c.v(a["self"])
    return c.out("div", [c.v(1.0, x), _composite(c, "sqrt", [x])])


def _abs(c, a):
    x = c.v(a["self"])
    return c.out("maximum", [x, _composite(c, "neg", [x])])


def _sum(c, a):
    x = c.v(a["self"])
    shape = c.b.types[x].shape
    axes = tuple(sorted(int(d) % len(shape) for d in (a["dim"] or range(len(shape)))))
    mean = c.b.node("mean", [x], _type(c.node.meta["val"]), {"axes": axes, "keepdims": bool(a["keepdim"])},
                    f"{c.node.name}_mean")
    count = int(np.prod([shape[i] for i in axes], dtype=np.int64))
    return c.out("mul", [mean, c.v(float(count), x)])


def _pow(c, a):
    x = c.v(a["self"])
    e = a["exponent"]
    if isinstance(e, numbers.Number) and e in (2, 3):  # x * x (* x), as PyTorch's CPU kernel computes these powers
        square = c.out("mul", [x, x])
        return square if e == 2 else c.out("mul", [square, x])
    return c.out("pow", [x, c.v(e, x)])


HANDLERS = {
    "convolution": _conv, "conv2d": _conv, "embedding": embedding, "addmm": _addmm, "linear": _linear,
    "mm": _matmul, "bmm": _matmul, "matmul": _matmul,
    "_native_batch_norm_legit_no_training": _batch_norm, "batch_norm": _batch_norm,
    "native_layer_norm": _layer_norm, "layer_norm": _layer_norm,
    "_softmax": _softmax, "softmax": _softmax, "split_with_sizes": split, "split": split,
    **{k: _guard_step(f) for k, f in (("eq", eq_scalar), ("logical_not", logical_not), ("any", any_dim),
                                      ("full_like", zeros_like), ("where", where_masked_softmax))},
    "max_pool2d_with_indices": _max_pool, "max_pool2d": _max_pool, "avg_pool2d": _avg_pool,
    "adaptive_avg_pool2d": _adaptive_avg_pool, "mean": _mean,
    "view": _reshape, "reshape": _reshape, "_unsafe_view": _reshape, "flatten": _reshape,
    "squeeze": _reshape, "unsqueeze": _reshape,
    "permute": _permute, "transpose": _permute, "t": _permute,
    "clone": _identity, "dropout": _identity, "alias": _identity, "contiguous": _identity, "detach": _identity,
    "lift_fresh_copy": _identity, "expand": _expand,
    "hardtanh": _clip, "clamp": _clip,
    "leaky_relu": lambda c, a: c.out("leaky_relu", [c.v(a["self"])], {"alpha": float(a["negative_slope"])}),
    "gelu": lambda c, a: c.out("gelu", [c.v(a["self"])], {"approximate": str(a["approximate"])}),
    "relu6": lambda c, a: c.out("clip", [c.v(a["self"])], {"min": 0.0, "max": 6.0}),
    **{n: _unary(n) for n in ("relu", "sigmoid", "tanh", "silu", "hardswish", "exp", "sqrt", "neg", "erf", "abs",
                              "log", "floor", "ceil", "round", "sin", "cos", "reciprocal")},
    **{n: _binary(n) for n in ("add", "sub", "mul", "div", "maximum", "minimum")},
    "pow": _pow, "cat": concat, "slice": _slice, "constant_pad_nd": _pad, "_to_copy": _to_copy, "rsqrt": _rsqrt,
    "abs": _abs, "sum": _sum, **QUANTIZED_HANDLERS,
}
# Ops that only check metadata at run time: nothing to compute.
SKIPPED = {"_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range_for_size", "_assert_async"}
SUPPORTED = tuple(f"aten.{n}" for n in HANDLERS)
MULTI_OUTPUT = {"_native_batch_norm_legit_no_training", "native_layer_norm", "max_pool2d_with_indices"}


def _bind(node) -> dict:
    """The fx node's arguments by schema name, defaults filled in."""
    schema = node.target._schema
    out = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(node.args) and not arg.kwarg_only:
            out[arg.name] = node.args[i]
        elif arg.name in node.kwargs:
            out[arg.name] = node.kwargs[arg.name]
        elif arg.has_default_value():
            out[arg.name] = arg.default_value
        else:
            out[arg.name] = None
    return out


def _getitem(c: _Ctx, node):
    src, index = node.args
    got = c.env[src.name]
    if isinstance(got, list):  # the parts of a split
        return got[index]
    if not isinstance(got, tuple) or index != 0:
        raise unsupported("from_torch", f"getitem[{index}]", node.name, SUPPORTED,
                          f"only output 0 of {', '.join(sorted(MULTI_OUTPUT))} is supported")
    return got[0]


def _convert(c: _Ctx, node):
    op = getattr(node.target, "overloadpacket", None)
    name = getattr(op, "__name__", None) if op is not None else None
    if name in SKIPPED:
        return None
    folded = None if name in QUANTIZED_HANDLERS else fold_constant(c, node)  # a weight's QDQ stays visible
    if folded is not None:
        return folded
    if name not in HANDLERS:
        raise unsupported("from_torch", str(node.target), node.name, SUPPORTED)
    try:
        value = HANDLERS[name](c, _bind(node))
    except TilewrightError:
        raise
    except Exception as e:  # noqa: BLE001 - a form of the op the mapping did not foresee: say which, do not crash
        raise unsupported("from_torch", str(node.target), node.name, SUPPORTED, f"{type(e).__name__}: {e}") from e
    return (value,) if name in MULTI_OUTPUT else value


def from_torch(module, example_inputs, decompose: bool = True, name: str | None = None):
    """The graph of `module` called on `example_inputs` (a tuple/list of tensors, or one tensor); the module is
    put in eval mode and its weights copied, so later changes to it do not reach the graph.

    decompose=True reads core ATen (after run_decompositions); False reads the
    export's ATen ops as they are (linear, conv2d, batch_norm, ...).
    `module` may also be a `torch.export.ExportedProgram` (its own example inputs fix the shapes;
    `example_inputs` is then ignored)."""
    import operator

    import torch

    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    ep = exported(module, example_inputs, decompose)
    sig = ep.graph_signature
    state = {**ep.state_dict, **ep.constants}
    lifted = {**sig.inputs_to_parameters, **sig.inputs_to_buffers, **sig.inputs_to_lifted_tensor_constants}
    c = _Ctx(name or (type(ep.module()).__name__ if module is ep else type(module).__name__))
    n_user = 0
    outputs = []
    for node in ep.graph.nodes:
        c.node = node
        if node.op == "placeholder":
            if node.name in lifted:
                if node.users:
                    t = state[lifted[node.name]]
                    c.env[node.name] = c.b.constant(t.detach().cpu().numpy(), lifted[node.name])
            else:
                c.env[node.name] = c.b.add_input(f"input{n_user}", _type(node.meta["val"]))
                n_user += 1
        elif node.op == "call_function":
            if node.target is operator.getitem:
                if node.users:
                    c.env[node.name] = _getitem(c, node)
            else:
                c.env[node.name] = _convert(c, node)
        elif node.op == "output":
            outputs = [c.v(a) for a in torch.utils._pytree.tree_leaves(node.args[0])]
        else:
            raise unsupported("from_torch", node.op, node.name, SUPPORTED, "not a function call")
    return c.b.build(outputs)

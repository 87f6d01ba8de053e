"""ONNX frontend: `from_onnx(model_or_path) -> Graph` through the `onnx`
package, default-domain opsets 13 to the newest the installed onnx knows
(28 with the pinned onnx 1.23; `supported_opsets`).

Types come from onnx.shape_inference (the graph's own `infer_node` where ONNX
leaves a shape unknown). Initializers and Constant nodes become constants;
shape arithmetic on known values (Shape/Gather/Unsqueeze/Concat/...) is folded
at import (`onnx_fold`). A MatMul or Gemm whose weight is a constant becomes
dense with the weight stored [N, K]. Graph inputs keep their ONNX names
(made identifier-safe). An op outside `SUPPORTED` raises UnsupportedOpError
naming the op, the node and the supported set."""

from __future__ import annotations

import numpy as np

from ...errors import TilewrightError
from ..infer import infer_node
from ..integer_ops import CAST_DTYPES
from ..ir import Node, TensorType
from ..opset import FLOAT_ONLY_UNARY
from .builder import GraphBuilder, UnsupportedOpError, unsupported
from .onnx_activations import ACTIVATION_HANDLERS
from .onnx_attention import ATTENTION_HANDLERS
from .onnx_bitwise import BITWISE_HANDLERS
from .onnx_conv import conv
from .onnx_conv_transpose import conv_transpose
from .onnx_dft import DFT_HANDLERS
from .onnx_einsum import EINSUM_HANDLERS
from .onnx_fold import fold, fold_node, reshape_shape
from .onnx_grid_sample import GRID_HANDLERS
from .onnx_inputs import fixed_input_shapes
from .onnx_linear_attention import LINEAR_ATTENTION_HANDLERS
from .onnx_logic import LOGIC_HANDLERS
from .onnx_losses import LOSS_HANDLERS
from .onnx_misc_ops import MISC_HANDLERS
from .onnx_normalization import NORM_HANDLERS
from .onnx_opsets import REVIEWED_OPSET, converted_to_supported, newer_attributes
from .onnx_pool import POOL_HANDLERS
from .onnx_quantized import QUANTIZED_HANDLERS, quantized_nk
from .onnx_recurrent import RECURRENT_HANDLERS
from .onnx_reduce import REDUCE_HANDLERS
from .onnx_resize import resize
from .onnx_scatter import SCATTER_HANDLERS
from .onnx_shape_ops import SHAPE_HANDLERS, pad_by_index
from .onnx_tensor_ops import TENSOR_HANDLERS
from .onnx_trig import TRIG_HANDLERS

_UNARY = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Sqrt": "sqrt", "Erf": "erf", "Exp": "exp",
          "Neg": "neg", "Abs": "abs", "Log": "log", "Floor": "floor", "Ceil": "ceil", "Round": "round", "Sin": "sin",
          "Cos": "cos", "Reciprocal": "reciprocal"}
_NEWER_HANDLED = {"SpaceToDepth": {"mode"}}  # attributes past opset 21 that a handler reads
_VARIADIC = ("Max", "Min")  # one or more inputs
_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Max": "maximum",
           "Min": "minimum"}


class _Importer:
    def __init__(self, model, name, input_values=None):
        import onnx
        from onnx import numpy_helper, shape_inference

        self.onnx, self.nph = onnx, numpy_helper
        try:
            model = shape_inference.infer_shapes(model, data_prop=True)
        except Exception:  # noqa: BLE001 - inference is a help, not a requirement: infer_node fills gaps
            pass
        self.model, self.g = model, model.graph
        self.b = GraphBuilder(name or self.g.name or "onnx")
        self.env: dict[str, str] = {}  # ONNX value -> graph value
        self.known: dict[str, np.ndarray] = {n.name: numpy_helper.to_array(n) for n in self.g.initializer}
        self.quantized: dict[str, tuple] = {}  # DequantizeLinear output -> (its constant integers, params, axis)
        self.onnx_types: dict[str, TensorType] = {}
        for vi in [*self.g.input, *self.g.value_info, *self.g.output]:
            t = self._tensor_type(vi)
            if t is not None:
                self.onnx_types[vi.name] = t
        self.node = None
        self.opset = REVIEWED_OPSET
        self.input_values = dict(input_values or {})  # example values of graph inputs, for `const`
        self.guards: dict[str, np.ndarray] = {}  # graph inputs whose example value fixed a shape

    def _tensor_type(self, vi) -> TensorType | None:
        tt = vi.type.tensor_type
        if not tt.HasField("shape") or any(not d.HasField("dim_value") for d in tt.shape.dim):
            return None
        dtype = np.dtype(self.onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)).name
        return TensorType(tuple(d.dim_value for d in tt.shape.dim), dtype)

    # values ----------------------------------------------------------------------------------------------
    def fail(self, why=""):
        return unsupported("from_onnx", self.node.op_type, self.node.name or self.node.output[0], SUPPORTED, why)

    def value(self, onnx_name: str) -> str:
        if onnx_name not in self.env:
            if onnx_name not in self.known:
                raise self.fail(f"input '{onnx_name}' is neither a graph input nor produced earlier")
            self.env[onnx_name] = self.b.constant(self.known[onnx_name], onnx_name)
        return self.env[onnx_name]

    def type_of(self, onnx_name: str) -> TensorType | None:
        if onnx_name in self.known:
            a = self.known[onnx_name]
            return TensorType(a.shape, a.dtype.name)
        if onnx_name in self.env:
            return self.b.types[self.env[onnx_name]]
        return self.onnx_types.get(onnx_name)

    def const(self, onnx_name: str, what: str) -> np.ndarray:
        """A constant's array; a graph input's example value, which every call must then repeat
        (the module checks it: it fixed a shape or an attribute here)."""
        if onnx_name in self.known:
            return self.known[onnx_name]
        example = self.input_values.get(onnx_name)
        if example is not None and onnx_name in self.env and np.asarray(example).dtype.kind in "iubf":
            self.guards[onnx_name] = np.array(example)
            return self.guards[onnx_name]
        raise self.fail(f"{what} ('{onnx_name}') must be a constant, or a graph input given a value "
                        "in example_inputs (then fixed: every call must pass the same value)")

    def emit(self, op, inputs, attrs=None, out: str | None = None) -> str:
        """Append a graph node; its type is ONNX's for `out` when static, else the graph's own inference."""
        hint = out or (self.node.output[0] + "_" + op)
        t = self.onnx_types.get(out) if out else None
        if t is None:
            probe = Node(op, inputs, ("probe",), dict(attrs or {}), name=hint)
            t = infer_node(probe, [self.b.types[v] for v in inputs])[0]
        v = self.b.node(op, inputs, t, attrs, hint)
        if out:
            self.env[out] = v
        return v

    # ops -------------------------------------------------------------------------------------------------
    def attrs(self, node) -> dict:
        out = {}
        for a in node.attribute:
            v = self.onnx.helper.get_attribute_value(a)
            if isinstance(v, bytes):
                v = v.decode()
            elif isinstance(v, self.onnx.TensorProto):
                v = self.nph.to_array(v)
            out[a.name] = v
        return out

    def run(self):
        for inp in self.g.input:
            if inp.name in self.known:
                continue  # an initializer listed as an input (IR version < 4)
            t = self.onnx_types.get(inp.name)
            if t is None:
                raise UnsupportedOpError(f"from_onnx: input '{inp.name}' needs a static shape; pass "
                                         f"input_shapes={{'{inp.name}': (...)}}")
            if t.dtype not in CAST_DTYPES:
                raise UnsupportedOpError(f"from_onnx: input '{inp.name}' has element type {t.dtype}; supported: "
                                         f"{', '.join(CAST_DTYPES)}")
            self.env[inp.name] = self.b.add_input(inp.name, t)
            if 0 in t.shape:  # no values: known as they are, whatever a call passes
                self.known[inp.name] = np.zeros(t.shape, t.dtype)
        for node in self.g.node:
            self.node = node
            if node.domain not in ("", "ai.onnx"):
                raise self.fail(f"domain '{node.domain}'")
            a = self.attrs(node)
            newer = newer_attributes(node.op_type, self.opset) & set(a) - _NEWER_HANDLED.get(node.op_type, set()) \
                if self.opset > REVIEWED_OPSET else ()
            if newer:
                raise self.fail(f"attribute {', '.join(sorted(newer))} (opset {self.opset}) is newer than the opset "
                                f"{REVIEWED_OPSET} definition this frontend follows")
            ins = list(node.input)
            if node.op_type == "Constant":
                self.known[node.output[0]] = _constant(a, self)
                continue
            if fold_node(self, node, ins, a):
                continue
            handler = _HANDLERS.get(node.op_type)
            if handler is None:
                raise self.fail()
            try:
                handler(self, node, ins, a)
            except TilewrightError:
                raise
            except Exception as e:  # noqa: BLE001 - a form of the op the mapping did not foresee: name it
                raise self.fail(f"{type(e).__name__}: {e}") from e
        graph = self.b.build([self.value(o.name) for o in self.g.output])
        graph.value_guards = {self.env[k]: v for k, v in self.guards.items()}
        return graph


def _constant(a, imp):
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if key in a:
            return np.asarray(a[key], dtype=np.int64 if "int" in key else None)
    raise imp.fail("a Constant needs value, value_float(s) or value_int(s)")


def _unary(op):
    def handler(imp, n, ins, a):
        x = imp.value(ins[0])
        if op in FLOAT_ONLY_UNARY and not np.issubdtype(np.dtype(imp.b.types[x].dtype), np.floating):
            raise imp.fail(f"a {imp.b.types[x].dtype} input (only floating point)")
        return imp.emit(op, [x], out=n.output[0])
    return handler


def _binary(op):
    return lambda imp, n, ins, a: imp.emit(op, [imp.value(ins[0]), imp.value(ins[1])], out=n.output[0])


def _variadic(op):
    """Max / Min of one or more inputs (broadcasting), folded left."""
    def handler(imp, n, ins, a):
        values = [imp.value(i) for i in ins if i]
        if len(values) == 1:
            return _identity(imp, n, ins, a)
        acc = values[0]
        for k, v in enumerate(values[1:], 1):
            acc = imp.emit(op, [acc, v], out=n.output[0] if k == len(values) - 1 else None)
    return handler


def _dropout(imp, n, ins, a):
    """The identity with an all-true mask: inference, or training with a constant ratio of 0; a random mask
    (training with a ratio above 0) is refused."""
    training = len(ins) > 2 and ins[2] and bool(np.asarray(imp.const(ins[2], "training_mode")).any())
    if training:
        ratio = imp.const(ins[1], "the ratio") if len(ins) > 1 and ins[1] else 0.5
        if float(np.asarray(ratio).reshape(())) != 0.0:
            raise imp.fail("training mode with a ratio above 0 (random masks); valid: inference, or a constant "
                           "ratio of 0")
    if len(n.output) > 1 and n.output[1]:
        imp.known[n.output[1]] = np.ones(imp.type_of(ins[0]).shape, np.bool_)
    _identity(imp, n, ins, a)


def _identity(imp, n, ins, a):
    imp.env[n.output[0]] = imp.value(ins[0])


def _weight_nk(imp, name, transposed: bool, scale: float = 1.0) -> str:
    """A dense weight [N, K] from B ([K, N] unless `transposed`), transposed and scaled at import when constant."""
    if scale == 1.0 and (quantized := quantized_nk(imp, name, transposed)) is not None:
        return quantized
    if name in imp.known:
        w = imp.known[name]
        return imp.b.constant((w if transposed else w.T) * np.float32(scale), name + ("" if transposed else "_t"))
    v = imp.value(name)
    if not transposed:
        v = imp.emit("permute", [v], {"dims": (1, 0)})
    if scale != 1.0:
        v = imp.emit("mul", [v, imp.b.constant(np.float32(scale), "alpha")])
    return v


def _gemm(imp, n, ins, a):
    x = imp.value(ins[0])
    if a.get("transA", 0):
        x = imp.emit("permute", [x], {"dims": (1, 0)})
    w = _weight_nk(imp, ins[1], bool(a.get("transB", 0)), a.get("alpha", 1.0))
    vals = [x, w]
    beta, n_out = a.get("beta", 1.0), imp.b.types[w].shape[0]
    late_bias = None
    if len(ins) > 2 and ins[2]:
        c = imp.known.get(ins[2])
        q = imp.quantized.get(ins[2])
        if c is not None and c.size == n_out:
            vals.append(imp.b.constant(c.reshape(n_out) * np.float32(beta), ins[2]))
        elif q is not None and beta == 1.0 and imp.known[q[0]].shape == (n_out,):  # a QDQ model's int32 bias
            vals.append(imp.value(ins[2]))
        else:
            late_bias = imp.value(ins[2])
            if beta != 1.0:
                late_bias = imp.emit("mul", [late_bias, imp.b.constant(np.float32(beta), "beta")])
    if late_bias is None:
        imp.emit("dense", vals, out=n.output[0])
    else:
        imp.emit("add", [imp.emit("dense", vals), late_bias], out=n.output[0])


def _matmul(imp, n, ins, a):
    ranks = [len(imp.type_of(i).shape) if imp.type_of(i) else None for i in ins[:2]]
    if 1 in ranks:
        return _vector_matmul(imp, n, ins, ranks)
    b = imp.known.get(ins[1])
    quantized = quantized_nk(imp, ins[1], transposed=False)
    if quantized is not None:
        imp.emit("dense", [imp.value(ins[0]), quantized], out=n.output[0])
    elif b is not None and b.ndim == 2:
        imp.emit("dense", [imp.value(ins[0]), imp.b.constant(b.T, ins[1] + "_t")], out=n.output[0])
    else:
        imp.emit("matmul", [imp.value(ins[0]), imp.value(ins[1])], out=n.output[0])


def _vector_matmul(imp, n, ins, ranks):
    """numpy.matmul with a 1-D operand: a vector is a one-row (left) or one-column (right) matrix, whose unit
    axis the result drops."""
    a, b = imp.value(ins[0]), imp.value(ins[1])
    sa, sb = imp.b.types[a].shape, imp.b.types[b].shape
    if ranks[0] == 1:
        a = imp.emit("reshape", [a], {"shape": (1, sa[0])})
    if ranks[1] == 1:
        b = imp.emit("reshape", [b], {"shape": (sb[0], 1)})
    y = imp.emit("matmul", [a, b])
    shape = imp.b.types[y].shape
    keep = [d for k, d in enumerate(shape) if not ((ranks[0] == 1 and k == len(shape) - 2)
                                                   or (ranks[1] == 1 and k == len(shape) - 1))]
    imp.emit("reshape", [y], {"shape": tuple(keep)}, n.output[0])


def _reshape_to(imp, n, ins, shape):
    x = imp.value(ins[0])
    if imp.b.types[x].shape == tuple(shape):
        imp.env[n.output[0]] = x
    else:
        imp.emit("reshape", [x], {"shape": tuple(int(d) for d in shape)}, n.output[0])


def _reshape(imp, n, ins, a):
    target = imp.const(ins[1], "the target shape")
    _reshape_to(imp, n, ins, reshape_shape(imp.type_of(ins[0]).shape, target.ravel(), a.get("allowzero", 0)))


def _shape_change(imp, n, ins, a):
    """Flatten, Squeeze, Unsqueeze on a tensor: the output shape, folded on the input's shape."""
    shape = imp.type_of(ins[0]).shape
    rest = [imp.const(i, "its axes") if i else None for i in ins[1:]]
    out = fold(n.op_type, a, [np.zeros(shape, np.float32), *rest], [shape])
    if out is None:
        raise imp.fail("its axes must be constant")
    _reshape_to(imp, n, ins, out[0].shape)


def _transpose(imp, n, ins, a):
    rank = len(imp.type_of(ins[0]).shape)
    dims = tuple(int(d) % rank for d in a.get("perm", range(rank - 1, -1, -1)))
    if dims == tuple(range(rank)):
        return _identity(imp, n, ins, a)
    imp.emit("permute", [imp.value(ins[0])], {"dims": dims}, n.output[0])


def _clip(imp, n, ins, a):
    present = [ins[k] if len(ins) > k and ins[k] else None for k in (1, 2)]
    if all(i is None or i in imp.known for i in present):
        bound = [float(imp.known[i]) if i else None for i in present]
        return imp.emit("clip", [imp.value(ins[0])], {"min": bound[0], "max": bound[1]}, n.output[0])
    # bounds given at run time: max(x, min), then min(., max) (ONNX applies min first)
    y, (lo, hi) = imp.value(ins[0]), present
    if lo:
        y = imp.emit("maximum", [y, imp.value(lo)], out=None if hi else n.output[0])
    if hi:
        imp.emit("minimum", [y, imp.value(hi)], out=n.output[0])


def _pad(imp, n, ins, a):
    mode = a.get("mode", "constant")
    if mode not in ("constant", "edge", "reflect", "wrap"):
        raise imp.fail(f"pad mode '{mode}' (valid: constant, edge, reflect, wrap)")
    rank = len(imp.type_of(ins[0]).shape)
    pads = [int(p) for p in imp.const(ins[1], "pads").ravel()]
    value = float(np.asarray(imp.const(ins[2], "the pad value")).reshape(())) if len(ins) > 2 and ins[2] else 0.0
    if len(ins) > 3 and ins[3]:
        axes = [int(x) % rank for x in imp.const(ins[3], "axes").ravel()]
        full = [0] * (2 * rank)
        for j, ax in enumerate(axes):
            full[ax], full[rank + ax] = pads[j], pads[len(axes) + j]
        pads = full
    if not any(pads):
        return _identity(imp, n, ins, a)
    if mode != "constant":
        return pad_by_index(imp, n, imp.value(ins[0]), pads, mode)
    imp.emit("pad", [imp.value(ins[0])], {"pads": tuple(pads), "value": value}, n.output[0])


def _concat(imp, n, ins, a):
    rank = len(imp.type_of(ins[0]).shape)
    imp.emit("concat", [imp.value(i) for i in ins if i], {"axis": a["axis"] % rank}, n.output[0])


def _cast(imp, n, ins, a):
    """Cast to attribute `to`, or (CastLike) to the dtype of the second input."""
    if n.op_type == "CastLike":
        target = imp.type_of(ins[1])
        if target is None:
            raise imp.fail("the target input needs a known type")
        to = np.dtype(target.dtype)
    else:
        to = np.dtype(imp.onnx.helper.tensor_dtype_to_np_dtype(a["to"]))
    src = imp.b.types[imp.value(ins[0])].dtype
    if to == np.dtype(src):
        return _identity(imp, n, ins, a)
    if to.name not in CAST_DTYPES:
        raise imp.fail(f"a cast to {to.name}; valid: {', '.join(CAST_DTYPES)}")
    imp.emit("cast", [imp.value(ins[0])], {"dtype": to.name}, n.output[0])


_HANDLERS = {
    "Conv": conv, "Gemm": _gemm, "MatMul": _matmul, **POOL_HANDLERS, **REDUCE_HANDLERS, **LOGIC_HANDLERS,
    **SHAPE_HANDLERS, **TENSOR_HANDLERS, **EINSUM_HANDLERS, **TRIG_HANDLERS, **SCATTER_HANDLERS, **MISC_HANDLERS,
    **NORM_HANDLERS, **LOSS_HANDLERS, **BITWISE_HANDLERS, **ATTENTION_HANDLERS, **RECURRENT_HANDLERS,
    **DFT_HANDLERS, **GRID_HANDLERS, **LINEAR_ATTENTION_HANDLERS,
    "Softmax": lambda imp, n, ins, a: imp.emit("softmax", [imp.value(ins[0])], {"axis": a.get("axis", -1)},
                                               n.output[0]),
    "LeakyRelu": lambda imp, n, ins, a: imp.emit("leaky_relu", [imp.value(ins[0])], {"alpha": a.get("alpha", 0.01)},
                                                 n.output[0]),
    "Gelu": lambda imp, n, ins, a: imp.emit("gelu", [imp.value(ins[0])], {"approximate": a.get("approximate", "none")},
                                            n.output[0]),
    "Clip": _clip, "Pad": _pad, "Concat": _concat, "Cast": _cast, "CastLike": _cast, **ACTIVATION_HANDLERS,
    **QUANTIZED_HANDLERS,
    "ConvTranspose": conv_transpose, "Resize": resize,
    "Reshape": _reshape, "Flatten": _shape_change, "Squeeze": _shape_change, "Unsqueeze": _shape_change,
    "Transpose": _transpose, "Identity": _identity, "Dropout": _dropout,
    **{k: _unary(v) for k, v in _UNARY.items()},
    **{k: (_variadic if k in _VARIADIC else _binary)(v) for k, v in _BINARY.items()},
}
SUPPORTED = tuple(sorted({*_HANDLERS, "Constant", "Shape", "Size"}))


def from_onnx(model_or_path, name: str | None = None, input_shapes: dict | None = None,
              input_values: dict | None = None):
    """The graph of an ONNX model (a ModelProto, or a path to a .onnx file); `input_shapes` maps input names to
    static shapes for models exported with dynamic dimensions. `input_values` maps input names to example
    arrays: an input that fixes a shape or an attribute (a Reshape's shape, a reduction's axes, Resize's scales) takes
    its example's value, listed in the graph's `value_guards` for the module to check on every call."""
    import onnx

    model = model_or_path if isinstance(model_or_path, onnx.ModelProto) else onnx.load(str(model_or_path))
    if input_shapes:
        model = fixed_input_shapes(model, input_shapes)
    model, version = converted_to_supported(model)
    importer = _Importer(model, name, input_values)
    importer.opset = version
    return importer.run()

"""The graph's operator vocabulary: what each op reads, its attributes and
their defaults, and its fusion pattern (TVM section 2: injective, reduction,
complex-out-fusable, opaque). Frontends map ATen/ONNX ops onto these names;
shape inference (`infer.py`) and lowering to te (`lower_te.py`) cover exactly
this set. Layout is NCHW unless an op's `layout` attribute says otherwise: conv2d
and pooling with layout 'NCHW{b}c' read and write packed 5-D data (a conv's
weight then is OIHW{ib}i{ob}o), see `graph/blocked.py` and `graph/layout.py`."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Pattern(enum.IntEnum):
    """TVM's fusion classes, ordered as TVM orders them (lower fuses more freely)."""
    INJECTIVE = 1  # elementwise, broadcast, reshape, permute, pad, concat
    REDUCTION = 2  # pooling, softmax, layer norm, mean
    COMPLEX = 3  # conv, dense, matmul: complex-out-fusable (an elementwise epilogue fuses into them)
    OPAQUE = 4  # not fused (constants, anything we cannot fuse)


@dataclass(frozen=True)
class OpSpec:
    name: str
    inputs: tuple[str, ...]  # roles, in order; a trailing "?" marks an optional input
    attrs: dict = field(default_factory=dict)  # attribute -> default (None: required)
    pattern: Pattern = Pattern.INJECTIVE
    doc: str = ""

    @property
    def min_inputs(self) -> int:
        return sum(1 for r in self.inputs if not r.endswith("?"))


_UNARY = {
    "relu": "max(x, 0)", "sigmoid": "1 / (1 + exp(-x))", "tanh": "tanh(x)", "silu": "x * sigmoid(x)",
    "hardswish": "x * relu6(x + 3) / 6", "exp": "e^x", "sqrt": "sqrt(x)", "neg": "-x", "erf": "erf(x)",
    "abs": "|x|", "log": "ln(x)", "floor": "floor(x)", "ceil": "ceil(x)", "round": "x rounded, halves to even",
    "sin": "sin(x)", "cos": "cos(x)", "reciprocal": "1 / x",
}
FLOAT_ONLY_UNARY = frozenset({"abs", "log", "floor", "ceil", "round", "sin", "cos", "reciprocal"})
_BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "pow")
BROADCASTING = frozenset(_BINARY)  # binary ops whose inputs broadcast as NumPy's do

_SPECS = [
    OpSpec("constant", (), {}, Pattern.OPAQUE, "a weight or other fixed array (Graph.constants)"),
    OpSpec("conv2d", ("x", "weight", "bias?"),
           {"stride": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1), "groups": 1},
           Pattern.COMPLEX, "NCHW x, OIHW weight; padding is (top, left, bottom, right)"),
    OpSpec("conv_transpose2d", ("x", "weight", "bias?"),
           {"stride": (1, 1), "padding": (0, 0), "output_padding": (0, 0), "dilation": (1, 1), "groups": 1},
           Pattern.OPAQUE, "F.conv_transpose2d: NCHW x, weight [C, O/groups, KH, KW]; symmetric padding"),
    OpSpec("embedding", ("weight", "ids"), {"negative_wraps": False}, Pattern.OPAQUE,
           "weight[V, D] rows at integer ids -> ids.shape + (D,); ids outside [0, V) (or [-V, V) where negative ids "
           "wrap, as ONNX Gather) are refused by the Module before any kernel runs"),
    OpSpec("dense", ("x", "weight", "bias?"), {}, Pattern.COMPLEX,
           "x[..., K] @ weight[N, K].T + bias[N] (torch.nn.Linear)"),
    OpSpec("matmul", ("a", "b"), {}, Pattern.COMPLEX,
           "a[..., M, K] @ b[..., K, N], leading dims broadcast (torch.matmul)"),
    OpSpec("batch_norm", ("x", "weight", "bias", "mean", "var"), {"eps": 1e-5}, Pattern.INJECTIVE,
           "inference batch norm over axis 1: (x - mean) / sqrt(var + eps) * weight + bias"),
    OpSpec("layer_norm", ("x", "weight?", "bias?"), {"axes": 1, "eps": 1e-5}, Pattern.REDUCTION,
           "normalize over the last `axes` dimensions"),
    OpSpec("softmax", ("x",), {"axis": -1, "masked_rows_zero": False}, Pattern.REDUCTION,
           "masked_rows_zero: a row that is -inf throughout gives zeros (attention's fully masked rows)"),
    OpSpec("max_pool2d", ("x",),
           {"kernel": None, "stride": None, "padding": (0, 0, 0, 0), "dilation": (1, 1), "ceil_mode": False},
           Pattern.REDUCTION),
    OpSpec("avg_pool2d", ("x",),
           {"kernel": None, "stride": None, "padding": (0, 0, 0, 0), "ceil_mode": False, "count_include_pad": True},
           Pattern.REDUCTION),
    OpSpec("mean", ("x",), {"axes": None, "keepdims": True}, Pattern.REDUCTION,
           "mean over `axes` (global average pooling is mean over (2, 3))"),
    OpSpec("leaky_relu", ("x",), {"alpha": 0.01}, Pattern.INJECTIVE),
    OpSpec("gelu", ("x",), {"approximate": "none"}, Pattern.INJECTIVE, "approximate: 'none' (erf) or 'tanh'"),
    OpSpec("clip", ("x",), {"min": None, "max": None}, Pattern.INJECTIVE, "clamp; ReLU6 is clip(0, 6)"),
    OpSpec("reshape", ("x",), {"shape": None}, Pattern.INJECTIVE, "the same elements in row-major order"),
    OpSpec("permute", ("x",), {"dims": None}, Pattern.INJECTIVE),
    OpSpec("pad", ("x",), {"pads": None, "value": 0.0}, Pattern.INJECTIVE,
           "pads: (before_0, ..., before_n-1, after_0, ..., after_n-1)"),
    OpSpec("concat", ("x*",), {"axis": 0}, Pattern.INJECTIVE, "x*: one or more inputs"),
    OpSpec("slice", ("x",), {"begin": None, "end": None, "step": None}, Pattern.INJECTIVE,
           "x[begin[d]:end[d]:step[d]] in every dimension d; 0 <= begin < end <= size, step >= 1"),
    OpSpec("winograd_input", ("x",), {"padding": (1, 1, 1, 1)}, Pattern.COMPLEX,
           "NCHW{b}c x -> V[36, N * tiles, C]: every 6x6 tile of a 3x3 convolution's input, B^T d B "
           "(graph/winograd.py writes it)"),
    OpSpec("winograd_output", ("m", "bias?"), {"shape": None}, Pattern.COMPLEX,
           "M[36, N * tiles, O] -> the NCHW{b}c output `shape`: A^T M A per 4x4 tile, plus bias"),
    OpSpec("quantize", ("x", "scale", "zero_point"), {"axis": 1}, Pattern.INJECTIVE,
           "ONNX QuantizeLinear: saturate(round_half_even(x / scale) + zero_point) in zero_point's dtype; scale "
           "and zero_point scalars or per `axis`"),
    OpSpec("dequantize", ("x", "scale", "zero_point"), {"axis": 1}, Pattern.INJECTIVE,
           "ONNX DequantizeLinear: float32(x - zero_point) * scale"),
    OpSpec("qconv2d", ("x", "weight", "multiplier", "bias?"),
           {"stride": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1), "groups": 1, "pad_value": 0,
            "zero_point": 0, "relu": False, "out_dtype": "uint8"}, Pattern.COMPLEX,
           "int8 conv: acc = sum(x * weight) in int32 over x padded with pad_value, + bias[o]; out = "
           "saturate(round_half_even(float32(acc) * multiplier[o]) + zero_point), at least zero_point with relu; "
           "out_dtype float32: float32(acc) * multiplier[o] (the dequantized result, relu at 0) "
           "(graph/quantized_ops.py)"),
    OpSpec("qdense", ("x", "weight", "multiplier", "bias?"),
           {"zero_point": 0, "relu": False, "out_dtype": "uint8"}, Pattern.COMPLEX,
           "int8 dense: acc[..., n] = sum_k x[..., k] * W[n, k] in int32, + bias[n], requantized as qconv2d; the "
           "weight stored [N/8, K/4, 8, 4] (graph/quantized_ops.py)"),
    OpSpec("cast", ("x",), {"dtype": None}, Pattern.INJECTIVE,
           "NumPy's astype between integer, bool and float dtypes; float -> integer is refused (graph/integer_ops.py)"),
    OpSpec("reduce_max", ("x",), {"axes": None, "keepdims": True}, Pattern.REDUCTION, "max over `axes`"),
    OpSpec("reduce_min", ("x",), {"axes": None, "keepdims": True}, Pattern.REDUCTION, "min over `axes`"),
    OpSpec("reduce_sum", ("x",), {"axes": None, "keepdims": True}, Pattern.REDUCTION,
           "sum over `axes` (graph/reduce_ops.py)"),
    OpSpec("reduce_prod", ("x",), {"axes": None, "keepdims": True}, Pattern.REDUCTION, "product over `axes`"),
    OpSpec("cumsum", ("x",), {"axis": 0, "exclusive": 0, "reverse": 0}, Pattern.OPAQUE,
           "ONNX CumSum along `axis` (graph/reduce_ops.py)"),
    OpSpec("cumprod", ("x",), {"axis": 0, "exclusive": 0, "reverse": 0}, Pattern.OPAQUE,
           "ONNX CumProd along `axis`, as cumsum with products"),
    OpSpec("dynamic_scale", ("low", "high"), {}, Pattern.INJECTIVE,
           "ONNX DynamicQuantizeLinear's y_scale from x's range widened to hold 0: (high - low) / 255, 1 where "
           "that is 0"),
    OpSpec("matmul_integer", ("x", "weight", "bias?"), {}, Pattern.COMPLEX,
           "uint8 x[..., K] times the int8 weight stored [N/8, K/4, 8, 4] as qdense's, + bias[N], in int32 "
           "(ONNX MatMulInteger with the zero points folded by the frontend)"),
    OpSpec("layout_transform", ("x",), {"src": None, "dst": None}, Pattern.INJECTIVE,
           "re-pack between 'NCHW' and 'NCHW{b}c' (graph/layout.py inserts these)"),
    *(OpSpec(n, ("a", "b"), {}, Pattern.INJECTIVE, "-> bool, NumPy broadcasting (graph/logic_ops.py)")
      for n in ("equal", "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or",
                "logical_xor")),
    OpSpec("logical_not", ("x",), {}, Pattern.INJECTIVE, "bool -> bool"),
    *(OpSpec(n, ("a", "b"), {}, Pattern.INJECTIVE, "integers of one dtype, NumPy broadcasting (graph/bitwise_ops.py)")
      for n in ("bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift")),
    OpSpec("bitwise_not", ("x",), {}, Pattern.INJECTIVE, "~x on an integer tensor"),
    OpSpec("take", ("x", "indices"), {"axis": 0}, Pattern.OPAQUE,
           "NumPy's take (ONNX Gather) at run-time indices (graph/gather_ops.py)"),
    OpSpec("take_along", ("x", "indices"), {"axis": 0}, Pattern.OPAQUE,
           "ONNX GatherElements (NumPy's take_along_axis)"),
    OpSpec("mod", ("a", "b"), {"fmod": 0}, Pattern.INJECTIVE,
           "integer remainder: fmod 1 with the dividend's sign, 0 with the divisor's (graph/integer_ops.py)"),
    OpSpec("truncdiv", ("a", "b"), {}, Pattern.INJECTIVE,
           "integer division rounding toward zero (ONNX's integer Div), NumPy broadcasting (graph/integer_ops.py)"),
    OpSpec("where", ("cond", "a", "b"), {}, Pattern.INJECTIVE, "a where cond holds, else b; NumPy broadcasting"),
    *(OpSpec(n, ("x",), {}, Pattern.INJECTIVE, d) for n, d in _UNARY.items()),
    *(OpSpec(n, ("a", "b"), {}, Pattern.INJECTIVE, "NumPy broadcasting") for n in _BINARY),
]

OPS: dict[str, OpSpec] = {s.name: s for s in _SPECS}


def spec(op: str, node: str = "") -> OpSpec:
    """The spec of `op`, or a ShapeError naming the node and the supported set."""
    from ..errors import ShapeError

    if op not in OPS:
        where = f"node '{node}': " if node else ""
        raise ShapeError(f"{where}unknown graph op '{op}'; supported: {', '.join(sorted(OPS))}")
    return OPS[op]

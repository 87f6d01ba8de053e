"""bfloat16 models on the CPU (`tw.compile(..., dtype="bfloat16")`): convolutions and dense layers
multiply bfloat16 operands and accumulate in float32, everything else computes in float32.

The pass rounds each eligible layer's constant weight to bfloat16 once, and each value such a layer
reads where that value is written (one `cast` per value). The layout pass packs such a
convolution's weight [O/ob, C/ib, KH, KW, ib/2, ob, 2] (each output lane's channel pair
contiguous, what AVX-512 BF16 `vdpbf16ps` reads) and fusion makes the cast the epilogue of the
layer before, so activations between convolutions are stored in bfloat16 only; a residual
addition reads its bfloat16 input widened inside its own kernel. Bias, activation functions,
residual additions, pooling and normalisation compute in float32, on the float32 accumulator.
Depthwise and grouped convolutions stay float32 (no channel reduction for a pair instruction to
sum); an odd channel count is zero-padded to even.

bfloat16 arrays are ml_dtypes' (ONNX and JAX use it), imported only for this path."""

from __future__ import annotations

import numpy as np

from ..errors import TilewrightError
from .ir import FreshNames, Graph, Node

PAIR = 2  # values a bf16 dot-product instruction sums per output lane


def bfloat16_dtype() -> np.dtype:
    """NumPy's bfloat16 (registered by ml_dtypes), or a clear error where ml_dtypes is missing."""
    try:
        import ml_dtypes
    except ImportError:
        raise TilewrightError("dtype='bfloat16' stores weights and activations as ml_dtypes bfloat16 arrays: "
                              "pip install ml_dtypes (the extra tilewright[bf16]), or pass dtype='float32'") from None
    return np.dtype(ml_dtypes.bfloat16)


def warn_without_bf16_dot(target) -> None:
    """A RuntimeWarning where `target` has no bfloat16 dot-product instruction: the pairs then run as
    float32 FMAs on widened values, and the model is slower than in float32 (docs/tensorize.md)."""
    if target.kind == "cpu" and "avx512_bf16" not in target.features:
        import warnings

        warnings.warn(f"dtype='bfloat16' on {target.isa} without AVX512-BF16: bfloat16 pairs run as float32 FMAs on "
                      "widened values, slower than the float32 model (ResNet-50 on AVX2: 0.84x); float32 is the "
                      "faster choice on this target", RuntimeWarning, stacklevel=3)


def _conv_eligible(graph: Graph, node: Node) -> bool:
    x = graph.type_of(node.inputs[0])
    w = graph.constants.get(node.inputs[1])
    return (x.dtype == "float32" and len(x.shape) == 4 and w is not None and w.ndim == 4
            and int(node.attr("groups", 1)) == 1 and not graph.is_constant(node.inputs[0]))


def _dense_eligible(graph: Graph, node: Node) -> bool:
    x = graph.type_of(node.inputs[0])
    w = graph.constants.get(node.inputs[1])
    return (x.dtype == "float32" and w is not None and w.ndim == 2 and w.shape[1] % PAIR == 0
            and not graph.is_constant(node.inputs[0]))


def _layer_inputs(graph: Graph) -> dict[str, int]:
    """The float32 values an eligible layer reads, each with the zero channels that make it even."""
    out: dict[str, int] = {}
    for node in graph.nodes:
        if node.op == "conv2d" and _conv_eligible(graph, node):
            out.setdefault(node.inputs[0], graph.type_of(node.inputs[0]).shape[1] % PAIR)
        elif node.op == "dense" and _dense_eligible(graph, node):
            out.setdefault(node.inputs[0], 0)
    return out


def to_bfloat16(graph: Graph) -> Graph:
    """`graph` (typed) with its convolutions (groups 1) and dense layers that have constant weights
    multiplying in bfloat16, accumulating in float32 (see the module docstring). A value such a layer
    reads is rounded to bfloat16 where it is written; its other readers (a residual addition) read
    that bfloat16 value widened back, as PyTorch's bfloat16 models and autocast do, so nothing keeps
    a float32 copy of it in memory (a graph output keeps its float32 value)."""
    from .cleanup import eliminate_dead_code
    from .infer import infer_types

    bf16 = bfloat16_dtype()
    fresh = FreshNames.of(graph)
    constants = dict(graph.constants)
    nodes: list[Node] = []
    reads = _layer_inputs(graph)
    rounded: dict[str, str] = {}  # float32 value -> its bfloat16 form (channels padded where odd)
    widened: dict[str, str] = {}  # float32 value -> its bfloat16 form read back as float32

    def round_value(v: str) -> None:
        src, pad = v, reads[v]
        if pad:
            src = fresh(f"{v}_c{graph.type_of(v).shape[1] + pad}")
            nodes.append(Node("pad", (v,), (src,), {"pads": (0, 0, 0, 0, 0, pad, 0, 0), "value": 0.0}, name=src))
        rounded[v] = fresh(f"{src}_bf16")
        nodes.append(Node("cast", (src,), (rounded[v],), {"dtype": "bfloat16"}, name=rounded[v]))
        if not pad and v not in graph.outputs and any(not _reads_rounded(graph, r, v) for r in graph.consumers(v)):
            widened[v] = fresh(f"{v}_f32")
            nodes.append(Node("cast", (rounded[v],), (widened[v],), {"dtype": "float32"}, name=widened[v]))

    def weight(v: str, pad_channels: int) -> str:
        w = graph.constants[v]
        if pad_channels:
            w = np.pad(w, ((0, 0), (0, pad_channels)) + ((0, 0),) * (w.ndim - 2))
        name = fresh(f"{v}_bf16")
        constants[name] = np.ascontiguousarray(w.astype(np.float32).astype(bf16))
        nodes.append(Node("constant", (), (name,), name=name))
        return name

    for v in graph.inputs:
        if v in reads:
            round_value(v)
    for node in graph.nodes:
        if _reads_rounded(graph, node, node.inputs[0] if node.inputs else ""):
            x = node.inputs[0]
            nodes.append(node.replace(inputs=(rounded[x], weight(node.inputs[1], reads[x]), *node.inputs[2:])))
        else:
            nodes.append(node.replace(inputs=tuple(widened.get(v, v) for v in node.inputs)))
        for v in node.outputs:
            if v in reads:
                round_value(v)
    return eliminate_dead_code(infer_types(graph.replace(nodes=nodes, constants=constants, types={
        v: t for v, t in graph.types.items() if v in graph.inputs})))


def _reads_rounded(graph: Graph, node: Node, v: str) -> bool:
    """Whether `node` is an eligible layer reading `v` as its input."""
    return bool(node.inputs) and node.inputs[0] == v and (
        (node.op == "conv2d" and _conv_eligible(graph, node)) or (node.op == "dense" and _dense_eligible(graph, node)))


__all__ = ["to_bfloat16", "bfloat16_dtype", "warn_without_bf16_dot", "PAIR"]

"""bfloat16 models on the CPU (`tw.compile(..., dtype="bfloat16")`): convolutions and dense layers
multiply bfloat16 operands and accumulate in float32, everything else stays float32.

The pass rounds each eligible layer's constant weight to bfloat16 once and reads its input
through a `cast` to bfloat16 (one per value, shared by its readers). The layout pass packs
such a convolution's weight [O/ob, C/ib, KH, KW, ib/2, ob, 2] (each output lane's channel pair
contiguous, what AVX-512 BF16 `vdpbf16ps` reads) and fusion makes the cast the epilogue of the
layer before, so activations between convolutions are stored in bfloat16. Bias, activation
functions, residual additions, pooling and normalisation compute in float32 on the float32
accumulator, as PyTorch's autocast does. Depthwise and grouped convolutions stay float32 (no
channel reduction for a pair instruction to sum); an odd channel count is zero-padded to even.

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
                              "pip install ml_dtypes (or pass dtype='float32')") from None
    return np.dtype(ml_dtypes.bfloat16)


def _conv_eligible(graph: Graph, node: Node) -> bool:
    x = graph.type_of(node.inputs[0])
    w = graph.constants.get(node.inputs[1])
    return (x.dtype == "float32" and len(x.shape) == 4 and w is not None and w.ndim == 4
            and int(node.attr("groups", 1)) == 1)


def _dense_eligible(graph: Graph, node: Node) -> bool:
    x = graph.type_of(node.inputs[0])
    w = graph.constants.get(node.inputs[1])
    return x.dtype == "float32" and w is not None and w.ndim == 2 and w.shape[1] % PAIR == 0


def to_bfloat16(graph: Graph) -> Graph:
    """`graph` (typed) with its convolutions (groups 1) and dense layers that have constant weights
    multiplying in bfloat16, accumulating in float32 (see the module docstring)."""
    from .infer import infer_types

    bf16 = bfloat16_dtype()
    fresh = FreshNames.of(graph)
    constants = dict(graph.constants)
    nodes: list[Node] = []
    casts: dict[tuple[str, int], str] = {}  # (float32 value, channels padded to) -> its bfloat16 form

    def as_bfloat16(v: str, pad_channels: int = 0) -> str:
        key = (v, pad_channels)
        if key not in casts:
            src = v
            if pad_channels:
                src = fresh(f"{v}_c{graph.type_of(v).shape[1] + pad_channels}")
                nodes.append(Node("pad", (v,), (src,), {"pads": (0, 0, 0, 0, 0, pad_channels, 0, 0), "value": 0.0},
                                  name=src))
            casts[key] = fresh(f"{src}_bf16")
            nodes.append(Node("cast", (src,), (casts[key],), {"dtype": "bfloat16"}, name=casts[key]))
        return casts[key]

    def weight(v: str, pad_channels: int = 0) -> str:
        w = graph.constants[v]
        if pad_channels:
            w = np.pad(w, ((0, 0), (0, pad_channels)) + ((0, 0),) * (w.ndim - 2))
        name = fresh(f"{v}_bf16")
        constants[name] = np.ascontiguousarray(w.astype(np.float32).astype(bf16))
        nodes.append(Node("constant", (), (name,), name=name))
        return name

    for node in graph.nodes:
        if node.op == "conv2d" and _conv_eligible(graph, node):
            pad = graph.type_of(node.inputs[0]).shape[1] % PAIR
            nodes.append(node.replace(inputs=(as_bfloat16(node.inputs[0], pad), weight(node.inputs[1], pad),
                                              *node.inputs[2:])))
        elif node.op == "dense" and _dense_eligible(graph, node):
            nodes.append(node.replace(inputs=(as_bfloat16(node.inputs[0]), weight(node.inputs[1]), *node.inputs[2:])))
        else:
            nodes.append(node)
    from .cleanup import eliminate_dead_code

    return eliminate_dead_code(infer_types(graph.replace(nodes=nodes, constants=constants, types={
        v: t for v, t in graph.types.items() if v in graph.inputs})))


__all__ = ["to_bfloat16", "bfloat16_dtype", "PAIR"]

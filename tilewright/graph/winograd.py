"""3x3 stride-1 convolutions on packed NCHW{b}c data computed by Winograd F(4x4, 3x3)
(`ops/winograd.py`): each becomes an input transform, a batched `matmul` with the transformed
weights (a constant, computed here once) and an output transform, which carries the bias and
takes the conv's epilogue (activation, residual add) in fusion as the conv would.

Packed data only: there every transform reads and writes whole vectors along the channel
block; on NCHW its input tiles would be gathered four pixels apart. Which convolutions:
`worthwhile` below; `compile(..., winograd=False)` keeps them direct."""

from __future__ import annotations

import math

import numpy as np

from ..ops.winograd import TILE, tiles, winograd_weight
from .blocked import block_of, unpack_weight
from .cleanup import eliminate_dead_code
from .concat_epilogue import push_epilogues
from .infer import infer_types, pair
from .ir import FreshNames, Graph, Node

# Set, not fitted: every ResNet layer they admit (64-512 channels; 7x7 outputs, whose 8x8 tiles
# waste 31%) measured faster than direct (docs/models.md, stop 26); smaller layers are unmeasured.
MIN_CHANNELS = 32  # input and output channels
MAX_TILE_WASTE = 0.35  # output pixels the tiles cover beyond the output, as a fraction of it


def eligible(graph: Graph, node: Node) -> bool:
    """A packed 3x3 conv2d, stride 1, dilation 1, one group, with constant weights, reading its
    input in its output's channel block (the transforms keep one block; layout.py may pack a
    conv 16 channels in and 8 out)."""
    block = block_of(node.attr("layout", "NCHW"))
    if node.op != "conv2d" or not block or graph.type_of(node.inputs[0]).shape[-1] != block:
        return False
    w = graph.constants.get(node.inputs[1])
    return (w is not None and w.ndim == 6 and w.shape[2:4] == (3, 3) and int(node.attr("groups", 1)) == 1
            and pair(node.attr("stride", (1, 1))) == (1, 1) and pair(node.attr("dilation", (1, 1))) == (1, 1))


def worthwhile(graph: Graph, node: Node) -> bool:
    """Enough input and output channels to repay the transforms, and an output that whole 4x4
    tiles cover without too much waste."""
    n, ob, oh, ow, b = graph.type_of(node.outputs[0]).shape
    c = graph.type_of(node.inputs[0]).shape
    covered = math.prod(tiles(oh, ow)) * TILE * TILE
    return min(c[1] * c[4], ob * b) >= MIN_CHANNELS and covered <= (1 + MAX_TILE_WASTE) * oh * ow


def winograd_convs(graph: Graph, pick=worthwhile, chunks: dict[str, int] | None = None) -> Graph:
    """`graph` with every eligible convolution that `pick` chooses as winograd_input -> matmul ->
    winograd_output (same output value, so its consumers and fusion see it as before).
    `chunks`: conv node name -> K > 1 splits its GEMM and output transform into K slices of its
    output channel blocks, concatenated in place, so its products live one slice at a time
    (`winograd_chunks.py` chooses K)."""
    return rewrite(graph, pick, chunks or {})[0]


def rewrite(graph: Graph, pick, chunks: dict[str, int],
            transformed: dict[str, np.ndarray] | None = None) -> tuple[Graph, dict[str, str]]:
    """`winograd_convs`, and the conv node name of each products value it made.
    `transformed`: weight name -> its Winograd transform, filled and reused (a search that
    rewrites the same graph many times computes each transform once)."""
    transformed = {} if transformed is None else transformed
    names = FreshNames.of(graph)
    constants = dict(graph.constants)
    nodes: list[Node] = []
    products: dict[str, str] = {}
    for node in graph.nodes:
        if not (eligible(graph, node) and pick(graph, node)):
            nodes.append(node)
            continue
        x, w, *bias = node.inputs
        out = node.outputs[0]
        u = names(f"{w}_winograd")
        if w not in transformed:
            transformed[w] = winograd_weight(unpack_weight(graph.constants[w]))
        weight = transformed[w]
        v = names(f"{out}_tiles")
        n, ob, oh, ow, b = shape = graph.type_of(out).shape
        th, tw = tiles(oh, ow)
        k = chunks.get(node.name, 1) if not bias or bias[0] in graph.constants else 1
        if ob % k:
            raise ValueError(f"winograd: conv '{node.name}' has {ob} output channel blocks, not divisible into {k}")
        nodes.append(Node("winograd_input", (x,), (v,), {"padding": node.attr("padding", (0, 0, 0, 0))},
                          name=names(f"{node.name}_input")))
        parts = []
        for part in range(k):
            lo, hi = part * ob // k * b, (part + 1) * ob // k * b  # output channels of this slice
            uk = u if k == 1 else names(f"{u}_{part}")
            constants[uk] = weight if k == 1 else np.ascontiguousarray(weight[:, :, lo:hi])
            nodes.append(Node("constant", (), (uk,), name=uk))
            bk = tuple(bias)
            if bias and k > 1:
                bk = (names(f"{bias[0]}_{part}"),)
                constants[bk[0]] = np.ascontiguousarray(graph.constants[bias[0]][lo:hi])
                nodes.append(Node("constant", (), bk, name=bk[0]))
            tag = "" if k == 1 else f"_{part}"
            m = names(f"{out}_products{tag}")
            products[m] = node.name
            sub = (n, (hi - lo) // b, oh, ow, b)
            whole = (n, sub[1], th * TILE, tw * TILE, b)
            # a partial last tile would be computed shifted off the h % 4 grid (bound.required_region keeps a
            # tile inside its tensor) and its selects would not fold: whole tiles are written, a slice crops
            y = out if (whole, k) == (shape, 1) else names(f"{out}_whole_tiles{tag}")
            nodes += [Node("matmul", (v, uk), (m,), name=names(f"{node.name}_products{tag}")),
                      Node("winograd_output", (m, *bk), (y,), {"shape": whole},
                           name=node.name if k == 1 else names(f"{node.name}{tag}"))]
            if whole != sub:
                cropped = out if k == 1 else names(f"{out}{tag}")
                nodes.append(Node("slice", (y,), (cropped,), {"begin": (0,) * 5, "end": sub, "step": (1,) * 5},
                                  name=names(f"{node.name}_crop{tag}")))
                y = cropped
            parts.append(y)
        if k > 1:
            nodes.append(Node("concat", tuple(parts), (out,), {"axis": 1}, name=names(f"{node.name}_concat")))
    if not products:
        return graph, products
    graph = infer_types(graph.replace(nodes=nodes, constants=constants))
    if any(k > 1 for k in chunks.values()):
        graph = push_epilogues(graph)
    return eliminate_dead_code(graph), products


__all__ = ["winograd_convs", "rewrite", "eligible", "worthwhile"]

"""3x3 stride-1 convolutions on packed NCHW{b}c data computed by Winograd F(4x4, 3x3)
(`ops/winograd.py`): each becomes an input transform, a batched `matmul` with the transformed
weights (a constant, computed here once) and an output transform, which carries the bias and
takes the conv's epilogue (activation, residual add) in fusion as the conv would.

Packed data only: there every transform reads and writes whole vectors along the channel
block; on NCHW its input tiles would be gathered four pixels apart. Which convolutions:
`worthwhile` below; `compile(..., winograd=False)` keeps them direct."""

from __future__ import annotations

import math

from ..ops.winograd import TILE, tiles, winograd_weight
from .blocked import block_of, unpack_weight
from .cleanup import eliminate_dead_code
from .infer import infer_types, pair
from .ir import FreshNames, Graph, Node

# Set, not fitted: every ResNet layer they admit (64-512 channels; 7x7 outputs, whose 8x8 tiles
# waste 31%) measured faster than direct (docs/models.md, stop 26); smaller layers are unmeasured.
MIN_CHANNELS = 32  # input and output channels
MAX_TILE_WASTE = 0.35  # output pixels the tiles cover beyond the output, as a fraction of it


def eligible(graph: Graph, node: Node) -> bool:
    """A packed 3x3 conv2d, stride 1, dilation 1, one group, with constant weights."""
    if node.op != "conv2d" or not block_of(node.attr("layout", "NCHW")):
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


def winograd_convs(graph: Graph, pick=worthwhile) -> Graph:
    """`graph` with every eligible convolution that `pick` chooses as winograd_input -> matmul ->
    winograd_output (same output value, so its consumers and fusion see it as before)."""
    names = FreshNames.of(graph)
    constants = dict(graph.constants)
    nodes: list[Node] = []
    changed = False
    for node in graph.nodes:
        if not (eligible(graph, node) and pick(graph, node)):
            nodes.append(node)
            continue
        changed = True
        x, w, *bias = node.inputs
        out = node.outputs[0]
        u = names(f"{w}_winograd")
        constants[u] = winograd_weight(unpack_weight(graph.constants[w]))
        v, m = names(f"{out}_tiles"), names(f"{out}_products")
        n, ob, oh, ow, b = shape = graph.type_of(out).shape
        th, tw = tiles(oh, ow)
        whole = (n, ob, th * TILE, tw * TILE, b)  # a partial last tile would be computed shifted off the h % 4
        # grid (bound.required_region keeps a tile inside its tensor) and its selects would not fold:
        # whole tiles are written instead, and a slice keeps the output
        y = out if whole == shape else names(f"{out}_whole_tiles")
        nodes += [Node("constant", (), (u,), name=u),
                  Node("winograd_input", (x,), (v,), {"padding": node.attr("padding", (0, 0, 0, 0))},
                       name=names(f"{node.name}_input")),
                  Node("matmul", (v, u), (m,), name=names(f"{node.name}_products")),
                  Node("winograd_output", (m, *bias), (y,), {"shape": whole}, name=node.name)]
        if y != out:
            nodes.append(Node("slice", (y,), (out,), {"begin": (0,) * 5, "end": shape, "step": (1,) * 5},
                              name=names(f"{node.name}_crop")))
    if not changed:
        return graph
    return eliminate_dead_code(infer_types(graph.replace(nodes=nodes, constants=constants)))


__all__ = ["winograd_convs", "eligible", "worthwhile"]

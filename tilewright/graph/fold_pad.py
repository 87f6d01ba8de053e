"""Zero padding folded into the convolution that reads it: ONNX and some
exporters emit an explicit `pad` before a `conv2d` (asymmetric 'SAME'
padding); the conv's own padding attribute does the same work without a pass
over memory."""

from __future__ import annotations

from .infer import quad
from .ir import Graph


def _spatial_zero_pads(node) -> tuple[int, int, int, int] | None:
    """(top, left, bottom, right) of a 4-D pad that adds zeros only along H and W, else None."""
    pads = node.attr("pads")
    if node.op != "pad" or pads is None or len(pads) != 8 or float(node.attr("value", 0.0)) != 0.0:
        return None
    pads = tuple(int(p) for p in pads)
    if any(pads[i] != 0 for i in (0, 1, 4, 5)) or min(pads) < 0:
        return None
    return pads[2], pads[3], pads[6], pads[7]


def fold_pad_into_conv(graph: Graph) -> Graph:
    """After this pass no conv2d reads, as its data input, the output of a `pad`
    of zeros along H and W only: it reads the pad's input and its `padding`
    attribute has grown by the pad's amounts. The pad node stays if anything
    else reads it (dead-code elimination removes it otherwise)."""
    nodes = []
    for node in graph.nodes:
        src = graph.producer(node.inputs[0]) if node.op == "conv2d" else None
        extra = _spatial_zero_pads(src) if src is not None else None
        if extra is not None:
            pt, pl, pb, pr = quad(node.attr("padding", (0, 0, 0, 0)))
            padding = (pt + extra[0], pl + extra[1], pb + extra[2], pr + extra[3])
            attrs = dict(node.attrs, padding=padding)
            node = node.replace(inputs=(src.inputs[0],) + node.inputs[1:], attrs=attrs)
        nodes.append(node)
    return graph.replace(nodes=nodes)

"""The graph that fusion cuts into kernels: the chosen activation layout packed
(`layout.py`), then strided 1x1 convolutions split into a subsampling slice and
a stride-1 GEMM (`subsample.py`), then packed 3x3 convolutions computed by Winograd
(`winograd.py`; sliced where their products would set the peak memory:
`winograd_chunks.py`) unless `winograd` is False. `compile` and `layout="auto"` both
build from it, so the layout they measure is the one they run."""

from __future__ import annotations

from .ir import Graph
from .layout import pack_layout
from .subsample import subsample_strided_pointwise
from .winograd_chunks import chunked_winograd_convs


def kernel_graph(graph: Graph, layout: str, block: int, winograd: bool = True, narrow: int = 0) -> Graph:
    graph = subsample_strided_pointwise(pack_layout(graph, layout, block, narrow))
    return chunked_winograd_convs(graph) if winograd else graph


__all__ = ["kernel_graph"]

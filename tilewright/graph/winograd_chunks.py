"""How finely to slice each Winograd convolution so its products do not set the
model's peak memory. A conv's products buffer holds 36 values per 16 outputs, 2.25x
its output (YOLO-v1's second layer: 20.7 MiB beside a 9.2 MiB output). Sliced into
K groups of output channel blocks (`winograd.rewrite`), the GEMM and output transform
run K times on 1/K of the products each, and the output is written in place.

Slicing costs speed (the transformed input is read K times, each GEMM is narrower),
so it is done only where it lowers the bound on the model's arena: while a products
buffer is live at the step where the most bytes are, that conv's K is raised to the
next divisor of its channel blocks (several convs may tie at that bound: each raise
moves it to the next), and the first slicing that lowers the bound by MIN_GAIN more
than the best so far becomes the best."""

from __future__ import annotations

from .fusion import fuse
from .ir import Graph
from .memory_plan import live_bound
from .winograd import rewrite, worthwhile

MIN_GAIN = 0.10  # a slicing must lower the best bound by this fraction (each slice costs speed)
MIN_BLOCKS = 2  # channel blocks per slice: each GEMM stays at least two vectors wide
MAX_ROUNDS = 32


def _next_k(blocks: int, k: int) -> int | None:
    return next((d for d in range(k + 1, blocks // MIN_BLOCKS + 1) if blocks % d == 0), None)


def chunked_winograd_convs(graph: Graph, pick=worthwhile) -> Graph:
    """`winograd.winograd_convs(graph, pick, chunks)` with the chunks chosen as above."""
    transformed: dict = {}  # each weight's transform, computed once for every rewrite below

    def attempt(chunks: dict[str, int]):
        rewritten, products = rewrite(graph, pick, chunks, transformed)
        return rewritten, products, *live_bound(fuse(rewritten))

    chunks: dict[str, int] = {}
    current, products, bound, live = attempt(chunks)
    if not products:
        return current
    blocks = {n.name: graph.type_of(n.outputs[0]).shape[1] for n in graph.nodes if n.name in products.values()}
    best = (bound, chunks)
    for _ in range(MAX_ROUNDS):
        raised = dict(chunks)
        for conv in {products[v] for v in live if v in products}:
            k = _next_k(blocks[conv], chunks.get(conv, 1))
            if k is not None:
                raised[conv] = k
        if raised == chunks:
            break
        chunks = raised
        _, products, bound, live = attempt(chunks)
        if bound < (1 - MIN_GAIN) * best[0]:
            best = (bound, chunks)
    return attempt(_trimmed(attempt, *best, blocks))[0]


def _trimmed(attempt, bound: int, chunks: dict[str, int], blocks: dict[str, int]) -> dict[str, int]:
    """`chunks` with each K lowered back to the previous divisor while the bound stays within
    MIN_GAIN of `bound`: the search raises every conv at the bound, some further than needed."""
    chunks = dict(chunks)
    for conv in sorted(chunks, key=lambda c: -chunks[c]):
        while chunks[conv] > 1:
            lower = max(d for d in range(1, chunks[conv]) if blocks[conv] % d == 0)
            trial = {**chunks, conv: lower}
            if attempt(trial)[2] > (1 + MIN_GAIN) * bound:
                break
            chunks = trial
    return chunks


__all__ = ["chunked_winograd_convs", "MIN_GAIN", "MIN_BLOCKS"]

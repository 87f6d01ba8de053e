"""`layout="auto"`: whether a model runs its convolutions on NCHW or packed
NCHW{b}c data, decided by measuring the whole model both ways. Neither layout
wins everywhere (MobileNet-v2's depthwise layers are 2.5x faster packed; our
ResNet 3x3 convolutions are slower packed), and a per-kernel comparison would
miss the transforms and the cache state between kernels, so the two modules are
built from the records as they stand (default schedules where there are none),
checked against each other, and timed in alternating rounds."""

from __future__ import annotations

import time

import numpy as np

from ..errors import EvaluationError
from ..stats import median
from .ir import Graph
from .kernel_graph import kernel_graph
from .layout import conv_block, narrow_block
from .module import Module

ROUNDS, CALLS = 3, 3  # alternating rounds; calls timed per round and side


def packable(graph: Graph, block: int) -> bool:
    return any(n.op == "conv2d" and conv_block(graph, n, block) for n in graph.nodes)


def choose_layout(graph: Graph, target, records, progress: bool = False,
                  winograd: bool = True) -> tuple[str, Module | None]:
    """"NCHWc" or "NCHW" for the optimized `graph` (the faster module on one random input), and that
    module as built from `records` (None when nothing could pack and nothing was built)."""
    from .fusion import fuse
    from .module import build_module

    block, narrow = target.vector_lanes(4), narrow_block(target)
    if block < 2 or not packable(graph, block):
        return "NCHW", None
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(graph.type_of(v).shape).astype(graph.type_of(v).dtype) for v in graph.inputs]
    modules, outputs = {}, {}
    with records:
        for layout in ("NCHW", "NCHWc"):
            modules[layout] = build_module(fuse(kernel_graph(graph, layout, block, winograd, narrow)), target)
            out = modules[layout](*inputs)
            outputs[layout] = out if isinstance(out, list) else [out]
    # bfloat16 activations: the two builds sum in other orders, so a rounding can land one bfloat16 step
    # (2^-8) apart and carry on through later layers
    tol = 2 ** -6 if any(t.dtype == "bfloat16" for t in graph.types.values()) else 1e-3
    for a, b in zip(outputs["NCHW"], outputs["NCHWc"], strict=True):
        scale = max(1.0, float(np.max(np.abs(a)))) if a.size else 1.0
        if not np.allclose(a, b, rtol=tol, atol=tol * scale):
            raise EvaluationError(f"graph '{graph.name}': the NCHW and NCHWc builds disagree (max difference "
                                  f"{float(np.max(np.abs(a - b))):.3g}); compile with layout='NCHW' or 'NCHWc' "
                                  f"explicitly and compare each with the reference")
    times: dict[str, list[float]] = {k: [] for k in modules}
    for _ in range(ROUNDS):
        for layout, module in modules.items():
            for _ in range(CALLS):
                start = time.perf_counter()
                module(*inputs)
                times[layout].append(time.perf_counter() - start)
    best = {k: median(v) for k, v in times.items()}
    choice = min(best, key=best.get)
    if progress:
        print(f"[{graph.name}] layout: {choice} ({' / '.join(f'{k} {v * 1e3:.2f} ms' for k, v in best.items())}, "
              f"the whole model before tuning)", flush=True)
    return choice, modules[choice]


__all__ = ["choose_layout", "packable"]

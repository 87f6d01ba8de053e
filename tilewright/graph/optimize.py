"""The graph-level pipeline that runs before fusion."""

from __future__ import annotations

from .canonicalize import fold_bias_add, recognize_gelu
from .cleanup import eliminate_common_subexpressions, eliminate_dead_code
from .fold_batch_norm import fold_batch_norm
from .fold_constants import fold_constants
from .fold_pad import fold_pad_into_conv
from .fold_qdq import fold_qdq
from .infer import infer_types
from .ir import Graph
from .simplify_reshape import simplify_reshapes

PASSES = (infer_types, fold_qdq, fold_constants, recognize_gelu, fold_bias_add, fold_batch_norm, fold_pad_into_conv,
          simplify_reshapes, fold_constants, eliminate_common_subexpressions, eliminate_dead_code, infer_types)


def optimize(graph: Graph) -> Graph:
    """Types inferred, QDQ convolutions made int8 `qconv2d` (before constant folding turns their
    quantized weights into float ones), constants folded (twice: before batch-norm folding so
    exporter-made weight transforms are plain constants, and after it), an
    erf-GELU spelt out made one gelu, bias adds made layer biases, batch
    norms folded, zero pads folded into convolutions, reshapes moved past
    dense/matmul and cancelled, common subexpressions and dead code removed,
    types inferred again. `graph.check()` holds after each pass; the outputs
    are the same values under the same names."""
    graph.check()
    for p in PASSES:
        graph = p(graph)
        graph.check()
    return graph

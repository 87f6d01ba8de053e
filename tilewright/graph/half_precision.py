"""float16 models: weights and activations stored as float16, arithmetic in
float32. A group's te program is lowered from the float32 graph as usual and
then rewritten: each float32 placeholder becomes a float16 one read through a
cast to float32, and each output is the float32 result cast to float16 in a
last elementwise stage. Every stage in between, reductions included (conv,
dense, matmul, pooling sums, softmax and normalisation sums), keeps its float32
accumulator, so only loads and stores round. The graph is retyped the same way
(float32 values become float16, constants cast once) for the memory plan and
the module's input and output checks."""

from __future__ import annotations

import numpy as np

from ..ir.dtype import as_dtype
from ..ir.expr import Cast, Load
from ..ir.traverse import loaded_tensors, transform
from ..te import cast, compute, placeholder
from ..te.program import collect_program
from ..te.tensor import ComputeOp, PlaceholderOp, Tensor
from .ir import Graph, TensorType
from .lower_te import GroupProgram
from .partition import Partition

FLOAT32, FLOAT16 = as_dtype("float32"), as_dtype("float16")


def half_type(t: TensorType) -> TensorType:
    return TensorType(t.shape, "float16") if t.dtype == "float32" else t


def half_graph(graph: Graph) -> Graph:
    """`graph` with every float32 value typed float16 and its float32 constants cast (the
    same nodes and names: it describes what the float16 programs read and write)."""
    types = {v: half_type(t) for v, t in graph.types.items()}
    constants = {v: (np.asarray(c, dtype=np.float16) if np.asarray(c).dtype == np.float32 else c)
                 for v, c in graph.constants.items()}
    return Graph(graph.nodes, graph.inputs, graph.outputs, types, constants, graph.name)


def half_partition(partition: Partition) -> Partition:
    return Partition(half_graph(partition.graph), partition.groups)


def half_program(program: GroupProgram) -> GroupProgram:
    """`program` reading and writing float16 where it read and wrote float32, computing in float32."""
    new: dict[int, Tensor] = {}
    for t in collect_program(list(program.outputs)).tensors:
        if isinstance(t.op, PlaceholderOp):
            new[id(t)] = placeholder(t.shape, FLOAT16, name=t.name) if t.dtype == FLOAT32 else t
        else:
            new[id(t)] = _rebuilt(t, new)
    inputs = tuple(new[id(t)] for t in program.inputs)
    outputs = []
    for t in program.outputs:
        mine = new[id(t)]
        if mine.dtype == FLOAT32:
            mine = compute(t.shape, lambda *i, m=mine: cast(m[i], FLOAT16), name=f"{t.name}_half")
        outputs.append(mine)
    return GroupProgram(program.name, inputs + tuple(outputs), program.input_values, program.output_values)


def _rebuilt(t: Tensor, new: dict[int, Tensor]) -> Tensor:
    """Stage `t` reading the rebuilt tensors (a float16 placeholder through a cast to float32)."""
    def swap(e):
        if not isinstance(e, Load) or id(e.tensor) not in new:
            return None
        src = new[id(e.tensor)]
        if src is e.tensor:
            return None
        load = Load(src, e.indices, src.dtype)
        return Cast(load, e.dtype) if src.dtype != e.dtype else load

    op = t.op
    body = transform(op.body, swap)
    if body is op.body:
        return t
    rebuilt = ComputeOp(op.name, op.axis, op.reduce_axis, body, dict(op.attrs), tuple(loaded_tensors(body)))
    return Tensor(rebuilt, t.shape, body.dtype)


__all__ = ["half_graph", "half_partition", "half_program", "half_type"]

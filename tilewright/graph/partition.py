"""The result of fusion: the graph cut into groups, each compiled as one te
program (one kernel). Written by `fusion.fuse`, read by `lower_te` and `tasks`."""

from __future__ import annotations

from dataclasses import dataclass

from .ir import Graph, Node
from .opset import Pattern


@dataclass(frozen=True, eq=False)
class Group:
    """Nodes in topological order; `inputs` are the values read from outside
    (activations and constants), `outputs` the values read after it or graph outputs.
    `anchor` is the node that decides the schedule (the conv/dense/matmul of a
    complex-out-fusable group, else the heaviest node)."""
    name: str
    nodes: tuple[Node, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    anchor: Node
    pattern: Pattern
    view: bool = False  # a contiguous slice or an in-place concat (graph/views.py)

    @property
    def is_view(self) -> bool:
        """No kernel: its output aliases memory that exists anyway (reshapes, or `view`)."""
        return self.view or all(n.op == "reshape" for n in self.nodes)


@dataclass(frozen=True, eq=False)
class Partition:
    graph: Graph
    groups: tuple[Group, ...]

    def __str__(self) -> str:
        lines = [f"partition of '{self.graph.name}': {len(self.groups)} groups"]
        for g in self.groups:
            ops = " -> ".join(n.op for n in g.nodes)
            lines.append(f"  {g.name} [{g.pattern.name.lower()}]: {ops}  ({', '.join(g.inputs)}) -> "
                         f"({', '.join(g.outputs)})")
        return "\n".join(lines)

"""Static analysis (FlexTensor section 4.1): the mini-graph of a te program's
stages and, per node, its spatial and reduce loops (number, trip counts,
order) and how it reads its inputs. Everything the space generator decides
from is here; nothing depends on which operator wrote the program."""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.expr import Binary, BinOp, Expr, IterVar, Load, Reduce, Select
from ..ir.traverse import free_vars, walk
from ..te.program import collect_program
from ..te.tensor import PlaceholderOp, Tensor


@dataclass(frozen=True)
class Loop:
    name: str
    extent: int
    reduce: bool


@dataclass(frozen=True, eq=False)
class Node:
    tensor: Tensor
    spatial: tuple[Loop, ...]
    reduce: tuple[Loop, ...]
    inputs: tuple[Tensor, ...]
    consumers: tuple[Tensor, ...]
    is_output: bool
    injective: bool  # no reduction: elementwise, padding, packing, layout change
    guarded: bool  # reads under a condition (padding-like)
    flops_per_point: int  # arithmetic operations per innermost iteration

    @property
    def name(self) -> str:
        return self.tensor.name

    @property
    def points(self) -> int:
        n = 1
        for loop in self.spatial + self.reduce:
            n *= loop.extent
        return n

    @property
    def flops(self) -> int:
        return self.points * self.flops_per_point

    def __str__(self) -> str:
        sp = ", ".join(f"{lp.name}:{lp.extent}" for lp in self.spatial)
        rd = ", ".join(f"{lp.name}:{lp.extent}" for lp in self.reduce)
        kind = "injective" if self.injective else "reduction"
        extra = ", guarded" if self.guarded else ""
        ins = ", ".join(t.name for t in self.inputs)
        outs = ", ".join(t.name for t in self.consumers) or ("(output)" if self.is_output else "-")
        return f"{self.name}: {kind}{extra}; spatial [{sp}] reduce [{rd}]; reads {ins}; read by {outs}"


@dataclass(frozen=True, eq=False)
class MiniGraph:
    nodes: tuple[Node, ...]  # producers first
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]

    def node(self, tensor_or_name) -> Node:
        for n in self.nodes:
            if n.tensor is tensor_or_name or n.name == tensor_or_name:
                return n
        raise KeyError(tensor_or_name)

    @property
    def main(self) -> Node:
        """The node doing most of the arithmetic (what a schedule must get right); among
        nodes without arithmetic (a reshape then a permute), the last: the earlier ones
        are then its producers, which a space may inline instead of copying twice."""
        return max(enumerate(self.nodes), key=lambda p: (p[1].flops, not p[1].injective, p[0]))[1]

    @property
    def flops(self) -> int:
        return sum(n.flops for n in self.nodes)

    def __str__(self) -> str:
        return "\n".join(str(n) for n in self.nodes)


def _count_ops(e: Expr) -> int:
    ops = 0
    for n in walk(e):
        if isinstance(n, Binary) and n.op in (BinOp.ADD, BinOp.SUB, BinOp.MUL, BinOp.DIV, BinOp.MIN, BinOp.MAX):
            if not n.dtype.is_int:  # index arithmetic is not work
                ops += 1
    return ops


def analyze(outputs) -> MiniGraph:
    program = collect_program(outputs)
    consumers: dict[int, list[Tensor]] = {}
    for t in program.stages:
        for p in t.op.input_tensors:
            consumers.setdefault(id(p), []).append(t)
    nodes = []
    for t in program.stages:
        op = t.op
        body = op.body
        spatial = tuple(Loop(a.name, a.extent, False) for a in op.axis)
        reduce = tuple(Loop(a.name, a.extent, True) for a in op.reduce_axis)
        if isinstance(body, Reduce):
            flops = _count_ops(body.source) + 1  # + the combine
        else:
            flops = _count_ops(body)
        guarded = any(isinstance(n, Select) and any(isinstance(m, Load) for m in walk(n)) for n in walk(body))
        nodes.append(Node(
            tensor=t, spatial=spatial, reduce=reduce, inputs=tuple(op.input_tensors),
            consumers=tuple(consumers.get(id(t), ())), is_output=any(t is o for o in program.outputs),
            injective=not isinstance(body, Reduce), guarded=guarded, flops_per_point=max(flops, 0),
        ))
    return MiniGraph(tuple(nodes), program.inputs, program.outputs)


def access_axes(node: Node, tensor: Tensor) -> list[set[str]]:
    """For each dimension of `tensor` as `node` reads it, the loop names its index uses."""
    out: list[set[str]] = [set() for _ in range(tensor.ndim)]
    for n in walk(node.tensor.op.body):
        if isinstance(n, Load) and n.tensor is tensor:
            for d, index in enumerate(n.indices):
                out[d] |= {v.name for v in free_vars(index) if isinstance(v, IterVar)}
    return out


def is_placeholder(t: Tensor) -> bool:
    return isinstance(t.op, PlaceholderOp)

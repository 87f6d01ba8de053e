"""The graph IR: a model as a list of operator nodes over named values.

A value is a name with a `TensorType`; a node reads values and writes values
(ONNX-like, names instead of pointers, so passes rebuild graphs cheaply and a
printed graph reads like the model). Constants are nodes of op "constant"
whose arrays live in `Graph.constants` under their output name. Nodes are
kept in topological order; `Graph.check()` says where that or a type fails."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from ..errors import ShapeError


@dataclass(frozen=True)
class TensorType:
    shape: tuple[int, ...]
    dtype: str = "float32"

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"


def _freeze(attrs: Mapping | None) -> Mapping:
    out = {}
    for k, v in sorted((attrs or {}).items()):
        out[k] = tuple(v) if isinstance(v, list) else v
    return MappingProxyType(out)


@dataclass(frozen=True, eq=False)
class Node:
    """One operator application. `op` is a name of `graph.opset.OPS`; `attrs`
    are plain Python values (ints, floats, strings, tuples)."""
    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping = field(default_factory=dict)
    name: str = ""

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "attrs", _freeze(self.attrs))
        if not self.name:
            object.__setattr__(self, "name", self.outputs[0] if self.outputs else self.op)

    def attr(self, key: str, default=None):
        return self.attrs.get(key, default)

    def replace(self, **changes) -> Node:
        fields = {"op": self.op, "inputs": self.inputs, "outputs": self.outputs, "attrs": dict(self.attrs),
                  "name": self.name}
        fields.update(changes)
        return Node(**fields)


class FreshNames:
    """Value names that collide with none already taken: `base`, else `base_1`, `base_2`, ..."""

    def __init__(self, taken=()):
        self.taken = set(taken)

    def __call__(self, base: str) -> str:
        name, i = base, 1
        while name in self.taken:
            name, i = f"{base}_{i}", i + 1
        self.taken.add(name)
        return name

    @classmethod
    def of(cls, graph: Graph) -> FreshNames:
        return cls(set(graph.inputs) | set(graph.types) | set(graph.constants)
                   | {v for n in graph.nodes for v in n.outputs})


class Graph:
    """`inputs` and `outputs` name values; `types` gives every value's type;
    `constants` maps a constant node's output name to its array."""

    def __init__(self, nodes: Iterable[Node], inputs: Iterable[str], outputs: Iterable[str],
                 types: Mapping[str, TensorType], constants: Mapping[str, np.ndarray] | None = None,
                 name: str = "graph"):
        self.nodes = tuple(nodes)
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.types = dict(types)
        self.constants = dict(constants or {})
        self.name = name
        self._producers = {v: n for n in self.nodes for v in n.outputs}
        self._consumers: dict[str, list[Node]] = {}
        for n in self.nodes:
            for v in n.inputs:
                self._consumers.setdefault(v, []).append(n)

    def producer(self, value: str) -> Node | None:
        """The node that writes `value` (None for a graph input)."""
        return self._producers.get(value)

    def consumers(self, value: str) -> list[Node]:
        return list(self._consumers.get(value, ()))

    def type_of(self, value: str) -> TensorType:
        try:
            return self.types[value]
        except KeyError:
            raise ShapeError(f"graph '{self.name}': value '{value}' has no type; run graph.infer.infer_types "
                             "or give the frontend its input shapes") from None

    def is_constant(self, value: str) -> bool:
        return value in self.constants

    def replace(self, nodes=None, inputs=None, outputs=None, types=None, constants=None) -> Graph:
        """A copy with some parts swapped; types and constants of values no node
        writes any longer are dropped."""
        nodes = self.nodes if nodes is None else tuple(nodes)
        inputs = self.inputs if inputs is None else inputs
        outputs = self.outputs if outputs is None else outputs
        types = self.types if types is None else types
        constants = self.constants if constants is None else constants
        live = set(inputs) | {v for n in nodes for v in n.outputs}
        return Graph(nodes, inputs, outputs, {k: t for k, t in types.items() if k in live},
                     {k: c for k, c in constants.items() if k in live}, self.name)

    def check(self) -> None:
        """Topological order, single writers, known inputs, typed values; a ShapeError names the node."""
        seen = set(self.inputs)
        for n in self.nodes:
            for v in n.inputs:
                if v not in seen:
                    raise ShapeError(f"graph '{self.name}': node '{n.name}' ({n.op}) reads '{v}', which no earlier "
                                     "node writes and is not a graph input")
            for v in n.outputs:
                if v in seen:
                    raise ShapeError(f"graph '{self.name}': value '{v}' is written twice (again by '{n.name}')")
                seen.add(v)
            if n.op == "constant" and n.outputs[0] not in self.constants:
                raise ShapeError(f"graph '{self.name}': constant node '{n.name}' has no array")
        for v in self.outputs:
            if v not in seen:
                raise ShapeError(f"graph '{self.name}': output '{v}' is never written")

    def __str__(self) -> str:
        from .printer import format_graph

        return format_graph(self)

    def __repr__(self) -> str:
        return (f"<Graph '{self.name}': {len(self.nodes)} nodes, inputs {list(self.inputs)}, "
                f"outputs {list(self.outputs)}>")

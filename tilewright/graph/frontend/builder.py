"""What both frontends share: a `GraphBuilder` that hands out unique value
names, records types and constant arrays and checks op names against the
opset, and the error an unsupported framework op raises."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import numpy as np

from ...errors import TilewrightError
from ..ir import FreshNames, Graph, Node, TensorType
from ..opset import spec


class UnsupportedOpError(TilewrightError):
    """A framework op the frontend has no mapping for; the message names the op,
    the node and the ops that are supported."""


def unsupported(frontend: str, op: str, node: str, supported: Iterable[str], why: str = "") -> UnsupportedOpError:
    reason = f" ({why})" if why else ""
    return UnsupportedOpError(f"{frontend}: op '{op}' at node '{node}' is not supported{reason}; "
                              f"supported: {', '.join(sorted(set(supported)))}")


def _float32(array) -> np.ndarray:
    a = np.asarray(array)
    return np.array(a, dtype=np.float32 if a.dtype.kind == "f" else a.dtype, order="C")  # keeps 0-d arrays 0-d


class GraphBuilder:
    """Accumulates nodes in topological order (the order they are added)."""

    def __init__(self, name: str = "graph"):
        self.name = name
        self.nodes: list[Node] = []
        self.types: dict[str, TensorType] = {}
        self.constants: dict[str, np.ndarray] = {}
        self.inputs: list[str] = []
        self._fresh = FreshNames()

    def fresh(self, hint: str) -> str:
        return self._fresh(re.sub(r"[^0-9A-Za-z_]", "_", hint) or "v")

    def add_input(self, name: str, ttype: TensorType) -> str:
        name = self.fresh(name)
        self.inputs.append(name)
        self.types[name] = ttype
        return name

    def constant(self, array, hint: str = "const", exact: bool = False) -> str:
        """A constant node holding `array` (floating arrays become float32 unless `exact`)."""
        a = np.array(array, order="C") if exact else _float32(array)
        name = self.fresh(hint)
        self.constants[name] = a
        self.types[name] = TensorType(a.shape, str(a.dtype))
        self.nodes.append(Node("constant", (), (name,)))
        return name

    def const_value(self, value: str) -> np.ndarray | None:
        return self.constants.get(value)

    def node(self, op: str, inputs: Iterable[str], ttype: TensorType, attrs: Mapping | None = None,
             hint: str = "") -> str:
        """Append `op(inputs)` with one output of type `ttype`; returns the output's name."""
        spec(op, hint)
        out = self.fresh(hint or op)
        self.types[out] = ttype
        self.nodes.append(Node(op, tuple(inputs), (out,), dict(attrs or {}), name=out))
        return out

    def build(self, outputs: Iterable[str]) -> Graph:
        """The graph, without nodes nothing reads (a transpose folded into a dense weight, unused initializers)."""
        outputs = tuple(outputs)
        live, kept = set(outputs), []
        for n in reversed(self.nodes):
            if any(v in live for v in n.outputs):
                kept.append(n)
                live.update(n.inputs)
        g = Graph(kept[::-1], self.inputs, outputs, self.types, self.constants, self.name).replace()
        g.check()
        return g

"""Templates in a model: which fused groups a hardware-native template computes (a dense layer
and the element-wise tail fusion gave it: bias, activations, one residual add), and the kernel
that slots into the model's step list in place of the searched one. The template's weight and
bias packs are constants made once per group, like the searched kernels' hoisted packs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..codegen.c import CSource
from ..kernels import CpuTile, Epilogue, GemmProblem
from ..kernels.cpu_source import single_source
from ..kernels.template_kernel import NativeKernel, pack_bias, pack_weight
from .ir import Graph
from .partition import Group

ACTIVATION_OPS = {"relu": "relu", "sigmoid": "sigmoid", "silu": "silu", "hardswish": "hardswish"}


@dataclass(frozen=True)
class TemplateMatch:
    """A group a GEMM template computes: rows of `x` times the constant `weight` ([N, K]),
    then `epilogue`; `bias` and `residual` are graph values (None when absent)."""
    problem: GemmProblem
    epilogue: Epilogue
    x: str
    weight: str
    bias: str | None
    residual: str | None
    out: str


def match_group(group: Group, graph: Graph) -> TemplateMatch | str:
    """The group's template form, or why it has none."""
    first = group.nodes[0]
    if first.op != "dense" or first is not group.anchor:
        return f"anchor is {group.anchor.op}, not a dense layer"
    x, w = first.inputs[0], first.inputs[1]
    bias = first.inputs[2] if len(first.inputs) > 2 else None
    xt, wt = graph.type_of(x), graph.type_of(w)
    if not graph.is_constant(w) or len(wt.shape) != 2 or graph.is_constant(x):
        return "the weight is not a constant matrix"
    if bias is not None and not graph.is_constant(bias):
        return "the bias is not a constant"
    if any(graph.type_of(v).dtype != "float32" for v in first.inputs):
        return "not float32"
    n, k = wt.shape
    if xt.shape[-1] != k:
        return "the input's last axis is not the weight's K"
    rows = int(np.prod(xt.shape[:-1], dtype=np.int64))
    steps, residual, value = (["bias"] if bias is not None else []), None, first.outputs[0]
    out_shape = graph.type_of(value).shape
    for node in group.nodes[1:]:
        if value not in node.inputs or len(node.outputs) != 1:
            return f"{node.op} does not continue the dense layer's output"
        if node.op in ACTIVATION_OPS:
            steps.append(ACTIVATION_OPS[node.op])
        elif node.op == "gelu":
            steps.append("gelu" if node.attr("approximate", "none") == "none" else "gelu_tanh")
        elif node.op == "add" and residual is None and len(node.inputs) == 2:
            other = node.inputs[1] if node.inputs[0] == value else node.inputs[0]
            if other == value or graph.type_of(other).shape != out_shape or graph.type_of(other).dtype != "float32":
                return "an add that is not a residual of the output's shape"
            residual = other
            steps.append("residual")
        else:
            return f"{node.op} is not an epilogue a template fuses"
        value = node.outputs[0]
    if tuple(group.outputs) != (value,):
        return "an intermediate value is read outside the group"
    return TemplateMatch(GemmProblem(rows, n, k), Epilogue(tuple(steps)), x, w, bias, residual, value)


class TemplateFill:
    """Makes a group's packed weight (and bias) from its constants, once."""

    def __init__(self, match: TemplateMatch, tile: CpuTile, slots: dict[str, int]):
        self.match, self.tile, self.slots = match, tile, slots
        self.names = ("template_weight",) + (("template_bias",) if match.bias is not None else ())

    def run(self, arrays: list) -> list[np.ndarray]:
        p = self.match.problem
        packed = [pack_weight(np.asarray(arrays[self.slots["weight"]]).reshape(p.N, p.K).T, p.K, p.N, self.tile.nr)]
        if self.match.bias is not None:
            packed.append(pack_bias(arrays[self.slots["bias"]], p.N, self.tile.nr))
        return packed


class GraphTemplateKernel(NativeKernel):
    """A template built for a model's step: `tw_call` takes the step's values in the task kernel's
    order, then the packs of its TemplateFill."""

    def __init__(self, match: TemplateMatch, tile: CpuTile, values: tuple[str, ...], target):
        slots = {"x": values.index(match.x), "weight": values.index(match.weight), "out": values.index(match.out)}
        extra = len(values)
        slots["bp"] = extra
        if match.bias is not None:
            slots["bias"] = values.index(match.bias)
            slots["packed_bias"] = extra + 1
        if match.residual is not None:
            slots["res"] = values.index(match.residual)
        call = {"x": slots["x"], "bp": slots["bp"], "bias": slots.get("packed_bias"), "res": slots.get("res"),
                "out": slots["out"]}
        self.match, self.tile = match, tile
        self.fill = TemplateFill(match, tile, slots)
        super().__init__(single_source(match.problem, match.epilogue, tile, call_slots=call), target,
                         match.problem.name)
        self._source = CSource(self.source, "tw_kernel", "")  # what graph/export.py reads

    def set_num_threads(self, n: int) -> None:
        self._lib.tw_set_num_threads(int(n))

    def temporary_bytes(self, cores: int) -> int:
        return 4 * self.tile.mr * self.tile.nr * cores  # each thread's tile on its stack


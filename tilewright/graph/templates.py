"""Templates in a model: which fused groups a hardware-native template computes (a dense layer, or
a convolution on channel-blocked NCHW{b}c data as the layout pass leaves it, with the element-wise
tail fusion gave it: bias, activations, one residual add), and the kernel that slots into the
model's step list in place of the searched one. The template's weight and bias packs are
constants made once per group, like the searched kernels' hoisted packs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..codegen.c import CSource
from ..kernels import ConvProblem, CpuTile, Epilogue, GemmProblem
from ..kernels.cpu_source import single_source
from ..kernels.template_kernel import NativeKernel, pack_bias, pack_weight
from .ir import Graph
from .partition import Group

ACTIVATION_OPS = {"relu": "relu", "sigmoid": "sigmoid", "silu": "silu", "hardswish": "hardswish"}


@dataclass(frozen=True)
class TemplateMatch:
    """A group a template computes: rows of `x` times the constant `weight` (a dense layer's [N, K], or
    a packed convolution's OIHW{ib}i{ob}o), then `epilogue`; `bias` and `residual` are graph values
    (None when absent)."""
    problem: GemmProblem | ConvProblem
    epilogue: Epilogue
    x: str
    weight: str
    bias: str | None
    residual: str | None
    out: str


def match_group(group: Group, graph: Graph) -> TemplateMatch | str:
    """The group's template form, or why it has none."""
    first = group.nodes[0]
    if first.op not in ("dense", "conv2d") or first is not group.anchor:
        return f"anchor is {group.anchor.op}, not a dense layer or convolution"
    x, w = first.inputs[0], first.inputs[1]
    bias = first.inputs[2] if len(first.inputs) > 2 else None
    if not graph.is_constant(w) or graph.is_constant(x):
        return "the weight is not a constant"
    if bias is not None and not graph.is_constant(bias):
        return "the bias is not a constant"
    if any(graph.type_of(v).dtype != "float32" for v in first.inputs):
        return "not float32"
    problem = _dense_problem(first, graph) if first.op == "dense" else _conv_problem(first, graph)
    if isinstance(problem, str):
        return problem
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
    return TemplateMatch(problem, Epilogue(tuple(steps)), x, w, bias, residual, value)


def _dense_problem(node, graph: Graph) -> GemmProblem | str:
    xt, wt = graph.type_of(node.inputs[0]), graph.type_of(node.inputs[1])
    if len(wt.shape) != 2 or xt.shape[-1] != wt.shape[1]:
        return "the weight is not an [N, K] matrix over the input's last axis"
    return GemmProblem(int(np.prod(xt.shape[:-1], dtype=np.int64)), wt.shape[0], wt.shape[1])


def _conv_problem(node, graph: Graph) -> ConvProblem | str:
    """A convolution on packed data: x [N, C/ib, H, W, ib], w [O/ob, C/ib, KH, KW, ib, ob]."""
    xt, wt = graph.type_of(node.inputs[0]), graph.type_of(node.inputs[1])
    if len(xt.shape) != 5 or len(wt.shape) != 6:
        return "a convolution on NCHW data (the conv template reads NCHW{b}c: compile with layout 'NCHWc')"
    top, left, bottom, right = node.attr("padding", (0, 0, 0, 0))
    (sh, sw), (dh, dw) = node.attr("stride", (1, 1)), node.attr("dilation", (1, 1))
    if int(node.attr("groups", 1)) != 1:
        return "a grouped or depthwise convolution"
    if not top == left == bottom == right or sh != sw or dh != dw:
        return "padding, stride or dilation differ between the axes"
    n, cb, h, wd, ib = xt.shape
    ob = wt.shape[5]
    return ConvProblem(n, h, wd, cb * ib, wt.shape[0] * ob, wt.shape[2], wt.shape[3], sh, top, dh, ib, ob)


def kn_weight(problem, weight: np.ndarray) -> np.ndarray:
    """A graph constant as the template's [K, N] weight: a dense layer's [N, K] transposed, a packed
    convolution's OIHW{ib}i{ob}o as HWIO."""
    if isinstance(problem, ConvProblem):
        return np.asarray(weight).transpose(2, 3, 1, 4, 0, 5).reshape(problem.K, problem.N)
    return np.asarray(weight).reshape(problem.N, problem.K).T


class TemplateFill:
    """Makes a group's packed weight (and bias) from its constants, once."""

    def __init__(self, match: TemplateMatch, tile: CpuTile, slots: dict[str, int]):
        self.match, self.tile, self.slots = match, tile, slots
        self.names = ("template_weight",) + (("template_bias",) if match.bias is not None else ())

    def run(self, arrays: list) -> list[np.ndarray]:
        p = self.match.problem
        packed = [pack_weight(kn_weight(p, arrays[self.slots["weight"]]), p.K, p.N, self.tile.nr)]
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
        """Each thread's tile on its stack, and a padded convolution's padded input copy."""
        p = self.match.problem
        padded = p.batch * (p.H + 2 * p.pad) * (p.W + 2 * p.pad) * p.IC if isinstance(p, ConvProblem) and p.pad else 0
        return 4 * (self.tile.mr * self.tile.nr * cores + padded)


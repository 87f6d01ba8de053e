"""Which of a model's tasks run on a template (`compile(kernels=...)`): "search" keeps every
searched kernel; "templates" puts a profiled template wherever a task's groups match one;
"auto" builds both and keeps, per task, the one whose steps run faster inside the model
(both timed in the same harness, on the same inputs, after the same tuning)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ShapeError, TilewrightError
from ..kernels import profile
from .module import Module
from .templates import GraphTemplateKernel, match_group

KERNEL_CHOICES = ("auto", "templates", "search")


@dataclass(frozen=True)
class TemplateDecision:
    task: str
    groups: int
    chosen: str  # "template" or "search"
    template_s: float | None  # the task's steps, summed
    search_s: float | None
    why: str

    def line(self) -> str:
        return (f"{self.task} x{self.groups}: {self.chosen} (template {ms(self.template_s)}, search "
                f"{ms(self.search_s)}; {self.why})")


def ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f} ms"


def check_choice(kernels: str) -> None:
    if kernels not in KERNEL_CHOICES:
        raise ShapeError(f"compile: kernels must be one of {', '.join(KERNEL_CHOICES)}, got {kernels!r}")


def template_kernels(partition, target, programs, tasks, store) -> tuple[dict, dict, dict[str, str]]:
    """(kernel per task key, fill per task key, reason per task key that has no template)."""
    graph = partition.graph
    by_name = {g.name: g for g in partition.groups}
    kernels, fills, reasons = {}, {}, {}
    for t in tasks:
        matches = [match_group(by_name[g], graph) for g in t.groups]
        bad = next((m for m in matches if isinstance(m, str)), None)
        if bad is not None:
            reasons[t.key] = bad
            continue
        first = matches[0]
        if any((m.problem, m.epilogue) != (first.problem, first.epilogue) for m in matches):
            reasons[t.key] = "its groups differ in shape or epilogue"
            continue
        prog = programs[t.groups[0]]
        values = tuple(prog.input_values) + tuple(prog.output_values)
        try:
            best = profile(first.problem, target, first.epilogue, records=store)
        except TilewrightError as exc:  # no tile fits (e.g. output blocks narrower than a vector): left searched
            reasons[t.key] = f"no template: {exc}"
            continue
        kernels[t.key] = GraphTemplateKernel(first, best.best, values, target)
        fills[t.key] = kernels[t.key].fill
    return kernels, fills, reasons


def group_seconds(module: Module, inputs: list[np.ndarray], in_place: bool = False) -> dict[str, float]:
    """Seconds per group's kernel: each on warm caches, or with `in_place` timed inside whole runs of the
    model (caches as the kernels before it leave them)."""
    times = module.kernel_times(*inputs, repeat=5, in_place=in_place, min_seconds=0.05)
    return {step.group.name: seconds for step, seconds in zip(module.steps, times)}


def step_seconds(module: Module, inputs: list[np.ndarray]) -> dict[str, float]:
    """Seconds per task key: its steps' kernel times summed, each on warm caches."""
    by_group, out = group_seconds(module, inputs), {}
    for step in module.steps:
        out[step.task.key] = out.get(step.task.key, 0.0) + by_group[step.group.name]
    return out


def random_model_inputs(partition, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    g = partition.graph
    return [rng.standard_normal(g.type_of(v).shape).astype(g.type_of(v).dtype)
            if np.dtype(g.type_of(v).dtype).kind == "f" else np.zeros(g.type_of(v).shape, g.type_of(v).dtype)
            for v in g.inputs]


def choose(mode: str, partition, target, programs, tasks, searched: tuple, store) -> tuple[tuple, list]:
    """The (kernels, fills, workspaces) to build the model with, and a TemplateDecision per task
    that has a template or was considered for one."""
    kernels, fills, workspaces = searched
    tpl, tpl_fills, reasons = template_kernels(partition, target, programs, tasks, store)
    decisions = [TemplateDecision(t.name, t.weight, "search", None, None, reasons[t.key])
                 for t in tasks if t.key in reasons]
    if not tpl:
        return searched, decisions
    swapped = ({**kernels, **tpl}, {**{k: v for k, v in fills.items() if k not in tpl}, **tpl_fills},
               {**workspaces, **{k: () for k in tpl}})
    if mode == "templates":
        decisions += [TemplateDecision(t.name, t.weight, "template", None, None, "kernels='templates'")
                      for t in tasks if t.key in tpl]
        return swapped, decisions
    inputs = random_model_inputs(partition)
    ours = step_seconds(Module(partition, swapped[0], tasks, programs, target, fills=swapped[1],
                               workspaces=swapped[2]), inputs)
    theirs = step_seconds(Module(partition, kernels, tasks, programs, target, fills=fills, workspaces=workspaces),
                          inputs)
    final_k, final_f, final_w = dict(kernels), dict(fills), dict(workspaces)
    for t in tasks:
        if t.key not in tpl:
            continue
        faster = ours[t.key] < theirs[t.key]
        decisions.append(TemplateDecision(t.name, t.weight, "template" if faster else "search", ours[t.key],
                                          theirs[t.key], "faster in the model" if faster else "slower in the model"))
        if faster:
            final_k[t.key], final_w[t.key] = tpl[t.key], ()
            final_f.pop(t.key, None)
            final_f[t.key] = tpl_fills[t.key]
    return (final_k, final_f, final_w), decisions

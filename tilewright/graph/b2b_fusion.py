"""Persistent back-to-back fusion in a model (`compile(fuse_b2b=True)`, Bolt section 3.2): a dense
layer with its fused tail whose only reader is a second dense layer becomes one step running
kernels/b2b.py's fused kernel; the intermediate is never written to the arena. The pass finds the
pairs on the fused partition, merges each pair into one group placed where the second ran (every
value the second reads exists there), and builds the fused kernel from the profiler's best tile,
which passed the static residency check. A pair the check refuses, or one that "auto" measures
slower than its two kernels, stays unfused with the reason in `module.templates`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..codegen.c import CSource
from ..errors import TilewrightError
from ..kernels import B2BProblem, GemmProblem, profile
from ..kernels.b2b import check_residency, second_tile
from ..kernels.cpu_source import b2b_source
from ..kernels.template_kernel import NativeKernel, pack_bias, pack_weight
from .lower_te import group_program
from .partition import Group, Partition
from .tasks import extract_tasks
from .templates import TemplateMatch, kn_weight, match_group


@dataclass(frozen=True)
class B2BPair:
    first: Group
    second: Group
    matches: tuple[TemplateMatch, TemplateMatch]

    @property
    def problem(self) -> B2BProblem:
        a, b = self.matches
        return B2BProblem(a.problem, b.problem, (a.epilogue, b.epilogue))

    @property
    def name(self) -> str:
        return f"{self.first.name}_b2b"


def find_pairs(partition: Partition) -> tuple[list[B2BPair], list[tuple[str, str]]]:
    """Pairs to fuse (none sharing a group), and (first group's name, reason) for each dense layer
    feeding another dense layer that cannot fuse with it."""
    graph = partition.graph
    readers: dict[str, list[Group]] = {}
    for g in partition.groups:
        for v in dict.fromkeys(g.inputs):
            readers.setdefault(v, []).append(g)
    pairs, refused, taken = [], [], set()
    for g in partition.groups:
        first = match_group(g, graph) if not g.is_view else "a view"
        if isinstance(first, str) or g.name in taken or len(readers.get(first.out, [])) != 1:
            continue
        nxt = readers[first.out][0]
        second = match_group(nxt, graph)
        if isinstance(second, str) or second.x != first.out:
            continue  # the reader is not a dense layer taking it as its rows
        why = _why_not(first, second, graph)
        if why:
            refused.append((g.name, why))
        elif nxt.name not in taken:
            pairs.append(B2BPair(g, nxt, (first, second)))
            taken |= {g.name, nxt.name}
    return pairs, refused


def _why_not(first: TemplateMatch, second: TemplateMatch, graph) -> str:
    if not all(isinstance(m.problem, GemmProblem) for m in (first, second)):
        return "a convolution: the fused kernel reads and writes NHWC, a model's convolutions run NCHW{b}c"
    if first.out in graph.outputs:
        return "the intermediate is a model output"
    if first.residual is not None:
        return "the first layer adds a residual (kept for a fused pair only on the second)"
    if second.residual == first.out:
        return "the second layer adds the intermediate itself as its residual"
    if second.problem.M != first.problem.M or second.problem.K != first.problem.N:
        return "the second layer does not read the first's output as its rows"
    return ""


def fuse_pairs(partition: Partition, programs: dict, pairs: list[B2BPair]) -> tuple[Partition, dict, list]:
    """The partition with each pair merged into one group at the second's place, the programs of
    its groups, and the tasks of the merged groups (pairs of one shape share a task)."""
    by_second = {p.second.name: p for p in pairs}
    firsts = {p.first.name for p in pairs}
    groups, merged = [], []
    for g in partition.groups:
        if g.name in firsts:
            continue
        p = by_second.get(g.name)
        if p is None:
            groups.append(g)
            continue
        inside = p.matches[0].out
        ins = p.first.inputs + tuple(v for v in p.second.inputs if v not in p.first.inputs and v != inside)
        m = Group(p.name, p.first.nodes + p.second.nodes, ins, p.second.outputs, p.first.anchor, p.first.pattern)
        groups.append(m)
        merged.append(m)
    fused = Partition(partition.graph, tuple(groups))
    new_programs = {g.name: programs[g.name] for g in groups if g.name in programs}
    new_programs.update({m.name: group_program(partition.graph, m) for m in merged})
    tasks = extract_tasks(Partition(partition.graph, tuple(merged)), {m.name: new_programs[m.name] for m in merged})
    return fused, new_programs, tasks


class B2BFill:
    """Packs a pair's two weights (and biases) from its constants, once."""

    def __init__(self, pair: B2BPair, tile, tile1, slots: dict[str, int]):
        self.pair, self.tiles, self.slots = pair, (tile, tile1), slots
        a, b = pair.matches
        self.names = tuple(n for n, keep in (("b2b_weight0", True), ("b2b_bias0", a.bias is not None),
                                             ("b2b_weight1", True), ("b2b_bias1", b.bias is not None)) if keep)

    def run(self, arrays: list) -> list:
        out = []
        for stage, (m, tile) in enumerate(zip(self.pair.matches, self.tiles)):
            p = m.problem
            w = kn_weight(p, arrays[self.slots[f"w{stage}"]])
            out.append(pack_weight(w, p.K, p.N, tile.nr))
            if m.bias is not None:
                out.append(pack_bias(arrays[self.slots[f"b{stage}"]], p.N, tile.nr))
        return out


class GraphB2BKernel(NativeKernel):
    """A fused pair built for a model's step: `tw_call` takes the merged group's values in its
    task's order, then the packs of its B2BFill."""

    def __init__(self, pair: B2BPair, tile, values: tuple[str, ...], target):
        problem = pair.problem
        check_residency(problem, tile, target)
        tile1 = second_tile(tile, problem, target)
        a, b = pair.matches
        slots = {"x": values.index(a.x), "w0": values.index(a.weight), "w1": values.index(b.weight),
                 "out": values.index(b.out)}
        call = {"x": slots["x"], "out": slots["out"]}
        extra = len(values)
        for name, value, pack in (("w0", a.weight, "bp0"), ("b0", a.bias, "bias0"), ("w1", b.weight, "bp1"),
                                  ("b1", b.bias, "bias1")):
            if value is not None:
                slots[name] = values.index(value)
                call[pack], extra = extra, extra + 1
        if b.residual is not None:
            call["res"] = values.index(b.residual)
        self.pair, self.tile, self.tile1 = pair, tile, tile1
        self.fill = B2BFill(pair, tile, tile1, slots)
        super().__init__(b2b_source(a.problem, problem.gemm1, problem.epilogues, tile, tile1, call_slots=call),
                         target, problem.name)
        self._source = CSource(self.source, "tw_kernel", "")  # what graph/export.py reads

    def set_num_threads(self, n: int) -> None:
        self._lib.tw_set_num_threads(int(n))

    def temporary_bytes(self, cores: int) -> int:
        n0 = self.pair.problem.first.N
        rows = self.tile.mc * -(-n0 // self.tile.nr) * self.tile.nr
        return 4 * cores * (rows + self.tile.mr * self.tile.nr + self.tile1.mr * self.tile1.nr)


def fused_kernels(pairs: list[B2BPair], partition: Partition, programs: dict, target, store):
    """Profile each pair's fused kernel and build it once per merged task. Returns (the pairs that
    built, kernel per merged task key, fill per merged task key, (pair, reason) for the refused)."""
    kept, tile_of, refused = [], {}, []
    for p in pairs:
        try:
            tile_of[p.name] = profile(p.problem, target, records=store).best
            kept.append(p)
        except TilewrightError as exc:
            refused.append((p, f"no fused kernel: {exc}"))
    _, merged_programs, tasks = fuse_pairs(partition, programs, kept)
    pair_of = {p.name: p for p in kept}
    kernels, fills = {}, {}
    for t in tasks:
        prog = merged_programs[t.groups[0]]
        values = tuple(prog.input_values) + tuple(prog.output_values)
        kernels[t.key] = GraphB2BKernel(pair_of[t.groups[0]], tile_of[t.groups[0]], values, target)
        fills[t.key] = kernels[t.key].fill
    return kept, kernels, fills, refused


def without(tasks: list, groups: set[str]) -> list:
    """The tasks with `groups` taken out (a task left with none is dropped)."""
    out = []
    for t in tasks:
        rest = [g for g in t.groups if g not in groups]
        if rest:
            out.append(t if len(rest) == len(t.groups) else dataclasses.replace(t, groups=rest))
    return out


@dataclass(frozen=True)
class B2BDecision:
    pair: str  # the merged group's name, or the first layer's group where no pair formed
    groups: int  # pairs of this shape in the model
    fused: bool
    fused_s: float | None  # the merged steps' kernel times, summed, timed inside the model
    unfused_s: float | None  # the two kernels of each pair, summed, timed inside the model
    why: str

    def line(self) -> str:
        from .template_choice import ms

        return (f"{self.pair} x{self.groups}: {'fused' if self.fused else 'unfused'} (fused {ms(self.fused_s)}, "
                f"unfused pair {ms(self.unfused_s)}; {self.why})")


def choose_b2b(mode: str, partition: Partition, target, programs: dict, tasks: list, chosen: tuple, store):
    """Fuse the model's pairs: with mode "templates" every pair whose fused kernel builds, with "auto"
    those whose fused step runs faster inside the model than their two kernels as `chosen` (kernels,
    fills, workspaces) built them. Returns (partition, programs, tasks, chosen, decisions)."""
    from .module import Module
    from .template_choice import group_seconds, random_model_inputs

    pairs, near = find_pairs(partition)
    decisions = [B2BDecision(g, 1, False, None, None, why) for g, why in near]
    if not pairs:
        return partition, programs, tasks, chosen, decisions
    kept, kernels, fills, refused = fused_kernels(pairs, partition, programs, target, store)
    decisions += [B2BDecision(p.name, 1, False, None, None, why) for p, why in refused]

    def assemble(subset: list[B2BPair]):
        fused, merged_programs, merged_tasks = fuse_pairs(partition, programs, subset)
        absorbed = {n for p in subset for n in (p.first.name, p.second.name)}
        keys = {t.key for t in merged_tasks}
        triple = ({**chosen[0], **{k: kernels[k] for k in keys}}, {**chosen[1], **{k: fills[k] for k in keys}},
                  {**chosen[2], **{k: () for k in keys}})
        return fused, merged_programs, without(tasks, absorbed) + merged_tasks, triple, merged_tasks

    winners = kept
    if mode == "auto" and kept:
        inputs = random_model_inputs(partition)
        # timed in place: where fusion's saving on a CPU (the intermediate left in cache) would show
        before = group_seconds(Module(partition, chosen[0], tasks, programs, target, fills=chosen[1],
                                      workspaces=chosen[2]), inputs, in_place=True)
        fused, merged_programs, all_tasks, triple, merged_tasks = assemble(kept)
        after = group_seconds(Module(fused, triple[0], all_tasks, merged_programs, target, fills=triple[1],
                                     workspaces=triple[2]), inputs, in_place=True)
        pair_of = {p.name: p for p in kept}
        winners = []
        for t in merged_tasks:
            f = sum(after[g] for g in t.groups)
            u = sum(before[pair_of[g].first.name] + before[pair_of[g].second.name] for g in t.groups)
            decisions.append(B2BDecision(t.groups[0], len(t.groups), f < u, f, u,
                                         "faster in the model" if f < u else "slower in the model"))
            winners += [pair_of[g] for g in t.groups] if f < u else []
    elif kept:
        decisions += [B2BDecision(p.name, 1, True, None, None, "kernels='templates'") for p in kept]
    if not winners:
        return partition, programs, tasks, chosen, decisions
    fused, merged_programs, all_tasks, triple, _ = assemble(winners)
    return fused, merged_programs, all_tasks, triple, decisions

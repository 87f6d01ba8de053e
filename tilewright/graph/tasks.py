"""Tasks: the distinct te programs of a partitioned model. Groups whose programs
have the same workload key (structure, shapes and dtypes, not names) are one
task, tuned once; a task's weight is how many groups run it (Ansor's task
weight), so the scheduler gives more trials where more time is spent."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

from ..analysis import workload_key
from ..te.program import collect_program
from .lower_te import GroupProgram, group_program
from .partition import Partition


@dataclass(eq=False)
class Task:
    """`program`: the first group's program, whose args are what `tw.tune` takes.
    `best_cost`: seconds of the best schedule known (inf until measured)."""
    key: str
    program: GroupProgram
    groups: list[str] = field(default_factory=list)
    best_cost: float = math.inf
    trials: int = 0
    # positions of kernel arguments that are graph constants in every group sharing the kernel
    constants: frozenset = frozenset()

    @property
    def weight(self) -> int:
        return len(self.groups)

    @property
    def args(self) -> list:
        return list(self.program.args)

    @property
    def name(self) -> str:
        return self.program.name

    @functools.cached_property
    def flops(self) -> int:
        """Arithmetic of one run of the program (the analysis' count: multiply-add = 2)."""
        from ..analysis import analyze

        return analyze(list(self.program.outputs)).flops

    def arg_order(self, program: GroupProgram) -> list[int] | None:
        """For each argument of this task's kernel, the position of the matching argument of
        `program` (a group of this task: its arguments may be listed in another order), or None."""
        mine, theirs = canonical_positions(self.program), canonical_positions(program)
        if mine is None or theirs is None or sorted(mine) != sorted(theirs):
            return None
        return [theirs.index(c) for c in mine]

    def __repr__(self) -> str:
        return f"<Task {self.name} x{self.weight} key={self.key}>"


def canonical_positions(program: GroupProgram) -> list[int] | None:
    """Where each argument sits in the program's canonical tensor order (what the workload
    key is computed over), or None if some argument is not reachable from the outputs."""
    tensors = collect_program(list(program.outputs)).tensors
    ids = {id(t): n for n, t in enumerate(tensors)}
    out = [ids.get(id(t)) for t in program.args]
    return None if None in out or len(set(out)) != len(out) else out


def lower_partition(partition: Partition) -> dict[str, GroupProgram]:
    """The te program of every group that runs a kernel (views run none), by group name."""
    return {g.name: group_program(partition.graph, g) for g in partition.groups if not g.is_view}


def extract_tasks(partition: Partition, programs: dict[str, GroupProgram] | None = None) -> list[Task]:
    """One Task per distinct workload, in the order of first use."""
    programs = lower_partition(partition) if programs is None else programs
    tasks: dict[str, Task] = {}
    for g in partition.groups:
        if g.is_view:
            continue
        prog = programs[g.name]
        key = workload_key(list(prog.outputs))
        tasks.setdefault(key, Task(key, prog)).groups.append(g.name)
    consts = partition.graph.constants
    for t in tasks.values():
        shared = constant_positions(t.program, consts)
        for g in t.groups[1:]:
            order = t.arg_order(programs[g])
            if order is not None:  # a group with its own kernel (no order) does not constrain this one
                shared &= constant_positions(programs[g], consts, order)
        t.constants = frozenset(shared)
    return list(tasks.values())


def constant_positions(program: GroupProgram, constants, order=None) -> set[int]:
    """Positions of `program`'s arguments (in `order`, if given) that are graph constants."""
    values = program.input_values + program.output_values
    values = values if order is None else tuple(values[i] for i in order)
    return {i for i, v in enumerate(values) if v in constants}

"""Dependence tokens for a VTA-like instruction stream (TVM section 3.5).

The load, compute and store units run their own instructions in order and
meet only through token FIFOs between neighbours (load <-> compute <->
store). Given a program that is correct when run in program order, with the
on-chip regions each instruction reads and writes, `insert_tokens` sets the
push/pop flags so that every conflicting pair of accesses (read after write,
write after read, write after write) by two units happens in program order,
and nothing else is ordered.

For each unit B and neighbour A, walking B's instructions in program order,
instruction y needs the latest instruction x of A it conflicts with; if that
x is later than the last one already synchronised on the A -> B channel, x
pushes a token and y pops it. Both the pushers and the poppers of one channel
then come in increasing program order, so the k-th push pairs with the k-th
pop: the condition of TVM's Theorem 3.1 (for pairs (x, y), (x', y'):
x' > x iff y' > y). An earlier x is already ordered before y, because B
popped a later token of A. Every push has its pop, so no token is left over,
and since each pop's push comes earlier in program order, the program order
itself is a schedule that never waits forever (with FIFOs deep enough; the
simulator checks finite depths)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace

import numpy as np

from ..errors import LoweringError
from ..ir.vta_insn import Deps, FinishInsn, Insn, Module, module_of


@dataclass(frozen=True)
class Access:
    buffer: str  # "inp", "wgt", "acc", "uop"
    lo: int  # element range [lo, hi)
    hi: int


@dataclass(frozen=True)
class Step:
    """One instruction before synchronisation, with the on-chip ranges it touches."""

    insn: Insn
    reads: tuple[Access, ...] = ()
    writes: tuple[Access, ...] = ()


_NEIGHBOURS = {Module.LOAD: (Module.COMPUTE,), Module.COMPUTE: (Module.LOAD, Module.STORE),
               Module.STORE: (Module.COMPUTE,)}


def _is_prev(a: Module, b: Module) -> bool:
    """Whether `a` comes before `b` in the load -> compute -> store pipeline."""
    return a < b


def _conflicts(steps: list[Step], depths: dict[str, int]):
    """Per step: {neighbour unit: the latest earlier step of it this one must follow}."""
    last_w = {m: {b: np.full(n, -1, np.int64) for b, n in depths.items()} for m in Module}
    last_r = {m: {b: np.full(n, -1, np.int64) for b, n in depths.items()} for m in Module}
    users: dict[str, set[Module]] = {b: set() for b in depths}  # units that touched each buffer so far
    for y, step in enumerate(steps):
        b = module_of(step.insn)
        need: dict[Module, int] = {}
        for m in {m for acc in (*step.reads, *step.writes) for m in users[acc.buffer]} - {b}:
            x = -1
            for acc in step.reads:
                x = max(x, int(last_w[m][acc.buffer][acc.lo:acc.hi].max(initial=-1)))
            for acc in step.writes:
                x = max(x, int(last_w[m][acc.buffer][acc.lo:acc.hi].max(initial=-1)),
                        int(last_r[m][acc.buffer][acc.lo:acc.hi].max(initial=-1)))
            if x >= 0:
                if m not in _NEIGHBOURS[b]:
                    raise LoweringError(f"VTA step {y} ({type(step.insn).__name__}, {b.name.lower()} unit) "
                                        f"conflicts with step {x} of the {m.name.lower()} unit, which no token "
                                        f"FIFO connects it to")
                need[m] = x
        for acc in step.reads:
            last_r[b][acc.buffer][acc.lo:acc.hi] = y
            users[acc.buffer].add(b)
        for acc in step.writes:
            last_w[b][acc.buffer][acc.lo:acc.hi] = y
            users[acc.buffer].add(b)
        yield y, b, need


def insert_tokens(steps: list[Step], depths: dict[str, int]) -> list[Insn]:
    """The instructions of `steps` with their dependence flags set (see the module docstring).
    `depths`: elements per on-chip buffer. A final FINISH waits for the last load and store."""
    steps = list(steps)
    if not steps or not isinstance(steps[-1].insn, FinishInsn):
        steps.append(Step(FinishInsn()))
    last = {m: max((i for i, s in enumerate(steps[:-1]) if module_of(s.insn) is m), default=-1)
            for m in (Module.LOAD, Module.STORE)}
    flags: dict[int, set[str]] = {}
    covered: dict[tuple[Module, Module], int] = {}
    for y, b, need in _conflicts(steps, depths):
        if y == len(steps) - 1:  # the FINISH: everything before it is done
            need = {m: x for m, x in last.items() if x >= 0}
        for a, x in need.items():
            if x <= covered.get((a, b), -1):
                continue
            covered[(a, b)] = x
            push, pop = ("push_next", "pop_prev") if _is_prev(a, b) else ("push_prev", "pop_next")
            flags.setdefault(x, set()).add(push)
            flags.setdefault(y, set()).add(pop)
    out = [s.insn for s in steps]
    deps: dict[tuple, Deps] = {}
    for n, names in flags.items():
        d = out[n].deps
        key = (d, frozenset(names))
        if key not in deps:
            deps[key] = replace(d, **dict.fromkeys(names, True))
        out[n] = _with_deps(out[n], deps[key])
    return out


def _with_deps(insn: Insn, deps: Deps) -> Insn:
    """`replace(insn, deps=deps)` without re-running the dataclass constructor (a hot path: every flagged
    instruction of a large program)."""
    new = copy.copy(insn)
    object.__setattr__(new, "deps", deps)
    return new


def check_theorem_3_1(insns: list[Insn]) -> None:
    """Raise if, on some channel, the k-th push does not come before the k-th pop in program
    order, or pushes and pops do not balance (what `insert_tokens` guarantees)."""
    pushes: dict[tuple[Module, Module], list[int]] = {}
    pops: dict[tuple[Module, Module], list[int]] = {}
    for n, insn in enumerate(insns):
        m, d = module_of(insn), insn.deps
        for flag, other in (("push_prev", -1), ("push_next", 1), ("pop_prev", -1), ("pop_next", 1)):
            if not getattr(d, flag):
                continue
            if not 0 <= m + other <= 2:
                raise LoweringError(f"VTA instruction {n}: {flag} on the {m.name.lower()} unit, which has no "
                                    f"neighbour on that side")
            if flag.startswith("push"):
                pushes.setdefault((m, Module(m + other)), []).append(n)
            else:
                pops.setdefault((Module(m + other), m), []).append(n)
    for ch in set(pushes) | set(pops):
        xs, ys = pushes.get(ch, []), pops.get(ch, [])
        if len(xs) != len(ys):
            raise LoweringError(f"VTA channel {ch[0].name.lower()} -> {ch[1].name.lower()}: {len(xs)} pushes, "
                                f"{len(ys)} pops")
        for x, y in zip(xs, ys):
            if x >= y:
                raise LoweringError(f"VTA channel {ch[0].name.lower()} -> {ch[1].name.lower()}: the token pushed "
                                    f"by instruction {x} is popped by instruction {y}, which comes before it")


__all__ = ["Access", "Step", "check_theorem_3_1", "insert_tokens"]

"""Constant weights packed once, when the model is built, not on every call.

A tuned convolution or dense kernel usually copies its weights into a blocked,
vector-friendly order (the `pack.<input>` knob) inside every call; in a model the
weights are constants, so that copy is the same each time. For a CPU kernel whose
arguments include graph constants, the kernel is built with those packs moved
out (lower/hoist_packs.py): the model runs the pack function once per group at
build time and passes the packed arrays as extra constant arguments."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..runtime.aligned import aligned_zeros


@dataclass(frozen=True)
class PackFill:
    """The kernel that fills a task kernel's hoisted packs, and what it fills."""
    kernel: object  # a built Kernel of Hoisted.pack
    hoisted: object  # lower.hoist_packs.Hoisted

    @property
    def names(self) -> tuple[str, ...]:
        """The packed buffers' names, in the order `run` returns them."""
        return tuple(p.buffer.name for p in self.hoisted.packs)

    def run(self, arrays: list) -> list[np.ndarray]:
        """The packed arrays for one group, whose kernel arguments are `arrays` (original
        order; only the constants among them are read)."""
        packed = [aligned_zeros(p.buffer.size, p.buffer.dtype.name) for p in self.hoisted.packs]
        full = list(arrays) + packed
        self.kernel(*[full[i] for i in self.hoisted.pack_args])
        return packed


def build_kernel(args: list, constant_positions: set[int], target, name: str):
    """The kernel for `args` (best record or default schedule), its PackFill (None where no
    pack of a constant could move), and the bytes of each temporary it takes as an argument
    after those (lower/workspace.py; none on targets other than the CPU)."""
    from ..backends import backend_for
    from ..codegen.c import STACK_LIMIT
    from ..lower.hoist_packs import hoist_constant_packs
    from ..lower.verify import verify
    from ..lower.workspace import lift_workspace
    from ..search.best import best_schedule

    backend = backend_for(target)
    if backend.operator_compiler is not None:  # a whole-operator backend (VTA, AIE, HLS): it builds the tensors
        return backend.operator_compiler(list(args), target), None, ()
    if backend.kind != "cpu":  # packs hoist and workspaces lift on the CPU's C modules only
        return backend.build(best_schedule(backend, args, target), args, target, name), None, ()
    s = best_schedule(backend, args, target, [args[i] for i in constant_positions])
    func = backend.lower(s, args, name, target)
    hoisted = hoist_constant_packs(func, {args[i].name for i in constant_positions}) if constant_positions else None
    kernel, lifted = lift_workspace(func if hoisted is None else hoisted.kernel, STACK_LIMIT)
    workspace = tuple(b.size * b.dtype.bytes for b in lifted)
    if hoisted is None:
        return backend.build_func(kernel, target), None, workspace
    verify(kernel)
    verify(hoisted.pack)
    return (backend.build_func(kernel, target), PackFill(backend.build_func(hoisted.pack, target), hoisted),
            workspace)


__all__ = ["PackFill", "build_kernel"]

"""`tw.lower` and `tw.build`: schedule -> loop IR -> C -> compiled Kernel."""

from __future__ import annotations

from .build import build_library
from .codegen import generate_c
from .lower import LoweredFunc
from .lower import lower as _lower
from .runtime import Kernel
from .schedule import Schedule
from .targets import as_target


def lower(s: Schedule, args, name: str = "kernel") -> LoweredFunc:
    """The loop IR of `s`; print it to read C-like pseudo-code."""
    return _lower(s, args, name)


def build(s, args=None, target="cpu", name: str = "kernel") -> Kernel:
    """Compile schedule `s` for `target` into a callable Kernel taking `args` in
    order. Given tensors instead of a schedule (`tw.build([A, B, C])`), it uses
    the best tuning record of the active `with tw.records(...)` store for this
    workload and target, or else the untuned default schedule."""
    tgt = as_target(target)
    if not isinstance(s, Schedule):
        from .tuning import best_schedule

        args = list(s) if args is None else list(args)
        s = best_schedule(args, tgt)
    func = _lower(s, args, name)
    source = generate_c(func)
    lib = build_library(source.text, tgt)
    return Kernel(func, source, lib, tgt)

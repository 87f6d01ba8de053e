"""Targets as plug-ins: one `Backend` record per target kind, assembled here
and nowhere else, pointing at its pieces in the stage folders: the schedule
space (`space/`), the lowering pass list (`lower/`), the renderer
(`codegen/`), the compiler (`build/`) and the runtime (`runtime/`).

`tw.build`, the tuner and the measurer ask the record; nothing else branches
on `target.kind`. Pieces are imported when a record is first asked for
(`backend_for`), so using the CPU never imports a GPU driver, and no
registry is filled as an import side effect."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from .errors import TilewrightError
from .targets import KINDS, Target


@dataclass(frozen=True)
class Backend:
    """What a target kind plugs in. Every callable takes the target explicitly.

    space(outputs, target) -> (Space, plan); apply(outputs, plan, point) -> Schedule;
    default_point(space, plan) -> Point; heuristic_points(space, plan, k) -> [Point]
      (the four are None for a kind with no schedule space yet: tuning says so);
    lower(schedule, args, name, target) -> LoweredFunc (the kind's passes and limits);
    render(func, target) -> source (`.text` is what the compiler takes);
    compile(source, target, timeout) -> artefact (`.path`: what a runner process loads);
    load(func, source, artefact, target) -> a callable kernel (`.source`, `.time()`, `.export()`);
    runner: the module whose `open_artefact(path, config)` a measuring process calls."""

    kind: str
    space: Callable | None
    apply: Callable | None
    default_point: Callable | None
    heuristic_points: Callable | None
    lower: Callable
    render: Callable
    compile: Callable
    load: Callable
    runner: str

    def build(self, schedule, args, target: Target, name: str = "kernel"):
        """Lower, render, compile (cached) and load `schedule` as a kernel taking `args`."""
        func = self.lower(schedule, args, name, target)
        source = self.render(func, target)
        return self.load(func, source, self.compile(source, target), target)

    def require_space(self) -> None:
        if self.space is None:
            raise TilewrightError(f"target kind '{self.kind}' has no schedule space yet, so it cannot be tuned or "
                                  f"given a default schedule; write one by hand (s[C].bind(...)) and tw.build it")


def _cpu() -> Backend:
    from .build import build_library
    from .codegen import generate_c
    from .lower import lower
    from .runtime import Kernel
    from .space import apply_cpu, cpu_space, default_point, heuristic_points

    return Backend(
        kind="cpu", space=cpu_space, apply=apply_cpu, default_point=default_point,
        heuristic_points=heuristic_points,
        lower=lambda s, args, name, target: lower(s, args, name),
        render=lambda func, target: generate_c(func),
        compile=lambda source, target, timeout=300.0: build_library(source.text, target, timeout=timeout),
        load=lambda func, source, artefact, target: Kernel(func, source, artefact, target),
        runner="tilewright.runtime.runner",
    )


_FACTORIES: dict[str, Callable[[], Backend]] = {"cpu": _cpu}


def register_backend(kind: str, factory: Callable[[], Backend]) -> None:
    """Plug in (or replace) the backend of a target kind; called explicitly, never on import."""
    if kind not in KINDS:
        raise TilewrightError(f"unknown target kind {kind!r}; valid: {', '.join(KINDS)}")
    _FACTORIES[kind] = factory
    _made.cache_clear()


@functools.cache
def _made(kind: str) -> Backend:
    return _FACTORIES[kind]()


def backend_for(target: Target) -> Backend:
    """The plug-in of `target`'s kind."""
    if target.kind not in _FACTORIES:
        raise TilewrightError(f"no backend for target kind '{target.kind}' in this build of tilewright; "
                              f"available: {', '.join(sorted(_FACTORIES))}")
    return _made(target.kind)


__all__ = ["Backend", "backend_for", "register_backend"]

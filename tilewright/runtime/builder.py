"""`LocalBuilder`: the builder half of measuring. Candidate schedules are lowered and rendered through the
backend record (serially: it is Python), then compiled in parallel (the compiler runs as a subprocess per
candidate, on TILEWRIGHT_BUILD_CPUS where set). Each candidate becomes a `BuildResult`: the artefact's
path, or the failure (instantiate or compile) that a measurement records in its place."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..config import build_cpus, pin_this_thread, usable_cores
from ..errors import BuildError, TilewrightError
from .result import ErrorKind, MeasureResult


@dataclass
class BuildResult:
    library: str | None = None
    error: MeasureResult | None = None
    build_s: float = 0.0
    source: str = field(default="", repr=False)


class LocalBuilder:
    """Builds schedules of a program whose arguments are `args` for `target` through `backend` (its lower,
    render, render_packed and compile). `constants`: names of inputs a model never changes, whose packs the
    backend may hoist out of the timed kernel. `compile_timeout`: seconds one compilation may take."""

    def __init__(self, backend, target, args: list, constants=frozenset(), compile_timeout: float = 60.0,
                 workers: int | None = None):
        self.backend, self.target, self.args, self.constants = backend, target, args, constants
        self.compile_timeout = compile_timeout
        self.cpus = build_cpus()  # TILEWRIGHT_BUILD_CPUS, checked here: a bad list fails before any work
        self.workers = workers or len(self.cpus or ()) or usable_cores()

    def render_one(self, schedule) -> tuple[object, float] | BuildResult:
        """(the source to compile, seconds spent) or the BuildResult of the failure that stopped it."""
        start = time.perf_counter()
        if isinstance(schedule, BaseException):
            return BuildResult(error=MeasureResult(error_kind=ErrorKind.INSTANTIATE, error_msg=message(schedule)))
        b = self.backend
        try:
            func = b.lower(schedule, self.args, "kernel", self.target)
            source = None
            if self.constants and b.render_packed is not None:
                source = b.render_packed(func, self.target, self.constants)
            return source or b.render(func, self.target), time.perf_counter() - start
        except TilewrightError as exc:
            return BuildResult(error=MeasureResult(error_kind=ErrorKind.INSTANTIATE, error_msg=message(exc)))

    def build_one(self, schedule) -> BuildResult:
        rendered = self.render_one(schedule)
        if isinstance(rendered, BuildResult):
            return rendered
        source, render_s = rendered
        start = time.perf_counter() - render_s
        try:
            artefact = self.backend.compile(source, self.target, self.compile_timeout)
        except BuildError as exc:
            return BuildResult(error=MeasureResult(error_kind=ErrorKind.COMPILE, error_msg=message(exc),
                                                   build_s=time.perf_counter() - start))
        return BuildResult(library=str(artefact.path), build_s=time.perf_counter() - start, source=str(source))

    def build(self, schedules: list) -> list[BuildResult]:
        """One BuildResult per schedule (or the exception that stopped making it), in order. The runner,
        started from the main thread, keeps the process's cores; the compilers run on the build CPUs."""
        with ThreadPoolExecutor(self.workers, initializer=pin_this_thread, initargs=(self.cpus,)) as pool:
            return list(pool.map(self.build_one, schedules))


def message(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:2000]


__all__ = ["BuildResult", "LocalBuilder", "message"]

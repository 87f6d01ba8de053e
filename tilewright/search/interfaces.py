"""The interfaces a tuning task is composed of (MetaSchedule's), as typing Protocols: what any builder,
runner or database must offer. The space generator is a concrete class (space/generator.py) built from
a backend record's functions. Implementations: LocalBuilder / RayBuilder, LocalRunner / RayRunner,
Records (SQLite)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..records import Record
from ..runtime.builder import BuildResult
from ..runtime.result import MeasureResult


@runtime_checkable
class Builder(Protocol):
    """Candidate schedules -> artefacts, or the failure (instantiate, lower, compile) with its error kind."""

    def build(self, schedules: list) -> list[BuildResult]: ...


@runtime_checkable
class Runner(Protocol):
    """Artefacts -> MeasureResult, checked against the reference, with the device's own timeout; `best`
    and `baseline` (fastest so far, the default point's time) scale that timeout."""

    best: float
    baseline: float

    def run(self, library: str) -> MeasureResult: ...

    def run_retrying(self, library: str) -> MeasureResult: ...

    def time_limit(self) -> float: ...

    def suspend(self) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class Database(Protocol):
    """Every measurement, committed as it happens, keyed by workload and target; written by the driver only."""

    def add(self, record: Record) -> None: ...

    def query(self, workload: str | None = None, target: str | None = None) -> list[Record]: ...

    def best(self, workload: str, target: str, k: int = 1) -> list[Record]: ...

    def count(self) -> int: ...


__all__ = ["Builder", "Database", "Runner"]

"""`TuneOptions`: how a tuning task searches, checked once where it is made. `tw.tune`, `tw.compile` and the
task scheduler all build one from their keyword arguments (`TuneOptions.of`), so a misspelled or out-of-range
option fails at the call that passed it, naming the valid ones, instead of being threaded down as `**kwargs`."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path

from ..errors import TilewrightError

COST_MODELS = ("auto", "on", "off")


@dataclass(frozen=True)
class TuneOptions:
    """method: the search strategy ("q", "p", "random"); timeout: seconds a candidate may run at most;
    seed: of the strategy, the inputs and the cost model; early_stop: stop a task after this many trials
    without improvement (None: max(60, half its budget)); batch: candidates per measured batch (None: two
    per core); warmup: trials proposed without the cost model (None: a fifth of the budget, at most 20);
    progress: a progress line on stderr (None: when it is a terminal); log: the log file (None: one in the
    cache directory); from_default: measure the heuristic default points first; cost_model: "auto" | "on"
    | "off" (search/prescreen.py); flush_cache: time single calls after evicting the caches."""
    method: str = "q"
    timeout: float = 10.0
    seed: int = 0
    early_stop: int | None = None
    batch: int | None = None
    warmup: int | None = None
    progress: bool | None = None
    log: str | Path | None = None
    from_default: bool = True
    cost_model: str = "auto"
    flush_cache: bool = False

    def __post_init__(self):
        from . import METHODS

        if self.method not in METHODS:
            raise TilewrightError(f"tune: unknown search method {self.method!r}; valid: {', '.join(METHODS)}")
        if self.cost_model not in COST_MODELS:
            raise TilewrightError(f"tune: cost_model must be one of {', '.join(map(repr, COST_MODELS))}, "
                                  f"got {self.cost_model!r}")
        if not _number(self.timeout) or self.timeout <= 0:
            raise TilewrightError(f"tune: timeout must be a positive number of seconds, got {self.timeout!r}")
        check_count("seed", self.seed, lowest=0)
        for name in ("early_stop", "batch"):
            check_count(name, getattr(self, name), optional=True)
        check_count("warmup", self.warmup, lowest=0, optional=True)
        for name in ("from_default", "flush_cache"):
            if not isinstance(getattr(self, name), bool):
                raise TilewrightError(f"tune: {name} must be True or False, got {getattr(self, name)!r}")
        if self.progress is not None and not isinstance(self.progress, bool):
            raise TilewrightError(f"tune: progress must be True, False or None, got {self.progress!r}")

    @classmethod
    def of(cls, options: TuneOptions | None = None, **kwargs) -> TuneOptions:
        """`options` (or the defaults) with `kwargs` replaced; an unknown name is an error naming the valid ones."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - names)
        if unknown:
            raise TilewrightError(f"tune: unknown option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                                  f"valid: {', '.join(sorted(names))}")
        return replace(options or cls(), **kwargs)


def check_count(name: str, value, lowest: int = 1, optional: bool = False) -> None:
    """`value` is an int >= `lowest` (or None where `optional`), else a TilewrightError naming `name`."""
    if value is None and optional:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < lowest:
        want = {0: "a non-negative int", 1: "a positive int"}.get(lowest, f"an int >= {lowest}")
        raise TilewrightError(f"tune: {name} must be {want}{' or None' if optional else ''}, got {value!r}")


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


__all__ = ["COST_MODELS", "TuneOptions", "check_count"]

"""What measuring one candidate gives: its times or the kind of failure that stopped it."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from ..stats import median


class ErrorKind(enum.Enum):
    NONE = "none"
    INSTANTIATE = "instantiate"  # the point's schedule or its lowering was rejected
    COMPILE = "compile"
    RUNTIME = "runtime"  # crashed or returned an error code
    TIMEOUT = "timeout"
    WRONG_RESULT = "wrong_result"


@dataclass(frozen=True)
class MeasureResult:
    costs: tuple[float, ...] = ()  # seconds per call, one per repeat
    error_kind: ErrorKind = ErrorKind.NONE
    error_msg: str = ""
    build_s: float = 0.0
    run_s: float = 0.0
    library: str = ""  # the built artefact that was run (re-timing runs it again without rebuilding)

    @property
    def ok(self) -> bool:
        return self.error_kind is ErrorKind.NONE

    @property
    def cost(self) -> float:
        """Median seconds per call; inf for a failed measurement."""
        return median(self.costs) if self.ok else math.inf


__all__ = ["ErrorKind", "MeasureResult"]

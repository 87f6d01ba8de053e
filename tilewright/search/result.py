"""What a tuning run returns: its trials and the `TuneResult` (best point and cost, the untuned default's
cost, history, report, and the best kernel built through the backend record)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import TilewrightError
from ..records import Record
from ..space import Point


@dataclass(frozen=True)
class Trial:
    index: int
    elapsed_s: float
    point: Point
    cost: float
    error_kind: str
    error_msg: str
    best_cost: float


@dataclass
class TuneResult:
    args: list
    outputs: list
    target: object
    backend: object
    space: object
    plan: object
    method: str
    workload: str
    best_point: Point | None
    best_cost: float
    default_cost: float
    history: list[Trial] = field(default_factory=list)
    log_path: Path | None = None
    cost_model: str = ""  # what the learned cost model did in this run (report line)

    @property
    def flops(self) -> int:
        return self.plan.graph.flops

    @property
    def gflops(self) -> float:
        return self.flops / self.best_cost / 1e9 if math.isfinite(self.best_cost) else 0.0

    @property
    def errors(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.history:
            if t.error_kind != "none":
                out[t.error_kind] = out.get(t.error_kind, 0) + 1
        return out

    def schedule(self):
        if self.best_point is None:
            raise TilewrightError("tuning found no working schedule; see the errors in the report")
        return self.backend.apply(self.outputs, self.plan, self.best_point)

    def build(self):
        """The best kernel, compiled (cached), taking `args` in order."""
        return self.backend.build(self.schedule(), self.args, self.target)

    def report(self) -> str:
        lines = [f"tuned {self.plan.main.name} ({self.flops / 1e9:.3f} GFLOP) on {self.target} with method "
                 f"{self.method}: {len(self.history)} measurements"]
        if math.isfinite(self.default_cost):
            lines.append(f"  untuned default: {self.default_cost * 1e3:.4f} ms "
                         f"({self.flops / self.default_cost / 1e9:.1f} GFLOP/s)")
        if math.isfinite(self.best_cost):
            gain = f", {self.default_cost / self.best_cost:.2f}x over default" if math.isfinite(self.default_cost) \
                else ""
            lines.append(f"  best: {self.best_cost * 1e3:.4f} ms ({self.gflops:.1f} GFLOP/s{gain})")
            lines.append(f"  point: {self.best_point}")
        if self.cost_model:
            lines.append(f"  cost model: {self.cost_model}")
        if self.errors:
            lines.append("  failed candidates: " + ", ".join(f"{k} {v}" for k, v in sorted(self.errors.items())))
        if self.log_path:
            lines.append(f"  log: {self.log_path}")
        return "\n".join(lines)


def valid_point(record: Record, space) -> Point | None:
    """A record's point when it parses and lies in this space (records outlive space changes)."""
    try:
        p = space.upgrade(Point.from_json(record.point))
    except ValueError:
        return None
    return p if space.valid(p) else None


__all__ = ["Trial", "TuneResult", "valid_point"]

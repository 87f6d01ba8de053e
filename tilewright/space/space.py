"""A space is an ordered set of knobs; a point gives each knob a value.
Points are frozen, hashable and JSON round-trippable; the space knows each
point's neighbours (one knob moved one step) and its feature vector."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import EmptySpaceError, TilewrightError
from .knobs import OrdinalKnob, SplitKnob


@dataclass(frozen=True)
class Point:
    values: tuple[tuple[str, object], ...]  # (knob name, value) in the space's knob order

    def __getitem__(self, name: str):
        for k, v in self.values:
            if k == name:
                return v
        raise KeyError(name)

    def replace(self, name: str, value) -> Point:
        return Point(tuple((k, value if k == name else v) for k, v in self.values))

    def to_json(self) -> str:
        return json.dumps({k: list(v) if isinstance(v, tuple) else v for k, v in self.values})

    @staticmethod
    def from_json(text: str) -> Point:
        data = json.loads(text)
        return Point(tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in data.items()))

    def __str__(self) -> str:
        return ", ".join(f"{k}={list(v) if isinstance(v, tuple) else v}" for k, v in self.values)


Direction = tuple[str, object, int]  # (knob name, direction within the knob, sign)


class Space:
    def __init__(self, knobs: list, constraint: Callable[[Point], bool] | None = None,
                 sampler: Callable[[random.Random], Point | None] | None = None, added: dict | None = None):
        """`sampler`: draws a point shaped by the target (a GPU's warp-multiple thread counts), for
        spaces whose constraints reject most uniform draws; None where it fails. `added`: knobs
        added after records were written, with the value that does what those records measured."""
        self.knobs: dict[str, SplitKnob | OrdinalKnob] = {k.name: k for k in knobs}
        self.constraint = constraint or (lambda p: True)
        self.sampler = sampler
        self.added = {k: v for k, v in (added or {}).items() if k in self.knobs}

    def upgrade(self, point: Point) -> Point:
        """A recorded point with the knobs added since it was written set as `added` says."""
        have = dict(point.values)
        missing = [k for k in self.added if k not in have]
        if not missing:
            return point
        have.update({k: self.added[k] for k in missing})
        return Point(tuple((k, have[k]) for k in self.knobs if k in have))

    def __len__(self) -> int:
        return len(self.knobs)

    def valid(self, point: Point) -> bool:
        names = [k for k, _ in point.values]
        if names != list(self.knobs):
            return False
        return all(self.knobs[k].valid(v) for k, v in point.values) and self.constraint(point)

    def check(self, point: Point) -> Point:
        if not self.valid(point):
            raise TilewrightError(f"point is not in this space: {point}; knobs are {list(self.knobs)}")
        return point

    def sample(self, rng: random.Random, tries: int = 1000) -> Point:
        for _ in range(tries if self.sampler else 0):
            p = self.sampler(rng)
            if p is not None and self.constraint(p):
                return p
        for _ in range(tries):
            p = Point(tuple((name, k.sample(rng)) for name, k in self.knobs.items()))
            if self.constraint(p):
                return p
        raise EmptySpaceError("could not sample a valid point: the space's constraints reject everything")

    def directions(self) -> list[Direction]:
        """Every move of the space, in a fixed order (the Q-network's outputs)."""
        out: list[Direction] = []
        for name, k in self.knobs.items():
            if isinstance(k, SplitKnob):
                out += [(name, d, s) for d in k.directions() for s in (1, -1)]
                out += [(name, "total", s) for s in (1, -1)]
            else:
                out += [(name, "step", s) for s in (1, -1)]
        return out

    def move(self, point: Point, direction: Direction) -> Point | None:
        name, d, sign = direction
        k, v = self.knobs[name], point[name]
        if isinstance(k, SplitKnob):
            new = k.retotal(v, sign) if d == "total" else k.move(v, d, sign)
        else:
            new = v + sign if 0 <= v + sign < len(k.options) else None
        if new is None:
            return None
        p = point.replace(name, new)
        return p if self.constraint(p) else None

    def neighbours(self, point: Point) -> list[Point]:
        out, seen = [], set()
        for d in self.directions():
            p = self.move(point, d)
            if p is not None and p not in seen:
                seen.add(p)
                out.append(p)
        return out

    def features(self, point: Point) -> list[float]:
        out: list[float] = []
        for name, v in point.values:
            out += self.knobs[name].features(v)
        return out

    def __str__(self) -> str:
        lines = []
        for k in self.knobs.values():
            if isinstance(k, SplitKnob):
                lines.append(f"{k.name}: split {k.axis} (extent {k.extent}) into {k.parts} parts, totals {k.totals}")
            else:
                lines.append(f"{k.name}: one of {list(k.options)}")
        return "\n".join(lines)

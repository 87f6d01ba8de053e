"""`SpaceGenerator` (MetaSchedule's space generator): the schedule space of one program on one target as a
target kind's backend record makes it: the knobs (`space`), the plan they were derived from, `apply(point)
-> Schedule`, the untuned default point and a few heuristic ones. The search only ever sees this object,
so a new target kind plugs in by giving its backend record these four functions."""

from __future__ import annotations

from collections.abc import Callable

from .space import Point, Space


class SpaceGenerator:
    """`make(outputs, target, constants=...) -> (Space, plan)`, `apply(outputs, plan, point) -> Schedule`,
    `default_point(space, plan) -> Point`, `heuristic_points(space, plan, k) -> [Point]`: the backend
    record's functions; `constants`: inputs that never change between calls (their packs are made once)."""

    def __init__(self, outputs: list, target, make: Callable, apply: Callable, default_point: Callable,
                 heuristic_points: Callable, constants=()):
        self.outputs, self.target = outputs, target
        self.space, self.plan = make(outputs, target, constants=constants)
        self.space: Space
        self._apply, self._default, self._heuristic = apply, default_point, heuristic_points

    def apply(self, point: Point):
        """The schedule of `point`; a point that is not in this space is an error naming the knobs."""
        return self._apply(self.outputs, self.plan, self.space.check(point))

    def default(self) -> Point:
        """The untuned schedule's point (what `tw.build` without records uses)."""
        return self._default(self.space, self.plan)

    def heuristic(self, k: int) -> list[Point]:
        """Up to `k` points a search starts from before it has measured anything."""
        return self._heuristic(self.space, self.plan, k=k)


__all__ = ["SpaceGenerator"]

"""Knobs: the dimensions of a schedule space, each with its own neighbourhood
(FlexTensor 4.2, 5.1). A split knob's value is a tuple of factors, outermost
first; a move takes the smallest prime factor of one part and gives it to
another, so a knob of N parts has N(N-1)/2 directions, each walkable both
ways. The product of the factors is the axis extent or a slightly larger
total (non-divisible choices, for extents whose divisors are poor); the
outermost loop then covers the extent with a guarded tail. Ordinal knobs
move one step up or down."""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass

from ..errors import TilewrightError


def smallest_prime_factor(n: int) -> int:
    for p in range(2, int(math.isqrt(n)) + 1):
        if n % p == 0:
            return p
    return n


def factorizations(total: int, parts: int) -> list[tuple[int, ...]]:
    """Every ordered tuple of `parts` positive ints whose product is `total`."""
    if parts == 1:
        return [(total,)]
    out = []
    for d in range(1, total + 1):
        if total % d == 0:
            out.extend((d, *rest) for rest in factorizations(total // d, parts - 1))
    return out


# Register-tile row counts that rarely divide an extent (1024 = 2^10 has no 3, 5, 6 or 7) but
# make the best register blocks (6 x 2 vectors with 16 registers).
REGISTER_ROWS = (3, 5, 6, 7)


def split_totals(extent: int, lanes: int = 8) -> tuple[int, ...]:
    """The extent itself plus guarded round-ups: when its divisors are poor for
    tiling and vectors (not a multiple of the target's vector `lanes`, at least 8),
    to multiples of 4, 8, ... up to twice the lanes (at least 32) within 25%
    (7 -> 8; 100 -> 104, 112; with 16 lanes 56 -> 64); for any extent, to multiples
    of the register row counts within 1/32 of it (1024 -> 1025, 1026, 1029; 56 -> 57)."""
    totals = {extent}
    if extent % max(8, lanes):
        for m in (4, 8, 16, 32, 64):
            if m > max(32, 2 * lanes):
                break
            up = -(-extent // m) * m
            if up <= extent * 1.25:
                totals.add(up)
    for m in REGISTER_ROWS:
        up = -(-extent // m) * m
        if extent > m and (up - extent) * 32 <= extent:
            totals.add(up)
    return tuple(sorted(totals))


@dataclass(frozen=True)
class SplitKnob:
    name: str
    axis: str
    extent: int
    parts: int
    totals: tuple[int, ...]

    def directions(self) -> list[tuple[int, int]]:
        return list(itertools.combinations(range(self.parts), 2))

    def move(self, value: tuple[int, ...], direction: tuple[int, int], sign: int) -> tuple[int, ...] | None:
        """Move the smallest prime factor from part j to part i (sign +1) or
        from i to j (sign -1); None when the source part is 1."""
        i, j = direction if sign > 0 else direction[::-1]
        if value[j] == 1:
            return None
        p = smallest_prime_factor(value[j])
        out = list(value)
        out[j] //= p
        out[i] *= p
        return tuple(out)

    def retotal(self, value: tuple[int, ...], sign: int) -> tuple[int, ...] | None:
        """Step to the next larger/smaller total, keeping the inner factors when they divide it."""
        total = math.prod(value)
        pos = self.totals.index(total) if total in self.totals else 0
        nxt = pos + sign
        if not 0 <= nxt < len(self.totals):
            return None
        new_total = self.totals[nxt]
        inner = math.prod(value[1:])
        if new_total % inner == 0:
            return (new_total // inner, *value[1:])
        return (new_total, *([1] * (self.parts - 1)))

    def neighbours(self, value) -> list[tuple[int, ...]]:
        out = [self.move(value, d, s) for d in self.directions() for s in (1, -1)]
        out += [self.retotal(value, s) for s in (1, -1)]
        return [v for v in out if v is not None]

    def sample(self, rng: random.Random) -> tuple[int, ...]:
        """The exact extent half the time, else a round-up; prime factors go to
        random parts, except that a round-up's primes above 8 (41 of 1025 =
        5 * 5 * 41) stay in the outermost loop: they exist only so that the
        inner parts can take the small factor the round-up was made for."""
        rounded = [t for t in self.totals if t != self.extent]
        total = rng.choice(rounded) if rounded and rng.random() < 0.5 else self.extent
        value = [1] * self.parts
        remaining = total
        while remaining > 1:  # hand out prime factors to random parts
            p = smallest_prime_factor(remaining)
            value[0 if total != self.extent and p > 8 else rng.randrange(self.parts)] *= p
            remaining //= p
        return tuple(value)

    def valid(self, value) -> bool:
        return (isinstance(value, tuple) and len(value) == self.parts and all(v >= 1 for v in value)
                and math.prod(value) in self.totals)

    def features(self, value) -> list[float]:
        return [math.log2(v) for v in value]


@dataclass(frozen=True)
class OrdinalKnob:
    """A choice among ordered options (loop orders, fuse depth, unroll, packing, placement)."""

    name: str
    options: tuple

    def neighbours(self, value: int) -> list[int]:
        return [v for v in (value - 1, value + 1) if 0 <= v < len(self.options)]

    def sample(self, rng: random.Random) -> int:
        return rng.randrange(len(self.options))

    def valid(self, value) -> bool:
        return isinstance(value, int) and 0 <= value < len(self.options)

    def features(self, value: int) -> list[float]:
        return [value / max(1, len(self.options) - 1)]


# Every knob name a space may omit and its code reads with a default (`option`): a name outside these is a
# misspelling, which would otherwise read as the default for every point and leave the knob untuned.
OPTIONAL_KNOBS = frozenset({"fuse", "unroll", "vec_reduce", "reduce_block", "outer_order", "reduce_order",
                            "reduce_inner", "pressure_sched", "rolled", "vec_axis", "fetch_vector", "cross"})
KNOB_PREFIXES = ("pack.", "place.", "shared.", "split.")


def option(point, name: str, default):
    """The value of knob `name` in `point`, or `default` where the space has no such knob; a name that no
    space declares (OPTIONAL_KNOBS, KNOB_PREFIXES) is an error, not a silent default."""
    if name not in OPTIONAL_KNOBS and not name.startswith(KNOB_PREFIXES):
        raise TilewrightError(f"no space declares a knob {name!r}; optional knobs: {', '.join(sorted(OPTIONAL_KNOBS))}"
                              f", or a name starting with {', '.join(KNOB_PREFIXES)}")
    try:
        return point[name]
    except KeyError:
        return default


def split_key(loop) -> str:
    """The name of the split knob of an analysed loop."""
    return f"split.{loop.name}"


def split_of(point, loop):
    """The factors of `loop`'s split in `point`, or None where it has no split knob (extent 1)."""
    return option(point, split_key(loop), None)


def reduce_orders(n: int) -> tuple:
    """The `reduce_order` options for n reduce loops: every permutation up to 3,
    rotations beyond."""
    if n <= 3:
        return tuple(itertools.permutations(range(n)))
    return tuple(tuple((k + s) % n for k in range(n)) for s in range(n))


def loop_knobs(main, spatial_parts: int, reduce_parts: int, lanes: int) -> list:
    """The knobs every space derives from the main node's loops: a split of each loop longer
    than one (spatial totals may round up, see split_totals), and the order of the reduce loops."""
    knobs: list = [SplitKnob(split_key(lp), lp.name, lp.extent, spatial_parts, split_totals(lp.extent, lanes))
                   for lp in main.spatial if lp.extent > 1]
    knobs += [SplitKnob(split_key(lp), lp.name, lp.extent, reduce_parts, (lp.extent,))
              for lp in main.reduce if lp.extent > 1]
    if len(main.reduce) > 1:
        knobs.append(OrdinalKnob("reduce_order", reduce_orders(len(main.reduce))))
    return knobs

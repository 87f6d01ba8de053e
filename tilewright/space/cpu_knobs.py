"""The CPU space's knobs: their names, their options and what each option
means, in one place. The space (`cpu.py`) builds its knobs from these, the
implementation (`apply_cpu`) and the default model (`cpu_default`,
`cpu_blocking`) read and write point values through them, never through
string keys and positional indices of their own.

Knobs, by name:
- `split.<loop>`: a spatial loop of the main node in three parts (parallel
  outer, cache tile, register tile), a reduce loop in two (outer, inner);
- `reduce_order`: a permutation of the reduce loops (`REDUCE_ORDERS`);
- `reduce_inner`: the inner reduce loops outside or inside the register rows;
- `reduce_block`: the outer reduce loops around the middle tiles (reduction blocking);
- `rolled`: reduce loops kept rolled (`Stage.no_unroll`);
- `vec_reduce`: the vector along the innermost reduce loop (lane sums);
- `vec_axis`: which spatial loop carries the vector (`cpu_plan.vector_axes`);
- `outer_order`: the order of the outer loops (`cpu_plan.outer_orders`);
- `fuse`: how many outer loops are fused into the parallel loop;
- `unroll`: the register tile unrolled;
- `pressure_sched`: GCC's pressure-aware instruction scheduling for the kernel
  (`Schedule.compiler_hint`; only where the compiler is GCC);
- `pack.<input>`: a packed copy of an input (`PACK`);
- `place.<producer>`: where an elementwise producer is computed (`PLACE`)."""

from __future__ import annotations

from .knobs import option, reduce_orders, split_key, split_of
from .space import Point

__all__ = ["PACK", "PLACE", "REDUCE_INNER", "fused_count", "option", "pack_choice", "pack_key", "place_choice",
           "place_key", "reduce_orders", "split_key", "split_of", "tile_factor"]

# pack.<input>: no copy; once per outer block (at the innermost outer loop indexing the input);
# per middle tile (per reduction block when blocked); once per call, in its own parallel stage
# (where the parallel loop fuses loops that do not index the input, "outer" repacks it in each).
PACK = ("none", "outer", "tile", "root")
# place.<producer>: per outer block; inlined into its reader; once per call, in its own parallel stage.
PLACE = ("outer", "inline", "root")
REDUCE_INNER = ("outside_rows", "inside_rows")


def pack_key(tensor) -> str:
    return f"pack.{tensor.name}"


def place_key(node) -> str:
    return f"place.{node.name}"


def tile_factor(point: Point, loop) -> int:
    """The register-tile factor of a spatial loop (1 where it has no split knob)."""
    value = split_of(point, loop)
    return value[2] if value is not None else 1


def pack_choice(point: Point, tensor) -> str:
    return PACK[option(point, pack_key(tensor), 0)]


def place_choice(point: Point, node) -> str:
    return PLACE[option(point, place_key(node), 0)]


def fused_count(point: Point) -> int:
    """How many outer loops the parallel loop fuses (the `fuse` knob's options are 1, 2, ...)."""
    return option(point, "fuse", 0) + 1

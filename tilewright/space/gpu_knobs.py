"""The GPU space's knobs: names, options and what each option means, in one
place; the space (`gpu.py`), its implementation and the default model
(`gpu_model.py`) read point values through these.

Knobs, by name:
- `split.<loop>`: a spatial loop of the main node in four parts (block,
  virtual thread, thread, inner), a reduce loop in three (outer, middle,
  inner);
- `reduce_order`: a permutation of the reduce loops, applied at each level;
- `shared.<input>`: the input staged in shared memory per iteration of the
  outer reduce loops, of the middle ones, or not at all (`SHARED`);
- `fetch_vector`: the width of the cooperative fetch's global loads;
- `unroll`: nothing, the register tile, or the register tile and the inner
  reduce loops unrolled (`UNROLL`);
- `cross`: threads that share each output's reduction (`CROSS`; 1: none). Above
  1 the innermost reduce loop is spread over threadIdx.x (neighbouring threads
  read neighbouring elements) and combined by a tree in shared memory, and
  each spatial loop's vthread x thread x inner parts are the block's rows of
  threads (threadIdx.y), one output each: a GEMV's 4096 outputs then keep
  4096 x 32 threads busy. Register tiles, staging, unrolling and the other
  reduce splits do not apply."""

from __future__ import annotations

from .knobs import option, split_key, split_of

SHARED = ("none", "outer", "middle")
UNROLL = ("none", "tile", "all")
FETCH_VECTOR = (1, 2, 4)
CROSS = (1, 8, 16, 32, 64, 128)
SPATIAL_PARTS, REDUCE_PARTS = 4, 3


def shared_key(tensor) -> str:
    return f"shared.{tensor.name}"


def unroll_choice(point) -> str:
    return UNROLL[option(point, "unroll", 0)]


def fetch_vector(point) -> int:
    return FETCH_VECTOR[option(point, "fetch_vector", 0)]


def cross_threads(point) -> int:
    return CROSS[option(point, "cross", 0)]


__all__ = ["CROSS", "FETCH_VECTOR", "REDUCE_PARTS", "SHARED", "SPATIAL_PARTS", "UNROLL", "cross_threads",
           "fetch_vector", "option", "shared_key", "split_key", "split_of", "unroll_choice"]

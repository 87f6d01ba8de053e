"""The schedule space of a convolution on the VTA-like accelerator, built from the
workload and the configuration (no template per layer): output rows, columns
and channel blocks per tile and input channel blocks per load step (each a
divisor of its extent), virtual threads (1, 2, 4) and the tile loop they split,
and the order of the tile loops (which operand stays on chip from one tile to
the next when all input channels fit one step).
A point is valid when its tiles fit every on-chip buffer and its micro-ops fit
the micro-op buffer; the same FlexTensor search (search/) explores it against
the simulator's cycle model.

`tvm_tutorial_tiling` is the fixed tiling TVM's VTA convolution tutorial uses
(apache/tvm vta/tutorials/optimize/convolution_opt.py: 7 x 14 output tile, 8
output and 1 input channel blocks, 2 virtual threads on output channels),
clamped to each layer: the baseline the search is compared with."""

from __future__ import annotations

from ..errors import ScheduleError, ShapeError
from ..lower.vta_conv import TVM_EPILOGUE, ConvShape, Epilogue, VTATiling, check_fits
from ..targets.vta import VTAConfig
from .knobs import OrdinalKnob
from .space import Point, Space

AXES = ("co", "h")
VTHREADS = (1, 2, 4)
ORDERS = ("h co w", "co h w", "h w co")  # TVM's; weights stay on chip across spatial tiles; inputs across co


def _divisors(n: int) -> tuple[int, ...]:
    return tuple(d for d in range(1, n + 1) if n % d == 0)


def tiling_of(space: Space, point: Point) -> VTATiling:
    k = space.knobs
    return VTATiling(tile_h=k["tile_h"].options[point["tile_h"]], tile_w=k["tile_w"].options[point["tile_w"]],
                     tile_co=k["tile_co"].options[point["tile_co"]], tile_ci=k["tile_ci"].options[point["tile_ci"]],
                     vthreads=k["vthreads"].options[point["vthreads"]],
                     vthread_axis=k["vthread_axis"].options[point["vthread_axis"]],
                     order=k["order"].options[point["order"]])


def point_of(space: Space, tiling: VTATiling) -> Point:
    values = []
    for name in space.knobs:
        v = getattr(tiling, name)
        opts = space.knobs[name].options
        if v not in opts:
            raise ScheduleError(f"VTA tiling {tiling}: {name}={v} is not one of {list(opts)}")
        values.append((name, opts.index(v)))
    return Point(tuple(values))


def vta_space(shape: ConvShape, cfg: VTAConfig, epilogue: Epilogue = TVM_EPILOGUE) -> Space:
    if shape.batch % cfg.batch or shape.in_channels % cfg.block_in or shape.out_channels % cfg.block_out:
        raise ShapeError(f"conv {shape}: batch, in and out channels must be multiples of the block {cfg.block}")
    knobs = [OrdinalKnob("tile_h", _divisors(shape.out_h)), OrdinalKnob("tile_w", _divisors(shape.out_w)),
             OrdinalKnob("tile_co", _divisors(shape.out_channels // cfg.block_out)),
             OrdinalKnob("tile_ci", _divisors(shape.in_channels // cfg.block_in)),
             OrdinalKnob("vthreads", VTHREADS), OrdinalKnob("vthread_axis", AXES), OrdinalKnob("order", ORDERS)]
    space = Space(knobs)
    cache: dict[Point, bool] = {}

    def fits(p: Point) -> bool:
        if p not in cache:
            try:
                check_fits(shape, cfg, tiling_of(space, p), epilogue)
                cache[p] = True
            except ScheduleError:
                cache[p] = False
        return cache[p]

    space.constraint = fits
    return space


def _largest_divisor(n: int, at_most: int) -> int:
    return max(d for d in _divisors(n) if d <= max(1, at_most))


def tvm_tutorial_tiling(shape: ConvShape, cfg: VTAConfig) -> VTATiling:
    ob, cb = shape.out_channels // cfg.block_out, shape.in_channels // cfg.block_in
    tile_co = _largest_divisor(ob, 128 // cfg.block_out)
    vthreads = 2 if (ob // tile_co) % 2 == 0 else 1
    return VTATiling(tile_h=_largest_divisor(shape.out_h, 7), tile_w=_largest_divisor(shape.out_w, 14),
                     tile_co=tile_co, tile_ci=_largest_divisor(cb, 16 // cfg.block_in), vthreads=vthreads,
                     vthread_axis="co")


__all__ = ["point_of", "tiling_of", "tvm_tutorial_tiling", "vta_space"]

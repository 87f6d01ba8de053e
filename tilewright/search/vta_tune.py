"""Tuning a convolution on the VTA-like accelerator: the FlexTensor search
(random, P- or Q-method) over space/vta.py, each proposal lowered and run in the
dependence-checked simulator, its cost the simulated time (cycles at the
configured clock). Records go to the record store under the workload and the
accelerator configuration's key, so a tiling tuned for one configuration is
never applied to another; `best_tiling` reads them back."""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from .. import __version__
from ..errors import ScheduleError, TilewrightError
from ..lower.vta_conv import TVM_EPILOGUE, ConvShape, Epilogue, VTATiling, check_fits, lower_conv2d
from ..lower.vta_operator import NchwConvOperator, match_conv
from ..records import Record, Records
from ..records.store import active_records, now
from ..runtime.vta_kernel import VTAKernel, VTAOperatorKernel
from ..runtime.vta_sim import VTASimError
from ..space.space import Point
from ..space.vta import point_of, tiling_of, tvm_tutorial_tiling, vta_space
from ..targets.vta import VTAConfig
from . import make_strategy


def workload_key(shape: ConvShape, epilogue: Epilogue) -> str:
    s = {k: v for k, v in asdict(shape).items() if k != "name"}
    return "vta_conv2d:" + json.dumps({**s, "epilogue": asdict(epilogue)}, sort_keys=True)


def simulated_seconds(shape: ConvShape, cfg: VTAConfig, tiling: VTATiling, epilogue: Epilogue) -> float:
    """The simulated time of one run (the timing does not depend on the values: zeros are fed)."""
    kernel = VTAKernel(lower_conv2d(shape, cfg, tiling, epilogue))
    sh = kernel.shapes
    kernel(np.zeros(sh["data"], np.int8), np.zeros(sh["kernel"], np.int8),
           np.zeros(sh["bias"], np.int32) if epilogue.bias else None)
    return kernel.time().seconds


def tune_conv(shape: ConvShape, cfg: VTAConfig, trials: int = 60, seed: int = 0, epilogue: Epilogue = TVM_EPILOGUE,
              method: str = "q", batch: int = 8, records: Records | None = None):
    """(best tiling, [(tiling, simulated seconds or inf, error)]) after `trials` proposals, the first
    of which are `seed_tilings` (the default tiling first)."""
    if trials < 1:
        raise TilewrightError(f"tune_conv: trials must be positive, got {trials}")
    space = vta_space(shape, cfg, epilogue)
    strategy = make_strategy(method, space, seed)
    key, run_id = workload_key(shape, epilogue), uuid.uuid4().hex[:12]
    history: list[tuple[VTATiling, float, str]] = []
    # the search starts from the default, and from the default with every input-channel block in one step
    first = [point_of(space, t) for t in seed_tilings(shape, cfg, epilogue)][:trials]
    while len(history) < trials:
        points = first or strategy.propose(min(batch, trials - len(history)))
        first = []
        if not points:
            break
        costs = []
        for p in points:
            tiling, err, kind = tiling_of(space, p), "", "none"
            try:
                cost = simulated_seconds(shape, cfg, tiling, epilogue)
            except ScheduleError as exc:
                cost, err, kind = math.inf, str(exc), "instantiate"
            except VTASimError as exc:
                cost, err, kind = math.inf, str(exc), "runtime"
            costs.append(cost)
            history.append((tiling, cost, err))
            if records is not None:
                records.add(Record(key, cfg.key, p.to_json(), json.dumps(asdict(tiling)),
                                   (cost,) if math.isfinite(cost) else (), kind, err, method, seed, run_id,
                                   __version__, now(), f"{shape.name} {tiling}"))
        strategy.observe(points, costs)
    ok = [(c, t) for t, c, _ in history if math.isfinite(c)]
    if not ok:
        raise TilewrightError(f"tune_conv {shape}: none of {len(history)} tilings ran; first error: "
                              f"{history[0][2] if history else 'none proposed'}")
    return min(ok, key=lambda ct: ct[0])[1], history


def best_tiling(shape: ConvShape, cfg: VTAConfig, records: Records, epilogue: Epilogue = TVM_EPILOGUE):
    """The best recorded tiling for this workload and configuration, or None."""
    space = vta_space(shape, cfg, epilogue)
    for r in records.best(workload_key(shape, epilogue), cfg.key):
        p = Point.from_json(r.point)
        if space.valid(p):
            return tiling_of(space, p)
    return None


def seed_tilings(shape: ConvShape, cfg: VTAConfig, epilogue: Epilogue = TVM_EPILOGUE) -> list[VTATiling]:
    """Where a search starts: the default tiling, and the same with all input-channel blocks in one load step
    where that fits (weights then stay on chip across tiles: what a layer with many shallow channel blocks,
    an im2col-unrolled one, needs and the tutorial's one-block steps miss)."""
    t = default_tiling(shape, cfg, epilogue)
    wide = replace(t, tile_ci=shape.in_channels // cfg.block_in)
    if wide == t:
        return [t]
    try:
        check_fits(shape, cfg, wide, epilogue)
    except ScheduleError:
        return [t]
    return [t, wide]


def default_tiling(shape: ConvShape, cfg: VTAConfig, epilogue: Epilogue = TVM_EPILOGUE) -> VTATiling:
    """The untuned tiling: TVM's tutorial tiles with two virtual threads (on output channel tiles, else
    on row tiles), halved until they fit this configuration's buffers."""
    t = tvm_tutorial_tiling(shape, cfg)
    while True:
        for cand in (replace(t, vthreads=2, vthread_axis="co"), replace(t, vthreads=2, vthread_axis="h"), t):
            try:
                check_fits(shape, cfg, cand, epilogue)
                return cand
            except ScheduleError:
                continue
        smaller = _halve(shape, cfg, t)
        if smaller == t:
            raise ScheduleError(f"VTA conv {shape}: even a 1 x 1 tile does not fit {cfg.describe()}")
        t = smaller


def _halve(shape: ConvShape, cfg: VTAConfig, t: VTATiling) -> VTATiling:
    def down(n: int, cur: int) -> int:
        return max((d for d in range(1, cur) if n % d == 0 and d <= cur // 2), default=cur)

    for field, extent in (("tile_co", shape.out_channels // cfg.block_out), ("tile_w", shape.out_w),
                          ("tile_h", shape.out_h), ("tile_ci", shape.in_channels // cfg.block_in)):
        new = down(extent, getattr(t, field))
        if new != getattr(t, field):
            return replace(t, **{field: new}, vthreads=1)
    return t


def build_operator(args, target):
    """`tw.build([data, weight, bias, out], target="vta")`: the best recorded tiling of the active record
    store for this workload and configuration, else the default one."""
    cfg = target.vta
    op = match_conv(args, cfg)
    store = active_records()
    if isinstance(op, NchwConvOperator):  # its layout comes from an embedding
        from .vta_embed_operator import build_nchw

        return build_nchw(op, target, store)
    tiling = best_tiling(op.shape, cfg, store, op.epilogue) if store is not None else None
    tiling = tiling or default_tiling(op.shape, cfg, op.epilogue)
    return VTAOperatorKernel(VTAKernel(lower_conv2d(op.shape, cfg, tiling, op.epilogue)), op.roles)


@dataclass
class VTATuneResult:
    tiling: VTATiling
    seconds: float  # simulated
    history: list
    default_seconds: float
    args: list
    target: object

    def report(self) -> str:
        ok = sum(1 for _, c, _ in self.history if math.isfinite(c))
        return (f"VTA tuning (simulated time, {self.target.vta.describe()}): {len(self.history)} tilings, {ok} ran; "
                f"best {self.tiling}: {self.seconds * 1e3:.3f} ms, default {self.default_seconds * 1e3:.3f} ms "
                f"({self.default_seconds / self.seconds:.2f}x)")

    def build(self):
        op = match_conv(self.args, self.target.vta)
        return VTAOperatorKernel(VTAKernel(lower_conv2d(op.shape, self.target.vta, self.tiling, op.epilogue)),
                                 op.roles)


def tune_operator(tensors, target, trials: int = 60, method: str = "q", seed: int = 0, records=None,
                  **options) -> VTATuneResult:
    """`tw.tune([...], target="vta")`: the search against the cycle model; records go to `records`
    (a path or a store) or the active store."""
    if options:
        raise TilewrightError(f"tw.tune on target vta: unknown option(s) {sorted(options)}; valid: trials, "
                              f"method, seed, records")
    args = list(tensors)
    cfg = target.vta
    op = match_conv(args, cfg)
    store = Records(records) if isinstance(records, (str, Path)) else (records or active_records())
    if isinstance(op, NchwConvOperator):  # the template and the top-k embeddings, searched together
        from .vta_embed_operator import tune_nchw

        return tune_nchw(args, op, target, trials, method, seed, store)
    best, history = tune_conv(op.shape, cfg, trials, seed, op.epilogue, method, records=store)
    cost = min(c for t, c, _ in history if t == best)
    return VTATuneResult(best, cost, history, history[0][1], args, target)


__all__ = ["VTATuneResult", "best_tiling", "build_operator", "default_tiling", "point_of", "seed_tilings",
           "simulated_seconds", "tune_conv", "tune_operator", "workload_key"]

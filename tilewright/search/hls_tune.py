"""Searching FPGA designs (FlexTensor 5.2): tilewright's strategies over the HLS space
(space/hls.py), each point costed by the analytic model, since synthesis takes hours; nothing runs
while searching; the search starts from the default design and the space's heuristic PE arrays.
`tw.build([...], target="hls")` builds the best recorded design, else the default;
`tw.tune([...], target="hls")` searches and records every point tried."""

from __future__ import annotations

import json
import math
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..errors import LoweringError, ScheduleError, TilewrightError
from ..lower.hls_design import HLSDesign
from ..lower.hls_form import HLSForm, hls_form
from ..records import Record, Records
from ..records.store import active_records, now
from ..runtime.hls_kernel import HLSKernel
from ..runtime.hls_model import estimate, over_budget
from ..space.hls import default_design, design_at, heuristic_designs, hls_space, point_of
from . import make_strategy
from .model_walk import walk


def form_of(args) -> HLSForm:
    if not args:
        raise TilewrightError("target hls: pass the operator's tensors, inputs then output ([A, B, C])")
    form = hls_form(args[-1])
    want = [o.name for o in form.operands]
    if sorted(t.name for t in args[:-1]) != sorted(want):
        raise TilewrightError(f"target hls: '{args[-1].name}' reads {want}; pass exactly those inputs then the "
                              f"output, got {[t.name for t in args]}")
    return form


def workload_key(form: HLSForm) -> str:
    ops = [{"shape": list(o.shape), "matrix": o.matrix, "offset": o.offset} for o in form.operands]
    return "hls:" + json.dumps({"axes": form.axes, "in": form.in_dtype, "acc": form.acc_dtype, "operands": ops},
                               sort_keys=True)


def best_recorded(form: HLSForm, device, store: Records | None) -> HLSDesign | None:
    trace = None if store is None else store.best_trace(workload_key(form), device.key)
    return None if trace is None else HLSDesign.from_json(trace)


def build_operator(args, target, design: HLSDesign | None = None) -> HLSKernel:
    """The C-simulated kernel of `args`: `design`, else the best record, else the default design."""
    args = list(args)
    form = form_of(args)
    dev = target.hls
    design = design or best_recorded(form, dev, active_records()) or default_design(form, dev)
    over = over_budget(form, design, dev)
    if over:
        raise ScheduleError(f"HLS design {design} of '{form.output.name}' does not fit {dev.name}: {over}")
    return HLSKernel(form, design, dev, name=f"tw_{form.output.name}")


@dataclass
class HLSTuneResult:
    design: HLSDesign
    cycles: int  # the model's
    history: list  # (design or None, cycles or inf, error)
    default_cycles: float
    seconds: float
    args: list
    target: object

    def report(self) -> str:
        ok = sum(1 for _, c, _ in self.history if math.isfinite(c))
        form = form_of(self.args)
        est = estimate(form, self.design, self.target.hls)
        return (f"HLS search (analytic model, no synthesis; {self.target.hls.describe()}): "
                f"{len(self.history)} designs, {ok} fit, {self.seconds:.1f} s; best {self.design}: "
                f"{self.cycles} cycles, {est.gops:.1f} GOPS, "
                f"{est.dsp} DSP, {est.bram36} BRAM36; default {self.default_cycles:.0f} cycles "
                f"({self.default_cycles / self.cycles:.1f}x)")

    def build(self) -> HLSKernel:
        return build_operator(self.args, self.target, self.design)


def tune_operator(tensors, target, trials: int = 400, method: str = "q", seed: int = 0, records=None,
                  **options) -> HLSTuneResult:
    if options:
        raise TilewrightError(f"tw.tune on target hls: unknown option(s) {sorted(options)}; valid: trials, method, "
                              f"seed, records")
    if trials < 1:
        raise TilewrightError(f"tw.tune on target hls: trials must be positive, got {trials}")
    start = time.perf_counter()
    args = list(tensors)
    dev = target.hls
    form = form_of(args)
    store = Records(records) if isinstance(records, (str, Path)) else (records or active_records())
    space = hls_space(form, dev)
    key, run_id = workload_key(form), uuid.uuid4().hex[:12]
    history: list = []
    seen: set = set()

    def record(p, cost, err):
        if p in seen:
            return
        seen.add(p)
        design = design_at(space, p) if math.isfinite(cost) else None
        history.append((design, cost, err))
        if store is not None:
            store.add(Record(key, dev.key, p.to_json(), json.dumps(design.to_json() if design else {}),
                             (cost,) if math.isfinite(cost) else (), "none" if design else "instantiate", err,
                             method, seed, run_id, __version__, now(), f"{form.output.name} {design}"))

    seeds = []
    for design in [default_design(form, dev), *heuristic_designs(space)]:
        try:
            seeds.append(point_of(space, design))
        except (ValueError, ScheduleError, LoweringError):
            continue
    default_cycles = space.cost(seeds[0])[0] if seeds else math.inf
    # two walks, from the heuristic points and from the default alone (a walk settles near where it starts)
    walks = [(make_strategy(method, space, seed + 1), seeds, trials - trials // 2),
             (make_strategy(method, space, seed), seeds[:1], trials // 2)]
    for strategy, first, budget in walks:
        walk(strategy, space, first, budget, record)
    ok = [(c, d) for d, c, _ in history if math.isfinite(c)]
    if not ok:
        raise TilewrightError(f"HLS search of '{form.output.name}': none of {len(history)} designs fits "
                              f"{dev.name}; first reason: {history[0][2] if history else 'none proposed'}")
    best_cost, best = min(ok, key=lambda cd: cd[0])
    return HLSTuneResult(best, int(best_cost), history, default_cycles, time.perf_counter() - start, args, target)


__all__ = ["HLSTuneResult", "best_recorded", "build_operator", "form_of", "tune_operator", "workload_key"]

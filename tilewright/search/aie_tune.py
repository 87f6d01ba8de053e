"""Tuning a convolution for the AI-Engine-like core (Vyasa III-F): tilewright's search (the same
strategies as every target) over Vyasa's space (space/aie.py), each point costed by the cycle
model (runtime/aie_cycles.py: simulated cycles; nothing runs while searching, so a trial costs
milliseconds). `tw.build([...], target="aie")` uses the best record, else the default schedule;
`tw.tune([...], target="aie")` searches and records every point tried (the space lowers each point once,
for its constraint and its cost)."""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import __version__
from ..errors import TilewrightError
from ..lower.aie_program import VyasaSchedule
from ..lower.vyasa import build_program
from ..lower.vyasa_form import conv_form
from ..records import Record, Records
from ..records.store import active_records, now
from ..runtime.aie_kernel import AIEKernel
from ..space.aie import aie_space, default_schedule, point_of, schedule_of
from ..space.space import Point
from . import make_strategy
from .model_walk import walk


def _form(args, target):
    if not args:
        raise TilewrightError("target aie: pass the operator's tensors, inputs then output ([I, W, O])")
    form = conv_form(args[-1], target.aie.acc_bits)
    want = {o.name for o in form.operands}
    if {t.name for t in args[:-1]} != want:
        raise TilewrightError(f"target aie: '{args[-1].name}' reads {sorted(want)}; pass exactly those inputs "
                              f"then the output, got {[t.name for t in args]}")
    return form


def workload_key(form) -> str:
    ops = [{"shape": list(o.tensor.shape), "dtype": o.tensor.dtype.name, "matrix": o.matrix, "offset": o.offset}
           for o in form.operands]
    return "aie_conv:" + json.dumps({"spatial": form.spatial, "reduce": form.reduce, "operands": ops,
                                     "shift": form.shift, "round": form.round_half_up}, sort_keys=True)


def best_recorded(form, config, store: Records | None) -> VyasaSchedule | None:
    trace = None if store is None else store.best_trace(workload_key(form), config.key)
    return None if trace is None else VyasaSchedule.from_json(trace)


def build_operator(args, target, schedule: VyasaSchedule | None = None) -> AIEKernel:
    """The kernel of `args` (inputs then output): `schedule`, else the best record, else the default."""
    args = list(args)
    form = _form(args, target)
    schedule = schedule or best_recorded(form, target.aie, active_records()) or default_schedule(form)
    return AIEKernel(build_program(form, schedule, target.aie), target.aie, arg_names=[t.name for t in args])


@dataclass
class AIETuneResult:
    schedule: VyasaSchedule
    cycles: int  # simulated
    history: list  # (schedule, cycles or inf, error)
    default_cycles: float
    args: list
    target: object

    def report(self) -> str:
        ok = sum(1 for _, c, _ in self.history if math.isfinite(c))
        form = _form(self.args, self.target)
        return (f"AIE tuning (cycle model, simulated; {self.target.aie.describe()}): {len(self.history)} schedules, "
                f"{ok} valid; best {self.schedule}: {self.cycles} cycles, {form.macs / self.cycles:.2f} MACs/cycle; "
                + (f"default {self.default_cycles:.0f} cycles ({self.default_cycles / self.cycles:.2f}x)"
                   if math.isfinite(self.default_cycles) else "the default (te order and layouts) is not valid"))

    def build(self) -> AIEKernel:
        return build_operator(self.args, self.target, self.schedule)


def tune_operator(tensors, target, trials: int = 60, method: str = "q", seed: int = 0, records=None,
                  passes: dict | None = None, **options) -> AIETuneResult:
    """`tw.tune([...], target="aie")`. `passes` turns Vyasa passes off (the ablation: reuse_graph,
    lazy_stores, fuse_columns = False); such programs are timed, not run."""
    if options:
        raise TilewrightError(f"tw.tune on target aie: unknown option(s) {sorted(options)}; valid: trials, method, "
                              f"seed, records, passes")
    if trials < 1:
        raise TilewrightError(f"tw.tune on target aie: trials must be positive, got {trials}")
    args = list(tensors)
    cfg = target.aie
    form = _form(args, target)
    store = Records(records) if isinstance(records, (str, Path)) else (records or active_records())
    space = aie_space(form, cfg, passes)
    strategy = make_strategy(method, space, seed)
    key, run_id = workload_key(form), uuid.uuid4().hex[:12]
    history: list = []
    seen: set[Point] = set()
    try:  # the plain vectorizer's point first, where the space has it (its vector axis fills the lanes)
        first = [point_of(space, VyasaSchedule(**{**asdict(default_schedule(form)), **(passes or {})}))]
    except ValueError:
        first = []
    first_is_default = bool(first)

    def record(p, cost, err):  # each point is costed once and recorded once
        if p in seen:
            return
        seen.add(p)
        sched = schedule_of(space, p)
        history.append((sched, cost, err))
        if store is not None and not passes:
            kind = "none" if math.isfinite(cost) else "instantiate"
            store.add(Record(key, cfg.key, p.to_json(), json.dumps(asdict(sched)),
                             (cost,) if math.isfinite(cost) else (), kind, err, method, seed, run_id,
                             __version__, now(), f"{form.output.name} {sched}"))

    walk(strategy, space, first, trials, record)
    ok = [(c, s) for s, c, _ in history if math.isfinite(c)]
    if not ok:
        raise TilewrightError(f"AIE tuning of '{form.output.name}': none of {len(history)} schedules is valid; "
                              f"first error: {history[0][2] if history else 'none proposed'}")
    best_cost, best = min(ok, key=lambda cs: cs[0])
    default = history[0][1] if first_is_default else math.inf
    return AIETuneResult(best, int(best_cost), history, default, args, target)


__all__ = ["AIETuneResult", "best_recorded", "build_operator", "tune_operator", "workload_key"]

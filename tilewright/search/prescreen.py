"""Pre-screening tuning proposals with the learned cost model (issue 14).

When a strategy proposes the next batch, the strategy is asked for `factor`
times more points than there are measurement slots; each is lowered (no
compile) and described by its loop-nest features (search/features.py); the
rank model (search/cost_model.py) scores them and the best-scored are
measured, except that each slot, with probability `epsilon`, takes a random
one of the rest instead (exploration: the model is wrong somewhere). The
candidates not chosen go back unvisited (`SearchStrategy.discard`).

The model trains on every measured schedule of this target whose features
are known: this workload's and every other workload's (transfer: a new
workload on a known target starts from a model trained on the others). It
is refitted every `refit_every` measurements of this run. Mode "auto"
switches it on when at least `min_records` measured schedules with features
exist for the target (otherwise the run only saves the features of what it
measures, for the next run), "on" as soon as a model can be fitted at all,
"off" leaves the tuner as it was without the model.

Features of measured schedules come from the lowering the measurer does
anyway: `backend` here is the tuner's backend with a `lower` that remembers
what it lowered for the schedules this class made."""

from __future__ import annotations

import math
import random
import time
from collections import deque
from dataclasses import replace
from statistics import fmean

import numpy as np

from ..errors import TilewrightError
from ..space import Point
from ..stats import median
from .cost_model import RankModel, spearman
from .feature_store import FeatureStore, features_path
from .features import N_FEATURES, loop_nest_features

MODES = ("auto", "on", "off")
MIN_RECORDS = 48  # "auto": measured schedules with features on this target before the model is used
FACTOR = 8  # proposals per measurement slot
# Lowering seconds the screen may spend per measurement slot: SCREEN_S_PER_SLOT, or SCREEN_MEASURE_RATIO
# times what building and timing a point has cost in this run where that is more (a slow kernel is
# worth screening harder). Where a task lowers slowly (unrolled Winograd transforms: 0.2 s a point,
# measured in 0.25 s) fewer proposals are screened, down to none, rather than multiplying the tuning
# time by FACTOR: at 3 s a slot, screening was 65 of a Winograd layer's 118 s on the Zen 4 host.
SCREEN_S_PER_SLOT = 1.0
SCREEN_MEASURE_RATIO = 2.0
WINDOW = 32  # the latest lowering and measuring times the budget averages
EPSILON = 0.1  # chance that a slot goes to a random proposal instead of the model's next best
REFIT_EVERY = 16  # measurements of this run between refits
HOME_WEIGHT = 2.0  # this workload's pairs weigh this much more than another workload's, once it has some
HOME_MIN = 24  # ... at least this many of its own measurements


class TrainingSet:
    """Measured schedules by (workload, point JSON): their successful times, a timeout flag and a
    wrong-result flag (a wrong kernel never trains the model), and their feature vectors."""

    def __init__(self):
        self.times: dict[tuple[str, str], list[float]] = {}
        self.timeouts: set = set()
        self.wrong: set = set()
        self.vectors: dict[tuple[str, str], np.ndarray] = {}

    def add(self, workload: str, point: str, costs, error_kind: str) -> None:
        key = (workload, point)
        if error_kind == "none" and costs:
            self.times.setdefault(key, []).extend(costs)
        elif error_kind == "timeout":
            self.timeouts.add(key)
        elif error_kind == "wrong_result":
            self.wrong.add(key)

    def arrays(self):
        """X, costs (inf: timed out, never ran), workloads, for every usable schedule with features."""
        keys = sorted(k for k in set(self.times) | self.timeouts if k in self.vectors and k not in self.wrong)
        X = np.array([self.vectors[k] for k in keys], float).reshape(len(keys), N_FEATURES)
        costs = np.array([median(self.times[k]) if k in self.times else math.inf for k in keys], float)
        return X, costs, np.array([w for w, _ in keys], dtype=object)


class Prescreen:
    def __init__(self, mode, backend, target, args, outputs, plan, space, records, workload: str, seed: int = 0,
                 factor: int = FACTOR, epsilon: float = EPSILON, refit_every: int = REFIT_EVERY,
                 min_records: int | None = None):
        if mode not in MODES:
            raise TilewrightError(f"tune: cost_model must be one of {', '.join(map(repr, MODES))}, got {mode!r}")
        self.mode, self.target, self.args, self.outputs, self.plan, self.space = mode, target, args, outputs, plan, \
            space
        self.workload, self.factor, self.epsilon, self.refit_every = workload, factor, epsilon, refit_every
        self.min_records = MIN_RECORDS if min_records is None else min_records
        self._backend = backend
        self.backend = backend if mode == "off" else replace(backend, lower=self._lower)
        self.rng = random.Random(seed * 7919 + 17)
        self.model = RankModel(N_FEATURES, seed=seed)
        self.data = TrainingSet()
        self.active = False
        self.on_from: int | None = None  # trial at which the model was first used
        self.fits, self.batches, self.proposals, self.since_fit, self.kept = 0, 0, 0, 0, 0
        self.trained = (0, 0, 0)  # samples of this workload, of others, other workloads
        self.predicted: dict[Point, float] = {}
        self.online: list[tuple[float, float]] = []  # (score, measured cost) of screened, measured points
        self._made: dict[Point, object] = {}
        self._lowered: dict[int, tuple] = {}
        self._vectors: dict[Point, np.ndarray | None] = {}
        self.records_on_target = 0
        self._lowering_s: deque[float] = deque(maxlen=WINDOW)  # the latest featurisations' lowering times
        self._measure_s: deque[float] = deque(maxlen=WINDOW)  # the latest measurements' build + run times
        self.reason = "cost_model='off'"
        self.fstore = None
        if mode == "off":
            return
        self.fstore = FeatureStore(features_path(records.path))
        rows = records.measurements(target.key)
        self.records_on_target = len(rows)
        for w, p, costs, kind in rows:
            self.data.add(w, p, costs, kind)
        self.data.vectors.update(self.fstore.for_target(target.key))
        self._backfill(rows)
        self._fit(trial=0)

    # ---- schedules and their features ---------------------------------------------------------------
    def instantiate(self, points: list[Point]) -> list:
        """The schedule of each point (the one its features were taken from), or the error that stopped it."""
        return [self._schedule(p) for p in points]

    def _schedule(self, p: Point):
        if p not in self._made:
            try:
                self._made[p] = self._backend.apply(self.outputs, self.plan, p)
            except TilewrightError as exc:
                self._made[p] = exc
        return self._made[p]

    def _lower(self, schedule, args, name, target):
        """The backend's lowering, remembered for the schedules this class made (the measurer lowers
        them again: the second time is free, and their features come from the same function)."""
        hit = self._lowered.get(id(schedule))
        if hit is not None and hit[0] is schedule and hit[1] == name:
            if isinstance(hit[2], BaseException):
                raise hit[2]
            return hit[2]
        try:
            func = self._backend.lower(schedule, args, name, target)
        except TilewrightError as exc:
            func = exc
        if any(s is schedule for s in self._made.values()):
            self._lowered[id(schedule)] = (schedule, name, func)
        if isinstance(func, BaseException):
            raise func
        return func

    def features(self, p: Point) -> np.ndarray | None:
        """The loop-nest features of point `p` (None when it does not instantiate or lower)."""
        if p not in self._vectors:
            s = self._schedule(p)
            vec = None
            if not isinstance(s, BaseException):
                start = time.perf_counter()
                try:
                    vec = loop_nest_features(self._lower(s, self.args, "kernel", self.target), self.target)
                except TilewrightError:
                    vec = None
                except Exception:  # noqa: BLE001 - a feature bug must not fail a tuning run
                    vec = None
                self._lowering_s.append(time.perf_counter() - start)
            if len(self._vectors) > 50000:
                self._vectors.clear()
            self._vectors[p] = vec
        return self._vectors[p]

    def _backfill(self, rows) -> None:
        """This workload's records from before features were kept: featurise a few, so that an old
        store is not read as empty."""
        if len(self.data.arrays()[1]) >= self.min_records:
            return
        missing = [p for w, p, costs, kind in rows if w == self.workload and kind == "none"
                   and (w, p) not in self.data.vectors]
        new = []
        for text in list(dict.fromkeys(missing))[:self.min_records]:
            try:
                p = self.space.upgrade(Point.from_json(text))
            except ValueError:
                continue
            if self.space.valid(p) and (vec := self.features(p)) is not None:
                self.data.vectors[(self.workload, text)] = vec
                new.append((self.workload, self.target.key, text, vec))
        self._forget()
        self.fstore.put_many(new)

    def _forget(self) -> None:
        self._made.clear()
        self._lowered.clear()

    # ---- choosing -----------------------------------------------------------------------------------
    def propose(self, strategy, want: int, warm: bool) -> list[Point]:
        """`want` points to measure next: the strategy's own when the model is off, else the model's pick
        of `factor * want` proposals (random ones while `warm`: the warm-up phase)."""
        gen = strategy.random_unvisited if warm else strategy.propose
        if not self.active:
            return gen(want)
        cands = gen(want * self.pool_factor())
        if len(cands) <= want:
            return cands
        start, budget = time.perf_counter(), self.screen_s_per_slot() * want
        vecs = [self.features(p) if time.perf_counter() - start < budget else self._vectors.get(p) for p in cands]
        scores = np.full(len(cands), -np.inf)
        ok = [i for i, v in enumerate(vecs) if v is not None]
        if ok:
            scores[ok] = self.model.predict(np.array([vecs[i] for i in ok]))
        rest = sorted(range(len(cands)), key=lambda i: -scores[i])  # stable: ties keep the strategy's order
        chosen = []
        for _ in range(want):
            explore = self.rng.random() < self.epsilon and len(rest) > 1
            chosen.append(rest.pop(self.rng.randrange(1, len(rest)) if explore else 0))
        dropped = [cands[i] for i in rest]
        strategy.discard(dropped)
        for p in dropped:  # keep their features (a later proposal may repeat them), not their schedules
            s = self._made.pop(p, None)
            self._lowered.pop(id(s), None)
        for i in chosen:
            self.predicted[cands[i]] = float(scores[i])
        self.batches += 1
        self.proposals += len(cands)
        return [cands[i] for i in chosen]

    def screen_s_per_slot(self) -> float:
        """Lowering seconds per slot the screen may spend (see SCREEN_S_PER_SLOT)."""
        if not self._measure_s:
            return SCREEN_S_PER_SLOT
        return max(SCREEN_S_PER_SLOT, SCREEN_MEASURE_RATIO * fmean(self._measure_s))

    def pool_factor(self) -> int:
        """Proposals per slot: FACTOR, fewer where lowering a proposal costs more than the screen's
        seconds per slot allow (1: the strategy's own points, unscreened)."""
        if not self._lowering_s:
            return self.factor
        mean = fmean(self._lowering_s)
        return max(1, min(self.factor, int(self.screen_s_per_slot() / max(mean, 1e-9))))

    # ---- learning -----------------------------------------------------------------------------------
    def observe(self, points, schedules, results, trial: int) -> None:
        """After a batch is measured: keep the features and times, refit when due."""
        if self.mode == "off":
            self._forget()
            return
        new = []
        self._measure_s.extend(m.build_s + m.run_s for m in results if m.ok)
        for p, s, m in zip(points, schedules, results):
            kind = m.error_kind.value
            text = p.to_json()
            self.data.add(self.workload, text, m.costs, kind)
            if kind != "instantiate" and not isinstance(s, BaseException):
                vec = self.features(p)
                if vec is not None:
                    self.data.vectors[(self.workload, text)] = vec
                    new.append((self.workload, self.target.key, text, vec))
            if p in self.predicted and m.ok:
                self.online.append((self.predicted.pop(p), m.cost))
        self._forget()
        self.kept += self.fstore.put_many(new)
        self.since_fit += len(points)
        if self.since_fit >= self.refit_every:
            self._fit(trial)

    def _fit(self, trial: int) -> None:
        X, costs, groups = self.data.arrays()
        self.since_fit = 0
        home = int(np.sum(groups == self.workload))
        others = sorted(set(groups) - {self.workload})
        if self.mode == "auto" and len(costs) < self.min_records:
            self.active = False
            if self.records_on_target == 0:
                self.reason = "no records for this target: cost model off"
            else:
                self.reason = (f"off: {len(costs)} measured schedules with features on this target, "
                               f"{self.min_records} needed")
            return
        weights = {g: 1.0 for g in others}
        weights[self.workload] = HOME_WEIGHT if home >= HOME_MIN else 1.0
        summary = self.model.fit(X, costs, groups, group_weights=weights)
        self.fits += 1
        if not summary.ok:
            self.active = False
            self.reason = f"off: {summary.reason}"
            return
        if not self.active and self.on_from is None:
            self.on_from = trial
        self.active = True
        self.trained = (home, len(costs) - home, len(others))

    def report(self) -> str:
        if not self.active and self.on_from is None:
            kept = f"; this run's {self.kept} measurements are kept with their features for the next" \
                if self.kept else ""
            return self.reason + kept
        home, other, n_other = self.trained
        when = "on" if not self.on_from else f"on from trial {self.on_from}"
        line = (f"{when}, trained on {home + other} measured schedules ({home} of this workload, {other} of "
                f"{n_other} other workload{'s' if n_other != 1 else ''}{': transfer' if other else ''}); "
                f"{self.batches} batches chosen from {self.factor}x proposals, epsilon {self.epsilon}, "
                f"{self.fits} fit{'s' if self.fits != 1 else ''}")
        if len(self.online) >= 5:
            scores, costs = zip(*self.online)
            rho = spearman(scores, [-c for c in costs])
            line += f"; rank correlation with this run's measurements {rho:.2f} (n={len(self.online)})"
        return line

    def close(self) -> None:
        self._forget()
        if self.fstore is not None:
            self.fstore.close()


__all__ = ["EPSILON", "FACTOR", "MIN_RECORDS", "MODES", "Prescreen", "REFIT_EVERY", "TrainingSet"]
